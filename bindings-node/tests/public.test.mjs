// PublicIds: round trips, key rotation, and a coded error for every bad input. The known pairs
// are in the shared vectors (tests/vectors/public, run by vectors.test.mjs).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import * as api from '../lib/index.mjs';
import { throwsCoded as throwsCodedWith } from '../../tests/harness/node-errors.mjs';

const { PublicIds, Generator } = api;
const KEY1 = new TextEncoder().encode('clockflake-key-1');
const KEY2 = Uint8Array.from({ length: 16 }, (_, i) => i);

const throwsCoded = (fn, code, ErrorClass = Error) => throwsCodedWith(fn, code, ErrorClass, { minMessageLength: 11 });

test('PublicIds: exported from require and import alike', () => {
  assert.equal(createRequire(import.meta.url)('../lib/index.cjs').PublicIds, PublicIds);
});

test('PublicIds: encode/decode and the text form round-trip generated ids', () => {
  const codec = new PublicIds(1, KEY1);
  assert.equal(codec.currentVersion, 1);
  const ids = new Generator({ workerId: 9 }).nextIds(20_000);
  const seen = new Set();
  for (const id of ids) {
    const pub = codec.encode(id);
    assert.equal(typeof pub, 'bigint');
    assert.ok(pub >= 0n && pub < 2n ** 63n);
    assert.notEqual(pub, id);
    seen.add(pub);
    assert.equal(codec.decode(pub), id);
    const text = codec.encodeText(id);
    assert.match(text, /^[0-9A-HJKMNP-TV-Z]{16}$/);
    assert.equal(text[0], '1', 'the key version leads');
    assert.equal(codec.decodeText(text), id);
    assert.equal(codec.decodeText(text.toLowerCase()), id);
  }
  assert.equal(seen.size, ids.length, 'distinct ids give distinct public ids');
  assert.equal(codec.decode(codec.encode(0n)), 0n);
  assert.equal(codec.decode(codec.encode(2n ** 63n - 1n)), 2n ** 63n - 1n);
});

test('PublicIds: a Buffer key is the same key', () => {
  const a = new PublicIds(1, KEY1);
  const b = new PublicIds(1, Buffer.from('clockflake-key-1'));
  assert.equal(a.encode(12345n), b.encode(12345n));
});

test('PublicIds: withOldKey returns a new codec that still reads texts of the old key', () => {
  const old = new PublicIds(1, KEY1);
  const text = old.encodeText(42n);
  const rotated = new PublicIds(2, KEY2).withOldKey(1, KEY1);
  assert.ok(rotated instanceof PublicIds);
  assert.equal(rotated.currentVersion, 2);
  assert.equal(rotated.decodeText(text), 42n);
  assert.equal(rotated.encodeText(42n)[0], '2');
  const fresh = new PublicIds(2, KEY2);
  const withOld = fresh.withOldKey(1, KEY1);
  assert.notEqual(withOld, fresh);
  throwsCoded(() => fresh.decodeText(text), 'UNKNOWN_KEY_VERSION');
  assert.equal(withOld.decodeText(text), 42n);
});

test('PublicIds: legacy keys (public ids made before FF1) keep their links', () => {
  // Made before FF1 with key version 1 (tests/vectors/public/codec.json).
  const text = '17T3G30P67GKXXA6';
  const id = 383_188_013_854_781_440n;
  const kept = PublicIds.legacy(1, KEY1);
  assert.ok(kept instanceof PublicIds);
  assert.equal(kept.currentVersion, 1);
  assert.equal(kept.decodeText(text), id);
  assert.equal(kept.encodeText(id), text);
  const moved = new PublicIds(2, KEY2).withLegacyKey(1, KEY1);
  assert.equal(moved.decodeText(text), id);
  assert.equal(moved.encodeText(id)[0], '2');
  // The text's construction bit: the same key bytes registered as FF1 still decode it.
  assert.equal(new PublicIds(1, KEY1).decodeText(text), id);
  assert.equal(kept.decodeText(new PublicIds(1, KEY1).encodeText(id)), id);
});

test('PublicIds: typos and unknown versions are errors, never a wrong id', () => {
  const codec = new PublicIds(1, KEY1);
  const text = codec.encodeText(383_188_013_854_781_440n);
  const alphabet = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
  for (let at = 1; at < 16; at++) {
    for (const c of alphabet) {
      if (c === text[at]) continue;
      const typo = text.slice(0, at) + c + text.slice(at + 1);
      throwsCoded(() => codec.decodeText(typo), 'INVALID_PUBLIC_ID');
    }
  }
  throwsCoded(() => codec.decodeText(`2${text.slice(1)}`), 'INVALID_PUBLIC_ID');
});

const codec = new PublicIds(1, KEY1);
const badInputs = [
  ['new PublicIds(32, key)', () => new PublicIds(32, KEY1), RangeError, 'INVALID_KEY_VERSION'],
  ['new PublicIds(256, key)', () => new PublicIds(256, KEY1), RangeError, 'INVALID_KEY_VERSION'],
  ['new PublicIds(-1, key)', () => new PublicIds(-1, KEY1), RangeError, 'INVALID_KEY_VERSION'],
  ['new PublicIds(1.5, key)', () => new PublicIds(1.5, KEY1), RangeError, 'INVALID_KEY_VERSION'],
  ['new PublicIds(NaN, key)', () => new PublicIds(NaN, KEY1), RangeError, 'INVALID_KEY_VERSION'],
  ['new PublicIds("1", key)', () => new PublicIds('1', KEY1), TypeError, 'INVALID_ARG_TYPE'],
  ['new PublicIds(1n, key)', () => new PublicIds(1n, KEY1), TypeError, 'INVALID_ARG_TYPE'],
  ['new PublicIds(1)', () => new PublicIds(1), TypeError, 'INVALID_ARG_TYPE'],
  ['new PublicIds(1, string key)', () => new PublicIds(1, 'clockflake-key-1'), TypeError, 'INVALID_ARG_TYPE'],
  ['new PublicIds(1, array key)', () => new PublicIds(1, [...KEY1]), TypeError, 'INVALID_ARG_TYPE'],
  ['new PublicIds(1, 15 bytes)', () => new PublicIds(1, KEY1.subarray(1)), RangeError, 'INVALID_ARG_VALUE'],
  ['new PublicIds(1, 17 bytes)', () => new PublicIds(1, new Uint8Array(17)), RangeError, 'INVALID_ARG_VALUE'],
  ['new PublicIds(1, Uint16Array)', () => new PublicIds(1, new Uint16Array(8)), TypeError, 'INVALID_ARG_TYPE'],
  ['withOldKey(current version)', () => codec.withOldKey(1, KEY2), Error, 'INVALID_KEY_VERSION'],
  ['withOldKey(40)', () => codec.withOldKey(40, KEY2), RangeError, 'INVALID_KEY_VERSION'],
  ['withOldKey(2, short key)', () => codec.withOldKey(2, new Uint8Array(3)), RangeError, 'INVALID_ARG_VALUE'],
  ['withLegacyKey(current version)', () => codec.withLegacyKey(1, KEY2), Error, 'INVALID_KEY_VERSION'],
  ['withLegacyKey(2, string key)', () => codec.withLegacyKey(2, 'k'), TypeError, 'INVALID_ARG_TYPE'],
  ['PublicIds.legacy(32, key)', () => PublicIds.legacy(32, KEY1), RangeError, 'INVALID_KEY_VERSION'],
  ['PublicIds.legacy(1, 15 bytes)', () => PublicIds.legacy(1, KEY1.subarray(1)), RangeError, 'INVALID_ARG_VALUE'],
  ['encode(number)', () => codec.encode(5), TypeError, 'INVALID_ARG_TYPE'],
  ['encode(string)', () => codec.encode('5'), TypeError, 'INVALID_ARG_TYPE'],
  ['encode(-1n)', () => codec.encode(-1n), Error, 'INVALID_ID'],
  ['encode(2^63)', () => codec.encode(2n ** 63n), Error, 'INVALID_ID'],
  ['encode(2^64)', () => codec.encode(2n ** 64n), Error, 'INVALID_ID'],
  ['encodeText(2^63)', () => codec.encodeText(2n ** 63n), Error, 'INVALID_ID'],
  ['encodeText(number)', () => codec.encodeText(1), TypeError, 'INVALID_ARG_TYPE'],
  ['decode(number)', () => codec.decode(5), TypeError, 'INVALID_ARG_TYPE'],
  ['decode(-1n)', () => codec.decode(-1n), Error, 'INVALID_PUBLIC_ID'],
  ['decode(2^63)', () => codec.decode(2n ** 63n), Error, 'INVALID_PUBLIC_ID'],
  ['decode(2^64 + 1)', () => codec.decode(2n ** 64n + 1n), Error, 'INVALID_PUBLIC_ID'],
  ['decodeText(bigint)', () => codec.decodeText(5n), TypeError, 'INVALID_ARG_TYPE'],
  ['decodeText(null)', () => codec.decodeText(null), TypeError, 'INVALID_ARG_TYPE'],
  ['decodeText("")', () => codec.decodeText(''), Error, 'INVALID_PUBLIC_ID'],
  ['decodeText(non-ASCII)', () => codec.decodeText('1ÄÄÄÄÄÄÄÄÄÄÄÄÄÄÄ'), Error, 'INVALID_PUBLIC_ID'],
  ['decodeText(emoji)', () => codec.decodeText('😀😀😀😀😀😀😀😀'), Error, 'INVALID_PUBLIC_ID'],
];
for (const [name, fn, ErrorClass, code] of badInputs) {
  test(`PublicIds bad input: ${name} -> ${code}`, () => throwsCoded(fn, code, ErrorClass));
}
