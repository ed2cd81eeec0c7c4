# clockflake-server: the id service over HTTP (issue 14). Included by the top Makefile.
#   make demo-server    start the server on a temp file:// directory and a loopback port,
#                       fetch a few ids with curl, stop it (part of `make demo`)
#   make serve-ids      run it by hand: SERVE_LEASE=... SERVE_LISTEN=... (Ctrl-C stops it)
#   make test-server    the HTTP API end to end (file://), three servers on one
#                       PostgreSQL and on one ZooKeeper under wrk load with one frozen past its
#                       TTL, and SIGTERM under load; PostgreSQL and ZooKeeper are throwaway
#                       servers in temp dirs, always stopped
#   make test-server-etcd  two servers on a three-member etcd cluster (scripts/etcd-cluster.sh, in a
#                       temp dir, always stopped) whose leader is killed and restarted, then frozen,
#                       under HTTP clients: 0 duplicates, no refusal, worker ids released on SIGTERM
#   make test-server-schema  schemathesis (PyPI) against openapi.json and the server, 0 failures
#   make test-server-image  the amd64 scratch image of a static debug build, built with podman and
#                       run (scripts/server-image.sh)
#   make dist-server    static musl binaries (x86_64, aarch64), SHA256SUMS, and the images as
#                       OCI archives into dist/ (part of make dist)
#   make bench-server-peers  GET /v1/id (wrk) beside Redis INCR and PostgreSQL nextval, in turns
#   make bench-server   oha against a release build on loopback (BENCHMARKS.md, "## Server")

SERVER_PG := $(ROOT)/scripts/postgres.sh
SERVER_ZK := $(ROOT)/scripts/zookeeper.sh
SERVER_BIN := $(ROOT)/target/debug/clockflake-server
SERVE_LEASE ?= file://$(ROOT)/target/serve-ids?app=default
SERVE_LISTEN ?= 127.0.0.1:8080

.PHONY: demo-server serve-ids test-server lint-server bench-server setup-oha setup-wrk setup-curl \
  setup-server-py test-server-schema setup-server-musl setup-musl-targets build-server-musl-test dist-server test-server-image \
  bench-server-peers

# The load generators; idempotent. wrk (Debian) for the fleet tests and bench-server-peers;
# oha (crates.io, a 10-minute build on a fresh machine) for bench-server only.
setup-wrk:
	@command -v wrk >/dev/null 2>&1 || { apt-get -o DPkg::Lock::Timeout=600 update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq wrk >/dev/null; }

setup-oha:
	@command -v oha >/dev/null 2>&1 || [ -x "$$HOME/.cargo/bin/oha" ] \
	  || $(CARGO) install --locked oha

setup-curl:
	@command -v curl >/dev/null 2>&1 || { apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq curl >/dev/null; }

demo-server: setup-rust setup-curl
	$(CARGO) build -q -p clockflake-server
	@dir=$$(mktemp -d /tmp/clockflake-server-demo.XXXXXX); out=$$dir/stdout; \
	$(SERVER_BIN) --lease "file://$$dir/leases?app=demo" --listen 127.0.0.1:0 >$$out 2>$$dir/log & \
	pid=$$!; trap 'kill $$pid 2>/dev/null || true; wait $$pid 2>/dev/null || true; rm -rf '"$$dir" EXIT; \
	for _ in $$(seq 100); do grep -q listening $$out && break; sleep 0.1; done; \
	base=$$(sed -n 's/.*listening on //p' $$out); \
	echo "clockflake-server on $$base (lease file://$$dir/leases?app=demo)"; \
	echo "GET /v1/id"; curl -sS "$$base/v1/id"; echo; \
	echo "GET /v1/ids?count=3 (Accept: text/plain)"; curl -sS -H 'Accept: text/plain' "$$base/v1/ids?count=3"; \
	id=$$(curl -sS -H 'Accept: text/plain' "$$base/v1/id"); \
	echo "GET /v1/decode/$$id"; curl -sS "$$base/v1/decode/$$id"; echo; \
	echo "GET /readyz"; curl -sS "$$base/readyz"; echo; \
	kill -TERM $$pid; wait $$pid; echo "stopped (SIGTERM): lease closed"

serve-ids: setup-rust
	$(CARGO) run -q -p clockflake-server -- --lease "$(SERVE_LEASE)" --listen "$(SERVE_LISTEN)"

lint-server: setup-rust
	$(CARGO) fmt -p clockflake-server --check
	$(LINT_CARGO) clippy -p clockflake-server $(CLIPPY_FLAGS)

test-server: setup-rust setup-wrk setup-faketime
	$(CARGO) build -q -p clockflake-server --tests --bins
	export CLOCKFLAKE_SERVER_REQUIRED=1; \
	export CLOCKFLAKE_PG_DIR=$$(mktemp -d /tmp/clockflake-server-pg.XXXXXX); \
	export CLOCKFLAKE_ZK_DIR=$$(mktemp -d /tmp/clockflake-server-zk.XXXXXX); \
	trap '$(SERVER_PG) stop; $(SERVER_ZK) stop' EXIT; \
	$(SERVER_PG) start; \
	export CLOCKFLAKE_PG_URL=$$($(SERVER_PG) url); \
	export CLOCKFLAKE_ZK_URL=$$($(SERVER_ZK) start); \
	$(CARGO) test -p clockflake-server -- --test-threads 1 --nocapture

# server/tests/etcd.rs on its own cluster; CLOCKFLAKE_ETCD_REQUIRED makes a missing one fail.
.PHONY: test-server-etcd
test-server-etcd: setup-rust
	$(CARGO) test -q -p clockflake-server --test etcd --no-run
	export CLOCKFLAKE_ETCD_DIR=$$(mktemp -d /tmp/clockflake-server-etcd.XXXXXX) CLOCKFLAKE_ETCD_REQUIRED=1; \
	trap '$(ROOT)/scripts/etcd-cluster.sh stop' EXIT; \
	CLOCKFLAKE_ETCD_URL=$$($(ROOT)/scripts/etcd-cluster.sh start) || exit 1; \
	export CLOCKFLAKE_ETCD_URL; \
	$(CARGO) test -p clockflake-server --test etcd -- --nocapture

bench-server: setup-rust setup-oha
	$(CARGO) build -q --release -p clockflake-server
	PATH="$$PATH:$$HOME/.cargo/bin" $(PYTHON) server/bench.py $(ROOT)/target/release/clockflake-server

# The Python tools the server's checks use, in a virtualenv of their own under target/ (so
# their pins never meet the bindings' .venv; idempotent; pinned):
# schemathesis (OpenAPI against the server), kubernetes-validate (manifests against the
# Kubernetes schemas it bundles), PyYAML, cargo-zigbuild and ziglang (the musl cross builds).
SERVER_VENV := $(ROOT)/target/server-venv
SERVER_PY := $(SERVER_VENV)/bin/python
SERVER_PY_TOOLS := schemathesis==4.32.5 kubernetes-validate==1.37.0 PyYAML==6.0.4 \
  cargo-zigbuild==0.24.1 ziglang==0.17.1
setup-server-py:
	@test -x $(SERVER_PY) || $(PYTHON) -m venv $(SERVER_VENV)
	@$(SERVER_PY) -m pip install -q --disable-pip-version-check $(SERVER_PY_TOOLS) >/dev/null

# schemathesis against server/openapi.json and a debug server with a public-id key and token
# (sent as the bearer token), bounded
# (100 examples per operation, about 10 s); server/schemathesis.toml says which statuses
# count as a rejection. 0 failures or it fails.
test-server-schema: setup-rust setup-server-py
	$(CARGO) build -q -p clockflake-server
	@dir=$$(mktemp -d /tmp/clockflake-server-schema.XXXXXX); out=$$dir/stdout; \
	CLOCKFLAKE_PUBLIC_KEY=1:000102030405060708090a0b0c0d0e0f CLOCKFLAKE_PUBLIC_TOKEN=schema-test-token-0123 RUST_LOG=warn \
	  $(SERVER_BIN) --lease "file://$$dir/leases?app=schema" --listen 127.0.0.1:0 >$$out 2>$$dir/log & \
	pid=$$!; trap 'kill $$pid 2>/dev/null || true; wait $$pid 2>/dev/null || true; rm -rf '"$$dir" EXIT; \
	for _ in $$(seq 100); do grep -q listening $$out && break; sleep 0.1; done; \
	base=$$(sed -n 's/.*listening on //p' $$out); \
	cd $$dir && timeout 300 $(SERVER_VENV)/bin/schemathesis --config-file $(ROOT)/server/schemathesis.toml \
	  run $(ROOT)/server/openapi.json --url "$$base" --max-examples 100 --no-color \
	  --header 'Authorization: Bearer schema-test-token-0123' 

# Release artifacts (make dist): static musl binaries for Linux x86_64 and aarch64, cross-built
# with cargo-zigbuild and zig from PyPI (target/server-venv) in their own target dir
# (target/zig), stripped;
# SHA256SUMS; the scratch image for each architecture as an OCI archive. The image needs no
# emulator to build (FROM scratch, nothing runs), so the arm64 one is built here too; only the
# amd64 one runs here (make test-server-image).
SERVER_VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' $(ROOT)/Cargo.toml | head -1)
SERVER_MUSL := x86_64-unknown-linux-musl:amd64 aarch64-unknown-linux-musl:arm64
SERVER_ZIG_DIR := $(ROOT)/target/zig
SERVER_IMAGE := localhost/clockflake-server
SERVER_IMAGE_SCRIPT := $(ROOT)/scripts/server-image.sh

setup-server-musl: setup-musl-targets setup-server-py
setup-musl-targets: setup-rust
	@for t in $(SERVER_MUSL); do triple=$${t%%:*}; \
	  rustup target list --installed | grep -qx $$triple || rustup target add $$triple; done

# $(call zigbuild-server,TRIPLE,PROFILE,ENV): a static clockflake-server for TRIPLE built with
# cargo-zigbuild into target/zig/TRIPLE/PROFILE's folder (release, or debug for dev), checked static.
define zigbuild-server
PATH=$(SERVER_VENV)/bin:$$PATH CARGO_TARGET_DIR=$(SERVER_ZIG_DIR) $(3) \
  $(CARGO) zigbuild -q -p clockflake-server --profile $(2) --target $(1)
@bin=$(SERVER_ZIG_DIR)/$(1)/$(if $(filter dev,$(2)),debug,$(2))/clockflake-server; \
  file -b $$bin | grep -q 'statically linked' || { echo "$$bin: not a static binary"; exit 1; }
endef

# build-server-musl TRIPLE: one static binary into target/zig/TRIPLE/release.
build-server-musl-%: setup-server-musl
	$(call zigbuild-server,$*,release)

dist-server: build-server-musl-x86_64-unknown-linux-musl build-server-musl-aarch64-unknown-linux-musl
	@mkdir -p $(DIST_DIR)
	@set -e; cd $(DIST_DIR); rm -f clockflake-server-SHA256SUMS; \
	for t in $(SERVER_MUSL); do triple=$${t%%:*}; arch=$${t##*:}; \
	  bin=clockflake-server-$(SERVER_VERSION)-$$triple; \
	  install -m 0755 $(SERVER_ZIG_DIR)/$$triple/release/clockflake-server $$bin; \
	  $(SERVER_IMAGE_SCRIPT) build $$arch $$bin $(SERVER_IMAGE):$(SERVER_VERSION)-$$arch >/dev/null; \
	  $(SERVER_IMAGE_SCRIPT) save $(SERVER_IMAGE):$(SERVER_VERSION)-$$arch \
	    clockflake-server-$(SERVER_VERSION)-image-$$arch.oci.tar; \
	  echo "$$bin: $$(file -b $$bin | cut -d, -f1-2,5), $$(stat -c %s $$bin) bytes"; \
	done; \
	sha256sum clockflake-server-$(SERVER_VERSION)-* > clockflake-server-SHA256SUMS; \
	sha256sum -c --quiet clockflake-server-SHA256SUMS; cat clockflake-server-SHA256SUMS

# The amd64 image built and run: leases on a mounted volume, answers, turns ready, passes its
# HEALTHCHECK, stops cleanly on SIGTERM (scripts/server-image.sh test). The image of a static
# debug build (without debug info): the image and what it runs are the test, and the release
# build differs only in optimisation and overflow checks; it costs half the CPU (151 s against
# 314 s here, each from nothing). make dist-server images the release builds.
SERVER_MUSL_TEST := $(SERVER_ZIG_DIR)/x86_64-unknown-linux-musl/debug/clockflake-server
build-server-musl-test: setup-server-musl
	$(call zigbuild-server,x86_64-unknown-linux-musl,dev,CARGO_PROFILE_DEV_DEBUG=0)

test-server-image: build-server-musl-test setup-curl
	$(SERVER_IMAGE_SCRIPT) build amd64 $(SERVER_MUSL_TEST) $(SERVER_IMAGE):test
	$(SERVER_IMAGE_SCRIPT) test $(SERVER_IMAGE):test

# clockflake-server against Redis INCR and PostgreSQL nextval, side by side on loopback
# (BENCHMARKS.md, "## Server"): scripts/bench-server-peers.py with Debian's wrk,
# redis-benchmark and pgbench.
bench-server-peers: setup-rust setup-wrk
	$(CARGO) build -q --release -p clockflake-server
	$(PYTHON) scripts/bench-server-peers.py $(ROOT)/target/release/clockflake-server

DEMO_TARGETS += demo-server
TEST_TARGETS += test-server test-server-schema test-server-etcd
# The image test runs the static binary the checks build: last, so that they have built it.
LAST_TEST_TARGETS += test-server-image
FIRST_CHECK_TARGETS += build-server-musl-test
CHECK_TARGETS += lint-server
SETUP_TOOLCHAIN_TARGETS += setup-musl-targets
DEBIAN_PACKAGES += wrk curl podman runc ca-certificates
DIST_TARGETS += dist-server
BENCH_TARGETS += bench-server bench-server-peers
