// PublicIds on the wasm engine, through the clockflake package: round trips, argument types,
// every refusal with core's code and message, typo detection, key rotation, and keys kept out of JS.
// The shared vectors (tests/vectors/public/) run in vectors.test.mjs.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { inspect } from 'node:util';
import { ClockflakeError, PublicIds, encode } from '../../../bindings-node/lib/index.mjs';
import { throwsCoded } from './throws.mjs';

const KEY1 = new TextEncoder().encode('clockflake-key-1');
const KEY2 = Uint8Array.from({ length: 16 }, (_, i) => i);
const ALPHABET = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
const TWO_63 = 1n << 63n;

/** A deterministic stream of ids below 2^63 (xorshift64). */
function* ids(count, seed = 0x9e3779b97f4a7c15n) {
  let x = seed;
  for (let i = 0; i < count; i++) {
    x ^= (x << 13n) & 0xffffffffffffffffn;
    x ^= x >> 7n;
    x ^= (x << 17n) & 0xffffffffffffffffn;
    yield x >> 1n;
  }
}

test('encode/decode and encodeText/decodeText round trip; 100,000 ids give 100,000 distinct public values', () => {
  const codec = new PublicIds(1, KEY1);
  const numbers = new Set();
  const texts = new Set();
  const edges = [0n, 1n, 4095n, (1n << 32n) - 1n, 1n << 32n, TWO_63 - 1n];
  for (const id of [...edges, ...ids(100_000)]) {
    const number = codec.encode(id);
    assert.ok(number >= 0n && number < TWO_63);
    assert.equal(codec.decode(number), id);
    const text = codec.encodeText(id);
    assert.match(text, /^1[0-9A-HJKMNP-TV-Z]{15}$/);
    assert.equal(codec.decodeText(text), id);
    numbers.add(number);
    texts.add(text);
  }
  assert.equal(numbers.size, 100_006);
  assert.equal(texts.size, 100_006);
  // The text form carries the public number: 13 base32 digits after the version, with the
  // construction bit (2^63, set for FF1) above the number.
  const id = encode({ timestampMs: 1_795_000_000_000, workerId: 7, sequence: 3 });
  let payload = 0n;
  for (const c of codec.encodeText(id).slice(1, 14)) payload = payload * 32n + BigInt(ALPHABET.indexOf(c));
  assert.equal(payload, TWO_63 | codec.encode(id));
});

test('consecutive ids look unrelated: one flipped input bit flips about half the output bits', () => {
  const codec = new PublicIds(0, KEY2);
  let flipped = 0;
  let pairs = 0;
  for (const id of ids(2000, 12345n)) {
    const out = codec.encode(id);
    for (let bit = 0n; bit < 63n; bit += 7n) {
      let diff = out ^ codec.encode(id ^ (1n << bit));
      for (; diff; diff &= diff - 1n) flipped++;
      pairs++;
    }
  }
  const mean = flipped / pairs;
  assert.ok(mean > 30 && mean < 33, `mean flipped bits ${mean} of 63`);
});

test('decodeText reads lower case and the look-alikes O, I, L', () => {
  const codec = new PublicIds(1, KEY1);
  let n = 0;
  for (const id of ids(2000, 777n)) {
    const text = codec.encodeText(id);
    assert.equal(codec.decodeText(text.toLowerCase()), id);
    const lookAlike = text.replaceAll('0', n % 2 ? 'o' : 'O').replaceAll('1', ['I', 'l', 'i', 'L'][n++ % 4]);
    assert.equal(codec.decodeText(lookAlike), id);
  }
});

test('every single mistyped character and every adjacent swap is refused, never a wrong id', () => {
  const codec = new PublicIds(1, KEY1).withOldKey(2, KEY2);
  let refused = 0;
  for (const id of ids(20, 99n)) {
    const text = codec.encodeText(id);
    for (let at = 0; at < 16; at++) {
      for (const c of ALPHABET) {
        if (c === text[at]) continue;
        const typo = text.slice(0, at) + c + text.slice(at + 1);
        throwsCoded(() => codec.decodeText(typo), ClockflakeError, 'INVALID_PUBLIC_ID');
        refused++;
      }
      if (at < 15 && text[at] !== text[at + 1]) {
        const swapped = text.slice(0, at) + text[at + 1] + text[at] + text.slice(at + 2);
        throwsCoded(
          () => codec.decodeText(swapped),
          ClockflakeError,
          'INVALID_PUBLIC_ID',
          'invalid public id: the check characters do not match: a character was mistyped or two were swapped',
        );
        refused++;
      }
    }
  }
  assert.ok(refused > 20 * 16 * 31);
});

test("malformed text gets core's code and message, whatever its characters", () => {
  const codec = new PublicIds(1, KEY1);
  const text = codec.encodeText(42n);
  const cases = [
    ['', 'invalid public id: expected 16 characters, found 0'],
    [text.slice(1), 'invalid public id: expected 16 characters, found 15'],
    [`${text}0`, 'invalid public id: expected 16 characters, found 17'],
    [`${text.slice(0, 5)}U${text.slice(6)}`, "invalid public id: expected a Crockford base32 character (0-9, A-Z without I L O U), found 'U' at byte 5"],
    [`${text.slice(0, 15)}-`, "invalid public id: expected a Crockford base32 character (0-9, A-Z without I L O U), found '-' at byte 15"],
    [`${text.slice(0, 3)}\n${text.slice(4)}`, "invalid public id: expected a Crockford base32 character (0-9, A-Z without I L O U), found '\\n' at byte 3"],
    // Not ASCII: the slow path through a Rust &str; 16 characters in more bytes name the bad character.
    ['éééééééé', "invalid public id: expected a Crockford base32 character (0-9, A-Z without I L O U), found 'é' at byte 0"],
    [`${text.slice(0, 10)}１${text.slice(11, 14)}`, "invalid public id: expected a Crockford base32 character (0-9, A-Z without I L O U), found '１' at byte 10"],
    [`${text.slice(0, 15)}é`, "invalid public id: expected a Crockford base32 character (0-9, A-Z without I L O U), found 'é' at byte 15"],
    ['😀'.repeat(4), "invalid public id: expected a Crockford base32 character (0-9, A-Z without I L O U), found '😀' at byte 0"],
    ['2ZZZZZZZZZZZZZG4', 'invalid public id: expected a value below 2^63'],
  ];
  for (const [input, message] of cases) throwsCoded(() => codec.decodeText(input), ClockflakeError, 'INVALID_PUBLIC_ID', message);
  throwsCoded(
    () => codec.decodeText('5000000000002DDP'),
    ClockflakeError,
    'UNKNOWN_KEY_VERSION',
    'unknown key version: the public id was made with key version 5, which this codec does not hold',
  );
  // The fast path leaves nothing behind: a good text right after a bad one decodes.
  assert.equal(codec.decodeText(text), 42n);
});

test('ids and public numbers are range-checked bigints, never wrapped', () => {
  const codec = new PublicIds(3, KEY2);
  for (const bad of [5, 2 ** 60, '42', null, undefined, {}, 1.5]) {
    throwsCoded(() => codec.encode(bad), TypeError, 'INVALID_ARG_TYPE');
    throwsCoded(() => codec.encodeText(bad), TypeError, 'INVALID_ARG_TYPE');
    throwsCoded(() => codec.decode(bad), TypeError, 'INVALID_ARG_TYPE');
  }
  for (const bad of [42n, 5, null, new Uint8Array(16)]) throwsCoded(() => codec.decodeText(bad), TypeError, 'INVALID_ARG_TYPE');
  const sign = 'invalid id: expected an integer below 2^63 (9223372036854775808), found 9223372036854775808';
  throwsCoded(() => codec.encode(TWO_63), ClockflakeError, 'INVALID_ID', sign);
  throwsCoded(() => codec.encodeText(TWO_63), ClockflakeError, 'INVALID_ID', sign);
  throwsCoded(() => codec.encode(-1n), ClockflakeError, 'INVALID_ID', 'invalid id: expected a non-negative decimal integer, found a minus sign');
  // 2^64 + 5 would be 5 after a 64-bit wrap: it must be refused, not encoded as 5.
  for (const big of [1n << 64n, (1n << 64n) + 5n, 1n << 100n]) {
    throwsCoded(() => codec.encode(big), ClockflakeError, 'INVALID_ID', 'invalid id: expected an integer below 2^63, found one of more than 64 bits');
    throwsCoded(() => codec.encodeText(big), ClockflakeError, 'INVALID_ID');
  }
  for (const bad of [TWO_63, (1n << 64n) - 1n, 1n << 64n, (1n << 64n) + 5n, -1n, -TWO_63]) {
    throwsCoded(() => codec.decode(bad), ClockflakeError, 'INVALID_PUBLIC_ID', 'invalid public id: expected a value below 2^63');
  }
  assert.equal(codec.decode(codec.encode(5n)), 5n);
});

test('keys: a 16-byte Uint8Array (a Buffer too); another type is a TypeError, another length a RangeError', () => {
  assert.equal(new PublicIds(1, Buffer.from(KEY1)).encode(7n), new PublicIds(1, KEY1).encode(7n));
  const expected = 'invalid argument type: key: expected a Uint8Array or Buffer of 16 bytes, found';
  const wrong = [
    ['clockflake-key-1', TypeError, 'INVALID_ARG_TYPE', `${expected} the string "clockflake-key-1"`],
    [Array.from(KEY1), TypeError, 'INVALID_ARG_TYPE', `${expected} an array`],
    [KEY1.buffer, TypeError, 'INVALID_ARG_TYPE', `${expected} an object`],
    [new Uint8Array(15), RangeError, 'INVALID_ARG_VALUE', 'key: expected 16 bytes, found 15 bytes'],
    [new Uint8Array(32), RangeError, 'INVALID_ARG_VALUE', 'key: expected 16 bytes, found 32 bytes'],
    [new Uint16Array(16), TypeError, 'INVALID_ARG_TYPE', `${expected} an object`],
    [undefined, TypeError, 'INVALID_ARG_TYPE', `${expected} undefined`],
    [5, TypeError, 'INVALID_ARG_TYPE', `${expected} the number 5`],
  ];
  for (const [key, Kind, code, message] of wrong) {
    throwsCoded(() => new PublicIds(1, key), Kind, code, message);
    throwsCoded(() => new PublicIds(1, KEY1).withOldKey(2, key), Kind, code, message);
  }
});

test('key versions: 0..=31, each once; others refused with INVALID_KEY_VERSION', () => {
  assert.equal(new PublicIds(0, KEY1).encodeText(1n)[0], '0');
  assert.equal(new PublicIds(31, KEY1).encodeText(1n)[0], 'Z');
  assert.equal(new PublicIds(31, KEY1).currentVersion, 31);
  const message = (v) => `invalid key version: expected 0..=31 and not already in the key ring, found ${v}`;
  throwsCoded(() => new PublicIds(32, KEY1), ClockflakeError, 'INVALID_KEY_VERSION', message(32));
  throwsCoded(() => new PublicIds(255, KEY1), ClockflakeError, 'INVALID_KEY_VERSION', message(255));
  for (const v of [256, -1, 1.5, NaN, Infinity, 2 ** 53]) throwsCoded(() => new PublicIds(v, KEY1), RangeError, 'INVALID_KEY_VERSION', message(v));
  for (const v of ['1', 1n, null, undefined]) throwsCoded(() => new PublicIds(v, KEY1), TypeError, 'INVALID_ARG_TYPE');
  const codec = new PublicIds(2, KEY2);
  throwsCoded(() => codec.withOldKey(2, KEY1), ClockflakeError, 'INVALID_KEY_VERSION', message(2));
  throwsCoded(() => codec.withOldKey(1, KEY1).withOldKey(1, KEY2), ClockflakeError, 'INVALID_KEY_VERSION', message(1));
  throwsCoded(() => codec.withOldKey(40, KEY1), ClockflakeError, 'INVALID_KEY_VERSION', message(40));
  throwsCoded(() => codec.withOldKey('1', KEY1), TypeError, 'INVALID_ARG_TYPE');
});

test('rotation: withOldKey returns a new codec that reads old texts; the receiver is unchanged', () => {
  const old = new PublicIds(1, KEY1);
  const oldTexts = [...ids(50, 5n)].map((id) => [id, old.encodeText(id)]);
  const current = new PublicIds(2, KEY2);
  const rotated = current.withOldKey(1, KEY1);
  assert.notEqual(rotated, current);
  assert.equal(rotated.currentVersion, 2);
  for (const [id, text] of oldTexts) {
    assert.equal(rotated.decodeText(text), id);
    throwsCoded(() => current.decodeText(text), ClockflakeError, 'UNKNOWN_KEY_VERSION');
    // New texts and numbers use the current key only.
    assert.equal(rotated.encodeText(id), current.encodeText(id));
    assert.equal(rotated.encode(id), current.encode(id));
    assert.notEqual(rotated.encode(id), old.encode(id));
  }
});

test('the key stays in wasm: not readable from the object, and later changes to the array do not matter', () => {
  const key = Uint8Array.from(KEY1);
  const codec = new PublicIds(1, key);
  const before = codec.encodeText(123n);
  key.fill(0);
  assert.equal(codec.encodeText(123n), before);
  assert.deepEqual(Object.keys(codec), []);
  assert.equal(JSON.stringify(codec), '{}');
  const shown = inspect(codec, { showHidden: true, depth: 5 });
  assert.doesNotMatch(shown, /clockflake-key|99, 108, 111/);
  // A different key gives a different permutation.
  assert.notEqual(new PublicIds(1, KEY2).encodeText(123n), before);
});

test('many codecs keep working side by side', () => {
  const codecs = [];
  for (let i = 0; i < 3000; i++) {
    const key = new Uint8Array(16);
    key[0] = i & 0xff;
    key[1] = i >> 8;
    codecs.push(new PublicIds(i % 32, key));
  }
  const texts = codecs.map((codec) => codec.encodeText(1n));
  assert.equal(new Set(texts).size, 3000);
  codecs.forEach((codec, i) => {
    assert.equal(codec.decodeText(texts[i]), 1n);
  });
});
