// Browser entry: `await init()` once, then use the API.
//   import init, { Generator, decode } from './index.js';
//   await init();
import initWasm, * as glue from './clockflake_wasm.js';
import { __bind } from './api.js';

export { ClockflakeError, Generator, PublicIds, decode, describeLayout, encode, idRange, layouts } from './api.js';

let ready;

/**
 * Loads and instantiates the .wasm: next to this file unless `input` (a URL, Response, bytes or
 * compiled module) says otherwise. Idempotent: later calls return the first call's promise.
 */
export default function init(input) {
  const options = input === undefined || (typeof input === 'object' && 'module_or_path' in input) ? input : { module_or_path: input };
  ready ??= initWasm(options).then(() => {
    __bind(glue);
  });
  return ready;
}
