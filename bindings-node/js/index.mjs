// Node's ES module entry: the very objects of the CommonJS entry (one copy of the package's
// state, whichever way it is loaded).
import clockflake from './index.cjs';

export const {
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
} = clockflake;
export default clockflake;
