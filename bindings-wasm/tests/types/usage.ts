// Type-checked (tsc --strict --noEmit) against the hand-written pkg/web/index.d.ts: the API as
// documented compiles, and misuse (a number id, a bad policy name) does not.
import init, { ClockflakeError, Generator, PublicIds, decode, describeLayout, encode, idRange, layouts } from '../../pkg/web/index.js';
import type { GeneratorState, LayoutInfo, Parts } from '../../pkg/web/index.js';

export async function usage(): Promise<void> {
  await init();
  const gen = new Generator({ workerId: 7, layout: 'clockseq', onRollback: 'logical', maxWaitMs: 5, clock: () => Date.now() });
  const id: bigint = gen.nextId();
  const at: bigint = gen.nextIdAt(1_795_000_000_000);
  const many: BigUint64Array = gen.nextIds(10);
  const text: string = gen.nextIdString();
  const state: GeneratorState = gen.state();
  const again: Generator = Generator.resume(JSON.parse(JSON.stringify(state)) as GeneratorState, { layout: 'clockseq' });
  const parts: Parts = decode(id);
  const when: Date = parts.date;
  const fromText: number = decode(text, 'twitter').workerId;
  const custom: LayoutInfo = describeLayout({ fields: [{ name: 'timestamp', bits: 41 }, { name: 'sequence', bits: 12 }], epochMs: 0 });
  const max: bigint = layouts.js53.maxId;
  const back: bigint = encode({ timestampMs: parts.timestampMs, workerId: 1, sequence: 0 }, 'twitter');
  const [low, high]: [bigint, bigint] = idRange(0, 1, 'js53');
  try {
    gen.nextIdAt(0);
  } catch (error) {
    if (error instanceof ClockflakeError) {
      const retry: number | null = error.retryAtMs;
      console.log(error.code, retry);
    }
  }
  const codec: PublicIds = new PublicIds(2, new Uint8Array(16)).withOldKey(1, crypto.getRandomValues(new Uint8Array(16)));
  const pub: bigint = codec.encode(id);
  const raw: bigint = codec.decode(pub);
  const shown: string = codec.encodeText(id);
  const back2: bigint = codec.decodeText(shown.toLowerCase());
  const version: number = codec.currentVersion;
  try {
    codec.decodeText('not a public id');
  } catch (error) {
    if (error instanceof ClockflakeError && error.code === 'INVALID_PUBLIC_ID') console.log(error.message);
  }
  // @ts-expect-error a number is not an id
  codec.encode(5);
  // @ts-expect-error the key is bytes, not a string
  new PublicIds(1, '0123456789abcdef');
  // @ts-expect-error currentVersion is read-only
  codec.currentVersion = 3;
  // @ts-expect-error a number is not an id
  decode(5);
  // @ts-expect-error no such policy
  new Generator({ workerId: 1, onRollback: 'panic' });
  // @ts-expect-error workerId is required
  new Generator({});
  console.log(at, many, again, when, fromText, custom, max, back, low, high, raw, back2, version);
}
