// Types of the npm package `clockflake`, one API for every runtime (hand-written, like js/;
// checked by `tsc --noEmit` on examples/ in `make test-node`, with and without @types/node).

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

/** What `Generator#stats()` returns: counters for metrics. */
export interface GeneratorStats {
  /** The worker id (for a leased generator, the leased one; `null` while it heals). */
  workerId: number | null;
  /** `'healing'`: a healing generator whose lease was lost, leasing again. */
  state: 'active' | 'lost' | 'closed' | 'forked' | 'healing';
  leased: boolean;
  /** A leased generator's: whether it heals (`heal`, the default). */
  heal?: boolean;
  /** A healing generator's leases lost, leases taken again after a loss, failed attempts. */
  losses?: number;
  heals?: number;
  healFailures?: number;
  /** Why the last lease was lost, and the last failed attempt's error (`null`: none). */
  lastLoss?: string | null;
  lastHealError?: string | null;
  /** Successful renewals of the lease and its reservation (the first, at open, included). */
  renewals: number;
  /** Renewals that failed (ids go on until the deadline). */
  renewalFailures: number;
  /** Times the wall clock was found more than 1 s behind and the generator followed it back. */
  clockStepsBack: number;
  /** Reservations persisted for a new clock sequence (after the time went back). */
  clockSeqSwitches: number;
  /** Waits of id calls (clock, full tick, handover, renewal thread) and their total time. */
  waits: number;
  waitUs: number;
  /** Ms to the lease deadline; `null` when the lease never expires (or no lease). */
  deadlineInMs: number | null;
  /** Unix ms up to which the persisted reservation lets ids be issued (0: none). */
  reservedUntilMs: number;
  /**
   * The start-up clock check (`max_skew`): this host's clock minus the coordinator's, ms
   * (positive: ahead); `null` when not measured (`file://`, `max_skew=off`, a fixed worker id).
   */
  measuredSkewMs: number | null;
}

/** Options of `Generator.resume`: the constructor's without `workerId` (it comes from the state). */
export type ResumeOptions = Omit<GeneratorOptions, 'workerId'>;

/**
 * Options of `Generator.open`: the constructor's without `workerId` (it is leased) and without
 * `clock` (a lease's deadline is measured on the system clock; use `nextIdAt` for explicit times).
 */
export interface OpenOptions {
  /** Default `'clockseq'`. Leases cover layouts of at most 65,536 worker ids. */
  layout?: Layout;
  onRollback?: RollbackPolicy;
  maxWaitMs?: number;
  maxDriftMs?: number;
  /**
   * Longest wait (ms) at the first id after taking over a worker id whose previous holder's
   * clock was ahead of this one's, when no clock sequence is free (default 15,000).
   */
  maxHandoverWaitMs?: number;
  /**
   * Whether a lost lease (a coordinator outage past the TTL, a paused machine, a failover's
   * fence) is leased again in the background, a new worker id if need be (default `true`).
   * Meanwhile id calls throw a retryable `COORDINATOR_UNAVAILABLE` with `retryAtMs`, never an id
   * under the lost lease; `isActive` is false and `stats()` says why. With `false`, a lost lease
   * throws `LEASE_LOST` until the generator is closed and a new one opened.
   */
  heal?: boolean;
}

/**
 * The events of a healing generator (`Generator.open`, `heal` on) and what each listener gets.
 * Also logged on stderr, one line each, when `NODE_DEBUG=clockflake` is set (silent otherwise).
 *
 * @example
 * const gen = await Generator.open('postgres://app@db:5432/ids?app=orders&ttl=10s');
 * gen.on('lost', ({ workerId, reason }) => logger.warn({ workerId, reason }, 'id lease lost'));
 * gen.on('attemptFailed', ({ error, retryInMs }) => logger.warn({ code: error.code, retryInMs }, error.message));
 * gen.on('healed', ({ workerId }) => logger.info({ workerId }, 'id lease healed'));
 */
export interface GeneratorEvents {
  /**
   * The lease was lost (`reason`: why): id calls throw the retryable `COORDINATOR_UNAVAILABLE`
   * until a new lease is held. `workerId`: the worker id it held (`null` for a lease lost before
   * it was in use).
   */
  lost: { workerId: number | null; reason: string };
  /** An attempt to lease again failed with `error`; the next starts in `retryInMs` (100 ms, doubling to 5 s). */
  attemptFailed: { error: ClockflakeError; retryInMs: number };
  /** A new lease is held: ids again, carrying `workerId` (perhaps another than before). */
  healed: { workerId: number };
}

/**
 * A coordinator URI (every one the lease accepts; tests/coordinators.test.mjs keeps the list
 * true): `file:///DIR?app=NAME`, `postgres://USER@HOST:PORT/DB?app=NAME&ttl=10s`,
 * `redis://[USER:PASSWORD@]HOST:PORT/DB?app=NAME&ttl=10s`, `zookeeper://HOST:PORT,.../PATH?ttl=10s`,
 * `etcd://HOST:PORT,.../?app=NAME&ttl=10s` (`etcds://` for TLS), `k8s:///DIR?app=NAME` (a StatefulSet pod's ordinal), `env:///DIR?app=NAME` (`CLOCKFLAKE_WORKER_ID`).
 */
export type CoordinatorUri = string;

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
 * Every error this package throws answers `error instanceof ClockflakeError` (through
 * `Symbol.hasInstance`: argument errors are real `TypeError`s and `RangeError`s as well, which a
 * class cannot extend at the same time). Core refusals are instances of this class, with core's
 * code and message, the same whichever engine (wasm or native) ran the call; argument-shape
 * problems are `TypeError` (`INVALID_ARG_TYPE`, `UNKNOWN_OPTION`) or `RangeError` (a number that
 * is not an integer 0..=2^53-1, with the field's range code or `INVALID_ARG_VALUE`). Leased
 * generators add `LEASE_LOST`, `WORKER_POOL_EXHAUSTED`, `INVALID_URI`, `COORDINATOR_UNAVAILABLE`,
 * `CLOCK_SKEW`, `WORKER_RANGE_CONFLICT` (two pools' `workers` ranges overlap), `GENERATOR_CLOSED`,
 * `INVALID_STATE` (a stored state record that cannot be read) and `NATIVE_UNAVAILABLE` (no native addon for this platform or runtime: `Generator.open` only);
 * `PublicIds` adds `INVALID_PUBLIC_ID`, `UNKNOWN_KEY_VERSION` and `INVALID_KEY_VERSION`. The
 * wasm engine has two codes of its own, `ENGINE_BUSY` and `UNKNOWN_HANDLE`, which no call of
 * this package provokes (a report of one is a bug).
 */
export declare class ClockflakeError extends Error {
  constructor(code: string, message: string, retryAtMs?: number | null);
  /** The stable code, e.g. `'WORKER_ID_OUT_OF_RANGE'`, `'INVALID_ID'`, `'CLOCK_MOVED_BACKWARDS'`. */
  readonly code: string;
  /** For clock and sequence refusals: when a retry can succeed (Unix ms); `null` if final. */
  readonly retryAtMs: number | null;
  /** True for every error the package throws (TypeErrors and RangeErrors included). */
  static [Symbol.hasInstance](value: unknown): value is ClockflakeError;
}

/**
 * `[Symbol.dispose](): void` where the compilation knows `Symbol.dispose` (TypeScript's
 * `esnext.disposable` lib, or @types/node), so `using gen = Generator.openSync(...)` type-checks;
 * nothing where it does not, so these types compile with or without either.
 */
type DisposeMethod = SymbolConstructor extends { readonly dispose: infer D extends symbol } ? { [K in D]: () => void } : Record<never, never>;
/** `[Symbol.asyncDispose](): Promise<void>` likewise, so `await using gen = await Generator.open(...)` type-checks. */
type AsyncDisposeMethod = SymbolConstructor extends { readonly asyncDispose: infer D extends symbol }
  ? { [K in D]: () => Promise<void> }
  : Record<never, never>;

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
  /**
   * A generator whose worker id is leased from a coordinator (a background thread renews it);
   * no id goes out after the lease deadline. A lost lease is leased again in the background
   * (`heal`, the default), id calls throwing the retryable `COORDINATOR_UNAVAILABLE` with
   * `retryAtMs` meanwhile; with `heal: false`, calls throw `LEASE_LOST` from then on. The
   * coordinator's I/O (and a handover's wait, up to `maxHandoverWaitMs`) runs on a thread of the
   * native addon, never on the event loop; every refusal rejects the promise. Ids are issued in
   * JavaScript, as for a fixed worker id, within ticks the lease granted through its checks (at
   * most 200 ms ahead, inside the persisted reservation, two ticks + 10 ms before the deadline),
   * each checked against the deadline. Release it with `await gen.close()` or `await using`.
   * Each cluster worker and worker_thread opens its own.
   *
   * @example
   * await using gen = await Generator.open('postgres://app@db:5432/ids?app=orders&ttl=10s');
   * const id = gen.nextId();
   */
  static open(uri: CoordinatorUri, options?: OpenOptions): Promise<Generator>;
  /**
   * `Generator.open` on the calling thread, which it blocks for the coordinator's I/O: for
   * scripts and CommonJS modules that cannot await, with a `file://` pool (local lock files).
   * A server wants `await Generator.open(uri)`.
   *
   * @example
   * using gen = Generator.openSync('file:///var/lib/app/ids?app=orders');
   */
  static openSync(uri: CoordinatorUri, options?: OpenOptions): Generator;
  /**
   * The worker id (for `Generator.open`, the leased one). While a healing generator leases
   * again, reading it throws the retryable `COORDINATOR_UNAVAILABLE` that id calls throw.
   */
  readonly workerId: number;
  /** False once closed, and for a leased generator while its lease is lost. */
  readonly isActive: boolean;
  /** A leased generator's coordinator (`file:///...?app=...`, never a password), else `null`. */
  readonly coordinator: string | null;
  /** Counters for metrics (slow paths only; reading them never waits). */
  stats(): GeneratorStats;
  /**
   * Ms left before the lease deadline if no renewal succeeds meanwhile (0 once lost or closed);
   * `null` for a `file://` lease (held until the process ends) and for a fixed worker id.
   */
  readonly leaseRemainingMs: number | null;
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
  /**
   * Stops issuing ids at once (later calls throw `GENERATOR_CLOSED`); the promise settles once a
   * leased generator has stored its state and released its worker id, off the event loop (it
   * rejects with `COORDINATOR_UNAVAILABLE` when the coordinator does not answer: the worker id
   * is then freed by its lease's expiry). Idempotent: every call returns the first one's promise.
   */
  close(): Promise<void>;
  /** `close()` on the calling thread, which it blocks until the worker id is released (or throws). */
  closeSync(): void;
  /**
   * Adds a listener of a healing generator's event (see `GeneratorEvents`): `'lost'`,
   * `'attemptFailed'`, `'healed'`; any other name throws `INVALID_ARG_VALUE`. Listeners run on
   * the event loop (never on the lease's threads), in the order added, with the generator as
   * `this`; one that throws is reported as an uncaught exception, as an EventEmitter's is. They
   * never keep the process alive, and none runs after `close()`. A generator with a fixed worker
   * id, or opened with `heal: false`, emits none. Returns the generator.
   *
   * @example
   * gen.on('lost', ({ workerId, reason }) => console.warn(`worker id ${workerId} lost: ${reason}`));
   */
  on<E extends keyof GeneratorEvents>(event: E, listener: (this: Generator, event: GeneratorEvents[E]) => void): this;
  /** `on`, for the next such event only. */
  once<E extends keyof GeneratorEvents>(event: E, listener: (this: Generator, event: GeneratorEvents[E]) => void): this;
  /** Removes a listener added with `on` or `once` (the one added last, if added more than once). */
  off<E extends keyof GeneratorEvents>(event: E, listener: (this: Generator, event: GeneratorEvents[E]) => void): this;
}

/** `gen[Symbol.dispose]()` is `closeSync()`, for `using`; `gen[Symbol.asyncDispose]()` is `close()`, for `await using`. */
export interface Generator extends DisposeMethod, AsyncDisposeMethod {}

/**
 * Public ids that reveal nothing: a keyed, reversible permutation of the 63-bit id space (NIST
 * FF1 with AES-128), and a 16-character text form (key version, payload, checksum). Hides when,
 * where and how many; it is not a capability, so never use it for authorisation. Keys whose
 * public ids were made before FF1 are legacy keys: `withLegacyKey`, `PublicIds.legacy`.
 *
 * @example
 * const codec = new PublicIds(1, Buffer.from('0123456789abcdef'));
 * const text = codec.encodeText(id); // '1...' (16 characters)
 * codec.decodeText(text) === id;
 */
export declare class PublicIds {
  /** `version`: 0..=31 (`INVALID_KEY_VERSION` otherwise); `key`: 16 secret bytes. */
  constructor(version: number, key: Uint8Array);
  /** A codec whose current key is a legacy key (public ids made before FF1 that must stay the same). */
  static legacy(version: number, key: Uint8Array): PublicIds;
  /** A new codec with these keys plus an older one, used only to decode texts made with it. */
  withOldKey(version: number, key: Uint8Array): PublicIds;
  /** A new codec with these keys plus a legacy key (texts made before FF1), used only to decode. */
  withLegacyKey(version: number, key: Uint8Array): PublicIds;
  /** The version of the current key. */
  readonly currentVersion: number;
  /** The public number of an id (below 2^63), under the current key. */
  encode(id: bigint): bigint;
  /** The id behind a public number (`INVALID_PUBLIC_ID` for a value outside 0..2^63). */
  decode(publicId: bigint): bigint;
  /** The text form: 16 characters of Crockford base32, upper case. */
  encodeText(id: bigint): string;
  /** The id behind a text form, case-insensitive; a typo throws `INVALID_PUBLIC_ID`, never a wrong id. */
  decodeText(text: string): bigint;
}

/** Splits an id (a bigint, or a decimal string) into its parts. A `number` is refused: it loses precision above 2^53. */
export declare function decode(id: bigint | string, layout?: Layout | LayoutOption): Parts;
/** Joins parts into an id; every field's range is checked. */
export declare function encode(parts: PartsInput, layout?: Layout | LayoutOption): bigint;
/** The smallest and largest id a time window (Unix ms, both inclusive) can hold, for range scans. */
export declare function idRange(fromMs: number, toMs: number, layout?: Layout | LayoutOption): [bigint, bigint];
/** The layout as an option: `decode(id, { layout: 'twitter' })` is `decode(id, 'twitter')`. */
export interface LayoutOption {
  layout?: Layout;
}
/**
 * A layout sized for a fleet: `workers` processes alive at once (count a rolling deploy's surge),
 * `peakIdsPerSec` from any one of them, ids made for `lifetimeYears` from 2024-01-01 (core's
 * `Layout::suggest`). Throws `INVALID_LAYOUT` when that needs more than 63 bits.
 *
 * @example
 * const layout = suggestLayout(300, 10_000, 30); // timestamp 41, clock_seq 3, worker 9, sequence 10
 * const gen = new Generator({ workerId: 299, layout });
 */
export declare function suggestLayout(workers: number, peakIdsPerSec: number, lifetimeYears: number): LayoutInfo;
/** Options of `isPlausible` and `guessLayout`. */
export interface PlausibleOptions {
  /** The time to judge by (Unix ms); default `Date.now()`. */
  nowMs?: number;
  /** How far past now an id's time may be; default 86,400,000 (a day of clock differences). */
  marginMs?: number;
}
/**
 * Whether `id` could have been issued under a layout (default `clockseq`) by now: it decodes and
 * its time is not after now + `marginMs`. `false` most often means another layout: an old
 * Twitter id decoded with the default layout reads 2040.
 *
 * @example
 * isPlausible(2125537250721665024n, 'twitter'); // true
 * isPlausible(2125537250721665024n);            // false
 */
export declare function isPlausible(id: bigint | string, layout?: Layout | (PlausibleOptions & LayoutOption)): boolean;
/** The preset under which `id` has a plausible time (the latest, when several do), or `null`. */
export declare function guessLayout(id: bigint | string, options?: PlausibleOptions): { name: PresetName; parts: Parts } | null;
/**
 * A `JSON.stringify` replacer that writes bigints as decimal strings (`JSON.stringify` throws on
 * a bigint, and JSON numbers above 2^53 are rounded by `JSON.parse`).
 *
 * @example
 * app.set('json replacer', jsonReplacer); // Express: res.json({ id }) sends "id":"383..."
 * JSON.stringify({ id: gen.nextId() }, jsonReplacer);
 */
export declare function jsonReplacer(key: string, value: unknown): unknown;
/** `JSON.stringify(value, jsonReplacer, space)`: bigints become decimal strings. */
export declare function stringify(value: unknown, space?: string | number): string;
/** Describes (and validates) a layout. */
export declare function describeLayout(layout: Layout): LayoutInfo;
/** Every preset layout's description. */
export declare const layouts: Readonly<Record<PresetName, LayoutInfo>>;
/**
 * Tells clockflake that this process was restored from a snapshot (a VM or container snapshot,
 * serverless snapshot-restore), which nothing inside the process can see. Every generator made
 * before refuses from now on with `WORKER_ID_INVALIDATED`; make new ones. Call it first thing
 * after a restore, before any id.
 */
export declare function restored(): void;
