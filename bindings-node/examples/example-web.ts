// Type-checked without @types/node and without the disposable lib (tsconfig.web.json): what a
// browser or worker project sees. The same package, the same types.
import { ClockflakeError, Generator, PublicIds, decode, idRange } from 'clockflake';
import { decode as decodeOnly, layouts } from 'clockflake/decode';

const gen = new Generator({ workerId: 1 });
const id: bigint = gen.nextId();
const ms: number = decode(id).timestampMs;
const [low, high]: [bigint, bigint] = idRange(ms, ms);
const worker: number = decodeOnly(String(id), layouts.clockseq).workerId;
const codec = new PublicIds(1, new Uint8Array(16));
const text: string = codec.encodeText(id);
try {
  decode('not an id');
} catch (error) {
  if (error instanceof ClockflakeError) {
    const code: string = error.code;
    const retry: number | null = error.retryAtMs;
    console.log(code, retry);
  }
}
gen.close();
// @ts-expect-error ids are bigints, never numbers
decode(1);
console.log(low, high, worker, text);
