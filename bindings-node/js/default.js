// The entry for browsers, workers (workerd and others) and Deno: the whole API on the wasm
// engine; `Generator.open` throws NATIVE_UNAVAILABLE (no native addon can load here).
export * from './api.js';
