// clockflake's one JavaScript API, for every runtime (Node, Bun, Deno, browsers, workers).
//
// Layouts, decoding, encoding, idRange, PublicIds and generators with a fixed worker id run on
// the wasm engine (engine.js: core compiled to WebAssembly, inlined, instantiated synchronously),
// so they need no native binary. `Generator.open(uri)` (leased worker ids: file locks and
// coordinator connections) needs the native addon, which an entry point may provide with
// `setNativeLoader` (node.js does, loading it lazily); elsewhere it throws NATIVE_UNAVAILABLE.
// Decoding is plain JavaScript on the layout's shifts, which come from the core.
//
// A leased generator serves ids from blocks taken through `leasedTake`: the lease grants a block
// of more than one id only while its deadline is more than two ticks + 10 ms away (closer, one id
// checked like any other), and the block is served only while `Date.now()` reads within the window
// the lease gave it (its tick on the system clock, ended before the deadline: core's `IdBlock`).
// So every id still goes out before the lease deadline, and no native call is made per id.
// `close()` empties the block first, and a timer drops a block left
// idle (see `#leasedRefill`).
import * as engine from './engine.js';
import { HALVES, HI, LO, Parts, SCRATCH, extractor } from './parts.js';
import { ClockflakeError, adopt, coded, integer, onlyKnownKeys, plainObject, shown, typeError } from './errors.js';

export { ClockflakeError };
export { PublicIds } from './public-ids.js';

// ---------------------------------------------------------------------------------------------
// The native addon (leases only)

let loadNative = null;
let native = null;

/** Called by an entry point that can load the native addon (Node): `load()` returns it or throws. */
export function setNativeLoader(load) {
  loadNative = load;
}

/** The native addon, loaded on first use; NATIVE_UNAVAILABLE where there is none. */
function nativeAddon() {
  if (native !== null) return native;
  if (loadNative === null) {
    throw new ClockflakeError(
      'NATIVE_UNAVAILABLE',
      'native addon unavailable: Generator.open (leased worker ids) needs the native addon, which this runtime cannot load (no Node-API here); everything else works without it: new Generator({ workerId }), decode, encode, idRange, layouts, PublicIds',
    );
  }
  native = loadNative();
  CORE_CODES = new Set(native.errorCodes());
  return native;
}

let CORE_CODES = new Set();

/** How many times `restored()` was called: a generator made before refuses. */
let restores = 0;

/**
 * Tells clockflake that this process was restored from a snapshot (a VM or container snapshot,
 * serverless snapshot-restore): copies made from outside, which nothing inside the process can
 * see. Every generator made before refuses from now on with `WORKER_ID_INVALIDATED` (its
 * worker id may be another copy's too); make new ones, with their own worker ids (leased ones
 * with `Generator.open`). Call it first thing after a restore, before any id.
 */
export function restored() {
  restores += 1;
  // Leased generators' native side refuses too (and so would a generator of another copy of
  // this module in the process).
  if (native !== null) native.restored();
}

/** Gives an error thrown by the native module its brand and `retryAtMs`. */
function fromNative(error) {
  return adopt(error, error !== null && typeof error === 'object' && CORE_CODES.has(error.code) ? native.lastRetryAtMs() : null);
}

/** Runs a native call, rethrowing its error with `retryAtMs` set. */
function call(fn, a, b, c, d, e, f, g, h) {
  try {
    return fn(a, b, c, d, e, f, g, h);
  } catch (error) {
    throw fromNative(error);
  }
}
// ---------------------------------------------------------------------------------------------
// Layouts


/** Everything about one layout: the native handle, the public description, the decoder constants. */
class LayoutRecord {
  constructor(handle, spec) {
    const info = engine.layoutInfo(handle, PRESET_NAMES);
    this.handle = handle;
    /** What the native addon needs to build the same layout: a preset name or [names, bits, unitMs, epochMs]. */
    this.spec = spec;
    this.nativeHandle = null;
    this.maxId = info.maxId;
    this.unitMs = info.unitMs;
    this.epochMs = info.epochMs;
    this.maxWorkerId = info.maxWorkerId;
    const [t, c, w, s] = [0, 1, 2, 3].map((i) => extractor(info.shifts[i], info.widths[i]));
    // Flat fields, so that the decoder reads each with one monomorphic property load.
    this.tHs = t.hs; this.tHm = t.hm; this.tHmul = t.hmul; this.tLs = t.ls; this.tLm = t.lm;
    this.cHs = c.hs; this.cHm = c.hm; this.cHmul = c.hmul; this.cLs = c.ls; this.cLm = c.lm;
    this.wHs = w.hs; this.wHm = w.hm; this.wHmul = w.hmul; this.wLs = w.ls; this.wLm = w.lm;
    this.sHs = s.hs; this.sHm = s.hm; this.sHmul = s.hmul; this.sLs = s.ls; this.sLm = s.lm;
    this.info = Object.freeze({
      name: info.name ?? null,
      fields: Object.freeze(info.fields.map((f) => Object.freeze({ name: f.name, bits: f.bits }))),
      unitMs: info.unitMs,
      epochMs: info.epochMs,
      clockSeqs: info.clockSeqs,
      maxWorkerId: info.maxWorkerId,
      maxId: info.maxId,
      fingerprint: info.fingerprint,
    });
    RECORD_OF.set(this.info, this);
  }

  /** Decodes an id known to be in 0..=maxId. */
  decode(id) {
    SCRATCH[0] = id;
    const lo = HALVES[LO];
    const hi = HALVES[HI];
    const tick = ((hi >>> this.tHs) & this.tHm) * this.tHmul + (((lo >>> this.tLs) & this.tLm) >>> 0);
    return new Parts(
      this.epochMs + tick * this.unitMs,
      ((hi >>> this.cHs) & this.cHm) * this.cHmul + (((lo >>> this.cLs) & this.cLm) >>> 0),
      ((hi >>> this.wHs) & this.wHm) * this.wHmul + (((lo >>> this.wLs) & this.wLm) >>> 0),
      ((hi >>> this.sHs) & this.sHm) * this.sHmul + (((lo >>> this.sLs) & this.sLm) >>> 0),
    );
  }
}

/** Public description object -> record, so `layouts.twitter` or a `describeLayout` result is found at once. */
const RECORD_OF = new WeakMap();
const PRESETS = new Map();
const PRESET_NAMES = engine.presetNames();
for (const name of PRESET_NAMES) PRESETS.set(name, new LayoutRecord(engine.presetLayout(name), name));
const DEFAULT = PRESETS.get('clockseq');

/** Custom layouts already validated by the core, by a key of their fields, unit and epoch. */
const CUSTOM = new Map();
const CUSTOM_CACHE_LIMIT = 256;

function customRecord(spec) {
  onlyKnownKeys(spec, ['fields', 'unitMs', 'epochMs'], 'layout');
  const { fields } = spec;
  if (!Array.isArray(fields)) throw typeError('layout.fields', 'an array of { name, bits }', fields);
  const names = [];
  const bits = [];
  fields.forEach((field, i) => {
    plainObject(field, `layout.fields[${i}]`);
    onlyKnownKeys(field, ['name', 'bits'], `layout.fields[${i}]`);
    if (typeof field.name !== 'string') throw typeError(`layout.fields[${i}].name`, 'a string', field.name);
    names.push(field.name);
    const width = integer(field.bits, `layout.fields[${i}].bits`, 'INVALID_LAYOUT');
    if (width > 0xffffffff) {
      throw coded(RangeError, 'INVALID_LAYOUT', `layout.fields[${i}].bits out of range: expected an integer 0..=4294967295, found ${width}`);
    }
    bits.push(width);
  });
  const unitMs = spec.unitMs === undefined ? 1 : integer(spec.unitMs, 'layout.unitMs', 'INVALID_LAYOUT');
  const epochMs = integer(spec.epochMs, 'layout.epochMs', 'INVALID_LAYOUT');
  const key = `${names.join(',')}|${bits.join(',')}|${unitMs}|${epochMs}`;
  let record = CUSTOM.get(key);
  if (record === undefined) {
    record = new LayoutRecord(engine.customLayout(names, bits, unitMs, epochMs), [names, bits, unitMs, epochMs]);
    if (CUSTOM.size >= CUSTOM_CACHE_LIMIT) CUSTOM.clear();
    CUSTOM.set(key, record);
  }
  return record;
}

function layoutRecord(layout) {
  if (layout === undefined) return DEFAULT;
  if (typeof layout === 'string') {
    const record = PRESETS.get(layout);
    if (record !== undefined) return record;
    engine.presetLayout(layout); // throws UNKNOWN_LAYOUT
  }
  if (layout !== null && typeof layout === 'object' && !Array.isArray(layout)) {
    return RECORD_OF.get(layout) ?? customRecord(layout);
  }
  throw typeError('layout', 'a preset name or { fields, unitMs, epochMs }', layout);
}

/** The native addon's handle of a layout (leased generators). */
function nativeLayout(record) {
  if (record.nativeHandle === null) {
    const addon = nativeAddon();
    record.nativeHandle =
      typeof record.spec === 'string' ? call(addon.presetLayout, record.spec) : call(addon.customLayout, ...record.spec);
  }
  return record.nativeHandle;
}

/** The layout's description: `{ name, fields, unitMs, epochMs, clockSeqs, maxWorkerId, maxId, fingerprint }`. */
export function describeLayout(layout) {
  return layoutRecord(layout).info;
}

export const layouts = Object.freeze(Object.fromEntries([...PRESETS].map(([name, record]) => [name, record.info])));

// ---------------------------------------------------------------------------------------------
// Ids

/**
 * The layout argument as given, or the `layout` of an options object (`decode(id, { layout })`,
 * the way Python takes `layout=`). A layout object has `fields`; an options object has not.
 */
function layoutOption(layout) {
  if (layout !== null && typeof layout === 'object' && !Array.isArray(layout) && Object.hasOwn(layout, 'layout') && !Object.hasOwn(layout, 'fields')) {
    onlyKnownKeys(layout, ['layout'], 'options');
    return layout.layout;
  }
  return layout;
}

/** Splits an id (bigint, or decimal string) into `{ timestampMs, date, clockSeq, workerId, sequence }`. */
export function decode(id, layoutOrOptions) {
  const layout = layoutOption(layoutOrOptions);
  const record = layout === undefined ? DEFAULT : layoutRecord(layout);
  if (typeof id === 'bigint') {
    if (id >= 0n && id <= record.maxId) return record.decode(id);
    engine.refuseId(record.handle, id); // throws the core's INVALID_ID
  } else if (typeof id === 'string') {
    const [timestampMs, clockSeq, workerId, sequence] = engine.decodeDecimal(record.handle, id);
    return new Parts(timestampMs, clockSeq, workerId, sequence);
  }
  throw typeError('id', 'a bigint or a decimal string (a number loses precision above 2^53)', id);
}

/** Joins `{ timestampMs, clockSeq?, workerId, sequence? }` into an id. */
export function encode(parts, layoutOrOptions) {
  const record = layoutRecord(layoutOption(layoutOrOptions));
  plainObject(parts, 'parts');
  onlyKnownKeys(parts, ['timestampMs', 'clockSeq', 'workerId', 'sequence'], 'parts');
  const timestampMs = integer(parts.timestampMs, 'timestampMs', 'TIMESTAMP_OUT_OF_RANGE');
  const clockSeq = parts.clockSeq === undefined ? 0 : integer(parts.clockSeq, 'clockSeq', 'CLOCK_SEQ_OUT_OF_RANGE');
  const workerId = integer(parts.workerId, 'workerId', 'WORKER_ID_OUT_OF_RANGE');
  const sequence = parts.sequence === undefined ? 0 : integer(parts.sequence, 'sequence', 'SEQUENCE_OUT_OF_RANGE');
  return engine.encode(record.handle, timestampMs, clockSeq, workerId, sequence);
}

/** The smallest and largest id a time window (Unix ms, inclusive) can hold: `[low, high]`. */
export function idRange(fromMs, toMs, layoutOrOptions) {
  const record = layoutRecord(layoutOption(layoutOrOptions));
  const from = integer(fromMs, 'fromMs', 'TIMESTAMP_OUT_OF_RANGE');
  const to = integer(toMs, 'toMs', 'TIMESTAMP_OUT_OF_RANGE');
  return engine.idRange(record.handle, from, to);
}

// ---------------------------------------------------------------------------------------------
// Choosing a layout, and checking one (core's suggest.rs)

/** How far past now a plausible id's time may be by default: a day of clock differences. */
const DEFAULT_MARGIN_MS = 86_400_000;

/** A layout sized for `workers` processes, `peakIdsPerSec` each and `lifetimeYears` (core's `Layout::suggest`). */
export function suggestLayout(workers, peakIdsPerSec, lifetimeYears) {
  const handle = engine.suggestLayout(
    integer(workers, 'workers', 'INVALID_ARG_VALUE'),
    integer(peakIdsPerSec, 'peakIdsPerSec', 'INVALID_ARG_VALUE'),
    integer(lifetimeYears, 'lifetimeYears', 'INVALID_ARG_VALUE'),
  );
  const info = engine.layoutInfo(handle, PRESET_NAMES);
  if (info.name !== null) return PRESETS.get(info.name).info;
  return describeLayout({ fields: info.fields, unitMs: info.unitMs, epochMs: info.epochMs });
}

/**
 * The id as `decode` reads it under a record, or null when it is no id of that layout (too
 * wide). Refuses what is no id at all (a number, junk text, a negative) with decode's errors.
 */
function decodedOrNull(id, record) {
  let value = id;
  if (typeof id === 'string') {
    decode(id); // core's text rules and INVALID_ID (the default layout takes every id below 2^63)
    value = BigInt(id);
  }
  if (typeof value === 'bigint' && value > record.maxId && value < 1n << 64n) return null;
  return decode(value, record.info);
}

function checkOptions(options, allowed) {
  if (options === undefined) return {};
  plainObject(options, 'options');
  onlyKnownKeys(options, allowed, 'options');
  return options;
}

/** now + margin, the latest plausible time (core's `Layout::is_plausible` rule, in JavaScript as decode is). */
function latestPlausibleMs(options) {
  const nowMs = options.nowMs === undefined ? Date.now() : integer(options.nowMs, 'nowMs', 'INVALID_ARG_VALUE');
  const marginMs = options.marginMs === undefined ? DEFAULT_MARGIN_MS : integer(options.marginMs, 'marginMs', 'INVALID_ARG_VALUE');
  return nowMs + marginMs;
}

/**
 * Whether `id` could have been issued under a layout by now: it decodes and its time is not after
 * now + `marginMs` (default a day). `isPlausible(id)`, `isPlausible(id, 'twitter')` or
 * `isPlausible(id, { layout, nowMs, marginMs })`. Core's `Layout::is_plausible`, computed here on
 * the decoded time (decoding is plain JavaScript).
 */
export function isPlausible(id, layoutOrOptions) {
  const options =
    typeof layoutOrOptions === 'string' || (layoutOrOptions !== null && typeof layoutOrOptions === 'object' && Object.hasOwn(layoutOrOptions, 'fields'))
      ? { layout: layoutOrOptions }
      : checkOptions(layoutOrOptions, ['layout', 'nowMs', 'marginMs']);
  const record = options.layout === undefined ? DEFAULT : layoutRecord(options.layout);
  const latest = latestPlausibleMs(options);
  const parts = decodedOrNull(id, record);
  return parts !== null && parts.timestampMs <= latest;
}

/**
 * The preset under which `id` has a plausible time (the latest such time when several do), as
 * `{ name, parts }`, or `null` (core's `Layout::guess_preset`).
 */
export function guessLayout(id, options) {
  const latest = latestPlausibleMs(checkOptions(options, ['nowMs', 'marginMs']));
  let best = null;
  for (const name of PRESET_NAMES) {
    const parts = decodedOrNull(id, PRESETS.get(name));
    if (parts !== null && parts.timestampMs <= latest && (best === null || parts.timestampMs > best.parts.timestampMs)) {
      best = { name, parts };
    }
  }
  return best;
}

// ---------------------------------------------------------------------------------------------
// JSON

/**
 * A `JSON.stringify` replacer that writes bigints (ids) as decimal strings: JSON numbers above
 * 2^53 are rounded by `JSON.parse`, and `JSON.stringify` throws on a bigint. For Express:
 * `app.set('json replacer', jsonReplacer)`.
 */
export function jsonReplacer(_key, value) {
  return typeof value === 'bigint' ? value.toString() : value;
}

/** `JSON.stringify` with {@link jsonReplacer}: bigints become decimal strings. */
export function stringify(value, space) {
  return JSON.stringify(value, jsonReplacer, space);
}

// ---------------------------------------------------------------------------------------------
// Generators

/** Most ids per block taken from the core (and the size of each generator's buffer). */
const BLOCK = 4096;
/**
 * Ids asked for by the first take of a tick. Each further take within the same tick asks for
 * four times more (16, 64, 256, 1024, 4096): a caller that needs one id per ms does not pay for
 * writing 4,096, and a busy one reaches whole blocks after a few calls.
 */
const FIRST_BLOCK = 16;
/**
 * The first take of a tick by a leased generator asks for one id (then 16, 64, ... as above):
 * a caller that needs one id now and then leaves no block behind, so it arms no timer to drop
 * one (see `#leasedRefill`).
 */
const FIRST_LEASED_BLOCK = 1;
/** A wasm generator slot that never exists: a closed generator's handle. */
const CLOSED_HANDLE = 0xffffffff;
/** Most ids one `nextIds` call returns. */
const MAX_BATCH = 1 << 26;
/** For sleeping through long waits where the runtime allows it (not on a page's main thread). */
const SLEEPER = typeof SharedArrayBuffer === 'function' ? new Int32Array(new SharedArrayBuffer(4)) : null;
let canSleep = SLEEPER !== null;

function sleep(ms) {
  if (!canSleep) return;
  try {
    Atomics.wait(SLEEPER, 0, 0, ms);
  } catch {
    canSleep = false; // a browser's main thread: spin instead
  }
}
const OPTION_NAMES = ['workerId', 'layout', 'onRollback', 'maxWaitMs', 'maxDriftMs', 'clock'];
const RESUME_OPTION_NAMES = OPTION_NAMES.filter((name) => name !== 'workerId');
const OPEN_OPTION_NAMES = ['layout', 'onRollback', 'maxWaitMs', 'maxDriftMs', 'maxHandoverWaitMs'];
/** `Symbol.dispose` where the runtime has it (Node >= 20.4, 18.18), else the registered name Node and TypeScript use. */
const DISPOSE = typeof Symbol.dispose === 'symbol' ? Symbol.dispose : Symbol.for('nodejs.dispose');
const STATE_KEYS = ['layoutFingerprint', 'workerId', 'clockSeq', 'highWaterMs'];
/** Set by `Generator.resume` and `Generator.open` for the one constructor call each makes. */
let resuming = null;

function generatorOptions(options, allowed, name) {
  plainObject(options, name);
  onlyKnownKeys(options, allowed, name);
  const { onRollback, maxWaitMs, maxDriftMs, clock } = options;
  if (onRollback !== undefined && typeof onRollback !== 'string') {
    throw typeError('onRollback', "'clock-sequence' | 'wait' | 'logical' | 'fail'", onRollback);
  }
  if (clock !== undefined && typeof clock !== 'function') throw typeError('clock', 'a function returning Unix ms', clock);
  return {
    record: layoutRecord(options.layout),
    onRollback,
    maxWaitMs: maxWaitMs === undefined ? undefined : integer(maxWaitMs, 'maxWaitMs', 'INVALID_ARG_VALUE'),
    maxDriftMs: maxDriftMs === undefined ? undefined : integer(maxDriftMs, 'maxDriftMs', 'INVALID_ARG_VALUE'),
    clock: clock ?? null,
  };
}

/** The options of `Generator.open`: those of the constructor that make sense with a lease. */
function openOptions(options) {
  plainObject(options, 'options');
  if (Object.hasOwn(options, 'workerId')) {
    throw coded(
      TypeError,
      'UNKNOWN_OPTION',
      'unknown option: Generator.open leases its worker id from the coordinator, so options.workerId cannot be given; use new Generator({ workerId }) for a fixed worker id',
    );
  }
  if (Object.hasOwn(options, 'clock')) {
    throw coded(
      TypeError,
      'UNKNOWN_OPTION',
      'unknown option: a leased generator reads the system clock (its lease deadline and renewals depend on it), so options.clock cannot be given; use nextIdAt(ms) for explicit times',
    );
  }
  const parsed = generatorOptions(options, OPEN_OPTION_NAMES, 'options');
  const { maxHandoverWaitMs } = options;
  parsed.maxHandoverWaitMs = maxHandoverWaitMs === undefined ? undefined : integer(maxHandoverWaitMs, 'maxHandoverWaitMs', 'INVALID_ARG_VALUE');
  return parsed;
}

function stateError(message) {
  return coded(Error, 'INVALID_STATE', `invalid state: ${message}`);
}

/**
 * Generates ids for one worker id. Not shareable between threads: each worker thread or cluster
 * worker creates its own, with its own worker id (structured clone copies none of its state).
 */
export class Generator {
  /** The wasm engine's generator (a fixed worker id), or null. */
  #handle = null;
  /** The native leased generator (`Generator.open`), or null for a fixed worker id. */
  #lease = null;
  /** The worker id of a generator with a fixed one. */
  #workerId = null;
  /** Resolved options of a leased generator. */
  #leaseOptions = null;
  #closed = false;
  #record;
  #clock;
  #buffer;
  #meta;
  /** The block being served: ids #buffer[#pos..#count) of the tick [#low, #end) (Unix ms). */
  #pos = 0;
  #count = 0;
  #want = FIRST_BLOCK;
  #low = Infinity;
  #end = -Infinity;
  /** A leased generator's block tick start, on the lease's time (Unix ms). */
  #tick = Infinity;
  /** A leased generator: whether a timer to drop an idle block is pending. */
  #dropArmed = false;
  /** `restores` when the generator was made (see `restored`). */
  #restores = restores;

  /**
   * @param {object} options `{ workerId, layout?, onRollback?, maxWaitMs?, maxDriftMs?, clock? }`
   */
  constructor(options) {
    let parsed;
    let handle;
    if (resuming !== null && resuming.lease !== undefined) {
      const { lease, record, options: resolved } = resuming;
      resuming = null;
      this.#lease = lease;
      this.#leaseOptions = resolved;
      this.#record = record;
      this.#clock = null;
      this.#handle = null;
      // BLOCK ids, then the block's tick (the lease's time) and its window [from, until) on `Date.now()`'s.
      this.#buffer = new BigUint64Array(BLOCK + 3);
      this.#meta = new Float64Array(this.#buffer.buffer, BLOCK * 8, 3);
      return;
    }
    if (resuming !== null) {
      const { parsed: resumed, state } = resuming;
      resuming = null;
      parsed = resumed;
      const { layoutFingerprint, workerId, clockSeq, marks } = state;
      handle = engine.resumeGenerator(this, parsed.record.handle, layoutFingerprint, workerId, clockSeq, marks, parsed.onRollback, parsed.maxWaitMs, parsed.maxDriftMs);
      this.#workerId = workerId;
    } else {
      parsed = generatorOptions(options, OPTION_NAMES, 'options');
      const workerId = integer(options.workerId, 'workerId', 'WORKER_ID_OUT_OF_RANGE');
      handle = engine.createGenerator(this, parsed.record.handle, workerId, parsed.onRollback, parsed.maxWaitMs, parsed.maxDriftMs);
      this.#workerId = workerId;
    }
    this.#handle = handle;
    this.#record = parsed.record;
    this.#clock = parsed.clock;
  }

  /**
   * Continues from a saved `state()` (after a restart, or taking over a worker id): never
   * reissues an id at or below the state's high-water marks.
   * @param {object} state the record `state()` returned (it survives JSON)
   * @param {object} [options] as the constructor's, without `workerId`
   */
  static resume(state, options = {}) {
    const parsed = generatorOptions(options, RESUME_OPTION_NAMES, 'options');
    if (state === null || typeof state !== 'object' || Array.isArray(state)) throw stateError(`expected an object, found ${shown(state)}`);
    for (const key of Object.keys(state)) {
      if (!STATE_KEYS.includes(key)) throw stateError(`unexpected key ${JSON.stringify(key)}: expected ${STATE_KEYS.join(', ')}`);
    }
    const { layoutFingerprint, workerId, clockSeq, highWaterMs } = state;
    if (typeof layoutFingerprint !== 'string') throw stateError(`layoutFingerprint: expected a decimal string, found ${shown(layoutFingerprint)}`);
    for (const [name, value] of [['workerId', workerId], ['clockSeq', clockSeq]]) {
      if (!Number.isSafeInteger(value) || value < 0) throw stateError(`${name}: expected an integer 0..=9007199254740991, found ${shown(value)}`);
    }
    if (!Array.isArray(highWaterMs)) throw stateError(`highWaterMs: expected an array, found ${shown(highWaterMs)}`);
    const marks = highWaterMs.map((mark, i) => {
      if (mark === null) return null;
      if (!Number.isSafeInteger(mark) || mark < 0) throw stateError(`highWaterMs[${i}]: expected null or an integer Unix ms, found ${shown(mark)}`);
      return mark;
    });
    resuming = { parsed, state: { layoutFingerprint, workerId, clockSeq, marks } };
    try {
      return new Generator(undefined);
    } finally {
      resuming = null;
    }
  }

  /**
   * A generator whose worker id is leased from a coordinator, continuing above every id that
   * worker id ever issued:
   * `file:///var/lib/app/ids?app=orders` (one host: a lock file per worker id),
   * `postgres://user@db:5432/ids?app=orders&ttl=10s` (row leases),
   * `zookeeper://zk1:2181,zk2:2181/snowflake/orders?ttl=10s`.
   * A background thread renews the lease; past its deadline every call throws `LEASE_LOST`.
   * Call `close()` (or `using`) to release the worker id. Each cluster worker and each
   * worker_thread opens its own.
   * @param {string} uri the coordinator
   * @param {object} [options] `{ layout?, onRollback?, maxWaitMs?, maxDriftMs?, maxHandoverWaitMs? }`
   */
  static open(uri, options = {}) {
    if (typeof uri !== 'string') throw typeError('uri', 'a string such as "file:///var/lib/app/ids?app=orders"', uri);
    const parsed = openOptions(options);
    const native = nativeAddon();
    const layout = nativeLayout(parsed.record);
    const resolved = call(native.resolveOptions, layout, parsed.onRollback, parsed.maxWaitMs, parsed.maxDriftMs);
    const lease = call(
      native.openLeased,
      layout,
      uri,
      parsed.onRollback,
      parsed.maxWaitMs,
      parsed.maxDriftMs,
      parsed.maxHandoverWaitMs,
    );
    resuming = { lease, record: parsed.record, options: resolved };
    try {
      return new Generator(undefined);
    } finally {
      resuming = null;
    }
  }

  /** The worker id (for `Generator.open`, the leased one). */
  get workerId() {
    if (this.#lease !== null) return native.leasedWorkerId(this.#lease);
    return this.#workerId;
  }

  /**
   * Whether the generator can still issue ids: false once closed, and for a leased generator
   * once its lease is lost.
   */
  get isActive() {
    if (this.#lease !== null) return native.leasedIsActive(this.#lease);
    return !this.#closed;
  }

  /**
   * For a leased generator whose lease expires (`postgres://`, `zookeeper://`): how many ms are
   * left before its deadline if no renewal succeeds meanwhile (the renewal thread moves it on;
   * 0 once lost or closed). null for a `file://` lease (held until the process ends) and for a
   * fixed worker id.
   */
  get leaseRemainingMs() {
    return this.#lease === null ? null : native.leasedRemainingMs(this.#lease);
  }

  /**
   * Counters for metrics: `workerId`, `state` ('active', 'lost', 'closed' or 'forked'),
   * `leased`, and for a leased generator renewals and their failures, clock steps back,
   * clock-sequence switches, waits and their time (µs), ms to the lease deadline (null: never
   * expires), the reservation (Unix ms; 0 for a fixed worker id) and the skew measured by the
   * start-up clock check (local minus the coordinator's clock, ms; null when not measured:
   * file://, max_skew=off, a fixed worker id). Counted on slow paths
   * only; reading them never waits.
   */
  stats() {
    if (this.#lease !== null) {
      const stats = native.leasedStats(this.#lease);
      // napi leaves out an absent Option: null, as the .d.ts says.
      return {
        ...stats,
        leased: true,
        deadlineInMs: stats.deadlineInMs ?? null,
        measuredSkewMs: stats.measuredSkewMs ?? null,
      };
    }
    return {
      workerId: this.workerId,
      state: this.#closed ? 'closed' : 'active',
      leased: false,
      renewals: 0,
      renewalFailures: 0,
      clockStepsBack: 0,
      clockSeqSwitches: 0,
      waits: 0,
      waitUs: 0,
      deadlineInMs: null,
      reservedUntilMs: 0,
      measuredSkewMs: null,
    };
  }

  /** The coordinator of a leased generator (`file:///...?app=...`, no password), or null. */
  get coordinator() {
    return this.#lease === null ? null : native.leasedCoordinator(this.#lease);
  }

  /**
   * Stops issuing ids: later calls throw `GENERATOR_CLOSED`. A leased generator stops its
   * renewal thread, stores its state with the coordinator and releases its worker id.
   * Idempotent. `gen[Symbol.dispose]()` (and `using`) calls it.
   */
  close() {
    // No id of a partly served block goes out after this.
    this.#pos = 0;
    this.#count = 0;
    this.#low = Infinity;
    this.#end = -Infinity;
    if (this.#lease !== null) {
      call(native.leasedClose, this.#lease);
      return;
    }
    if (this.#closed) return;
    this.#closed = true;
    engine.freeGenerator(this, this.#handle);
    // Never a valid slot: the next call fails in the engine with core's GENERATOR_CLOSED.
    this.#handle = CLOSED_HANDLE;
  }

  /** The layout's description (see `describeLayout`). */
  get layout() {
    return this.#record.info;
  }

  /** The rollback policy in force, and the waits it allows. */
  get options() {
    if (this.#lease !== null) return { ...this.#leaseOptions };
    return engine.generatorOptions(this.#handle);
  }

  /**
   * The next id, at the clock's time. Waits (at most until the next tick) when the tick is full
   * and the next one starts within a second; otherwise throws SEQUENCE_EXHAUSTED with `retryAtMs`.
   */
  nextId() {
    if (this.#restores !== restores) this.#refuseRestored();
    const handle = this.#handle;
    if (handle !== null) {
      const now = this.#clock === null ? Date.now() : this.#readClock();
      const id = engine.nextIdAt(handle, now);
      return id >= 0n ? id : this.#retry(now, (ms) => engine.nextIdAt(handle, ms));
    }
    if (this.#pos < this.#count) {
      const now = this.#clock === null ? Date.now() : this.#readClock();
      if (now < this.#end && now >= this.#low) return this.#buffer[this.#pos++];
      this.#refill(now, 1);
      return this.#buffer[this.#pos++];
    }
    this.#refill(this.#clock === null ? Date.now() : this.#readClock(), 1);
    return this.#buffer[this.#pos++];
  }

  /** The next id at an explicit time (Unix ms). Never blocks: a refusal throws, with `retryAtMs`. */
  nextIdAt(nowMs) {
    const now = integer(nowMs, 'nowMs', 'INVALID_ARG_VALUE');
    if (this.#restores !== restores) this.#refuseRestored();
    if (this.#lease !== null) {
      // From the block when `now` is its tick, and only while it may be served at all.
      if (this.#pos < this.#count && now >= this.#tick && now < this.#tick + this.#record.unitMs) {
        const wall = Date.now();
        if (wall < this.#end && wall >= this.#low) return this.#buffer[this.#pos++];
      }
      return call(native.leasedNextIdAt, this.#lease, now);
    }
    const id = engine.nextIdAt(this.#handle, now);
    if (id < 0n) throw engine.takeError();
    return id;
  }

  /** The next id as a decimal string, for JSON. */
  nextIdString() {
    return String(this.nextId());
  }

  /** `count` new ids, strictly increasing within one clock sequence; waits for the next tick when one is full. */
  nextIds(count) {
    const n = integer(count, 'count', 'INVALID_ARG_VALUE');
    if (n > MAX_BATCH) throw coded(RangeError, 'INVALID_ARG_VALUE', `count out of range: expected at most ${MAX_BATCH}, found ${n}`);
    if (this.#restores !== restores) this.#refuseRestored();
    const out = new BigUint64Array(n);
    let filled = 0;
    const handle = this.#handle;
    if (handle !== null) {
      while (filled < n) {
        const wanted = Math.min(n - filled, engine.ID_BUFFER_LEN);
        const now = this.#clock === null ? Date.now() : this.#readClock();
        let got = engine.fill(handle, now, wanted);
        if (got < 0) got = this.#retry(now, (ms) => engine.fill(handle, ms, wanted));
        engine.copyIds(out, filled, got);
        filled += got;
      }
      return out;
    }
    while (filled < n) {
      const now = this.#clock === null ? Date.now() : this.#readClock();
      if (!(now < this.#end && now >= this.#low && this.#pos < this.#count)) this.#refill(now, n - filled);
      const take = Math.min(this.#count - this.#pos, n - filled);
      if (take === 1) {
        out[filled] = this.#buffer[this.#pos];
      } else {
        out.set(this.#buffer.subarray(this.#pos, this.#pos + take), filled);
      }
      this.#pos += take;
      filled += take;
    }
    return out;
  }

  /**
   * A JSON-safe snapshot to persist: `{ layoutFingerprint, workerId, clockSeq, highWaterMs }`.
   * Give it to `Generator.resume` after a restart.
   */
  state() {
    if (this.#lease !== null) return native.leasedState(this.#lease);
    return engine.generatorState(this.#handle);
  }

  /**
   * After a refusal at `now`: waits for the time it names and tries again with `attempt(ms)`,
   * until success or a final refusal. Whether and until when to wait is core's rule
   * (`Generator::blocking_retry_at`): a full tick only if the next starts within a second (a
   * layout with long ticks throws SEQUENCE_EXHAUSTED with `retryAtMs` at once), a clock step
   * back only within `maxWaitMs`.
   */
  /** Made before `restored()`: no id of a served block goes out, and every call refuses. */
  #refuseRestored() {
    this.#pos = 0;
    this.#count = 0;
    this.#low = Infinity;
    this.#end = -Infinity;
    throw engine.coreError('WORKER_ID_INVALIDATED');
  }

  #retry(now, attempt) {
    for (;;) {
      const at = engine.blockingRetryAt(now);
      if (at < 0) throw engine.takeError();
      now = this.#waitUntil(at, now);
      const outcome = attempt(now);
      if (outcome >= 0) return outcome;
    }
  }

  #readClock() {
    const now = this.#clock();
    if (typeof now !== 'number') throw typeError('clock()', 'a number of Unix ms', now);
    if (!Number.isSafeInteger(now) || now < 0) {
      throw coded(RangeError, 'INVALID_ARG_VALUE', `clock() out of range: expected an integer 0..=9007199254740991 Unix ms, found ${now}`);
    }
    return now;
  }

  /** A leased generator: takes a new block at `now`, of at least `needed` ids where the tick has them. */
  #refill(now, needed) {
    // Still inside the block's tick: the caller keeps this tick busy, so ask for more.
    const want = now < this.#end && now >= this.#low ? Math.min(Math.max(this.#want * 4, FIRST_BLOCK), BLOCK) : FIRST_LEASED_BLOCK;
    this.#want = Math.max(want, Math.min(needed, BLOCK));
    this.#leasedRefill(now);
  }

  /**
   * Takes a new block from the lease (which waits out a full tick and a handover itself, and
   * refuses once the lease is lost or closed). The block is served while `Date.now()` reads in
   * `[#low, #end)`: the window the lease gave it (its tick on the system clock, ending before
   * the lease deadline), whatever the rollback policy.
   */
  #leasedRefill(now) {
    // Nothing of the old block survives a refusal.
    this.#pos = 0;
    this.#count = 0;
    this.#low = Infinity;
    this.#end = -Infinity;
    if (this.#want === 1) {
      // The first id of a tick: one plain native call, checked like any id; the caller takes
      // it at once. The window (on Date.now(), close enough) only tells the next call whether
      // this tick keeps the generator busy, so that it asks for a block.
      let id;
      try {
        id = native.leasedNextId(this.#lease);
      } catch (error) {
        throw fromNative(error);
      }
      this.#buffer[0] = id;
      this.#count = 1;
      const unit = this.#record.unitMs;
      this.#low = now - ((now - this.#record.epochMs) % unit);
      this.#end = this.#low + unit;
      return;
    }
    let count;
    try {
      count = native.leasedTake(this.#lease, this.#buffer, this.#want);
    } catch (error) {
      throw fromNative(error);
    }
    this.#count = count;
    this.#tick = this.#meta[0];
    this.#low = this.#meta[1];
    this.#end = this.#meta[2];
    if (count > 1 && !this.#dropArmed) {
      // Drop the block once the event loop is free a tick + 5 ms later, well inside the lease's
      // block margin (2 ticks + 10 ms): if the system clock stepped back and then read the
      // block's tick again while this generator sat idle, the rest of the block would go out
      // then, maybe past the deadline. Unref'd (keeps no process or thread alive), and it
      // holds the generator weakly (never delays its collection).
      this.#dropArmed = true;
      setTimeout(Generator.#dropBlock, this.#record.unitMs + 5, new WeakRef(this)).unref();
    }
  }

  /** The timer of `#leasedRefill`: empties the block (a busy caller just takes a new one). */
  static #dropBlock(ref) {
    const gen = ref.deref();
    if (gen === undefined) return;
    gen.#dropArmed = false;
    gen.#pos = 0;
    gen.#count = 0;
    gen.#low = Infinity;
    gen.#end = -Infinity;
  }

  /** Waits until the clock reads `atMs`, on core's rule (`engine.waitStep`); this side only sleeps and reads. */
  #waitUntil(atMs, now) {
    const start = now;
    const began = performance.now();
    for (;;) {
      const step = engine.waitStep(atMs, start, now, performance.now() - began);
      if (step < 0) return now;
      if (step > 0) sleep(step);
      now = this.#clock === null ? Date.now() : this.#readClock();
    }
  }
}

/** `using gen = Generator.open(...)` closes the generator at the end of the block. */
Object.defineProperty(Generator.prototype, DISPOSE, {
  value: function dispose() {
    this.close();
  },
  writable: true,
  configurable: true,
});
