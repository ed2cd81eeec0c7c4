# clockflake: the two README commands, and every step CI runs, runnable by hand.
#   make demo   build everything and print decoded ids from every part (embedded default, no server)
#   make test   every test suite of every part
#   make dist   every release artifact into dist/ (not part of make test)
# Each part adds its own targets in its folder's make.mk: it appends to DEMO_TARGETS,
# TEST_TARGETS, BENCH_TARGETS and DIST_TARGETS, so parts never edit each other's rules.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help
ROOT := $(CURDIR)
CARGO ?= cargo
PYTHON ?= python3

DEMO_TARGETS :=
TEST_TARGETS :=
BENCH_TARGETS :=
DIST_TARGETS :=
DIST_DIR := $(ROOT)/dist
# The host's triple. napi build always passes --target, so the Python extension is built for it
# too: the two bindings then share their release dependencies in target/$(HOST_TARGET)/release.
HOST_TARGET := $(shell rustc -vV 2>/dev/null | sed -n 's/^host: //p')
# Every crate is linted with the same flags: `$(CARGO) clippy -p CRATE $(CLIPPY_FLAGS)`.
CLIPPY_FLAGS := --no-deps --all-targets -- -D warnings

.PHONY: help demo test bench dist setup-rust demo-core test-core lint-core bench-core vectors dist-crates

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

demo-core: setup-rust
	$(CARGO) run -q --release -p clockflake --example demo

test-core: setup-rust lint-core
	$(PYTHON) tests/vectors/reference.py --check
	$(PYTHON) tests/vectors/public_reference.py --check
	$(CARGO) test -p clockflake --all-features
	$(CARGO) build -p clockflake --no-default-features --target wasm32v1-none

lint-core: setup-rust
	$(CARGO) fmt --all --check
	$(CARGO) clippy -p clockflake $(CLIPPY_FLAGS)
	$(CARGO) clippy -p clockflake --no-default-features --lib -- -D warnings
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc -q -p clockflake --no-deps --all-features

bench-core: setup-rust
	$(CARGO) bench -p clockflake --bench generator -- --noplot
	$(CARGO) bench -p clockflake --bench throughput

# The crates meant for crates.io (clockflake, clockflake-lease, clockflake-server; the bindings'
# crates are internal), packaged and verified together as `cargo package` names them, into dist/.
dist-crates: setup-rust
	$(CARGO) package -q -p clockflake -p clockflake-lease -p clockflake-server --target-dir $(ROOT)/target/package
	@mkdir -p $(DIST_DIR) && cp $(ROOT)/target/package/package/*.crate $(DIST_DIR)/

DIST_TARGETS += dist-crates

# Regenerates the shared vectors from the independent reference script.
vectors:
	$(PYTHON) tests/vectors/reference.py
	$(PYTHON) tests/vectors/public_reference.py

-include $(sort $(wildcard */make.mk))

demo: demo-core $(DEMO_TARGETS)
test: test-core $(TEST_TARGETS)
	@echo "make test: every suite passed"
bench: bench-core $(BENCH_TARGETS)
dist: $(DIST_TARGETS)
	@echo "make dist: artifacts in $(DIST_DIR)"; ls -l $(DIST_DIR)
