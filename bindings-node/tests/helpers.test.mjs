// The helpers of issue 24: layout advice (suggestLayout, isPlausible, guessLayout, core's
// suggest.rs through the wasm engine), bigint-safe JSON (jsonReplacer, stringify), the layout as
// an option (`decode(id, { layout })`), and what NATIVE_UNAVAILABLE tells a tarball user.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as decodeOnly from '../lib/decode.mjs';
import { Generator, decode, encode, guessLayout, idRange, isPlausible, jsonReplacer, layouts, stringify, suggestLayout } from '../lib/index.mjs';
import { throwsCoded } from '../../tests/harness/node-errors.mjs';

const TWITTER_ID = 2125537250721665024n; // made 2026-11-25T10:29:05.801Z under Twitter's layout
const A_DAY_LATER = 1_795_700_000_000;

test('suggestLayout: 300 processes, 10,000 ids/s each, 30 years', () => {
  const layout = suggestLayout(300, 10_000, 30);
  assert.deepEqual(layout.fields.map((f) => [f.name, f.bits]), [['timestamp', 41], ['clock_seq', 3], ['worker', 9], ['sequence', 10]]);
  assert.equal(layout.maxWorkerId, 511);
  assert.equal(layout.name, null);
  const gen = new Generator({ workerId: 299, layout });
  assert.equal(decode(gen.nextId(), layout).workerId, 299);
  gen.closeSync();
  assert.equal(suggestLayout(128, 4_096_000, 60), layouts.clockseq);
});

test('suggestLayout: what cannot fit is INVALID_LAYOUT; bad numbers are RangeErrors', () => {
  throwsCoded(() => suggestLayout(2 ** 30, 2 ** 40, 1000), 'INVALID_LAYOUT');
  throwsCoded(() => suggestLayout(-1, 1, 1), 'INVALID_ARG_VALUE', RangeError);
  throwsCoded(() => suggestLayout(1.5, 1, 1), 'INVALID_ARG_VALUE', RangeError);
  throwsCoded(() => suggestLayout('300', 1, 1), 'INVALID_ARG_TYPE', TypeError);
});

test('isPlausible: a Twitter id is plausible as twitter, not as the default (2040)', () => {
  assert.equal(isPlausible(TWITTER_ID, { layout: 'twitter', nowMs: A_DAY_LATER }), true);
  assert.equal(isPlausible(TWITTER_ID, { nowMs: A_DAY_LATER }), false);
  assert.equal(isPlausible(String(TWITTER_ID), { layout: 'twitter', nowMs: A_DAY_LATER }), true);
  assert.equal(isPlausible(TWITTER_ID, { layout: 'js53', nowMs: A_DAY_LATER }), false);
  assert.equal(isPlausible(TWITTER_ID, layouts.twitter), true); // now, by default
  assert.equal(isPlausible(TWITTER_ID, 'twitter'), true);
  const ahead = encode({ timestampMs: A_DAY_LATER + 10_000, workerId: 1 });
  assert.equal(isPlausible(ahead, { nowMs: A_DAY_LATER }), true);
  assert.equal(isPlausible(ahead, { nowMs: A_DAY_LATER, marginMs: 1_000 }), false);
  const gen = new Generator({ workerId: 1 });
  assert.equal(isPlausible(gen.nextId()), true);
  gen.closeSync();
});

test('isPlausible and guessLayout refuse what is no id, and unknown options', () => {
  throwsCoded(() => isPlausible(-1n), 'INVALID_ID');
  throwsCoded(() => isPlausible('12x'), 'INVALID_ID');
  throwsCoded(() => isPlausible(1), 'INVALID_ARG_TYPE', TypeError);
  throwsCoded(() => isPlausible(1n, { nowMS: 1 }), 'UNKNOWN_OPTION', TypeError);
  throwsCoded(() => guessLayout(1n, { layout: 'twitter' }), 'UNKNOWN_OPTION', TypeError);
});

test('guessLayout: names the preset with the latest plausible time', () => {
  const guess = guessLayout(TWITTER_ID, { nowMs: A_DAY_LATER });
  assert.equal(guess.name, 'twitter');
  assert.deepEqual(guess.parts, decode(TWITTER_ID, 'twitter'));
  assert.equal(guess.parts.timestampMs, 1_795_602_545_801);
  assert.equal(guessLayout(TWITTER_ID, { nowMs: 0, marginMs: 0 }), null);
  const gen = new Generator({ workerId: 3 });
  assert.equal(guessLayout(gen.nextId()).name, 'clockseq');
  gen.closeSync();
});

test("isPlausible and guessLayout (core's, on the wasm engine) follow core's rule: it decodes and its time is at most now + margin; the preset with the latest such time", () => {
  const ids = [0n, 1n, 2125537250721665024n, 1n << 52n, (1n << 53n) - 1n, 1n << 53n, (1n << 62n) + 12345n, (1n << 63n) - 1n, 1n << 63n, (1n << 64n) - 1n];
  for (const preset of Object.values(layouts)) ids.push(encode({ timestampMs: preset.epochMs + 1000 * preset.unitMs, workerId: 1 }, preset.name));
  let compared = 0;
  for (const id of ids) {
    for (const nowMs of [0, 1_500_000_000_000, 1_795_700_000_000, 3_000_000_000_000]) {
      for (const marginMs of [0, 86_400_000, 2 ** 53 - 1]) {
        let best = null;
        for (const name of Object.keys(layouts)) {
          const parts = id <= layouts[name].maxId ? decode(id, name) : null;
          const expected = parts !== null && parts.timestampMs <= nowMs + marginMs;
          assert.equal(isPlausible(id, { layout: name, nowMs, marginMs }), expected, `${id} ${name} ${nowMs} ${marginMs}`);
          if (expected && (best === null || parts.timestampMs > best.parts.timestampMs)) best = { name, parts };
          compared++;
        }
        assert.deepEqual(guessLayout(id, { nowMs, marginMs }), best, `${id} ${nowMs} ${marginMs}`);
      }
    }
  }
  assert.ok(compared > 1000);
});

test('decode, encode and idRange take the layout as an option too', () => {
  assert.deepEqual(decode(TWITTER_ID, { layout: 'twitter' }), decode(TWITTER_ID, 'twitter'));
  assert.deepEqual(decode(TWITTER_ID, { layout: layouts.twitter }), decode(TWITTER_ID, 'twitter'));
  assert.deepEqual({ ...decodeOnly.decode(TWITTER_ID, { layout: 'twitter' }) }, { ...decode(TWITTER_ID, 'twitter') });
  const parts = { timestampMs: A_DAY_LATER, workerId: 5 };
  assert.equal(encode(parts, { layout: 'twitter' }), encode(parts, 'twitter'));
  assert.deepEqual(idRange(A_DAY_LATER, A_DAY_LATER + 1, { layout: 'discord' }), idRange(A_DAY_LATER, A_DAY_LATER + 1, 'discord'));
  throwsCoded(() => decode(1n, { layout: 'twitter', lay: 1 }), 'UNKNOWN_OPTION', TypeError);
  throwsCoded(() => decodeOnly.decode(1n, { layout: 'twitter', lay: 1 }), 'UNKNOWN_OPTION', TypeError);
  throwsCoded(() => decode(1n, { layout: 'nope' }), 'UNKNOWN_LAYOUT');
});

test('jsonReplacer and stringify: bigints as decimal strings, everything else as JSON does', () => {
  const gen = new Generator({ workerId: 7 });
  const id = gen.nextId();
  gen.closeSync();
  const body = { id, ids: [id, 1n], n: 1, s: 'x', nested: { id }, nothing: null };
  const text = JSON.stringify(body, jsonReplacer);
  assert.equal(stringify(body), text);
  const back = JSON.parse(text);
  assert.equal(back.id, String(id));
  assert.equal(BigInt(back.id), id);
  assert.deepEqual(back.ids, [String(id), '1']);
  assert.equal(back.n, 1);
  assert.equal(stringify({ id: 1n }, 2), '{\n  "id": "1"\n}');
  assert.throws(() => JSON.stringify(body), TypeError); // what the helper is for
});

test('NATIVE_UNAVAILABLE tells a tarball user to install the addon, not that npm does it', () => {
  // The package's Node entry in a folder with no binding.js next to it: the addon cannot load.
  const here = fileURLToPath(new URL('.', import.meta.url));
  const dir = mkdtempSync(join(tmpdir(), 'clockflake-no-addon-'));
  try {
    mkdirSync(join(dir, 'lib'));
    copyFileSync(join(here, '../lib/index.cjs'), join(dir, 'lib/index.cjs'));
    copyFileSync(join(here, '../package.json'), join(dir, 'package.json'));
    const script = `const { Generator } = require(${JSON.stringify(join(dir, 'lib/index.cjs'))});
try { Generator.openSync('file:///tmp/x?app=a'); } catch (e) { process.stdout.write(e.code + '\\n' + e.message); }`;
    const [code, message] = execFileSync(process.execPath, ['-e', script], { encoding: 'utf8' }).split('\n');
    assert.equal(code, 'NATIVE_UNAVAILABLE');
    assert.doesNotMatch(message, /npm installs it/);
    const { version } = JSON.parse(readFileSync(join(here, '../package.json'), 'utf8'));
    assert.ok(message.includes(`npm install clockflake-linux-x64-gnu@${version}\``) || message.includes(`npm install clockflake-linux-x64-musl@${version}\``), message);
    assert.ok(message.includes(`beside clockflake@${version}`), message);
    assert.match(message, /tarball/);
    assert.match(message, /Everything else works without it/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
