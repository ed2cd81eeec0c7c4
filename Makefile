# clockflake: the two README commands, and every step CI runs, runnable by hand.
#   make demo   build everything and print decoded ids from every part (embedded default, no server)
#   make test   every test suite of every part
#   make dist   every release artifact into dist/ (not part of make test)
# Each part adds its own targets in its folder's make.mk: it appends to DEMO_TARGETS,
# TEST_TARGETS (and LAST_TEST_TARGETS), CHECK_TARGETS (and FIRST_CHECK_TARGETS), SETUP_TARGETS,
# SETUP_TOOL_TARGETS, DEBIAN_PACKAGES, BENCH_TARGETS and DIST_TARGETS, so parts never edit each
# other's rules.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help
ROOT := $(CURDIR)
CARGO ?= cargo
PYTHON ?= python3

DEMO_TARGETS :=
# make test's suites: what starts a real server, reads a clock, waits on a timeout or makes load.
TEST_TARGETS :=
# Suites that run an artifact the checks build (FIRST_CHECK_TARGETS): after every other suite.
LAST_TEST_TARGETS :=
# make test's checks: deterministic CPU work that needs none of that (Miri, loom, the simulation,
# the fuzz replay, cross builds); they run beside the suites. The artifacts LAST_TEST_TARGETS
# run are built first.
FIRST_CHECK_TARGETS :=
CHECK_TARGETS :=
# make test's installs, made before either lane starts: virtualenvs and npm packages; Rust
# toolchains and targets (rustup); tools built from crates.io.
SETUP_TARGETS :=
SETUP_TOOLCHAIN_TARGETS :=
# Tools built from crates.io for make test, installed beside the other installs.
SETUP_TOOL_TARGETS :=
# The Debian packages make test uses (installed without their recommendations).
DEBIAN_PACKAGES :=
BENCH_TARGETS :=
DIST_TARGETS :=
DIST_DIR := $(ROOT)/dist
# The host's triple. napi build always passes --target, so the Python extension is built for it
# too: the two bindings then share their dependencies in target/$(HOST_TARGET)/$(BINDINGS_PROFILE).
HOST_TARGET := $(shell rustc -vV 2>/dev/null | sed -n 's/^host: //p')
# The Cargo profile of the Node addon and the Python extension: `bindings` (Cargo.toml) for the
# tests and demos; release for what is measured or shipped (the benchmarks, make dist), set for
# those targets at the end of this file.
BINDINGS_PROFILE := bindings
# Every crate is linted with the same flags: `$(LINT_CARGO) clippy -p CRATE $(CLIPPY_FLAGS)`.
CLIPPY_FLAGS := --no-deps --all-targets -- -D warnings
# The lints (clippy, rustdoc's warnings) build in a target directory of their own: they are make
# test's checks, and their builds then never wait for the suites' builds, nor the other way round.
LINT_CARGO := CARGO_TARGET_DIR=$(ROOT)/target/lint $(CARGO)

.PHONY: help demo test test-setup test-suites test-checks setup-debian setup-tools bench dist setup-rust demo-core test-core lint-core bench-core vectors dist-crates

help:
	@echo "make demo   build and print decoded ids from every part"
	@echo "make test   run every test suite"
	@echo "make bench  run the benchmarks recorded in BENCHMARKS.md"
	@echo "make dist   build every release artifact into dist/"

# Rust targets this repository builds for; idempotent.
setup-rust:
	@rustup target list --installed 2>/dev/null | grep -qx wasm32v1-none \
	  && rustup target list --installed | grep -qx wasm32-unknown-unknown \
	  || rustup target add wasm32-unknown-unknown wasm32v1-none
	@rustup component list --installed 2>/dev/null | grep -q '^clippy' || rustup component add clippy rustfmt
	@# clockflake-lease's default features build etcd-client, whose build runs protoc on etcd's
	@# .proto files, which import protobuf's own (libprotobuf-dev): the bindings, the server and the
	@# extension all need both, make demo included.
	@[ "$$(dpkg-query -W -f '$${Status}\n' protobuf-compiler libprotobuf-dev 2>/dev/null \
	  | grep -c 'ok installed')" = 2 ] || (. $(ROOT)/scripts/lib.sh && apt_install \
	  "protoc for etcd-client's build" --no-install-recommends protobuf-compiler libprotobuf-dev)

demo-core: setup-rust
	$(CARGO) run -q --release -p clockflake --example demo

test-core: setup-rust
	$(PYTHON) tests/vectors/reference.py --check
	$(PYTHON) tests/vectors/public_reference.py --check
	$(CARGO) test -p clockflake --all-features
	$(CARGO) build -p clockflake --no-default-features --target wasm32v1-none

lint-core: setup-rust
	$(CARGO) fmt --all --check
	$(LINT_CARGO) clippy -p clockflake $(CLIPPY_FLAGS)
	$(LINT_CARGO) clippy -p clockflake --no-default-features --lib -- -D warnings
	RUSTDOCFLAGS="-D warnings" $(LINT_CARGO) doc -q -p clockflake --no-deps --all-features

bench-core: setup-rust
	$(CARGO) bench -p clockflake --bench generator -- --noplot
	$(CARGO) bench -p clockflake --bench throughput

# The crates meant for crates.io (clockflake, clockflake-lease, clockflake-server; the bindings'
# crates are internal), packaged and verified together as `cargo package` names them, into dist/.
# cargo verifies each crate against the others as packaged, through a local registry: unpacked
# under CARGO_HOME (registry/src/-HASH/NAME-VERSION) and built in the target dir, where a
# registry crate's build is never redone for the same version. A second make dist at one version
# then verified the server against the first run's clockflake (after a change to core: "no
# method named `with_legacy_key`"). Both go first.
dist-crates: setup-rust
	rm -rf $${CARGO_HOME:-$$HOME/.cargo}/registry/src/-*/clockflake-* $(ROOT)/target/package
	$(CARGO) package -q -p clockflake -p clockflake-lease -p clockflake-server --target-dir $(ROOT)/target/package
	@mkdir -p $(DIST_DIR) && cp $(ROOT)/target/package/package/*.crate $(DIST_DIR)/

DIST_TARGETS += dist-crates

# Regenerates the shared vectors from the independent reference script.
vectors:
	$(PYTHON) tests/vectors/reference.py
	$(PYTHON) tests/vectors/public_reference.py

-include $(sort $(wildcard */make.mk))

demo: demo-core $(DEMO_TARGETS)

# make test: every install first (test-setup), then two lanes at once (scripts/test-lanes.sh):
# the suites (test-core and TEST_TARGETS), one after another, printed as they run; and the
# checks (CHECK_TARGETS) at the lowest CPU priority (nice 19), so that they take the CPU the
# suites leave idle (a suite mostly waits on its servers), two at a time in the order listed
# (scripts/run-checks.sh), printed when they end.
# `make test-suites` and `make test-checks` run one lane alone. Concurrency is only ever this
# explicit: .NOTPARALLEL below keeps `make -jN` from running two suites at once.
test: test-setup
	@bash $(ROOT)/scripts/test-lanes.sh "$(MAKE)" $(ROOT)/target/test-checks.log
	@echo "make test: every suite and check passed"
test-suites: test-core $(TEST_TARGETS) $(LAST_TEST_TARGETS)
test-checks:
	@bash $(ROOT)/scripts/run-checks.sh "$(MAKE)" $(ROOT)/target/checks \
	  $(FIRST_CHECK_TARGETS) lint-core $(CHECK_TARGETS)

# Every install make test needs, before the lanes start, so that nothing installs twice at once.
# Three at a time, as none of them writes where another does: the tools compiled from crates.io;
# the Debian packages (one apt-get run), then the Rust toolchains and targets; the virtualenvs and
# npm packages.
test-setup: setup-rust
	@status=0; \
	$(MAKE) --no-print-directory setup-tools & tools=$$!; \
	$(MAKE) --no-print-directory setup-debian $(SETUP_TOOLCHAIN_TARGETS) & system=$$!; \
	$(MAKE) --no-print-directory $(SETUP_TARGETS) || status=$$?; \
	wait $$tools || status=1; wait $$system || status=1; exit $$status
setup-tools: $(SETUP_TOOL_TARGETS)

# Idempotent: one apt-get run (scripts/lib.sh's apt_install) for the packages not installed yet.
setup-debian:
	@missing=$$(for p in $(sort $(DEBIAN_PACKAGES)); do \
	  dpkg-query -W -f '$${Status}\n' $$p 2>/dev/null | grep -q 'ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  . $(ROOT)/scripts/lib.sh && apt_install "from Debian: $$(echo $$missing)" --no-install-recommends $$missing; \
	fi

.NOTPARALLEL:
# What is measured or shipped is optimised (the prerequisites of these targets inherit it).
bench dist $(BENCH_TARGETS) $(DIST_TARGETS) bench-node-lone setup-bench-python bench-python-import: \
  BINDINGS_PROFILE := release
bench: bench-core $(BENCH_TARGETS)
# Then every package installed from local registries as users install them, and run.
dist: $(DIST_TARGETS)
	bash $(ROOT)/scripts/dist-registries.sh $(DIST_DIR)
	@echo "make dist: artifacts in $(DIST_DIR)"; ls -l $(DIST_DIR)
