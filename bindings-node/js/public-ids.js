// PublicIds: keyed, reversible public ids (core's `PublicIds`) on the wasm engine.
import * as engine from './engine.js';
import { coded, typeError } from './errors.js';

const MAX_KEY_VERSION = 31;
/**
 * Lets `withOldKey`, `withLegacyKey` and `PublicIds.legacy` build a codec: [base handle (-1 for
 * a new codec), current version, the key's version, the key, whether it is a legacy key].
 */
let adopting = null;

function keyVersion(version) {
  if (typeof version !== 'number') throw typeError('version', 'a number 0..=31', version);
  if (!Number.isInteger(version) || version < 0 || version > MAX_KEY_VERSION) {
    throw coded(RangeError, 'INVALID_KEY_VERSION', `invalid key version: expected 0..=${MAX_KEY_VERSION} and not already in the key ring, found ${version}`);
  }
  return version;
}

function keyBytes(key) {
  if (!(key instanceof Uint8Array)) throw typeError('key', 'a Uint8Array or Buffer of 16 bytes', key);
  if (key.length !== 16) throw coded(RangeError, 'INVALID_ARG_VALUE', `key: expected 16 bytes, found ${key.length} bytes`);
  return key;
}

function bigintArg(value, name) {
  if (typeof value !== 'bigint') throw typeError(name, 'a bigint (a number loses precision above 2^53)', value);
  return value;
}

function adopt(base, currentVersion, version, key, legacy) {
  adopting = [base, currentVersion, version, key, legacy];
  try {
    return new PublicIds(undefined, undefined);
  } finally {
    adopting = null;
  }
}

/**
 * Public ids that reveal nothing: a keyed, reversible permutation of the 63-bit id space (NIST
 * FF1 with AES-128), and a 16-character text form with a key version and a checksum. It hides
 * when, where and how many; it is not a capability: anyone can submit a public id and get some
 * raw id back, so never use it for authorisation. Keys whose public ids were made before FF1
 * (clockflake 0.1) are registered as legacy keys: `withLegacyKey`, `PublicIds.legacy`.
 */
export class PublicIds {
  #handle;
  #version;

  /**
   * @param {number} version the key's version, 0..=31 (the text form's first character)
   * @param {Uint8Array} key 16 secret bytes (a `Buffer` works)
   */
  constructor(version, key) {
    if (adopting !== null) {
      const [base, currentVersion, keyVersion_, key_, legacy] = adopting;
      adopting = null;
      this.#version = currentVersion;
      this.#handle = engine.publicIds(this, base, keyVersion_, key_, legacy);
      return;
    }
    this.#version = keyVersion(version);
    this.#handle = engine.publicIds(this, -1, this.#version, keyBytes(key), false);
  }

  /**
   * A codec whose current key is a legacy key (public ids made before FF1 that must stay the
   * same, numbers included); prefer a new key with `withLegacyKey` for this one.
   */
  static legacy(version, key) {
    const checked = keyVersion(version);
    return adopt(-1, checked, checked, keyBytes(key), true);
  }

  /** A new codec with the same keys plus an older one, used only to decode texts made with it. */
  withOldKey(version, key) {
    return adopt(this.#handle, this.#version, keyVersion(version), keyBytes(key), false);
  }

  /** A new codec with the same keys plus a legacy key (texts made before FF1), used only to decode. */
  withLegacyKey(version, key) {
    return adopt(this.#handle, this.#version, keyVersion(version), keyBytes(key), true);
  }

  /** The version of the current key (the one `encode` and `encodeText` use). */
  get currentVersion() {
    return this.#version;
  }

  /** The public number of an id (a bigint below 2^63), under the current key. */
  encode(id) {
    return engine.publicEncode(this.#handle, bigintArg(id, 'id'));
  }

  /** The id behind a public number, under the current key. */
  decode(publicId) {
    return engine.publicDecode(this.#handle, bigintArg(publicId, 'publicId'));
  }

  /** The 16-character text form of an id (Crockford base32, upper case). */
  encodeText(id) {
    return engine.publicEncodeText(this.#handle, bigintArg(id, 'id'));
  }

  /** The id behind a text form (case-insensitive); a typo is an `INVALID_PUBLIC_ID` error, never a wrong id. */
  decodeText(text) {
    if (typeof text !== 'string') throw typeError('text', 'a string of 16 characters', text);
    return engine.publicDecodeText(this.#handle, text);
  }
}
