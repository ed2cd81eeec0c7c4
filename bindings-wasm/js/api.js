// clockflake's public JS API (browser and Node builds alike) over the raw wasm exports.
//
// Hot paths call one wasm export with plain numbers/bigints and read results from a small
// scratch area in wasm memory through typed-array views; refusals come back as a sentinel (-1)
// and are turned into `ClockflakeError`s (`.code`, `.retryAtMs`) with core's message. Values
// from JS are checked here before they reach wasm: a bigint id outside 0..2^64 or a number
// that is not a non-negative safe integer never reaches Rust, so nothing wraps silently.
import { formatMessage } from './messages.js';

// The wasm-bindgen glue module; until `init()` has bound it, any use says so.
let raw = new Proxy(
  {},
  {
    get() {
      const error = new Error('clockflake: the wasm module is not loaded yet: `await init()` first');
      error.code = 'NOT_INITIALIZED';
      throw error;
    },
  },
);
let memory;
let scratch64Ptr, scratch32Ptr, idBufferPtr, idBufferLen;
let f64, u64, u32, u8, idBuffer;

const U64_MAX = (1n << 64n) - 1n;
const FIELD_NAMES = ['timestamp', 'clock_seq', 'worker', 'sequence'];
const now = () => performance.now();

/** Every layout preset by name (filled when the wasm module is ready). */
export const layouts = {};
let presetNames = [];
const presetHandles = new Map();

/** Connects the API to an instantiated wasm-bindgen glue module. Internal. */
export function __bind(glue) {
  raw = glue;
  memory = glue.wasm_memory();
  scratch64Ptr = glue.scratch64_ptr();
  scratch32Ptr = glue.scratch32_ptr();
  idBufferPtr = glue.id_buffer_ptr();
  idBufferLen = glue.id_buffer_len();
  views();
  presetNames = [];
  for (let i = 0; i < glue.preset_count(); i++) presetNames.push(glue.preset_name(i));
  for (const name of presetNames) layouts[name] = describeLayout(name);
  Object.freeze(layouts);
}

function views() {
  const buffer = memory.buffer;
  f64 = new Float64Array(buffer, scratch64Ptr, 32);
  u64 = new BigUint64Array(buffer, scratch64Ptr, 32);
  u32 = new Uint32Array(buffer, scratch32Ptr, 32);
  u8 = new Uint8Array(buffer, scratch64Ptr, 16);
  idBuffer = new BigUint64Array(buffer, idBufferPtr, idBufferLen);
}

/** Memory growth detaches the old buffer (its views read as length 0): make new views. */
function fresh() {
  if (u32.length === 0) views();
}

// ---------------------------------------------------------------------------------------------
// Errors

/** Every refusal: a real `Error` with core's stable `.code` and, when a retry can succeed, `.retryAtMs`. */
export class ClockflakeError extends Error {
  constructor(code, message, retryAtMs = null) {
    super(message);
    this.name = 'ClockflakeError';
    this.code = code;
    this.retryAtMs = retryAtMs;
  }
}

function takeError() {
  const code = raw.error_take();
  fresh();
  const fields = [u64[0], u64[1], u64[2], u64[3]];
  const retryAt = f64[4];
  return new ClockflakeError(code, formatMessage(code, u32[0], fields), retryAt < 0 ? null : retryAt);
}

function show(value) {
  if (typeof value === 'bigint') return `${value}n`;
  if (typeof value === 'string') return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}...` : value);
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'object') return 'an object';
  return `${typeof value} ${String(value)}`;
}

function coded(Kind, code, message) {
  const error = new Kind(message);
  error.code = code;
  return error;
}

/** Wrong kind of value: TypeError INVALID_ARG_TYPE. */
function typeError(what, expected, value) {
  return coded(TypeError, 'INVALID_ARG_TYPE', `${what}: expected ${expected}, found ${show(value)}`);
}

/** A number that must be a non-negative safe integer; else TypeError (not a number) or RangeError(code). */
function uint(value, what, code) {
  if (typeof value !== 'number') throw typeError(what, 'a number', value);
  if (!Number.isSafeInteger(value) || value < 0) {
    throw coded(RangeError, code, `${what}: expected an integer in 0..=2^53-1, found ${value}`);
  }
  return value;
}

// ---------------------------------------------------------------------------------------------
// Layouts

function presetHandle(name) {
  let handle = presetHandles.get(name);
  if (handle === undefined) {
    handle = raw.layout_by_name(name);
    if (handle < 0) throw takeError();
    presetHandles.set(name, handle);
  }
  return handle;
}

const customHandles = new WeakMap();

/** A custom layout's handle; cached per object, re-checked against its current values. */
function customHandle(spec) {
  const fields = spec.fields;
  if (!Array.isArray(fields)) throw typeError('layout.fields', 'an array of {name, bits}', fields);
  const values = [];
  for (const field of fields) {
    if (field === null || typeof field !== 'object') throw typeError('layout.fields[]', '{name, bits}', field);
    if (typeof field.name !== 'string') throw typeError('layout field name', 'a string', field.name);
    values.push(field.name, field.bits);
  }
  values.push(spec.unitMs, spec.epochMs);
  const cached = customHandles.get(spec);
  if (cached !== undefined && cached.values.length === values.length && cached.values.every((v, i) => v === values[i])) {
    return cached.handle;
  }
  if (fields.length > 16) throw coded(RangeError, 'INVALID_LAYOUT', `invalid layout: expected at most 4 fields, found ${fields.length}`);
  const unitMs = spec.unitMs === undefined ? 1 : uint(spec.unitMs, 'layout.unitMs', 'INVALID_LAYOUT');
  const epochMs = uint(spec.epochMs, 'layout.epochMs', 'INVALID_LAYOUT');
  const codes = fields.map((field) => {
    const code = FIELD_NAMES.indexOf(field.name);
    const bits = uint(field.bits, `layout field ${field.name} bits`, 'INVALID_LAYOUT');
    if (bits > 0xffffffff) throw coded(RangeError, 'INVALID_LAYOUT', `invalid layout: ${field.name} has ${bits} bits`);
    return [code < 0 ? 4 : code, bits];
  });
  fresh();
  codes.forEach(([code, bits], i) => {
    u32[2 * i] = code;
    u32[2 * i + 1] = bits;
  });
  const handle = raw.layout_custom(codes.length, unitMs, epochMs);
  if (handle < 0) throw takeError();
  customHandles.set(spec, { handle, values });
  return handle;
}

function layoutHandle(layout) {
  if (layout === undefined || layout === null) return 0;
  if (typeof layout === 'string') return presetHandle(layout);
  if (typeof layout === 'object') return customHandle(layout);
  throw typeError('layout', 'a preset name or {fields, unitMs, epochMs}', layout);
}

/**
 * What a layout is: its fields (most significant first), time unit, epoch, clock sequences,
 * largest worker id and id, and the fingerprint saved in generator state.
 */
export function describeLayout(layout) {
  return describeHandle(layoutHandle(layout));
}

function describeHandle(handle) {
  const count = raw.layout_info(handle);
  if (count < 0) throw takeError();
  fresh();
  const fields = [];
  for (let i = 0; i < count; i++) fields.push({ name: FIELD_NAMES[u32[2 * i]], bits: u32[2 * i + 1] });
  const preset = u32[8];
  return {
    name: preset < presetNames.length ? presetNames[preset] : null,
    fields,
    unitMs: f64[0],
    epochMs: f64[1],
    clockSeqs: f64[2],
    maxWorkerId: f64[3],
    maxId: u64[4],
    fingerprint: u64[5],
  };
}

// ---------------------------------------------------------------------------------------------
// Ids

/** What an id says. `date` is computed on access from `timestampMs`. */
class Parts {
  constructor(timestampMs, clockSeq, workerId, sequence) {
    this.timestampMs = timestampMs;
    this.clockSeq = clockSeq;
    this.workerId = workerId;
    this.sequence = sequence;
  }

  /** The start of the id's tick, as a Date. */
  get date() {
    return new Date(this.timestampMs);
  }

  toJSON() {
    const { timestampMs, clockSeq, workerId, sequence } = this;
    return { timestampMs, date: this.date.toISOString(), clockSeq, workerId, sequence };
  }
}

/**
 * Splits an id (bigint, or a decimal string) into its parts under a layout (default `clockseq`).
 * A `number` is refused with a TypeError: above 2^53 it has already lost digits.
 */
export function decode(id, layout) {
  const handle = layout === undefined ? 0 : layoutHandle(layout);
  let timestampMs;
  if (typeof id === 'bigint') {
    timestampMs = id >= 0n && id <= U64_MAX ? raw.decode(handle, id) : raw.decode_text(handle, String(id));
  } else if (typeof id === 'string') {
    timestampMs = decodeDecimal(handle, id);
  } else {
    throw typeError('id', 'a bigint or a decimal string', id);
  }
  if (timestampMs < 0) throw takeError();
  fresh();
  return new Parts(timestampMs, u32[0], u32[1], u32[2]);
}

/**
 * Decodes a decimal id. Up to 19 digits (always below 2^64) are read here into two exact
 * numbers, the leading digits and the last nine, with no BigInt or string copy; anything else
 * goes to core's strict parser, which also words the error.
 */
function decodeDecimal(handle, text) {
  const length = text.length;
  if (length === 0 || length > 19) return raw.decode_text(handle, text);
  const split = length - 9;
  let high = 0;
  let low = 0;
  for (let i = 0; i < length; i++) {
    const digit = text.charCodeAt(i) - 48;
    if (digit < 0 || digit > 9) return raw.decode_text(handle, text);
    if (i < split) high = high * 10 + digit;
    else low = low * 10 + digit;
  }
  return raw.decode_split(handle, high, low);
}

/** Joins parts into an id (bigint), checking every field's range. */
export function encode(parts, layout) {
  if (parts === null || typeof parts !== 'object') throw typeError('parts', '{timestampMs, clockSeq, workerId, sequence}', parts);
  const handle = layoutHandle(layout);
  const id = raw.encode(
    handle,
    uint(parts.timestampMs, 'timestampMs', 'TIMESTAMP_OUT_OF_RANGE'),
    parts.clockSeq === undefined ? 0 : uint(parts.clockSeq, 'clockSeq', 'CLOCK_SEQ_OUT_OF_RANGE'),
    uint(parts.workerId, 'workerId', 'WORKER_ID_OUT_OF_RANGE'),
    uint(parts.sequence, 'sequence', 'SEQUENCE_OUT_OF_RANGE'),
  );
  if (id < 0n) throw takeError();
  return id;
}

/** The smallest and largest id carrying a time in fromMs..=toMs (Unix ms): for range scans. */
export function idRange(fromMs, toMs, layout) {
  const handle = layoutHandle(layout);
  const low = raw.id_range(
    handle,
    uint(fromMs, 'fromMs', 'TIMESTAMP_OUT_OF_RANGE'),
    uint(toMs, 'toMs', 'TIMESTAMP_OUT_OF_RANGE'),
  );
  if (low < 0n) throw takeError();
  fresh();
  return [low, u64[0]];
}

// ---------------------------------------------------------------------------------------------
// Generators

const freeing = new FinalizationRegistry((handle) => raw.gen_free(handle));
const RESUME = Symbol('resume');

function generatorOptions(options) {
  let policy = '';
  if (options.onRollback !== undefined) {
    if (typeof options.onRollback !== 'string') throw typeError('onRollback', 'a policy name', options.onRollback);
    policy = options.onRollback;
  }
  const maxWaitMs = options.maxWaitMs === undefined ? -1 : uint(options.maxWaitMs, 'maxWaitMs', 'INVALID_ARG_TYPE');
  const maxDriftMs = options.maxDriftMs === undefined ? -1 : uint(options.maxDriftMs, 'maxDriftMs', 'INVALID_ARG_TYPE');
  if (options.clock !== undefined && typeof options.clock !== 'function') throw typeError('clock', 'a function returning Unix ms', options.clock);
  return [policy, maxWaitMs, maxDriftMs];
}

function readClock(clock) {
  const ms = clock();
  if (typeof ms !== 'number' || !Number.isSafeInteger(ms) || ms < 0) {
    throw typeError('clock()', 'an integer number of Unix ms', ms);
  }
  return ms;
}

/** The longest `nextId()` / `nextIds()` wait for the next tick: core's `Generator::MAX_TICK_WAIT_MS`. */
const MAX_TICK_WAIT_MS = 1000;

/**
 * Generates ids for one worker id. `nextId()` reads `Date.now()` (or `options.clock`) and waits
 * out a full tick (spinning: keep the waits short on a page's main thread); `nextIdAt(ms)`
 * never waits and throws with `.retryAtMs` instead.
 */
export class Generator {
  #handle;
  #clock;
  #workerId;
  #layoutHandle;

  constructor(options, handle, clock) {
    if (options === RESUME) {
      this.#init(handle, clock);
      return;
    }
    if (options === null || typeof options !== 'object') throw typeError('options', '{workerId, layout?, ...}', options);
    const workerId = uint(options.workerId, 'workerId', 'WORKER_ID_OUT_OF_RANGE');
    const layout = layoutHandle(options.layout);
    const [policy, maxWaitMs, maxDriftMs] = generatorOptions(options);
    const made = raw.gen_new(layout, workerId, policy, maxWaitMs, maxDriftMs);
    if (made < 0) throw takeError();
    this.#init(made, options.clock);
    this.#workerId = workerId;
    this.#layoutHandle = layout;
  }

  #init(handle, clock) {
    this.#handle = handle;
    this.#clock = clock;
    freeing.register(this, handle, this);
  }

  /** Continues from `state()` saved earlier (after a restart): never repeats an id it covers. */
  static resume(state, options = {}) {
    if (state === null || typeof state !== 'object') throw typeError('state', 'a saved state object', state);
    if (options === null || typeof options !== 'object') throw typeError('options', 'an object', options);
    const fingerprint = parseFingerprint(state.layoutFingerprint);
    const workerId = uint(state.workerId, 'state.workerId', 'WORKER_ID_OUT_OF_RANGE');
    const clockSeq = uint(state.clockSeq, 'state.clockSeq', 'INVALID_STATE');
    const marks = state.highWaterMs;
    if (!Array.isArray(marks)) throw typeError('state.highWaterMs', 'an array of Unix ms or null', marks);
    const layout = layoutHandle(options.layout);
    const [policy, maxWaitMs, maxDriftMs] = generatorOptions(options);
    const values = marks.map((mark) => (mark === null ? -1 : uint(mark, 'state.highWaterMs[]', 'INVALID_STATE')));
    if (values.length > 16 && values.slice(16).some((v) => v >= 0)) {
      raw.error_high_water_out_of_range();
      throw takeError();
    }
    fresh();
    for (let k = 0; k < 16; k++) f64[k] = k < values.length ? values[k] : -1;
    const made = raw.gen_resume(layout, fingerprint, workerId, clockSeq, policy, maxWaitMs, maxDriftMs);
    if (made < 0) throw takeError();
    const generator = new Generator(RESUME, made, options.clock);
    generator.#workerId = workerId;
    generator.#layoutHandle = layout;
    return generator;
  }

  /** The worker id. */
  get workerId() {
    return this.#workerId;
  }

  /** The layout ids are issued under, as `describeLayout` gives it. */
  get layout() {
    return describeHandle(this.#layoutHandle);
  }

  #now() {
    return this.#clock === undefined ? Date.now() : readClock(this.#clock);
  }

  /** The next id (bigint). Waits for the next tick when this one is full. */
  nextId() {
    const id = raw.gen_next(this.#handle, this.#clock === undefined ? Date.now() : readClock(this.#clock));
    return id >= 0n ? id : this.#retry((ms) => raw.gen_next(this.#handle, ms));
  }

  /** The next id at an explicit time (Unix ms). Never waits: a refusal carries `.retryAtMs`. */
  nextIdAt(ms) {
    const id = raw.gen_next(this.#handle, uint(ms, 'nextIdAt(ms)', 'TIMESTAMP_OUT_OF_RANGE'));
    if (id < 0n) throw takeError();
    return id;
  }

  /** The next id as a decimal string. */
  nextIdString() {
    return String(this.nextId());
  }

  /** `count` new ids, taken a whole run of a tick at a time. */
  nextIds(count) {
    uint(count, 'count', 'INVALID_ARG_TYPE');
    const out = new BigUint64Array(count);
    const handle = this.#handle;
    let filled = 0;
    while (filled < count) {
      const wanted = Math.min(count - filled, idBufferLen);
      let got = raw.gen_fill(handle, this.#now(), wanted);
      if (got < 0) got = this.#retry((ms) => raw.gen_fill(handle, ms, wanted));
      fresh();
      out.set(idBuffer.subarray(0, got), filled);
      filled += got;
    }
    return out;
  }

  /**
   * Waits for the time a refusal names and tries again, until success or a final refusal. A full
   * tick is waited for only if the next starts within MAX_TICK_WAIT_MS (a layout with long ticks
   * throws SEQUENCE_EXHAUSTED with `retryAtMs` at once); a clock step back names a retry time
   * only within `maxWaitMs` (the core's rule).
   */
  #retry(attempt) {
    for (;;) {
      const error = takeError();
      const at = error.retryAtMs;
      if (at === null) throw error;
      let ms = this.#now();
      if (error.code === 'SEQUENCE_EXHAUSTED' && at - ms > MAX_TICK_WAIT_MS) throw error;
      const started = now();
      const patience = Math.max(at - ms, 0) + 1000;
      while (ms < at) {
        if (now() - started > patience) {
          raw.error_clock_not_advancing(at, ms);
          throw takeError();
        }
        ms = this.#now();
      }
      const outcome = attempt(ms);
      if (outcome >= 0) return outcome;
    }
  }

  /** A snapshot to save (JSON-safe): `Generator.resume(state, options)` continues from it. */
  state() {
    const clockSeqs = raw.gen_state(this.#handle);
    if (clockSeqs < 0) throw takeError();
    fresh();
    const highWaterMs = [];
    for (let k = 0; k < clockSeqs; k++) highWaterMs.push(f64[3 + k] < 0 ? null : f64[3 + k]);
    return { layoutFingerprint: String(u64[0]), workerId: f64[1], clockSeq: f64[2], highWaterMs };
  }

  /** Releases the generator now instead of at garbage collection; later calls throw WORKER_ID_INVALIDATED. */
  free() {
    if (this.#handle === 0xffffffff) return;
    freeing.unregister(this);
    raw.gen_free(this.#handle);
    this.#handle = 0xffffffff;
  }

}

if (typeof Symbol.dispose === 'symbol') Generator.prototype[Symbol.dispose] = Generator.prototype.free;

function parseFingerprint(value) {
  let fingerprint;
  if (typeof value === 'bigint') fingerprint = value;
  else if (typeof value === 'string' && /^[0-9]{1,20}$/.test(value)) fingerprint = BigInt(value);
  else throw typeError('state.layoutFingerprint', 'a decimal string', value);
  if (fingerprint < 0n || fingerprint > U64_MAX) {
    throw coded(RangeError, 'INVALID_STATE', `state.layoutFingerprint: expected an integer in 0..2^64, found ${fingerprint}`);
  }
  return fingerprint;
}

// ---------------------------------------------------------------------------------------------
// Public ids

const TWO_63 = 1n << 63n;
const PUB_ENCODE = 0;
const PUB_DECODE = 1;
const PUB_ENCODE_TEXT = 2;
const PUB_DECODE_ASCII = 3;
const freeingCodecs = new FinalizationRegistry((handle) => raw.pub_free(handle));
const NEW_CODEC = Symbol('codec');

/** A key version: a number in 0..=255 goes to core (which takes 0..=31); anything else is refused here. */
function keyVersion(value) {
  if (typeof value !== 'number') throw typeError('key version', 'a number in 0..=31', value);
  if (!Number.isInteger(value) || value < 0 || value > 255) {
    throw coded(RangeError, 'INVALID_KEY_VERSION', `invalid key version: expected 0..=31 and not already in the key ring, found ${value}`);
  }
  return value;
}

/** Copies a 16-byte key into the scratch area (never kept on the JS side). */
function writeKey(key) {
  if (Object.prototype.toString.call(key) !== '[object Uint8Array]' || key.length !== 16) {
    const found = Object.prototype.toString.call(key) === '[object Uint8Array]' ? `a Uint8Array of ${key.length} bytes` : show(key);
    throw coded(TypeError, 'INVALID_ARG_TYPE', `key: expected a Uint8Array of 16 bytes, found ${found}`);
  }
  fresh();
  u8.set(key);
}

/**
 * Keyed, reversible public ids (core's `PublicIds`): `encode(id)` maps a raw id to a number
 * that looks random, `encodeText(id)` to 16 URL-safe characters with a key version and a check;
 * `decode` / `decodeText` map back. It hides ids; it does not authenticate anything.
 */
export class PublicIds {
  #handle;
  #version;

  /** A codec whose current key (16 bytes) is tagged `version` (0..=31) in the text form. */
  constructor(version, key) {
    let handle;
    if (version === NEW_CODEC) {
      [handle, version] = key;
    } else {
      version = keyVersion(version);
      writeKey(key);
      handle = raw.pub_new(-1, version);
      if (handle < 0) throw takeError();
    }
    this.#handle = handle;
    this.#version = version;
    freeingCodecs.register(this, handle);
  }

  /** A new codec with these keys plus an older key, used only to decode text forms tagged `version`. */
  withOldKey(version, key) {
    const v = keyVersion(version);
    writeKey(key);
    const handle = raw.pub_new(this.#handle, v);
    if (handle < 0) throw takeError();
    return new PublicIds(NEW_CODEC, [handle, this.#version]);
  }

  /** The version of the current key. */
  get currentVersion() {
    return this.#version;
  }

  /** The public number (bigint below 2^63) of an id, under the current key. */
  encode(id) {
    return this.#call(PUB_ENCODE, checkId(id));
  }

  /** The id behind a public number, under the current key. */
  decode(publicId) {
    if (typeof publicId !== 'bigint') throw typeError('public id', 'a bigint', publicId);
    // Out of 0..2^64: core's refusal for a value above 2^63 (INVALID_PUBLIC_ID), never a wrap.
    return this.#call(PUB_DECODE, publicId >= 0n && publicId < TWO_63 ? publicId : TWO_63);
  }

  /** The 16-character text form of an id (upper case), under the current key. */
  encodeText(id) {
    this.#call(PUB_ENCODE_TEXT, checkId(id));
    const b = u8;
    return String.fromCharCode(b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
  }

  /** The id behind a text form (case-insensitive); its version character picks the key. */
  decodeText(text) {
    if (typeof text !== 'string') throw typeError('public id text', 'a string', text);
    if (text.length === 16) {
      fresh();
      const b = u8;
      let ascii = true;
      for (let i = 0; i < 16; i++) {
        const c = text.charCodeAt(i);
        if (c > 127) ascii = false;
        b[i] = c;
      }
      if (ascii) return this.#call(PUB_DECODE_ASCII, 0n);
    }
    const id = raw.pub_decode_text(this.#handle, text);
    if (id < 0n) throw takeError();
    return id;
  }

  #call(op, value) {
    const out = raw.pub_call(this.#handle, op, value);
    if (out < 0n) throw takeError();
    fresh();
    return out;
  }
}

/** An id for the codec: a bigint; one outside 0..2^64 gets core's parser's refusal (INVALID_ID). */
function checkId(id) {
  if (typeof id !== 'bigint') throw typeError('id', 'a bigint', id);
  if (id >= 0n && id <= U64_MAX) return id;
  raw.decode_text(0, String(id));
  throw takeError();
}
