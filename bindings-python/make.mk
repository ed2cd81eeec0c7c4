# clockflake Python package (bindings-python/): pyo3 + maturin, tests with pytest.
#   make setup-python   virtualenv $(ROOT)/.venv with maturin, pytest, hypothesis, mypy, ruff, ziglang, auditwheel,
#                       pydantic, opentelemetry-api and -sdk
#   make test-python    shared vectors + binding tests (pytest), stubtest, ruff, clippy
#   make build-python-wheel  the release wheel (linux x86_64, manylinux2014) into target/wheels
#   make test-python-dist  that wheel installed into fresh virtualenvs of Python 3.10 to 3.13, and
#                       the sdist built from source in one: a smoke test from each
#   make dist-python    every wheel this machine builds (linux x86_64/aarch64, manylinux2014 and musllinux_1_2;
#                       windows x86_64 with mingw-w64, checked but not run) and the sdist, into dist/ (slow,
#                       about 8 minutes here, and 6 more for the Windows wheel from cold: not part of make
#                       test); macOS wheels, and the Windows wheels run on Windows, come from
#                       .github/workflows/python-release.yml
#   make setup-faketime libfaketime for the clock-excursion tests (also a prerequisite of test-core)
#   make demo-python    a few ids with their decoded fields
#   make test-python-pg the PostgreSQL lease tests (starts a throwaway cluster; part of make test)
#   make test-python-zk the ZooKeeper lease tests (starts a throwaway server; part of make test)
#   make bench-python   throughput and per-call costs against PyPI peers (installs the peers; not part of make test)
#   make bench-python-import  import time and a first id's process beside uuid-utils, paired (part of bench-python)

PY_DIR := $(ROOT)/bindings-python
PY_VENV := $(ROOT)/.venv
PY_BIN := $(PY_VENV)/bin/python
# pydantic: clockflake.pydantic's tests and stubtest (the package itself does not depend on it);
# opentelemetry: clockflake.otel's tests, types and docs snippet (the extra `clockflake[otel]`).
PY_DEV_DEPS := "maturin>=1.9.4,<2" pytest hypothesis mypy ruff ziglang auditwheel "pydantic>=2.7,<3" \
  opentelemetry-api==1.45.2 opentelemetry-sdk==1.45.2
# Every Python file of the package, and the reference scripts of the shared vectors.
PY_LINT_PATHS := $(PY_DIR)/python $(PY_DIR)/tests $(PY_DIR)/bench $(PY_DIR)/examples $(PY_DIR)/scripts \
  $(ROOT)/tests/vectors
PY_BENCH_DEPS := snowflake-id snowflake-id-toolkit uuid-utils python-ulid

.PHONY: setup-python build-python build-python-wheel lint-python test-python test-python-dist dist-python demo-python bench-python

# Idempotent: makes the virtualenv only if missing, installs the tools only if one is missing.
setup-python:
	@test -x $(PY_BIN) || $(PYTHON) -m venv $(PY_VENV)
	@$(PY_BIN) -c "import maturin, pytest, hypothesis, mypy, ruff, ziglang, auditwheel, pydantic, opentelemetry.sdk" 2>/dev/null \
	  || $(PY_BIN) -m pip install -q $(PY_DEV_DEPS)

# The extension in $(BINDINGS_PROFILE), installed into the virtualenv (editable: python/clockflake is
# the source). Built for $(HOST_TARGET) explicitly, as napi builds the Node addon: they share the
# dependencies.
build-python: setup-python
	VIRTUAL_ENV=$(PY_VENV) CARGO_TARGET_DIR=$(ROOT)/target $(PY_VENV)/bin/maturin develop -q --profile $(BINDINGS_PROFILE) \
	  --target $(HOST_TARGET) -m $(PY_DIR)/Cargo.toml

# The package's LICENSE files are copies of the root's (maturin takes no file from above the package).
lint-python: setup-python
	cmp $(ROOT)/LICENSE-MIT $(PY_DIR)/LICENSE-MIT
	cmp $(ROOT)/LICENSE-APACHE $(PY_DIR)/LICENSE-APACHE
	$(PY_VENV)/bin/ruff check --config $(PY_DIR)/pyproject.toml $(PY_LINT_PATHS)
	$(PY_VENV)/bin/ruff format --check --config $(PY_DIR)/pyproject.toml $(PY_LINT_PATHS)
	$(CARGO) fmt -p clockflake-python --check
	$(LINT_CARGO) clippy -p clockflake-python $(CLIPPY_FLAGS)

# libfaketime (Debian's faketime) for the clock-excursion tests: tests/test_clock_excursion.py
# here and core/tests/clock_excursion.rs (so test-core needs it too). Idempotent.
LIBFAKETIME := /usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1
.PHONY: setup-faketime
setup-faketime:
	@test -e $(LIBFAKETIME) || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq faketime)
test-core: setup-faketime

test-python: build-python setup-faketime
	cd $(PY_DIR) && $(PY_BIN) -m pytest -q tests
	cd $(PY_DIR) && $(PY_BIN) -m mypy.stubtest clockflake --allowlist tests/stubtest-allowlist.txt
	cd $(PY_DIR) && $(PY_BIN) -m mypy --strict tests/typing_check.py python/clockflake/otel.py tests/test_otel.py

# The release wheel for linux x86_64 (manylinux2014) into target/wheels, as make dist builds it
# (scripts/dist-python.sh, in target/dist). One of make test's checks; under a lock, because the
# suites' test-python-dist may ask for it while the checks build it.
PY_WHEEL_DIR := $(ROOT)/target/wheels
build-python-wheel: setup-python
	@mkdir -p $(PY_WHEEL_DIR)
	flock $(PY_WHEEL_DIR)/.lock env VENV=$(PY_VENV) CARGO_TARGET_DIR=$(ROOT)/target/dist \
	  bash $(ROOT)/scripts/dist-python.sh $(PY_WHEEL_DIR) x86_64-unknown-linux-gnu

# The artifacts as a user installs them: that wheel, and the sdist built from source.
test-python-dist: build-python-wheel
	VENV=$(PY_VENV) WHEEL_DIR=$(PY_WHEEL_DIR) CARGO_TARGET_DIR=$(ROOT)/target HOST_TARGET=$(HOST_TARGET) \
	  BINDINGS_PROFILE=$(BINDINGS_PROFILE) \
	  bash $(PY_DIR)/scripts/smoke.sh

dist-python: setup-python setup-mingw
	VENV=$(PY_VENV) bash $(ROOT)/scripts/dist-python.sh $(DIST_DIR)

demo-python: build-python
	$(PY_BIN) $(PY_DIR)/examples/demo.py

.PHONY: setup-bench-python bench-python-import
setup-bench-python: build-python
	@$(PY_BIN) -c "import snowflake, snowflake_id_toolkit, uuid_utils, ulid" 2>/dev/null \
	  || $(PY_BIN) -m pip install -q $(PY_BENCH_DEPS)

bench-python: setup-bench-python bench-python-import
	$(PY_BIN) $(PY_DIR)/bench/bench.py --write $(ROOT)/BENCHMARKS.md

# Cold start (issue 26): `import clockflake` and a process making one id, paired with uuid-utils.
bench-python-import: setup-bench-python
	$(PY_BIN) $(PY_DIR)/bench/import_time.py

DEMO_TARGETS += demo-python
TEST_TARGETS += test-python
# test-python-dist installs the wheel the checks build: last, so that they have built it.
LAST_TEST_TARGETS += test-python-dist
FIRST_CHECK_TARGETS += build-python-wheel
CHECK_TARGETS += lint-python
SETUP_TARGETS += setup-python
DEBIAN_PACKAGES += faketime
DIST_TARGETS += dist-python
BENCH_TARGETS += bench-python

# The PostgreSQL lease tests of the Python package (a fork over row leases, a row taken away, a
# server frozen past the TTL and thawed: tests/test_heal_postgres.py)
# against a throwaway cluster (scripts/postgres.sh installs PostgreSQL 15 from apt if missing;
# always stopped afterwards).
.PHONY: test-python-pg
test-python-pg: build-python
	export CLOCKFLAKE_PG_DIR=$$(mktemp -d /tmp/clockflake-python-pg.XXXXXX); \
	trap '$(ROOT)/scripts/postgres.sh stop' EXIT; \
	$(ROOT)/scripts/postgres.sh start; \
	export CLOCKFLAKE_PG_URL=$$($(ROOT)/scripts/postgres.sh url); \
	cd $(PY_DIR) && $(PY_BIN) -m pytest -q tests/test_lease.py tests/test_heal_postgres.py -k postgres

# Issue 22's PostgreSQL and Redis failovers across two languages: Python holders on a primary,
# Rust newcomers (the lease probe) on its promoted, lagging replica (scripts/postgres-ha.sh,
# scripts/redis-ha.sh).
.PHONY: test-python-failover
test-python-failover: build-python
	$(CARGO) build -q -p clockflake-lease --bins
	export CLOCKFLAKE_PG_HA_DIR=$$(mktemp -d /tmp/clockflake-python-pg-ha.XXXXXX) \
	  CLOCKFLAKE_REDIS_HA_DIR=$$(mktemp -d /tmp/clockflake-python-redis-ha.XXXXXX); \
	trap '$(ROOT)/scripts/postgres-ha.sh stop; $(ROOT)/scripts/redis-ha.sh stop' EXIT; \
	cd $(PY_DIR) && $(PY_BIN) -m pytest -q tests/test_failover.py

# The ZooKeeper lease tests of the Python package (including the refusal in a forked child)
# against a throwaway server
# (scripts/zookeeper.sh installs Debian's zookeeper if missing; always stopped afterwards).
.PHONY: test-python-zk
test-python-zk: build-python
	export CLOCKFLAKE_ZK_DIR=$$(mktemp -d /tmp/clockflake-python-zk.XXXXXX); \
	trap '$(ROOT)/scripts/zookeeper.sh stop' EXIT; \
	$(ROOT)/scripts/zookeeper.sh start >/dev/null; \
	export CLOCKFLAKE_ZK_URL=$$($(ROOT)/scripts/zookeeper.sh url); \
	cd $(PY_DIR) && $(PY_BIN) -m pytest -q tests/test_lease.py -k zookeeper

TEST_TARGETS += test-python-pg test-python-zk test-python-failover

# etcd:// across two languages: Python holders and a Rust probe on a three-member cluster
# (scripts/etcd-cluster.sh, always stopped) whose leader is killed and restarted, then frozen.
.PHONY: test-python-etcd
test-python-etcd: build-python
	$(CARGO) build -q -p clockflake-lease --bins
	export CLOCKFLAKE_ETCD_DIR=$$(mktemp -d /tmp/clockflake-python-etcd.XXXXXX); \
	trap '$(ROOT)/scripts/etcd-cluster.sh stop' EXIT; \
	export CLOCKFLAKE_ETCD_URL=$$($(ROOT)/scripts/etcd-cluster.sh start); \
	cd $(PY_DIR) && $(PY_BIN) -m pytest -q tests/test_etcd.py

TEST_TARGETS += test-python-etcd
