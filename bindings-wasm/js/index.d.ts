// clockflake-wasm: hand-written types for index.js (browser) and the Node test build.
// Ids are `bigint`; times (Unix ms), worker ids, clock sequences and sequences are `number`s.

/** A preset name. */
export type PresetName = 'clockseq' | 'twitter' | 'discord' | 'sonyflake' | 'baidu' | 'js53';

/** One field of a layout, most significant first. */
export interface LayoutField {
  name: 'timestamp' | 'clock_seq' | 'worker' | 'sequence';
  bits: number;
}

/** A custom layout. `unitMs` defaults to 1. Treat the object as immutable once used (changes are noticed, at a cost). */
export interface CustomLayout {
  fields: LayoutField[];
  unitMs?: number;
  epochMs: number;
}

/** A preset name or a custom layout; omitted means `'clockseq'`. */
export type LayoutOption = PresetName | CustomLayout;

/** What `describeLayout` tells about a layout. */
export interface LayoutInfo {
  /** The preset's name, or `null` for a custom layout that equals no preset. */
  name: PresetName | null;
  fields: LayoutField[];
  unitMs: number;
  epochMs: number;
  clockSeqs: number;
  maxWorkerId: number;
  maxId: bigint;
  /** Stored in generator state, so that state is never resumed under another layout. */
  fingerprint: bigint;
}

/** What an id says. */
export interface Parts {
  /** Start of the id's tick, Unix ms. */
  timestampMs: number;
  /** `new Date(timestampMs)`, computed on access. */
  readonly date: Date;
  clockSeq: number;
  workerId: number;
  sequence: number;
}

/** What `encode` takes. `clockSeq` defaults to 0. */
export interface PartsInput {
  timestampMs: number;
  clockSeq?: number;
  workerId: number;
  sequence: number;
}

/** The rollback policies (see DESIGN.md). */
export type Policy = 'clock-sequence' | 'wait' | 'logical' | 'fail';

export interface GeneratorOptions {
  /** Preset name or custom layout; default `'clockseq'`. */
  layout?: LayoutOption;
  /** Default: `'clock-sequence'` when the layout has clock-sequence bits, else `'wait'`. */
  onRollback?: Policy;
  /** Longest wait a refusal may ask for and still carry `retryAtMs` (default 5). */
  maxWaitMs?: number;
  /** How far ahead of the clock the `logical` policy may run (default 1000). */
  maxDriftMs?: number;
  /** The clock `nextId()` reads, Unix ms as an integer; default `Date.now`. */
  clock?: () => number;
}

/** A saved generator state: JSON-safe. */
export interface GeneratorState {
  layoutFingerprint: string;
  workerId: number;
  clockSeq: number;
  /** Per clock sequence, the latest (or reserved) Unix ms issued with it; `null` if never used. */
  highWaterMs: (number | null)[];
}

/** Error codes (core's `Error::code()`), plus `INVALID_ARG_TYPE` for a value of the wrong kind and `NOT_INITIALIZED` for a call before `init()`. */
export type ErrorCode =
  | 'INVALID_ID' | 'INVALID_LAYOUT' | 'UNKNOWN_LAYOUT' | 'UNKNOWN_POLICY' | 'WORKER_ID_OUT_OF_RANGE'
  | 'TIMESTAMP_OUT_OF_RANGE' | 'CLOCK_SEQ_OUT_OF_RANGE' | 'SEQUENCE_OUT_OF_RANGE' | 'INVALID_RANGE'
  | 'EPOCH_IN_FUTURE' | 'TIMESTAMP_EXHAUSTED' | 'SEQUENCE_EXHAUSTED' | 'CLOCK_MOVED_BACKWARDS'
  | 'CLOCK_SEQUENCE_EXHAUSTED' | 'INVALID_STATE' | 'CLOCK_NOT_ADVANCING' | 'WORKER_ID_INVALIDATED'
  | 'LEASE_LOST' | 'WORKER_POOL_EXHAUSTED' | 'INVALID_PUBLIC_ID' | 'UNKNOWN_KEY_VERSION'
  | 'INVALID_KEY_VERSION' | 'INVALID_ARG_TYPE' | 'NOT_INITIALIZED';

/**
 * Every refusal from the core. Arguments of the wrong kind throw a `TypeError`, and numbers
 * that are not non-negative safe integers a `RangeError`; both also carry `.code`.
 */
export class ClockflakeError extends Error {
  readonly name: 'ClockflakeError';
  readonly code: ErrorCode;
  /** When a retry of the same call can succeed (Unix ms); `null` means final. */
  readonly retryAtMs: number | null;
}

/** Loads the .wasm (browser: next to index.js unless `input` says otherwise). Await it once before anything else. */
export default function init(input?: string | URL | Request | Response | BufferSource | WebAssembly.Module): Promise<void>;

/** Every preset, by name. */
export const layouts: Readonly<Record<PresetName, LayoutInfo>>;

/** Describes a layout; throws `UNKNOWN_LAYOUT` / `INVALID_LAYOUT`. */
export function describeLayout(layout?: LayoutOption): LayoutInfo;

/**
 * Splits an id into its parts. A `number` throws a TypeError (`INVALID_ARG_TYPE`): above 2^53 it
 * has already lost digits. Strings are decimal, strictly (no sign, no spaces).
 */
export function decode(id: bigint | string, layout?: LayoutOption): Parts;

/** Joins parts into an id, checking every field's range. */
export function encode(parts: PartsInput, layout?: LayoutOption): bigint;

/** The smallest and largest id carrying a time in `fromMs..=toMs` (for `WHERE id BETWEEN`). */
export function idRange(fromMs: number, toMs: number, layout?: LayoutOption): [bigint, bigint];

/** Generates ids for one worker id; never repeats one, whatever the clock does. */
export class Generator {
  constructor(options: GeneratorOptions & { workerId: number });
  /** Continues from a saved state; `options.layout` must be the layout it was saved under. */
  static resume(state: GeneratorState, options?: GeneratorOptions): Generator;
  readonly workerId: number;
  readonly layout: LayoutInfo;
  /** The next id; waits (spinning) for the next tick when this one is full. */
  nextId(): bigint;
  /** The next id at `ms` (Unix ms); never waits: a refusal carries `retryAtMs`. */
  nextIdAt(ms: number): bigint;
  /** `count` new ids, consecutive within each tick. */
  nextIds(count: number): BigUint64Array;
  /** `nextId()` as a decimal string. */
  nextIdString(): string;
  /** A JSON-safe snapshot for `Generator.resume`. */
  state(): GeneratorState;
  /** Releases the generator now rather than at garbage collection. */
  free(): void;
}

/**
 * Public ids that reveal nothing (core's `PublicIds`): a keyed, reversible permutation of the
 * 63-bit id space, and a 16-character text form (Crockford base32: key version, payload, check).
 * Keep raw ids as keys and show these outside. It hides ids; it is not a capability: anyone can
 * submit any value and get some id back, so never use it for authorisation.
 *
 * Refusals are `ClockflakeError`s: `INVALID_ID` (an id of 2^63 or more, or outside 0..2^64),
 * `INVALID_PUBLIC_ID` (a mistyped or swapped character, a wrong length, a value of 2^63 or
 * more), `UNKNOWN_KEY_VERSION` (text made with a key this codec does not hold),
 * `INVALID_KEY_VERSION` (above 31, or twice in the key ring). A `number` id or a key that is not
 * a 16-byte `Uint8Array` is a TypeError (`INVALID_ARG_TYPE`); a version that is not an integer
 * in 0..=255 a RangeError (`INVALID_KEY_VERSION`).
 */
export class PublicIds {
  /** A codec whose current key (16 secret bytes) is tagged `version` (0..=31) in the text form. */
  constructor(version: number, key: Uint8Array);
  /** A new codec with these keys plus an older key, used only to decode text forms tagged `version` (after a key rotation). This codec is unchanged. */
  withOldKey(version: number, key: Uint8Array): PublicIds;
  /** The version of the current key. */
  readonly currentVersion: number;
  /** The public number of an id (below 2^63), under the current key. Carries no key version and no check: prefer `encodeText`. */
  encode(id: bigint): bigint;
  /** The id behind a public number, under the current key. */
  decode(publicId: bigint): bigint;
  /** The 16-character text form of an id, upper case, under the current key. */
  encodeText(id: bigint): string;
  /** The id behind a text form (case-insensitive; O reads as 0, I and L as 1); its version character picks the key. */
  decodeText(text: string): bigint;
}
