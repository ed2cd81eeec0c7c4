// Types of the npm package `clockflake` (hand-written, like index.js; checked by `tsc --noEmit`
// on examples/example.ts in `make test-node`).

/** A preset layout's name. */
export type PresetName = 'clockseq' | 'twitter' | 'discord' | 'sonyflake' | 'baidu' | 'js53';

/** A field of an id. */
export type FieldName = 'timestamp' | 'clock_seq' | 'worker' | 'sequence';

/** A custom layout: fields from most to least significant bit, the tick in ms (default 1), the epoch in Unix ms. */
export interface CustomLayout {
  fields: ReadonlyArray<{ name: FieldName; bits: number }>;
  unitMs?: number;
  epochMs: number;
}

/** What `describeLayout` returns (and what `layouts` holds). Passing one back as a layout is the fastest way to name a layout. */
export interface LayoutInfo {
  /** The preset name, or `null` for a custom layout. */
  readonly name: PresetName | null;
  /** Fields with at least one bit, most significant first. */
  readonly fields: ReadonlyArray<{ readonly name: FieldName; readonly bits: number }>;
  readonly unitMs: number;
  readonly epochMs: number;
  /** Number of clock sequences (1 without clock-sequence bits). */
  readonly clockSeqs: number;
  readonly maxWorkerId: number;
  /** The largest id the layout holds. */
  readonly maxId: bigint;
  /** Identifies the layout in saved generator states. */
  readonly fingerprint: bigint;
}

/** A preset name, a custom layout, or a `LayoutInfo`. */
export type Layout = PresetName | CustomLayout | LayoutInfo;

/** Rollback policies: what a generator does when the clock reads earlier than its last id. */
export type RollbackPolicy = 'clock-sequence' | 'wait' | 'logical' | 'fail';

export interface GeneratorOptions {
  /** This generator's worker id, unique among the live generators of the application (0..=layout.maxWorkerId). */
  workerId: number;
  /** Default `'clockseq'`. */
  layout?: Layout;
  /** Default `'clock-sequence'` for layouts with clock-sequence bits, `'wait'` for the others. */
  onRollback?: RollbackPolicy;
  /** Longest wait (ms) a clock refusal may ask for and still be retried (default 5). */
  maxWaitMs?: number;
  /** How far ahead of the clock the `logical` policy may run (ms, default 1000). */
  maxDriftMs?: number;
  /** The time source, Unix ms as an integer (default `Date.now`). */
  clock?: () => number;
}

/** Options of `Generator.resume`: the constructor's without `workerId` (it comes from the state). */
export type ResumeOptions = Omit<GeneratorOptions, 'workerId'>;

/** A generator's saved state: JSON-safe. */
export interface GeneratorState {
  /** The layout's fingerprint, as a decimal string. */
  layoutFingerprint: string;
  workerId: number;
  clockSeq: number;
  /** Per clock sequence of the layout, the latest tick start (Unix ms) issued with it, or `null`. */
  highWaterMs: Array<number | null>;
}

/** What an id says. */
export interface Parts {
  /** Start of the id's tick, Unix ms. */
  readonly timestampMs: number;
  /** The same time as a `Date` (computed on access, not an own property). */
  readonly date: Date;
  readonly clockSeq: number;
  readonly workerId: number;
  readonly sequence: number;
}

/** The fields `encode` takes (`clockSeq` and `sequence` default to 0). */
export interface PartsInput {
  timestampMs: number;
  clockSeq?: number;
  workerId: number;
  sequence?: number;
}

/**
 * Every error this package throws. Core refusals are `Error`s; argument-shape problems are
 * `TypeError` (`INVALID_ARG_TYPE`, `UNKNOWN_OPTION`) or `RangeError` (a number that is not an
 * integer 0..=2^53-1, with the field's range code or `INVALID_ARG_VALUE`).
 */
export interface ClockflakeError extends Error {
  /** The stable code, e.g. `'WORKER_ID_OUT_OF_RANGE'`, `'INVALID_ID'`, `'CLOCK_MOVED_BACKWARDS'`. */
  code: string;
  /** For clock and sequence refusals: when a retry can succeed (Unix ms); `null` if final. */
  retryAtMs: number | null;
}

/**
 * Generates ids for one worker id. One per thread: a `Generator` cannot be shared with a worker
 * thread (structured clone copies none of its state); give each thread its own worker id.
 *
 * @example
 * const gen = new Generator({ workerId: 7 });
 * const id = gen.nextId(); // 383196811201900544n
 */
export declare class Generator {
  constructor(options: GeneratorOptions);
  /** Continues from a saved `state()`, never reissuing an id at or below its high-water marks. */
  static resume(state: GeneratorState, options?: ResumeOptions): Generator;
  readonly workerId: number;
  readonly layout: LayoutInfo;
  readonly options: { onRollback: RollbackPolicy; maxWaitMs: number; maxDriftMs: number };
  /** The next id at the clock's time; when the tick is full, waits for the next one. */
  nextId(): bigint;
  /** The next id at an explicit time (Unix ms). Never blocks: refusals throw with `retryAtMs`. */
  nextIdAt(nowMs: number): bigint;
  /** `count` ids, strictly increasing within one clock sequence. */
  nextIds(count: number): BigUint64Array;
  /** The next id as a decimal string. */
  nextIdString(): string;
  /** A snapshot to persist and pass to `Generator.resume`. */
  state(): GeneratorState;
}

/** Splits an id (a bigint, or a decimal string) into its parts. A `number` is refused: it loses precision above 2^53. */
export declare function decode(id: bigint | string, layout?: Layout): Parts;
/** Joins parts into an id; every field's range is checked. */
export declare function encode(parts: PartsInput, layout?: Layout): bigint;
/** The smallest and largest id a time window (Unix ms, both inclusive) can hold, for range scans. */
export declare function idRange(fromMs: number, toMs: number, layout?: Layout): [bigint, bigint];
/** Describes (and validates) a layout. */
export declare function describeLayout(layout: Layout): LayoutInfo;
/** Every preset layout's description. */
export declare const layouts: Readonly<Record<PresetName, LayoutInfo>>;
