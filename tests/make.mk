# Chaos tests (issue 12): what operations do to a running generator, against real servers.
#   make test-chaos   freeze PostgreSQL (25 s) and ZooKeeper (10 s) with SIGSTOP under a tight
#                     next_id() loop in Rust, Python and Node: every call returns within 100 ms,
#                     LEASE_LOST at the deadline, new leases above the old marks (part of make test)

.PHONY: test-chaos

test-chaos: build-python build-node
	$(CARGO) build -q -p clockflake-lease --example chaos_child
	export CLOCKFLAKE_PG_DIR=$$(mktemp -d /tmp/clockflake-chaos-pg.XXXXXX) \
	  CLOCKFLAKE_ZK_DIR=$$(mktemp -d /tmp/clockflake-chaos-zk.XXXXXX); \
	trap '$(ROOT)/scripts/postgres.sh thaw 2>/dev/null; $(ROOT)/scripts/zookeeper.sh thaw 2>/dev/null; \
	  $(ROOT)/scripts/postgres.sh stop; $(ROOT)/scripts/zookeeper.sh stop' EXIT; \
	$(ROOT)/scripts/postgres.sh start; \
	zk_url=$$($(ROOT)/scripts/zookeeper.sh start); \
	$(PY_BIN) $(ROOT)/tests/chaos/freeze.py postgres "$$($(ROOT)/scripts/postgres.sh url)" 25 10; \
	$(PY_BIN) $(ROOT)/tests/chaos/freeze.py zookeeper "$$zk_url" 10 4

TEST_TARGETS += test-chaos
