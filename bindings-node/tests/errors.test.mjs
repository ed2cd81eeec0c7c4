// One error shape, whichever engine runs a call. Every core refusal reachable from JavaScript is
// provoked with the same input through the package's API (the wasm engine, whose JS rebuilds
// core's message from numbers) and through core itself (examples/core_errors.rs, which prints
// core's own code and message for each case below by name: `make test-node` runs it into
// pkg/core-errors.tsv). Code and message must agree, so the JS mapping is checked against core
// itself, never against a retyped copy. bindings-wasm's test compares the same JS mapping with
// core's sample of every error kind (examples/messages.rs -> core-messages.jsonl).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as api from '../lib/index.mjs';

const { ClockflakeError, Generator, PublicIds, decode, encode, idRange, describeLayout } = api;
const T = 1_767_225_600_000; // 2026-01-01
const KEY = new Uint8Array(16).fill(7);

/** [name, the same input through the API]; examples/core_errors.rs runs each name's input through core. */
const CASES = [
  ['INVALID_ID empty', () => decode('')],
  ['INVALID_ID minus', () => decode('-5')],
  ['INVALID_ID letter', () => decode('12a')],
  ['INVALID_ID emoji', () => decode('1😀')],
  ['INVALID_ID too large', () => decode('99999999999999999999')],
  ['INVALID_ID sign bit', () => decode(1n << 63n)],
  ['INVALID_ID sign bit text', () => decode(String(1n << 63n))],
  ['INVALID_ID above layout', () => decode(1n << 53n, 'js53')],
  ['INVALID_LAYOUT too wide', () => describeLayout({ fields: [{ name: 'timestamp', bits: 60 }, { name: 'sequence', bits: 10 }], epochMs: 0 })],
  ['INVALID_LAYOUT unknown field', () => describeLayout({ fields: [{ name: 'timestamp', bits: 41 }, { name: 'shard', bits: 3 }], epochMs: 0 })],
  ['INVALID_LAYOUT no sequence', () => describeLayout({ fields: [{ name: 'timestamp', bits: 41 }], epochMs: 0 })],
  ['INVALID_LAYOUT zero unit', () => describeLayout({ fields: [{ name: 'timestamp', bits: 41 }, { name: 'sequence', bits: 12 }], unitMs: 0, epochMs: 0 })],
  ['UNKNOWN_LAYOUT', () => decode(1n, 'snowflake')],
  ['UNKNOWN_POLICY', () => new Generator({ workerId: 1, onRollback: 'retry' })],
  ['WORKER_ID_OUT_OF_RANGE', () => new Generator({ workerId: 128 })],
  ['WORKER_ID_OUT_OF_RANGE encode', () => encode({ timestampMs: T, workerId: 1024 }, 'twitter')],
  ['TIMESTAMP_OUT_OF_RANGE', () => encode({ timestampMs: 5, workerId: 1 })],
  ['CLOCK_SEQ_OUT_OF_RANGE', () => encode({ timestampMs: T, workerId: 1, clockSeq: 8 })],
  ['SEQUENCE_OUT_OF_RANGE', () => encode({ timestampMs: T, workerId: 1, sequence: 4096 })],
  ['INVALID_RANGE', () => idRange(T + 1, T)],
  ['EPOCH_IN_FUTURE', () => new Generator({ workerId: 1 }).nextIdAt(1000)],
  ['TIMESTAMP_EXHAUSTED', () => new Generator({ workerId: 1, layout: 'baidu' }).nextIdAt(T)],
  ['CLOCK_MOVED_BACKWARDS', () => {
    const gen = new Generator({ workerId: 1, onRollback: 'fail' });
    gen.nextIdAt(T);
    gen.nextIdAt(T - 10);
  }],
  ['INVALID_STATE layout', () => Generator.resume({ ...new Generator({ workerId: 1 }).state(), layoutFingerprint: '3' })],
  ['INVALID_PUBLIC_ID length', () => new PublicIds(1, KEY).decodeText('ABC')],
  ['INVALID_PUBLIC_ID character', () => new PublicIds(1, KEY).decodeText('1ABCDEFGHJKMNPQ!')],
  ['INVALID_PUBLIC_ID range', () => new PublicIds(1, KEY).decode(1n << 63n)],
  ['UNKNOWN_KEY_VERSION', () => new PublicIds(1, KEY).decodeText(new PublicIds(5, KEY).encodeText(1n))],
  ['INVALID_KEY_VERSION duplicate', () => new PublicIds(1, KEY).withOldKey(1, KEY)],
];

/** Core's own refusal of each case: name -> { code, message }. */
const CORE = (() => {
  const path = fileURLToPath(new URL('../pkg/core-errors.tsv', import.meta.url));
  assert.ok(existsSync(path), `${path} is missing: make test-node writes it (cargo run -p clockflake-node --example core_errors)`);
  const lines = readFileSync(path, 'utf8').split('\n').filter((line) => line !== '');
  return new Map(
    lines.map((line) => {
      const [name, code, message, ...rest] = line.split('\t');
      assert.equal(rest.length, 0, line);
      return [name, { code, message }];
    }),
  );
})();

function caught(fn) {
  try {
    fn();
  } catch (error) {
    return error;
  }
  assert.fail('expected a refusal');
}

test('core answered exactly the cases of this file, each with the refusal its name says', () => {
  assert.deepEqual([...CORE.keys()], CASES.map(([name]) => name));
  for (const [name, { code }] of CORE) assert.equal(code, name.split(' ')[0], name);
});

for (const [name, viaApi] of CASES) {
  test(`same code and message as core: ${name}`, () => {
    const expected = CORE.get(name);
    assert.ok(expected !== undefined, `${name}: not in core's answers`);
    const got = caught(viaApi);
    assert.ok(got instanceof ClockflakeError, `${name}: instanceof ClockflakeError`);
    assert.ok(got instanceof Error);
    assert.equal(got.code, expected.code, `${name}: ${got.message}`);
    assert.equal(got.message, expected.message, name);
    assert.ok('retryAtMs' in got);
  });
}

test('argument errors are TypeError / RangeError and ClockflakeError at once; plain errors are not ClockflakeErrors', () => {
  const type = caught(() => decode(1));
  assert.ok(type instanceof TypeError && type instanceof ClockflakeError);
  assert.equal(type.code, 'INVALID_ARG_TYPE');
  const range = caught(() => new Generator({ workerId: -1 }));
  assert.ok(range instanceof RangeError && range instanceof ClockflakeError);
  const option = caught(() => new Generator({ workerId: 1, workerID: 2 }));
  assert.ok(option instanceof TypeError && option instanceof ClockflakeError && option.code === 'UNKNOWN_OPTION');
  assert.ok(!(new Error('x') instanceof ClockflakeError));
  assert.ok(!(Object.assign(new TypeError('x'), { code: 'INVALID_ARG_TYPE' }) instanceof ClockflakeError));
  assert.ok(!(null instanceof ClockflakeError) && !({ code: 'X' } instanceof ClockflakeError));
  const made = new ClockflakeError('SOME_CODE', 'a message');
  assert.ok(made instanceof ClockflakeError && made instanceof Error);
  assert.deepEqual([made.code, made.message, made.retryAtMs, made.name], ['SOME_CODE', 'a message', null, 'ClockflakeError']);
});

test('errors of the native addon (leases) answer instanceof ClockflakeError too, with their code', () => {
  const error = caught(() => Generator.openSync('nope://x'));
  assert.ok(error instanceof ClockflakeError);
  assert.equal(error.code, 'INVALID_URI');
  const dir = mkdtempSync(join(tmpdir(), 'clockflake-errors-'));
  const closed = Generator.openSync(`file://${dir}?app=errors`);
  closed.closeSync();
  rmSync(dir, { recursive: true, force: true });
  const after = caught(() => closed.nextId());
  assert.ok(after instanceof ClockflakeError && after.code === 'GENERATOR_CLOSED');
});

test('a closed fixed generator: GENERATOR_CLOSED, the same as a leased one', () => {
  const gen = new Generator({ workerId: 1 });
  gen.closeSync();
  gen.closeSync();
  for (const call of [() => gen.nextId(), () => gen.nextIdAt(T), () => gen.nextIds(2), () => gen.state()]) {
    const error = caught(call);
    assert.ok(error instanceof ClockflakeError);
    assert.equal(error.code, 'GENERATOR_CLOSED', error.message);
  }
  assert.equal(gen.isActive, false);
});
