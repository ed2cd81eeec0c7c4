# bindings-wasm: the wasm engine (wasm-bindgen) that the npm package clockflake (bindings-node/) inlines,
# and the ID inspector page (www/, which loads the clockflake package's browser build).
#   make build-wasm   .wasm + pkg/web (wasm-bindgen's glue), which make build-js copies into bindings-node/wasm/
#   make test-wasm    shared vectors + engine tests through the package in Node, then the page in headless Chromium
#   make bench-wasm   decode / nextId / sustained rate in Node and Chromium vs nodejs-snowflake
#   make serve-wasm   the ID inspector page on a loopback port (also: make serve)

WASM_DIR := $(ROOT)/bindings-wasm
WASM_BINDGEN_VERSION := 0.2.130
WASM_OUT := $(ROOT)/target/wasm32-unknown-unknown/wasm-release/clockflake_wasm.wasm
WASM_PORT ?= 8737
CHROMIUM ?= /usr/bin/chromium

.PHONY: build-wasm lint-wasm setup-wasm-bindgen setup-wasm-npm setup-wasm-chromium test-wasm bench-wasm serve-wasm serve demo-wasm

# The CLI must be exactly the crate's wasm-bindgen version. Built unoptimised (--debug), the
# longest install of a fresh machine compiles in about half the time (100 s against 194 s here,
# one after the other) and writes the same files, in 0.1 s instead of 0.03 s for this module.
# Only the wasm-bindgen binary, without the default TLS feature (which only the test runner's
# downloads use): 110 s of CPU against 130 s, 59 s alone.
setup-wasm-bindgen:
	@if [ "$$(wasm-bindgen --version 2>/dev/null)" != "wasm-bindgen $(WASM_BINDGEN_VERSION)" ]; then \
	  echo "installing wasm-bindgen-cli $(WASM_BINDGEN_VERSION)"; \
	  $(CARGO) install --debug --no-default-features --bin wasm-bindgen wasm-bindgen-cli \
	    --version $(WASM_BINDGEN_VERSION); \
	fi

# npm ci only when the committed lock differs from what was installed last.
setup-wasm-npm:
	@cd $(WASM_DIR) && if ! cmp -s package-lock.json node_modules/.installed-lock.json; then \
	  npm ci --no-audit --no-fund && cp package-lock.json node_modules/.installed-lock.json; fi

setup-wasm-chromium:
	@if [ ! -x $(CHROMIUM) ]; then \
	  echo "installing chromium from apt"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	fi

# The size budget: 32 KiB until public ids moved to NIST FF1, whose AES (the aes crate's
# constant-time software AES here) and FF1 rounds add about 12.6 KiB (27,992 -> 40,5xx bytes;
# BENCHMARKS.md, "Public ids on FF1").
build-wasm: setup-rust setup-wasm-bindgen
	$(CARGO) build -q --target wasm32-unknown-unknown --profile wasm-release -p clockflake-wasm
	@rm -rf $(WASM_DIR)/pkg/web $(WASM_DIR)/pkg/node
	wasm-bindgen --target web --remove-name-section --remove-producers-section --out-dir $(WASM_DIR)/pkg/web $(WASM_OUT)
	@size=$$(stat -c %s $(WASM_DIR)/pkg/web/clockflake_wasm_bg.wasm); \
	  echo "clockflake_wasm_bg.wasm: $$size bytes ($$(( (size + 1023) / 1024 )) KiB; budget 44 KiB)"; \
	  test $$size -le 45056 || { echo "over the 44 KiB budget"; exit 1; }

lint-wasm: setup-rust
	$(LINT_CARGO) clippy -q -p clockflake-wasm --target wasm32-unknown-unknown $(CLIPPY_FLAGS)

test-wasm: build-wasm build-js setup-wasm-npm setup-wasm-chromium
	$(CARGO) test -q -p clockflake-wasm --lib
	$(CARGO) run -q -p clockflake-wasm --example messages > $(WASM_DIR)/pkg/core-messages.jsonl
	cd $(WASM_DIR) && node --test --test-reporter=spec tests/node/
	cd $(WASM_DIR) && CHROMIUM=$(CHROMIUM) node --test --test-reporter=spec tests/browser/

bench-wasm: build-wasm build-js setup-wasm-npm setup-wasm-chromium
	@cd $(WASM_DIR)/bench && if ! cmp -s package-lock.json node_modules/.installed-lock.json; then \
	  npm ci --no-audit --no-fund && cp package-lock.json node_modules/.installed-lock.json; fi
	cd $(WASM_DIR) && CHROMIUM=$(CHROMIUM) node bench/run.mjs

serve-wasm: build-wasm build-js
	cd $(WASM_DIR) && node www/serve.mjs --port $(WASM_PORT)

serve: serve-wasm

demo-wasm: build-wasm build-js
	cd $(WASM_DIR) && node www/demo.mjs
	@echo "ID inspector page: run 'make serve' and open http://127.0.0.1:$(WASM_PORT)/ (offline, loopback only)"

DEMO_TARGETS += demo-wasm
TEST_TARGETS += test-wasm
CHECK_TARGETS += lint-wasm
SETUP_TARGETS += setup-wasm-npm
SETUP_TOOL_TARGETS += setup-wasm-bindgen
DEBIAN_PACKAGES += chromium
BENCH_TARGETS += bench-wasm
