// Rebuilds core's error messages (core/src/error.rs, `Display`) from the numbers the wasm
// engine hands over (bindings-wasm/src/error_numbers.rs), so the .wasm needs no core::fmt. The
// tests compare every kind with core's own output (bindings-wasm/examples/messages.rs), so a
// change in core shows up there.

const FIELD_NAMES = ['timestamp', 'clock_seq', 'worker', 'sequence'];
/** The wasm engine's handle tables, by the kind of its own refusals (`Table` in bindings-wasm/src/lib.rs). */
const TABLES = ['generator', 'public-id codec', 'layout'];
const NONE = (1n << 64n) - 1n;

/** Rust's `{:?}` of a char. */
function debugChar(codePoint) {
  const escapes = { 0: '\\0', 9: '\\t', 10: '\\n', 13: '\\r', 39: "\\'", 92: '\\\\' };
  if (escapes[codePoint] !== undefined) return `'${escapes[codePoint]}'`;
  const c = String.fromCodePoint(codePoint);
  const hidden = /[\p{Mn}\p{Me}\p{Cc}\p{Cf}\p{Cs}\p{Co}\p{Cn}\p{Zl}\p{Zp}]/u.test(c) || (/\p{Zs}/u.test(c) && c !== ' ');
  return hidden ? `'\\u{${codePoint.toString(16)}}'` : `'${c}'`;
}

/** Core's message of an `INVALID_ID` of this sub-kind (exported for the decode-only entry). */
export function invalidIdMessage(kind, fields) {
  return `invalid id: ${invalidId(kind, fields)}`;
}

/** Core's message of `UNKNOWN_LAYOUT`. */
export const UNKNOWN_LAYOUT_MESSAGE = 'unknown layout: expected one of clockseq, twitter, discord, sonyflake, baidu, js53';

function invalidId(kind, [a, b]) {
  switch (kind) {
    case 0: return 'expected a decimal integer, found an empty string';
    case 1: return 'expected a non-negative decimal integer, found a minus sign';
    case 2: return `expected a decimal digit, found ${debugChar(Number(a))} at byte ${b}`;
    case 3: return 'expected an integer below 2^63, found one of more than 64 bits';
    case 4: return `expected an integer below 2^63 (9223372036854775808), found ${a}`;
    case 5: return `expected at most ${b} for this layout, found ${a}: its timestamp lies beyond the layout's lifetime`;
    default: return 'invalid id';
  }
}

function layoutProblem(kind, [a, b, c]) {
  const field = FIELD_NAMES[Number(a)];
  switch (kind) {
    case 0: return `expected fields of at most 63 bits in all, found ${a}`;
    case 1: return `expected ${field} to be at most ${c} bits, found ${b}`;
    case 2: return `expected ${field} to be at least 1 bit, found 0`;
    case 3: return 'a field is listed twice';
    case 4: return 'unknown field: expected timestamp, clock_seq, worker or sequence';
    case 5: return 'expected timestamp as the most significant field';
    case 6: return 'expected a sequence field';
    case 7: return 'expected a time unit of at least 1 ms, found 0';
    case 8: return "expected the layout's lifetime to end by 2^53 - 1 Unix ms (epoch + 2^timestamp_bits * unit_ms)";
    default: return 'invalid layout';
  }
}

function stateProblem(kind, [a, b]) {
  switch (kind) {
    case 0: return `saved under another layout: expected fingerprint ${a}, found ${b}`;
    case 1: return 'its clock sequence does not exist in this layout';
    case 2: return "a high-water mark lies outside the layout's lifetime or names a missing clock sequence";
    case 3: return 'the layout fingerprint is not a decimal number below 2^64';
    case 4: return `expected ${a} high-water marks (one per clock sequence), found ${b}`;
    default: return 'invalid state';
  }
}

function publicIdProblem(kind, [a, b]) {
  switch (kind) {
    case 0: return `expected 16 characters, found ${a}`;
    case 1: return `expected a Crockford base32 character (0-9, A-Z without I L O U), found ${debugChar(Number(a))} at byte ${b}`;
    case 2: return 'the check characters do not match: a character was mistyped or two were swapped';
    case 3: return 'expected a value below 2^63';
    default: return 'invalid public id';
  }
}

const retry = (at) => (at === NONE ? '; the wait would exceed max_wait_ms' : `; retry at ${at} Unix ms`);

/**
 * Core's message for an error.
 * @param {string} code  Error::code()
 * @param {number} kind  sub-kind (error_numbers.rs); 255 for a variant the wasm build does not know
 * @param {bigint[]} f   the four fields, as u64
 */
export function formatMessage(code, kind, f) {
  if (kind === 255) return code.toLowerCase().replaceAll('_', ' ');
  const [a, b, c] = f;
  switch (code) {
    case 'INVALID_ID': return invalidIdMessage(kind, f);
    case 'INVALID_LAYOUT': return `invalid layout: ${layoutProblem(kind, f)}`;
    case 'UNKNOWN_LAYOUT': return UNKNOWN_LAYOUT_MESSAGE;
    case 'UNKNOWN_POLICY': return 'unknown rollback policy: expected one of clock-sequence, wait, logical, fail';
    case 'WORKER_ID_OUT_OF_RANGE': return `worker id out of range: expected 0..=${b} for this layout, found ${a}`;
    case 'TIMESTAMP_OUT_OF_RANGE': return `timestamp out of range: expected ${b}..=${c} Unix ms for this layout, found ${a}`;
    case 'CLOCK_SEQ_OUT_OF_RANGE': return `clock sequence out of range: expected 0..=${b} for this layout, found ${a}`;
    case 'SEQUENCE_OUT_OF_RANGE': return `sequence out of range: expected 0..=${b} for this layout, found ${a}`;
    case 'INVALID_RANGE': return `invalid range: expected from_ms <= to_ms, found ${a} > ${b}`;
    case 'EPOCH_IN_FUTURE': return `epoch in the future: the clock reads ${a} Unix ms, before the layout's epoch ${b}`;
    case 'TIMESTAMP_EXHAUSTED': return `timestamp exhausted: the layout's timestamp field ran out at ${b} Unix ms; the clock reads ${a}`;
    case 'SEQUENCE_EXHAUSTED': return `sequence exhausted: every sequence number of this tick is used, retry at ${a} Unix ms`;
    case 'CLOCK_MOVED_BACKWARDS':
      return `clock moved backwards: the clock reads ${b} Unix ms, ${a > b ? a - b : 0n} ms before the last id issued at ${a}${retry(c)}`;
    case 'CLOCK_SEQUENCE_EXHAUSTED':
      return `clock sequence exhausted: the clock went back to ${a} Unix ms and every clock sequence was already used at that time${retry(b)}`;
    case 'INVALID_STATE': return `invalid state: ${stateProblem(kind, f)}`;
    case 'CLOCK_NOT_ADVANCING': return `clock not advancing: waited for ${a} Unix ms but the clock still reads ${b}`;
    case 'WORKER_ID_INVALIDATED':
      return "worker id invalidated: this generator's worker id belongs to another process (after a fork, another copy of the process or restored()); give it a new worker id";
    case 'GENERATOR_CLOSED': return 'generator closed: close() was called; make a new generator';
    case 'INVALID_PUBLIC_ID': return `invalid public id: ${publicIdProblem(kind, f)}`;
    case 'UNKNOWN_KEY_VERSION':
      return `unknown key version: the public id was made with key version ${a}, which this codec does not hold`;
    case 'INVALID_KEY_VERSION': return `invalid key version: expected 0..=31 and not already in the key ring, found ${a}`;
    // The engine's own refusals (bindings-wasm/src/lib.rs, `Refusal`), which the package's calls never provoke.
    case 'ENGINE_BUSY':
      return `engine busy: the wasm engine's ${TABLES[kind]} table is in use by a call in progress (a call made from inside another)`;
    case 'UNKNOWN_HANDLE': return `unknown handle: no ${TABLES[kind]} of the wasm engine has handle ${a}`;
    default: return code.toLowerCase().replaceAll('_', ' ');
  }
}
