# clockflake-lease: leased worker ids (issue 6). Included by the top Makefile.
#   make demo-lease    lease worker ids from a file:// directory in a temp dir, print ids
#   make test-lease    every lease test against a throwaway PostgreSQL 15
#                      (installed from apt if missing, stopped afterwards whatever happens)
#   make bench-lease   start-up latency, cost per renewal and per-id cost on every coordinator
#                      (file, k8s, env, and throwaway PostgreSQL, ZooKeeper, Redis, a
#                      three-member etcd) beside a static generator, in one run (BENCHMARKS.md)
#   make lint-lease    rustfmt, clippy and rustdoc's warnings, and lint-lease-features:
#   make lint-lease-features   the crate without its default features and with each
#                      coordinator feature alone: clippy -D warnings on the library (test-lease
#                      runs the unit tests without default features)
#   make test-lease-failover   issue 22's failovers under live holders: a PostgreSQL primary +
#                      streaming replica (scripts/postgres-ha.sh; async and sync) and a Redis
#                      primary + replica (scripts/redis-ha.sh), a three-server ZooKeeper ensemble
#                      (scripts/zookeeper-ensemble.sh), every id checked
#   make check-windows the lease crate on Windows (issue 26): clippy -D warnings for
#                      x86_64-pc-windows-gnu with every coordinator (ring's C code needs Debian's
#                      mingw-w64), and cargo check for x86_64-pc-windows-msvc with the coordinators
#                      whose dependencies build no C (file, env, k8s, zookeeper): ring's C code
#                      for MSVC needs lib.exe and the MSVC CRT headers, which no registry here has
#   make test-lease-tls-skew   issue 15's TLS to PostgreSQL (lease/tests/postgres_tls.rs starts
#                      its own TLS cluster) and the start-up clock check against PostgreSQL and
#                      ZooKeeper (lease/tests/clock_skew.rs), both servers stopped afterwards

LEASE_PG := $(ROOT)/scripts/postgres.sh

.PHONY: demo-lease test-lease lint-lease lint-lease-features bench-lease test-lease-tls-skew \
  test-lease-failover check-windows setup-windows-targets

demo-lease: setup-rust
	$(CARGO) run -q -p clockflake-lease --example demo

# Each feature set rebuilds only clockflake-lease itself (its dependencies keep their features).
LEASE_FEATURE_SETS := "" postgres zookeeper redis k8s etcd

lint-lease-features: setup-rust
	for features in $(LEASE_FEATURE_SETS); do \
	  $(LINT_CARGO) clippy -q -p clockflake-lease --no-deps --lib --no-default-features \
	    --features "$$features" -- -D warnings || exit 1; \
	done

lint-lease: setup-rust lint-lease-features
	$(CARGO) fmt -p clockflake-lease --check
	$(LINT_CARGO) clippy -p clockflake-lease $(CLIPPY_FLAGS)
	RUSTDOCFLAGS="-D warnings" $(LINT_CARGO) doc -q -p clockflake-lease --no-deps

test-lease: setup-rust
	$(CARGO) test -q -p clockflake-lease --lib --no-default-features
	$(CARGO) build -q -p clockflake-lease --tests --bins
	export CLOCKFLAKE_PG_DIR=$$(mktemp -d /tmp/clockflake-lease-pg.XXXXXX); \
	trap '$(LEASE_PG) stop' EXIT; \
	$(LEASE_PG) start; \
	export CLOCKFLAKE_PG_URL=$$($(LEASE_PG) url); \
	$(CARGO) test -p clockflake-lease

test-lease-tls-skew: setup-rust
	$(CARGO) build -q -p clockflake-lease --tests
	export CLOCKFLAKE_PG_DIR=$$(mktemp -d /tmp/clockflake-lease-pg.XXXXXX) \
	  CLOCKFLAKE_ZK_REQUIRED=1 CLOCKFLAKE_ZK_DIR=$${TMPDIR:-/tmp}/clockflake-zk-$$$$; \
	trap '$(LEASE_PG) stop; $(ROOT)/scripts/zookeeper.sh stop' EXIT; \
	$(LEASE_PG) start; \
	export CLOCKFLAKE_PG_URL=$$($(LEASE_PG) url); \
	export CLOCKFLAKE_ZK_URL=$$($(ROOT)/scripts/zookeeper.sh start); \
	$(CARGO) test -p clockflake-lease --test postgres_tls --test clock_skew

test-lease-failover: setup-rust
	$(CARGO) build -q -p clockflake-lease --tests
	export CLOCKFLAKE_PG_HA_DIR=$$(mktemp -d /tmp/clockflake-pg-ha.XXXXXX) CLOCKFLAKE_PG_HA_REQUIRED=1 \
	  CLOCKFLAKE_REDIS_HA_DIR=$$(mktemp -d /tmp/clockflake-redis-ha.XXXXXX) CLOCKFLAKE_REDIS_HA_REQUIRED=1 \
	  CLOCKFLAKE_ZK_ENSEMBLE_DIR=$$(mktemp -d /tmp/clockflake-zk-ensemble.XXXXXX) CLOCKFLAKE_ZK_ENSEMBLE_REQUIRED=1; \
	trap '$(ROOT)/scripts/postgres-ha.sh stop; $(ROOT)/scripts/redis-ha.sh stop; \
	  $(ROOT)/scripts/zookeeper-ensemble.sh stop' EXIT; \
	$(CARGO) test -p clockflake-lease --test postgres_failover --test redis_failover \
	  --test zookeeper_ensemble -- --test-threads 1

WINDOWS_TARGETS := x86_64-pc-windows-gnu x86_64-pc-windows-msvc
setup-windows-targets: setup-rust
	@for target in $(WINDOWS_TARGETS); do \
	  rustup target list --installed | grep -qx $$target || rustup target add $$target; done

check-windows: setup-windows-targets
	@command -v x86_64-w64-mingw32-gcc >/dev/null || (apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gcc-mingw-w64-x86-64 >/dev/null)
	CARGO_TARGET_DIR=$(ROOT)/target/windows $(CARGO) clippy -q -p clockflake-lease --no-deps \
	  --lib --bins --target x86_64-pc-windows-gnu -- -D warnings
	CARGO_TARGET_DIR=$(ROOT)/target/windows $(CARGO) check -q -p clockflake-lease --lib --bins \
	  --target x86_64-pc-windows-msvc --no-default-features --features zookeeper,k8s

# Every coordinator in one run: throwaway PostgreSQL, ZooKeeper and Redis on loopback (always
# stopped afterwards); file://, k8s:// and env:// in a temp dir.
bench-lease: setup-rust
	$(CARGO) build -q --profile bench -p clockflake-lease --bench lease
	export CLOCKFLAKE_PG_DIR=$$(mktemp -d /tmp/clockflake-lease-pg.XXXXXX) \
	  CLOCKFLAKE_ZK_DIR=$${TMPDIR:-/tmp}/clockflake-zk-$$$$ \
	  CLOCKFLAKE_REDIS_DIR=$${TMPDIR:-/tmp}/clockflake-redis-$$$$ \
	  CLOCKFLAKE_ETCD_DIR=$$(mktemp -d /tmp/clockflake-etcd.XXXXXX); \
	trap '$(LEASE_PG) stop; $(ROOT)/scripts/zookeeper.sh stop; $(ROOT)/scripts/redis.sh stop; \
	  $(ROOT)/scripts/etcd-cluster.sh stop' EXIT; \
	$(LEASE_PG) start; \
	export CLOCKFLAKE_PG_URL=$$($(LEASE_PG) url); \
	export CLOCKFLAKE_ZK_URL=$$($(ROOT)/scripts/zookeeper.sh start); \
	export CLOCKFLAKE_REDIS_URL=$$($(ROOT)/scripts/redis.sh start); \
	export CLOCKFLAKE_ETCD_URL=$$($(ROOT)/scripts/etcd-cluster.sh start); \
	$(CARGO) bench -q -p clockflake-lease --bench lease

DEMO_TARGETS += demo-lease
TEST_TARGETS += test-lease test-lease-tls-skew test-lease-failover
CHECK_TARGETS += lint-lease check-windows
SETUP_TOOLCHAIN_TARGETS += setup-windows-targets
DEBIAN_PACKAGES += gcc-mingw-w64-x86-64
BENCH_TARGETS += bench-lease

# etcd:// (lease/src/etcd/): lease/tests/etcd.rs and etcd_cluster.rs against a throwaway
# three-member cluster of Debian's etcd-server on loopback (scripts/etcd-cluster.sh, always
# stopped): pool exhaustion, records, fencing, paused holders, authentication, the leader
# killed and a member frozen under live holders, a holder cut off past its TTL. etcd-client's
# build compiles etcd's .proto files with protoc (protobuf-compiler), which import protobuf's
# own (libprotobuf-dev); setup-rust installs both for every build, make demo included.
.PHONY: test-lease-etcd
test-lease-etcd: setup-rust
	$(CARGO) build -q -p clockflake-lease --tests --bins
	export CLOCKFLAKE_ETCD_DIR=$$(mktemp -d /tmp/clockflake-etcd.XXXXXX) CLOCKFLAKE_ETCD_REQUIRED=1; \
	trap '$(ROOT)/scripts/etcd-cluster.sh stop' EXIT; \
	export CLOCKFLAKE_ETCD_URL=$$($(ROOT)/scripts/etcd-cluster.sh start); \
	$(CARGO) test -p clockflake-lease --test etcd && \
	$(CARGO) test -p clockflake-lease --test etcd_cluster -- --test-threads 1

TEST_TARGETS += test-lease-etcd
DEBIAN_PACKAGES += etcd-server etcd-client protobuf-compiler libprotobuf-dev

# The deterministic simulation of the lease protocol (lease/tests/simulation/, issues 23 and 36):
# holders running the shipped decisions (clockflake_lease::holder's Holder, protocol, core's
# Generator) against simulated PostgreSQL, file://, Redis, ZooKeeper and etcd coordinators, with
# copies of a process, every id checked. `make simulate` runs SCHEDULES (default 100,000) from
# BASE_SEED (default 0); `SEED=S make simulate` replays one schedule and prints its trace;
# `MECHANISM=name make simulate` switches one mechanism off and searches until the simulation
# finds the duplicate (or late id) it prevents; `BREAK=name make simulate` breaks one of DESIGN's
# assumptions in every schedule (an unknown name lists the known ones; docs/DESIGN.md, "Safety
# checked by machine", says what each found); `KEEP_GOING=1` counts failing schedules instead of
# stopping at the first.
# `make simulate-long`: 2,000,000 schedules from a seed of the clock (printed), going on past
# failures; figures in BENCHMARKS.md.
SIMULATION := $(CARGO) test -q --release -p clockflake-lease --no-default-features --test simulation
.PHONY: simulate simulate-long test-simulation

simulate: setup-rust
	SCHEDULES=$${SCHEDULES:-100000} $(SIMULATION)

test-simulation: simulate

simulate-long: setup-rust
	base=$${BASE_SEED:-$$(date +%s)000000}; echo "BASE_SEED=$$base"; \
	BASE_SEED=$$base SCHEDULES=$${SCHEDULES:-2000000} KEEP_GOING=$${KEEP_GOING:-1} $(SIMULATION)

CHECK_TARGETS += test-simulation

# Loom models of the atomics the id path and the renewal thread share (lease/src/
# limits.rs, through lease/src/sync.rs): every interleaving of two threads. Built with
# `--cfg loom` in its own target directory, without the coordinators' dependencies.
.PHONY: test-lease-loom
test-lease-loom: setup-rust
	RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=$(ROOT)/target/loom $(CARGO) test -q --release \
	  -p clockflake-lease --no-default-features --lib loom_models

CHECK_TARGETS += test-lease-loom

# One id space across regions (workers=LO-HI): lease/tests/regions.rs against two Redis servers,
# one per region, each from scripts/redis.sh in a directory of its own, and a ZooKeeper
# (scripts/zookeeper.sh; two roots as two regions), all always stopped; and its file://, env://
# and k8s:// cases. lease/tests/regions_postgres.rs runs in test-lease.
.PHONY: test-lease-regions
test-lease-regions: setup-rust
	$(CARGO) build -q -p clockflake-lease --tests --bins
	export CLOCKFLAKE_REDIS_REQUIRED=1 CLOCKFLAKE_ZK_REQUIRED=1 \
	  A=$$(mktemp -d /tmp/clockflake-region-a.XXXXXX) B=$$(mktemp -d /tmp/clockflake-region-b.XXXXXX) \
	  CLOCKFLAKE_ZK_DIR=$$(mktemp -d /tmp/clockflake-region-zk.XXXXXX); \
	trap 'CLOCKFLAKE_REDIS_DIR=$$A $(ROOT)/scripts/redis.sh stop; \
	  CLOCKFLAKE_REDIS_DIR=$$B $(ROOT)/scripts/redis.sh stop; $(ROOT)/scripts/zookeeper.sh stop' EXIT; \
	export CLOCKFLAKE_REDIS_URL=$$(CLOCKFLAKE_REDIS_DIR=$$A $(ROOT)/scripts/redis.sh start) \
	  CLOCKFLAKE_REDIS_B_URL=$$(CLOCKFLAKE_REDIS_DIR=$$B $(ROOT)/scripts/redis.sh start) \
	  CLOCKFLAKE_ZK_URL=$$($(ROOT)/scripts/zookeeper.sh start); \
	$(CARGO) test -p clockflake-lease --test regions

TEST_TARGETS += test-lease-regions
