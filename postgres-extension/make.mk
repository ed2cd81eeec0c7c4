# The PostgreSQL extension `clockflake` (issue 35). Included by the top Makefile.
#   make build-postgres-extension    the library (release), checked against the hand-written SQL
#   make install-postgres-extension  the library, control and SQL files into PostgreSQL 15's
#                      directories (pg_config --pkglibdir, --sharedir): root, as `cargo pgrx
#                      install` would
#   make test-postgres-extension     tests/run.sh on throwaway PostgreSQL 15 clusters (run as
#                      `postgres`): the SQL API, 8 pgbench connections inserting
#                      DEFAULT clockflake.next_id() (0 duplicates, increasing per connection), a
#                      standby's refusal, no worker id, no shared_preload_libraries, a bad layout,
#                      two servers leasing from one file:// directory, kill -9 of the postmaster
#                      under load and a restart with the clock an hour behind (libfaketime), a
#                      replica promoted after its primary is killed under load, a lock file
#                      removed (healed without a restart), leases from another PostgreSQL server
#                      (postgres://): a full pool, and the coordinator frozen past its TTL under
#                      load (refused while lost, none past the deadline, a newcomer on the old
#                      worker id, healed); 25 to 40 s
#   make lint-postgres-extension     rustfmt and clippy -D warnings
#   make bench-postgres-extension    next_id() beside nextval() and gen_random_uuid() (pgbench, 1
#                      and 8 clients), and inserts of 1 M rows keyed by each, in turns: rounds
#                      that rotate the order, medians and ratios (tests/bench.sh, about 4 min)
#   make dist-postgres-extension     dist/clockflake-postgresql15-VERSION-ARCH.tar.gz: the files
#                      in the layout pg_config gives (usr/lib/postgresql/15/lib,
#                      usr/share/postgresql/15/extension), to untar at /
#
# Its own workspace (postgres-extension/Cargo.toml) and target directory (target/pgext), so
# pgrx never enters or invalidates the main build. Built with plain `cargo build`, without
# cargo-pgrx: pgrx's build script finds PostgreSQL through PGRX_PG_CONFIG_PATH (what
# `cargo pgrx init` would write to ~/.pgrx/config.toml), and the SQL is a file written by hand
# (sql/), which tests/check-symbols.sh checks against the library's exported functions. That
# saves make test the ~6 min build of cargo-pgrx and a `cargo pgrx schema` pass.
# pgrx 0.18.1: 0.19 declares Rust 1.96, above this workspace's stable toolchain
# (rust-toolchain.toml); 0.18.1 builds with it.

PGEXT_DIR := $(ROOT)/postgres-extension
PGEXT_PG_CONFIG ?= /usr/lib/postgresql/15/bin/pg_config
# Another target directory by PGEXT_TARGET=DIR (a helper's own, beside other builds).
PGEXT_TARGET ?= $(ROOT)/target/pgext
PGEXT_CARGO := PGRX_PG_CONFIG_PATH=$(PGEXT_PG_CONFIG) CARGO_TARGET_DIR=$(PGEXT_TARGET) $(CARGO)
PGEXT_LIB := $(PGEXT_TARGET)/release/libclockflake_postgres.so
PGEXT_VERSION := $(shell sed -n "s/^default_version = '\(.*\)'/\1/p" $(PGEXT_DIR)/clockflake.control)
PGEXT_SQL := $(PGEXT_DIR)/sql/clockflake--$(PGEXT_VERSION).sql

.PHONY: build-postgres-extension install-postgres-extension test-postgres-extension \
  lint-postgres-extension dist-postgres-extension bench-postgres-extension

build-postgres-extension: setup-rust
	cd $(PGEXT_DIR) && $(PGEXT_CARGO) build -q --release --locked
	bash $(PGEXT_DIR)/tests/check-symbols.sh $(PGEXT_LIB) $(PGEXT_SQL)

# $(1): the root to install under ("" for this machine's PostgreSQL).
define pgext_install
	install -D -m 755 $(PGEXT_LIB) $(1)$$($(PGEXT_PG_CONFIG) --pkglibdir)/clockflake.so
	install -D -m 644 -t $(1)$$($(PGEXT_PG_CONFIG) --sharedir)/extension \
	  $(PGEXT_DIR)/clockflake.control $(PGEXT_SQL)
endef

install-postgres-extension: build-postgres-extension
	$(call pgext_install,)

test-postgres-extension: install-postgres-extension
	bash $(PGEXT_DIR)/tests/run.sh

bench-postgres-extension: install-postgres-extension
	bash $(PGEXT_DIR)/tests/bench.sh

# In the build's own target dir and profile: clippy then reuses its build scripts (pgrx's
# bindings of PostgreSQL's headers, most of the build) and only checks the crates (cargo's lock
# on the dir lets one of the two wait when make test runs them at once).
lint-postgres-extension: setup-rust
	cd $(PGEXT_DIR) && $(CARGO) fmt --check
	cd $(PGEXT_DIR) && $(PGEXT_CARGO) clippy -q --release --locked -- -D warnings

dist-postgres-extension: build-postgres-extension
	rm -rf $(PGEXT_TARGET)/dist && mkdir -p $(DIST_DIR)
	$(call pgext_install,$(PGEXT_TARGET)/dist)
	tar -C $(PGEXT_TARGET)/dist -czf \
	  $(DIST_DIR)/clockflake-postgresql15-$(PGEXT_VERSION)-$$(uname -m).tar.gz usr

TEST_TARGETS += test-postgres-extension
CHECK_TARGETS += lint-postgres-extension
# pgbench comes with postgresql-15's client; pgrx's bindgen needs the server headers and libclang;
# libfaketime sets a restarted server's clock back (tests/run.sh).
DEBIAN_PACKAGES += postgresql-15 postgresql-server-dev-15 libclang-dev faketime
DIST_TARGETS += dist-postgres-extension
BENCH_TARGETS += bench-postgres-extension
