// ES module entry: the same objects as the CommonJS entry (index.js).
import clockflake from './index.js';

export const { Generator, PublicIds, decode, encode, idRange, layouts, describeLayout } = clockflake;
export default clockflake;
