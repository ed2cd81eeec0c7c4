# zookeeper:// worker ids (lease/src/zookeeper/) against a real ZooKeeper from Debian's
# `zookeeper` package, started on loopback by scripts/zookeeper.sh and always stopped again.
#   make test-zookeeper    unit tests + lease/tests/zookeeper.rs, zookeeper_outage.rs, zookeeper_offline.rs
#   make demo-zookeeper    lease a worker id from a throwaway ZooKeeper and print a few ids
#   make zookeeper-start / zookeeper-stop   a server to try things by hand (prints its URL)
#   make bench-zookeeper   start-up latency and per-id cost under a ZooKeeper lease (BENCHMARKS.md)
# demo-zookeeper is not part of `make demo`, which needs no server.

ZK_SCRIPT := $(ROOT)/scripts/zookeeper.sh
# A directory of its own per run, so a server started by hand is never touched.
ZK_RUN = export CLOCKFLAKE_ZK_REQUIRED=1 CLOCKFLAKE_ZK_DIR=$${TMPDIR:-/tmp}/clockflake-zk-$$$$; \
	trap '$(ZK_SCRIPT) stop' EXIT; \
	export CLOCKFLAKE_ZK_URL=$$($(ZK_SCRIPT) start)

.PHONY: test-zookeeper demo-zookeeper bench-zookeeper zookeeper-start zookeeper-stop

test-zookeeper: setup-rust
	$(ZK_RUN); \
	$(CARGO) test -p clockflake-lease --lib zookeeper && \
	$(CARGO) test -p clockflake-lease --test zookeeper --test zookeeper_outage --test zookeeper_offline && \
	$(CARGO) test -p clockflake-lease --test restart_storm zookeeper

demo-zookeeper: setup-rust
	$(CARGO) build -q -p clockflake-lease --bin clockflake-lease-probe
	$(ZK_RUN); \
	for server in 10.0.0.1:8080 10.0.0.2:8080 10.0.0.1:8080; do \
	  $(ROOT)/target/debug/clockflake-lease-probe --count 2 \
	    --uri "$$CLOCKFLAKE_ZK_URL/snowflake/demo?server=$$server&ttl=2s"; \
	done

bench-zookeeper: setup-rust
	$(CARGO) build -q --release -p clockflake-lease --bench zookeeper
	$(ZK_RUN); \
	$(CARGO) bench -q -p clockflake-lease --bench zookeeper

zookeeper-start:
	$(ZK_SCRIPT) start

zookeeper-stop:
	$(ZK_SCRIPT) stop

TEST_TARGETS += test-zookeeper
# The servers of scripts/*.sh (each script installs its own when run alone).
DEBIAN_PACKAGES += postgresql-15 openssl zookeeper redis-server redis-tools
BENCH_TARGETS += bench-zookeeper

# redis:// worker ids (lease/src/redis/) against a real Redis from Debian's `redis-server`,
# started on loopback by scripts/redis.sh (a password, AOF with appendfsync always, a TLS port
# signed by a throwaway CA) and always stopped again.
#   make test-redis    lease/tests/redis.rs + lease/tests/redis_outage.rs + restart_storm's case
#                      + late_renewal's Redis case
#   make redis-start / redis-stop   a server to try things by hand (prints its URL)

REDIS_SCRIPT := $(ROOT)/scripts/redis.sh
# A directory of its own per run, so a server started by hand is never touched.
REDIS_RUN = export CLOCKFLAKE_REDIS_REQUIRED=1 CLOCKFLAKE_REDIS_DIR=$${TMPDIR:-/tmp}/clockflake-redis-$$$$; \
	trap '$(REDIS_SCRIPT) stop' EXIT; \
	export CLOCKFLAKE_REDIS_URL=$$($(REDIS_SCRIPT) start)

.PHONY: test-redis redis-start redis-stop

test-redis: setup-rust
	$(REDIS_RUN); \
	$(CARGO) test -p clockflake-lease --test redis --test redis_outage; \
	$(CARGO) test -p clockflake-lease --test late_renewal redis; \
	$(CARGO) test -p clockflake-lease --test restart_storm redis; \
	$(CARGO) test -p clockflake-lease --test clock_skew redis

redis-start:
	$(REDIS_SCRIPT) start

redis-stop:
	$(REDIS_SCRIPT) stop

TEST_TARGETS += test-redis

# The id service's latency at a fixed rate (scripts/bench-latency.py, BENCHMARKS.md "## Latency at
# a fixed rate"): GET /v1/id beside Redis INCR at 1, 10 and 100 connections, each at half of its
# saturated throughput, through scripts/loadgen (an open-loop load generator with
# coordinated-omission correction; its own Cargo project, no dependencies).
#   make bench-latency   the benchmark (minutes; not part of make test)
#   make test-loadgen    the load generator's smoke check (part of make test, about 3 s): a fixed
#                        rate is held, and a 300 ms freeze of the server mid-run shows in the p99
#                        (latency counted from each request's intended send time)
LOADGEN_TARGET := $(ROOT)/target/loadgen

.PHONY: bench-latency test-loadgen

bench-latency: setup-rust
	$(CARGO) build -q --release -p clockflake-server
	$(CARGO) build -q --release --manifest-path $(ROOT)/scripts/loadgen/Cargo.toml --target-dir $(LOADGEN_TARGET)
	$(PYTHON) $(ROOT)/scripts/bench-latency.py $(ROOT)/target/release/clockflake-server \
	  $(LOADGEN_TARGET)/release/clockflake-loadgen

test-loadgen: setup-rust
	$(CARGO) build -q -p clockflake-server
	$(CARGO) build -q --manifest-path $(ROOT)/scripts/loadgen/Cargo.toml --target-dir $(LOADGEN_TARGET)
	$(CARGO) fmt --manifest-path $(ROOT)/scripts/loadgen/Cargo.toml --check
	$(CARGO) clippy -q --manifest-path $(ROOT)/scripts/loadgen/Cargo.toml --target-dir $(LOADGEN_TARGET) \
	  -- -D warnings
	bash $(ROOT)/scripts/loadgen/smoke.sh $(SERVER_BIN) $(LOADGEN_TARGET)/debug/clockflake-loadgen

TEST_TARGETS += test-loadgen
BENCH_TARGETS += bench-latency
