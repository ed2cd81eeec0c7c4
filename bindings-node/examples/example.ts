// Type-checked by `tsc --noEmit -p examples/tsconfig.json` (make test-node): the shipped
// index.d.ts must accept this program and refuse the lines marked @ts-expect-error.
import { Generator, PublicIds, decode, encode, idRange, layouts, describeLayout, guessLayout, isPlausible, jsonReplacer, stringify, suggestLayout } from 'clockflake';
import type { ClockflakeError, GeneratorEvents, GeneratorState, LayoutInfo, OpenOptions, Parts } from 'clockflake';

const gen = new Generator({ workerId: 7, onRollback: 'clock-sequence', maxWaitMs: 5 });
const id: bigint = gen.nextId();
const parts: Parts = decode(id);
const when: Date = parts.date;
const ms: number = parts.timestampMs + parts.clockSeq + parts.workerId + parts.sequence;
const batch: BigUint64Array = gen.nextIds(1000);
const text: string = gen.nextIdString();
const at: bigint = gen.nextIdAt(Date.now());
const fromText: Parts = decode(text, 'clockseq');

const state: GeneratorState = JSON.parse(JSON.stringify(gen.state()));
const resumed = Generator.resume(state, { layout: 'clockseq' });
const [low, high]: [bigint, bigint] = idRange(Date.now() - 60_000, Date.now());
const again: bigint = encode({ timestampMs: parts.timestampMs, workerId: 7 });
const sony: LayoutInfo = layouts.sonyflake;
const custom: LayoutInfo = describeLayout({ fields: [{ name: 'timestamp', bits: 41 }, { name: 'worker', bits: 10 }, { name: 'sequence', bits: 12 }], epochMs: 1_288_834_974_657 });
const maxId: bigint = custom.maxId;
const testGen = new Generator({ workerId: 1, layout: sony, clock: () => 1_795_000_000_000 });

try {
  gen.nextIdAt(0);
} catch (error) {
  const e = error as ClockflakeError;
  const code: string = e.code;
  const retry: number | null = e.retryAtMs;
  console.log(code, retry);
}

// Leased worker ids, released at the end of the block (`await using`: close() off the event loop).
async function leased(): Promise<bigint> {
  const options: OpenOptions = { layout: 'clockseq', maxHandoverWaitMs: 2000 };
  await using leasedGen = await Generator.open('postgres://app@db:5432/ids?app=orders&ttl=10s', options);
  const worker: number = leasedGen.workerId;
  const active: boolean = leasedGen.isActive;
  const where: string | null = leasedGen.coordinator;
  console.log(worker, active, where);
  return leasedGen.nextId();
}
// The synchronous forms, for scripts (`using`: closeSync()).
function leasedSync(): bigint {
  using leasedGen = Generator.openSync('file:///var/lib/app/ids?app=orders');
  return leasedGen.nextId();
}
void Generator.open('file:///var/lib/app/ids?app=orders').then(async (other: Generator) => {
  // A healing generator's events, typed by name.
  const onLost = ({ workerId, reason }: GeneratorEvents['lost']) => console.warn(workerId ?? 'none', reason);
  other
    .on('lost', onLost)
    .on('attemptFailed', ({ error, retryInMs }) => console.warn(error.code, error.retryAtMs, retryInMs))
    .once('healed', function (this: Generator, { workerId }) {
      const again: number = workerId;
      console.info(again, this.isActive);
    })
    .off('lost', onLost);
  const closing: Promise<void> = other.close();
  await closing;
  await other[Symbol.asyncDispose]();
  other.closeSync();
  other[Symbol.dispose]();
});

const codec = new PublicIds(2, Buffer.from('0123456789abcdef')).withOldKey(1, new Uint8Array(16));
const pub: bigint = codec.encode(id);
const back: bigint = codec.decode(pub);
const pubText: string = codec.encodeText(id);
const fromPub: bigint = codec.decodeText(pubText);
const version: number = codec.currentVersion;
const moved: PublicIds = new PublicIds(3, new Uint8Array(16)).withLegacyKey(2, Buffer.from('0123456789abcdef'));
const kept: PublicIds = PublicIds.legacy(2, Buffer.from('0123456789abcdef'));

// @ts-expect-error a leased generator takes no workerId
Generator.open('file:///tmp/ids', { workerId: 1 });
// @ts-expect-error nor a clock
Generator.open('file:///tmp/ids', { clock: () => 0 });
// @ts-expect-error the uri is a string
Generator.open(new URL('file:///tmp/ids'));
// @ts-expect-error a generator has no 'error' event
gen.on('error', () => {});
// @ts-expect-error 'healed' carries a worker id, not a reason
gen.on('healed', ({ reason }) => reason);
// @ts-expect-error a public id is a bigint, not a number
codec.encode(5);
// @ts-expect-error a key is bytes
new PublicIds(1, 'secret');

// @ts-expect-error a number is not an id: it loses precision above 2^53
decode(123);
// @ts-expect-error workerId is required
new Generator({});
// @ts-expect-error unknown policy
new Generator({ workerId: 1, onRollback: 'panic' });
// @ts-expect-error unknown layout name
new Generator({ workerId: 1, layout: 'snowflake' });
// @ts-expect-error unknown option
new Generator({ workerId: 1, workerID: 2 });
// @ts-expect-error resume takes no workerId
Generator.resume(state, { workerId: 3 });

console.log(leased, leasedSync, pub, back, fromPub, version, moved, kept, id, when, ms, batch, at, fromText, resumed, low, high, again, maxId, testGen);

// Issue 24: layout advice, JSON helpers, the layout as an option.
const suggested: LayoutInfo = suggestLayout(300, 10_000, 30);
const plausible: boolean = isPlausible(id, { layout: suggested, nowMs: Date.now(), marginMs: 1000 }) && isPlausible(id, 'twitter');
const guessed = guessLayout(id, { nowMs: Date.now() });
const guessedName: string | undefined = guessed?.name;
const guessedMs: number | undefined = guessed?.parts.timestampMs;
const asOption: Parts = decode(id, { layout: 'twitter' });
const body: string = JSON.stringify({ id }, jsonReplacer) + stringify({ id }, 2);
// @ts-expect-error: a number is no id
isPlausible(1);
// @ts-expect-error: guessLayout takes no layout
guessLayout(id, { layout: 'twitter' });
void [suggested, plausible, guessedName, guessedMs, asOption, body];
