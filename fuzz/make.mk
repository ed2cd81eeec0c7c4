# Checks by machine (issue 23): fuzz targets for every parser that takes outside input, Miri
# over core's tests, loom models of core's atomics. Included by the top Makefile.
#   make test-loom   the loom models of core's generator (core/tests/loom.rs) under
#                    RUSTFLAGS="--cfg loom", in target/loom (part of make test)
#   make test-miri   core's unit tests and its block tests under Miri (part of make test)
#   make test-fuzz   every fuzz target over its committed corpus, each input once (part of make
#                    test): deterministic. Exploring in make test was not: two runs with one
#                    seed differed (libFuzzer's compare tracing sees addresses), and the second
#                    found a leak the first did not; `make fuzz` explores. The replay needs no
#                    coverage instrumentation (libFuzzer runs a corpus once with -runs=0), so it
#                    is a stable debug build (overflow checks and debug assertions on) in the
#                    main target directory, sharing the dependencies the other suites built,
#                    not cargo-fuzz's nightly AddressSanitizer build (several minutes more)
#   make fuzz        every fuzz target for FUZZ_SECONDS each (default 300), new inputs kept in
#                    fuzz/target/corpus/TARGET (ignored); crashes land in fuzz/artifacts/TARGET
#   make fuzz-TARGET one target, as make fuzz
# The nightly toolchain, Miri, rust-src and cargo-fuzz are installed when missing.

FUZZ_DIR := $(ROOT)/fuzz
FUZZ_TARGETS := id layout_name public_text state_record lease_uri server_query server_body \
  server_config
FUZZ_SECONDS ?= 300
# Release with debug assertions (overflow checks on), AddressSanitizer; the server's targets
# are a cargo feature of the fuzz crate, always built here.
FUZZ_CARGO := cd $(FUZZ_DIR) && $(CARGO) +nightly fuzz
FUZZ_FLAGS := -a --features server

.PHONY: setup-nightly setup-fuzz test-loom test-miri test-fuzz fuzz build-fuzz build-fuzz-replay

setup-nightly:
	@rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
	@rustup +nightly component list --installed | grep -q '^miri' \
	  && rustup +nightly component list --installed | grep -q '^rust-src' \
	  || rustup +nightly component add miri rust-src

# Asks cargo itself (cargo finds subcommands in $CARGO_HOME/bin and on PATH): a cargo-fuzz in
# another home would not be found when the recipe runs.
setup-fuzz: setup-nightly
	@$(CARGO) fuzz --version >/dev/null 2>&1 || $(CARGO) install --locked cargo-fuzz

test-loom: setup-rust
	RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=$(ROOT)/target/loom \
	  $(CARGO) test -p clockflake --release --test loom

# Excluded: vectors.rs (every shared vector: 130 s under Miri here, over this step's budget;
# plain `cargo test` runs it), properties.rs (proptest: hundreds of cases, file persistence),
# public_ids.rs (statistics over millions of ids: over 20 minutes under Miri), threads.rs and
# clock_excursion.rs (hundreds of thousands of ids on threads; loom covers the atomics),
# blocking_bound.rs, doctests, and the two std_clock unit tests bounded by real time: one whose
# clock advances per read while the wait is bounded (Miri's reads are too slow for it), and one
# that allows 50 ms between two clock reads (make test runs Miri beside the suites, where a thread
# can wait longer than that for a core; plain `cargo test` runs both). The std_clock
# tests read the system clock, so isolation is off.
test-miri: setup-nightly
	MIRIFLAGS=-Zmiri-disable-isolation $(CARGO) +nightly miri test -p clockflake --lib --test blocks \
	  -- --skip std_clock::tests::blocking_call_waits_for_the_next_tick_instead_of_repeating \
	  --skip std_clock::tests::monotonic_clock_tracks_the_wall_clock

build-fuzz: setup-fuzz
	rustfmt --check --edition 2021 $(FUZZ_DIR)/fuzz_targets/*.rs
	$(FUZZ_CARGO) build $(FUZZ_FLAGS)

# fuzz/Cargo.lock pins the main workspace's versions (plus libFuzzer's own crates), so that the
# replay build shares the main target directory's dependencies.
build-fuzz-replay: setup-rust
	rustfmt --check --edition 2021 $(FUZZ_DIR)/fuzz_targets/*.rs
	cd $(FUZZ_DIR) && CARGO_TARGET_DIR=$(ROOT)/target $(CARGO) build -q --locked --features server --bins

# A failing input is reported, and libFuzzer copies it to fuzz/artifacts/TARGET.
test-fuzz: build-fuzz-replay
	@set -e; logs=$$(mktemp -d /tmp/clockflake-fuzz.XXXXXX); trap 'rm -rf '"$$logs" EXIT; \
	for target in $(FUZZ_TARGETS); do \
	  mkdir -p $(FUZZ_DIR)/artifacts/$$target; \
	  if ! $(ROOT)/target/debug/$$target -runs=0 -artifact_prefix=$(FUZZ_DIR)/artifacts/$$target/ \
	      $(FUZZ_DIR)/corpus/$$target >$$logs/$$target.log 2>&1; then \
	    tail -n 60 $$logs/$$target.log; \
	    echo "fuzz target $$target failed: the input is in fuzz/artifacts/$$target"; exit 1; \
	  fi; \
	  grep -E '^Done' $$logs/$$target.log | sed "s/^/$$target: /"; \
	done

fuzz-%: build-fuzz
	@mkdir -p $(FUZZ_DIR)/target/corpus/$*
	$(FUZZ_CARGO) run $(FUZZ_FLAGS) $* target/corpus/$* corpus/$* -- \
	  -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1

fuzz: $(addprefix fuzz-,$(FUZZ_TARGETS))

CHECK_TARGETS += test-loom test-miri test-fuzz
SETUP_TOOLCHAIN_TARGETS += setup-nightly
