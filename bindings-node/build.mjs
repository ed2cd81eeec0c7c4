// Builds the package's JavaScript into lib/ from js/ (ES module sources) with esbuild:
//   lib/index.cjs    Node's entry (require), with the native loader for Generator.open
//   lib/index.mjs    Node's entry (import): the same objects as index.cjs
//   lib/browser.mjs  browsers, web workers, Deno (and bundlers' `import`); lib/browser.cjs for `require`
//   lib/workerd.mjs  Cloudflare Workers (workerd), which refuse to compile wasm from bytes: it imports
//                    lib/clockflake.wasm as a module instead (wrangler bundles .wasm imports so)
//   lib/decode.mjs, lib/decode.cjs   `clockflake/decode`: decoding only, plain JavaScript
// The wasm engine (wasm/: bindings-wasm's build, copied in by `make build-js`) is inlined as
// bytes and instantiated synchronously: no .wasm file to locate, no bundler configuration, no
// `await init()`. Core's tables (wasm/core.js, which `make build-js` has core write: message
// templates, presets, names) are bundled like any module.
import { build } from 'esbuild';
import { copyFileSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { deflateRawSync } from 'node:zlib';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const lib = join(here, 'lib');
/**
 * The wasm-bindgen glue's async loader (never called: the bytes are inlined) names the .wasm by
 * `new URL('clockflake_wasm_bg.wasm', import.meta.url)`, which bundlers would try to resolve and
 * emit: leave it out.
 */
const inlineWasm = {
  name: 'inline-wasm',
  setup(builder) {
    builder.onLoad({ filter: /clockflake_wasm\.js$/ }, async ({ path }) => {
      const source = readFileSync(path, 'utf8');
      const stripped = source.replace("new URL('clockflake_wasm_bg.wasm', import.meta.url)", 'undefined');
      if (stripped === source) throw new Error('the wasm-bindgen glue no longer names its .wasm as expected');
      return { contents: stripped, loader: 'js' };
    });
  },
};
const WASM = join(here, 'wasm/clockflake_wasm_bg.wasm');

/**
 * `clockflake:wasm`: the engine's bytes, plain (`deflated` false) or deflated + inflated at load,
 * or (`deflated` 'module') a WebAssembly.Module imported from lib/clockflake.wasm.
 */
const wasmModule = (deflated) => ({
  name: 'wasm-bytes',
  setup(builder) {
    builder.onResolve({ filter: /^clockflake:wasm$/ }, () => ({ path: 'wasm', namespace: 'clockflake' }));
    builder.onLoad({ filter: /^wasm$/, namespace: 'clockflake' }, () => {
      if (deflated === 'module') return { contents: "import module from './clockflake.wasm';\nexport const wasmBytes = module;", loader: 'js', resolveDir: here };
      if (!deflated) return { contents: `import bytes from ${JSON.stringify(WASM)};\nexport const wasmBytes = bytes;`, loader: 'js', resolveDir: here };
      const bytes = readFileSync(WASM);
      const packed = deflateRawSync(bytes, { level: 9 }).toString('base64');
      return {
        contents: `import { inflateRaw } from './js/inflate.js';
export const wasmBytes = inflateRaw(Uint8Array.from(atob(${JSON.stringify(packed)}), (c) => c.charCodeAt(0)), ${bytes.length});`,
        loader: 'js',
        resolveDir: here,
      };
    });
  },
});
const common = { bundle: true, logLevel: 'warning', loader: { '.wasm': 'binary' }, legalComments: 'none', plugins: [inlineWasm, wasmModule(false)] };
const browserPlugins = [inlineWasm, wasmModule(true)];

rmSync(lib, { recursive: true, force: true });
mkdirSync(lib);
await build({
  ...common,
  entryPoints: [join(here, 'js/node.js')],
  outfile: join(lib, 'index.cjs'),
  format: 'cjs',
  platform: 'node',
  target: 'node18',
  define: { 'import.meta.url': '__clockflake_module_url' },
  banner: { js: "'use strict';\nconst __clockflake_module_url = require('node:url').pathToFileURL(__filename).href;" },
});
copyFileSync(join(here, 'js/index.mjs'), join(lib, 'index.mjs'));
for (const [format, file] of [['esm', 'browser.mjs'], ['cjs', 'browser.cjs']]) {
  await build({ ...common, plugins: browserPlugins, entryPoints: [join(here, 'js/default.js')], outfile: join(lib, file), format, platform: 'neutral', target: 'es2020' });
}

await build({
  ...common,
  plugins: [inlineWasm, wasmModule('module')],
  external: ['./clockflake.wasm'],
  entryPoints: [join(here, 'js/default.js')],
  outfile: join(lib, 'workerd.mjs'),
  format: 'esm',
  platform: 'neutral',
  target: 'es2022',
});
copyFileSync(WASM, join(lib, 'clockflake.wasm'));

// The decode-only entry: plain JavaScript, with the preset layouts of core's tables (wasm/core.js).
for (const [format, file] of [['esm', 'decode.mjs'], ['cjs', 'decode.cjs']]) {
  await build({ ...common, entryPoints: [join(here, 'js/decode.js')], outfile: join(lib, file), format, platform: 'neutral', target: 'es2020' });
}
