// The Chromium half of `make bench-wasm`, in a dedicated worker (no main-thread limits on
// synchronous wasm compilation, which the peer's Node-style glue uses).
import * as api from '/clockflake/browser.mjs';
import { measureAll } from './measure.mjs';

/** Loads nodejs-snowflake's `--target nodejs` glue in the browser with a tiny require() shim. */
async function loadPeer() {
  const base = '/bench/node_modules/nodejs-snowflake/';
  const [source, bytes] = await Promise.all([
    fetch(`${base}nodejs_snowflake.js`).then((r) => r.text()),
    fetch(`${base}nodejs_snowflake_bg.wasm`).then((r) => r.arrayBuffer()),
  ]);
  const module = { exports: {} };
  const modules = {
    util: { TextDecoder, TextEncoder },
    path: { join: (...parts) => parts.join('/') },
    fs: { readFileSync: () => new Uint8Array(bytes) },
  };
  // eslint-disable-next-line no-new-func
  new Function('module', 'exports', 'require', '__dirname', source)(module, module.exports, (name) => modules[name], '.');
  return module.exports.Snowflake;
}

const quick = new URL(import.meta.url).searchParams.has('quick');
const Snowflake = await loadPeer();
const { default: Hashids } = await import('/bench/node_modules/hashids/esm/hashids.js');
postMessage({ crossOriginIsolated: self.crossOriginIsolated, userAgent: navigator.userAgent, ...measureAll({ api, Snowflake, Hashids, quick }) });
