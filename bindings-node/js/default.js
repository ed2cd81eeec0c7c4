// The entry for browsers, workers (workerd and others) and Deno: the whole API on the wasm
// engine; `Generator.open` throws NATIVE_UNAVAILABLE (no native addon can load here).
export {
  ClockflakeError,
  Generator,
  PublicIds,
  decode,
  describeLayout,
  encode,
  guessLayout,
  idRange,
  isPlausible,
  jsonReplacer,
  layouts,
  restored,
  stringify,
  suggestLayout,
} from './api.js';
