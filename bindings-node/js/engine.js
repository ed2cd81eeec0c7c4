// The wasm engine: core compiled to WebAssembly (bindings-wasm), instantiated synchronously
// from bytes inlined in the bundle (`clockflake:wasm`, provided by build.mjs: plain bytes for
// Node, deflated bytes inflated at load for browsers, where size counts), so that no runtime
// and no bundler has to fetch or locate a .wasm file. Every function here takes plain numbers/bigints/strings already checked by
// api.js, and throws the core's refusal as a ClockflakeError with core's code and message
// (rebuilt by messages.js; its test compares it with core's own output).
import { wasmBytes } from 'clockflake:wasm';
import {
  decode as wasm_decode,
  decode_split as wasm_decode_split,
  decode_text as wasm_decode_text,
  encode as wasm_encode,
  error_retry_at as wasm_error_retry_at,
  error_take as wasm_error_take,
  gen_fill as wasm_gen_fill,
  gen_free as wasm_gen_free,
  gen_new as wasm_gen_new,
  gen_next as wasm_gen_next,
  gen_options as wasm_gen_options,
  gen_resume as wasm_gen_resume,
  gen_state as wasm_gen_state,
  guess_preset as wasm_guess_preset,
  id_buffer_len as wasm_id_buffer_len,
  id_buffer_ptr as wasm_id_buffer_ptr,
  id_range as wasm_id_range,
  initSync as wasm_initSync,
  layout_by_name as wasm_layout_by_name,
  layout_custom as wasm_layout_custom,
  layout_info as wasm_layout_info,
  layout_plausible as wasm_layout_plausible,
  layout_suggest as wasm_layout_suggest,
  preset_count as wasm_preset_count,
  preset_name as wasm_preset_name,
  pub_call as wasm_pub_call,
  pub_decode_text as wasm_pub_decode_text,
  pub_free as wasm_pub_free,
  pub_new as wasm_pub_new,
  scratch32_ptr as wasm_scratch32_ptr,
  scratch64_ptr as wasm_scratch64_ptr,
  wasm_memory as wasm_wasm_memory,
  wait_step as wasm_wait_step,
} from '../wasm/clockflake_wasm.js';
import { FIELD_NAMES, POLICY_NAMES } from '../wasm/core.js';
import { formatMessage } from './messages.js';
import { ClockflakeError } from './errors.js';

wasm_initSync({ module: wasmBytes });

const memory = wasm_wasm_memory();
const scratch64Ptr = wasm_scratch64_ptr();
const scratch32Ptr = wasm_scratch32_ptr();
const idBufferPtr = wasm_id_buffer_ptr();
export const ID_BUFFER_LEN = wasm_id_buffer_len();
let f64, u64, u32, u8, idBuffer;

function views() {
  const buffer = memory.buffer;
  f64 = new Float64Array(buffer, scratch64Ptr, 32);
  u64 = new BigUint64Array(buffer, scratch64Ptr, 32);
  u32 = new Uint32Array(buffer, scratch32Ptr, 32);
  u8 = new Uint8Array(buffer, scratch64Ptr, 16);
  idBuffer = new BigUint64Array(buffer, idBufferPtr, ID_BUFFER_LEN);
}
views();

/** Memory growth detaches the old buffer (its views read as length 0): make new views. */
function fresh() {
  if (u32.length === 0) views();
}

/** Core's error of `code` for a refusal without numbers (`WORKER_ID_INVALIDATED`). */
export function coreError(code) {
  return new ClockflakeError(code, formatMessage(code, 0, [0n, 0n, 0n, 0n]));
}

/** The refusal the last call left behind, as a ClockflakeError with core's code and message. */
export function takeError() {
  const code = wasm_error_take();
  fresh();
  const retryAt = f64[4];
  return new ClockflakeError(code, formatMessage(code, u32[0], [u64[0], u64[1], u64[2], u64[3]]), retryAt < 0 ? null : retryAt);
}

// ---------------------------------------------------------------------------------------------
// Layouts

export function presetNames() {
  const names = [];
  for (let i = 0; i < wasm_preset_count(); i++) names.push(wasm_preset_name(i));
  return names;
}

export function presetLayout(name) {
  const handle = wasm_layout_by_name(name);
  if (handle < 0) throw takeError();
  return handle;
}

/** A custom layout's handle (`names` most significant first; an unknown name is core's refusal). */
export function customLayout(names, bits, unitMs, epochMs) {
  if (names.length > 16) {
    throw new ClockflakeError('INVALID_LAYOUT', formatMessage('INVALID_LAYOUT', 4, [0n, 0n, 0n, 0n]));
  }
  fresh();
  for (let i = 0; i < names.length; i++) {
    const code = FIELD_NAMES.indexOf(names[i]);
    u32[2 * i] = code < 0 ? 4 : code;
    u32[2 * i + 1] = bits[i];
  }
  const handle = wasm_layout_custom(names.length, unitMs, epochMs);
  if (handle < 0) throw takeError();
  return handle;
}

/** Core's `Layout::suggest`: the suggested layout's handle (the wrapper passes safe integers). */
export function suggestLayout(workers, peakIdsPerSec, lifetimeYears) {
  const handle = wasm_layout_suggest(workers, peakIdsPerSec, lifetimeYears);
  if (handle < 0) throw takeError();
  return handle;
}

/** `{ name, fields, unitMs, epochMs, clockSeqs, maxWorkerId, maxId, fingerprint, shifts, widths }`. */
export function layoutInfo(handle, names) {
  const count = wasm_layout_info(handle);
  if (count < 0) throw takeError();
  fresh();
  const fields = [];
  for (let i = 0; i < count; i++) fields.push({ name: FIELD_NAMES[u32[2 * i]], bits: u32[2 * i + 1] });
  const preset = u32[8];
  const shifts = [0, 0, 0, 0];
  const widths = [0, 0, 0, 0];
  let shift = 0;
  for (let i = fields.length - 1; i >= 0; i--) {
    const at = FIELD_NAMES.indexOf(fields[i].name);
    shifts[at] = shift;
    widths[at] = fields[i].bits;
    shift += fields[i].bits;
  }
  return {
    name: preset < names.length ? names[preset] : null,
    fields,
    unitMs: f64[0],
    epochMs: f64[1],
    clockSeqs: f64[2],
    maxWorkerId: f64[3],
    maxId: u64[4],
    fingerprint: u64[5],
    shifts,
    widths,
  };
}

/** Core's `Layout::is_plausible` (the wrapper passes an id in 0..2^64 and safe integers). */
export function isPlausible(handle, id, nowMs, marginMs) {
  const answer = wasm_layout_plausible(handle, id, nowMs, marginMs);
  if (answer < 0) throw takeError();
  return answer === 1;
}

/**
 * Core's `Layout::guess_preset`: [preset index, timestampMs, clockSeq, workerId, sequence] of
 * the preset with the latest plausible time, or null when none fits.
 */
export function guessPreset(id, nowMs, marginMs) {
  const index = wasm_guess_preset(id, nowMs, marginMs);
  if (index < 0) return null;
  fresh();
  return [index, f64[0], u32[0], u32[1], u32[2]];
}

// ---------------------------------------------------------------------------------------------
// Ids

/** Throws core's INVALID_ID for a bigint the layout cannot hold (the caller checked it is so). */
export function refuseId(handle, id) {
  if (id >= 0n && id < 1n << 64n) wasm_decode(handle, id);
  else wasm_decode_text(handle, String(id));
  throw takeError();
}

/**
 * Decodes a decimal id into [timestampMs, clockSeq, workerId, sequence]. Up to 19 digits (always
 * below 2^64) are read here into two exact numbers, the leading digits and the last nine;
 * anything else goes to core's strict parser, which also words the refusal.
 */
export function decodeDecimal(handle, text) {
  const length = text.length;
  let timestampMs;
  if (length === 0 || length > 19) {
    timestampMs = wasm_decode_text(handle, text);
  } else {
    const split = length - 9;
    let high = 0;
    let low = 0;
    let digits = true;
    for (let i = 0; i < length; i++) {
      const digit = text.charCodeAt(i) - 48;
      if (digit < 0 || digit > 9) {
        digits = false;
        break;
      }
      if (i < split) high = high * 10 + digit;
      else low = low * 10 + digit;
    }
    timestampMs = digits ? wasm_decode_split(handle, high, low) : wasm_decode_text(handle, text);
  }
  if (timestampMs < 0) throw takeError();
  fresh();
  return [timestampMs, u32[0], u32[1], u32[2]];
}

export function encode(handle, timestampMs, clockSeq, workerId, sequence) {
  const id = wasm_encode(handle, timestampMs, clockSeq, workerId, sequence);
  if (id < 0n) throw takeError();
  return id;
}

export function idRange(handle, fromMs, toMs) {
  const low = wasm_id_range(handle, fromMs, toMs);
  if (low < 0n) throw takeError();
  fresh();
  return [low, u64[0]];
}

// ---------------------------------------------------------------------------------------------
// Generators

/**
 * Frees a generator's engine slot when its JS object is collected; Cloudflare Workers have no
 * FinalizationRegistry, so there a slot lives until `close()` (or the isolate) ends it.
 */
const registry = (free) => (typeof FinalizationRegistry === 'function' ? new FinalizationRegistry(free) : null);
const freeing = registry((handle) => wasm_gen_free(handle));

/** A generator's handle; freed when `owner` is garbage-collected, or by `freeGenerator`. */
export function createGenerator(owner, layout, workerId, onRollback, maxWaitMs, maxDriftMs) {
  const handle = wasm_gen_new(layout, workerId, onRollback ?? '', maxWaitMs ?? -1, maxDriftMs ?? -1);
  if (handle < 0) throw takeError();
  freeing?.register(owner, handle, owner);
  return handle;
}

/** A generator from a state record (core's `State::from_record` checks its form): the fingerprint as decimal text. */
export function resumeGenerator(owner, layout, fingerprint, workerId, clockSeq, marks, onRollback, maxWaitMs, maxDriftMs) {
  fresh();
  for (let k = 0; k < 16; k++) f64[k] = k < marks.length && marks[k] !== null ? marks[k] : -1;
  const handle = wasm_gen_resume(layout, fingerprint, workerId, clockSeq, marks.length, onRollback ?? '', maxWaitMs ?? -1, maxDriftMs ?? -1);
  if (handle < 0) throw takeError();
  freeing?.register(owner, handle, owner);
  return handle;
}

export function freeGenerator(owner, handle) {
  freeing?.unregister(owner);
  wasm_gen_free(handle);
}

export function generatorOptions(handle) {
  const policy = wasm_gen_options(handle);
  if (policy < 0) throw takeError();
  fresh();
  return { onRollback: POLICY_NAMES[policy], maxWaitMs: f64[0], maxDriftMs: f64[1] };
}

export function generatorState(handle) {
  const clockSeqs = wasm_gen_state(handle);
  if (clockSeqs < 0) throw takeError();
  fresh();
  const highWaterMs = [];
  for (let k = 0; k < clockSeqs; k++) highWaterMs.push(f64[3 + k] < 0 ? null : f64[3 + k]);
  return { layoutFingerprint: String(u64[0]), workerId: f64[1], clockSeq: f64[2], highWaterMs };
}

/** The next id at `nowMs`, or -1n (the refusal waits in `takeError()`). Never blocks. */
export const nextIdAt = wasm_gen_next;

/** Up to `wanted` (<= ID_BUFFER_LEN) ids at `nowMs` into `out` at `offset`: how many, or -1. */
export function fill(handle, nowMs, wanted) {
  return wasm_gen_fill(handle, nowMs, wanted);
}

export function copyIds(out, offset, count) {
  fresh();
  out.set(idBuffer.subarray(0, count), offset);
}

/**
 * After a refusal at `nowMs`: the Unix ms a blocking call waits for and tries again at, by core's
 * rule (`Generator::blocking_retry_at`; the refusal is then dropped), or -1 for a final refusal
 * (still there for `takeError()`).
 */
export const blockingRetryAt = wasm_error_retry_at;

/**
 * One step of a wait for the clock to read `atMs` (core's `wait_step`): -1 once it does, else
 * the ms to sleep before reading it again (0: spin once); throws `CLOCK_NOT_ADVANCING` when the
 * clock has not got there within the wait plus a second of real time.
 */
export function waitStep(atMs, startMs, nowMs, elapsedMs) {
  const step = wasm_wait_step(atMs, startMs, nowMs, elapsedMs);
  if (step === -2) throw takeError();
  return step;
}

// ---------------------------------------------------------------------------------------------
// Public ids

const PUB_ENCODE = 0;
const PUB_DECODE = 1;
const PUB_ENCODE_TEXT = 2;
const PUB_DECODE_ASCII = 3;
const TWO_63 = 1n << 63n;
const freeingCodecs = registry((handle) => wasm_pub_free(handle));

/**
 * A codec's handle (`base` -1: a new codec; else `base` plus an old key; `legacy`: the key is of
 * the construction used before FF1), freed with `owner`.
 */
export function publicIds(owner, base, version, key, legacy) {
  fresh();
  u8.set(key);
  const handle = wasm_pub_new(base, version, legacy);
  fresh();
  u8.fill(0);
  if (handle < 0) throw takeError();
  freeingCodecs?.register(owner, handle);
  return handle;
}

function pubCall(handle, op, value) {
  const out = wasm_pub_call(handle, op, value);
  if (out < 0n) throw takeError();
  return out;
}

/** `id` must be a bigint; one outside 0..2^64 gets core's parser's refusal (INVALID_ID). */
function u64Id(id) {
  if (id >= 0n && id < 1n << 64n) return id;
  wasm_decode_text(0, String(id));
  throw takeError();
}

export function publicEncode(handle, id) {
  return pubCall(handle, PUB_ENCODE, u64Id(id));
}

export function publicDecode(handle, publicId) {
  // Out of 0..2^63: core's refusal for a value above 2^63 (INVALID_PUBLIC_ID), never a wrap.
  return pubCall(handle, PUB_DECODE, publicId >= 0n && publicId < TWO_63 ? publicId : TWO_63);
}

export function publicEncodeText(handle, id) {
  pubCall(handle, PUB_ENCODE_TEXT, u64Id(id));
  fresh();
  return String.fromCharCode(...u8);
}

export function publicDecodeText(handle, text) {
  if (text.length === 16) {
    fresh();
    let ascii = true;
    for (let i = 0; i < 16; i++) {
      const c = text.charCodeAt(i);
      if (c > 127) ascii = false;
      u8[i] = c;
    }
    if (ascii) return pubCall(handle, PUB_DECODE_ASCII, 0n);
  }
  const id = wasm_pub_decode_text(handle, text);
  if (id < 0n) throw takeError();
  return id;
}
