// `clockflake/decode` (plain JavaScript, no wasm) decodes exactly as the full package does, with
// the same codes and messages (the full package's come from core).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import * as full from '../lib/index.mjs';
import * as only from '../lib/decode.mjs';

const outcome = (fn) => {
  try {
    return { parts: { ...fn() } };
  } catch (error) {
    return { code: error.code, message: error.message, brand: error instanceof full.ClockflakeError };
  }
};

test('decode-only: the same parts and the same refusals as the full package', () => {
  const gen = new full.Generator({ workerId: 77 });
  const ids = [0n, 1n, gen.nextId(), full.layouts.clockseq.maxId, full.layouts.js53.maxId, 1n << 53n, (1n << 63n) - 1n, 1n << 63n, (1n << 64n) - 1n, 1n << 64n, -1n];
  const texts = ['', '-1', '12a', '1😀', '+5', ' 5', '99999999999999999999', '99999999999999999999x', '18446744073709551615', '9223372036854775807', '0042'];
  let compared = 0;
  for (const layout of [undefined, 'twitter', 'js53', 'sonyflake', 'baidu', full.layouts.discord, 'nope']) {
    for (const id of [...ids, ...ids.map(String), ...texts]) {
      const a = outcome(() => full.decode(id, layout));
      const b = outcome(() => only.decode(id, layout));
      assert.deepEqual(b, a, `${String(id)} under ${JSON.stringify(layout?.name ?? layout)}`);
      compared++;
    }
  }
  assert.ok(compared > 150);
  assert.equal(outcome(() => only.decode(5)).code, 'INVALID_ARG_TYPE');
});

test('decode-only: the preset layouts are the core\'s, and require() gets the same module', () => {
  assert.deepEqual(only.layouts, full.layouts);
  assert.equal(createRequire(import.meta.url)('../lib/decode.cjs').layouts.twitter.epochMs, full.layouts.twitter.epochMs);
  assert.ok(only.ClockflakeError === undefined || new only.ClockflakeError('X', 'y') instanceof full.ClockflakeError);
});
