// Node entry (the `--target nodejs` build, instantiated synchronously on import). `init()` is
// there for parity with the browser entry and resolves at once.
import { createRequire } from 'node:module';
import { __bind } from './api.js';

export { ClockflakeError, Generator, PublicIds, decode, describeLayout, encode, idRange, layouts } from './api.js';

__bind(createRequire(import.meta.url)('./clockflake_wasm.cjs'));

export default async function init() {}
