// Browser entry: `await init()` once, then use the API.
//   import init, { Generator, decode } from './index.js';
//   await init();
import initWasm, * as glue from './clockflake_wasm.js';
import { __bind } from './api.js';

export { ClockflakeError, Generator, decode, describeLayout, encode, idRange, layouts } from './api.js';

let ready;

/** Loads and instantiates the .wasm (next to this file unless `input` says otherwise). Idempotent. */
export default function init(input) {
  ready ??= initWasm(input === undefined ? undefined : { module_or_path: input }).then(() => {
    __bind(glue);
  });
  return ready;
}
