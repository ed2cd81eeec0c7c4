// clockflake's one JavaScript API, for every runtime (Node, Bun, Deno, browsers, workers): the
// one list of what the package exports, which every entry point (default.js, node.js, and
// through index.cjs index.mjs) re-exports whole.
//
// Layouts, decoding, encoding, idRange, PublicIds and generators with a fixed worker id run on
// the wasm engine (engine.js: core compiled to WebAssembly, inlined, instantiated synchronously),
// so they need no native binary. `Generator.open(uri)` (leased worker ids: file locks and
// coordinator connections) needs the native addon, which an entry point may provide with
// `setNativeLoader` (native.js; node.js does, loading it lazily); elsewhere it throws
// NATIVE_UNAVAILABLE. Where each part lives: layouts.js, ids.js, generator.js (with fixed.js and
// leased.js), public-ids.js, errors.js.
export { ClockflakeError } from './errors.js';
export { Generator } from './generator.js';
export { decode, encode, guessLayout, idRange, isPlausible, jsonReplacer, stringify, suggestLayout } from './ids.js';
export { describeLayout, layouts } from './layouts.js';
export { restored } from './native.js';
export { PublicIds } from './public-ids.js';
