// Decoding in plain JavaScript: an id's fields from its two 32-bit halves (shared by the full
// package and the decode-only entry).

const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;
export const SCRATCH = new BigUint64Array(1);
export const HALVES = new Uint32Array(SCRATCH.buffer);
export const LO = LITTLE_ENDIAN ? 0 : 1;
export const HI = LITTLE_ENDIAN ? 1 : 0;

/**
 * How to take one field out of the two 32-bit halves of an id with plain number arithmetic:
 * value = ((hi >>> hs) & hm) * hmul + (((lo >>> ls) & lm) >>> 0). Every mask is at most 31 bits
 * wide except a 32-bit low part, which `>>> 0` keeps unsigned; every sum stays below 2^53.
 */
export function extractor(shift, width) {
  if (width === 0) return { hs: 0, hm: 0, hmul: 0, ls: 0, lm: 0 };
  const top = shift + width; // first bit above the field
  const hs = shift >= 32 ? shift - 32 : 0;
  const hiBits = top > 32 ? top - 32 - hs : 0;
  const loBits = shift < 32 ? Math.min(width, 32 - shift) : 0;
  return {
    hs,
    hm: hiBits === 0 ? 0 : 2 ** hiBits - 1,
    hmul: shift >= 32 ? 1 : 2 ** (32 - shift),
    ls: shift < 32 ? shift : 0,
    lm: loBits === 0 ? 0 : loBits === 32 ? 0xffffffff : 2 ** loBits - 1,
  };
}

/** The result of `decode`. `date` is computed on access. */
export class Parts {
  constructor(timestampMs, clockSeq, workerId, sequence) {
    this.timestampMs = timestampMs;
    this.clockSeq = clockSeq;
    this.workerId = workerId;
    this.sequence = sequence;
  }

  /** The id's time as a `Date` (a new one each time). */
  get date() {
    return new Date(this.timestampMs);
  }
}
