// API shape and error shape of the Node package.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import * as api from '../lib/index.mjs';
import { throwsCoded } from '../../tests/harness/node-errors.mjs';

const { Generator, decode, encode, idRange, layouts, describeLayout } = api;
const T = 1_795_000_000_000; // 2026-11-19T...Z, inside every generating layout's lifetime


test('exports: the same objects from require and import', () => {
  const cjs = createRequire(import.meta.url)('../lib/index.cjs');
  for (const name of ['Generator', 'decode', 'encode', 'idRange', 'layouts', 'describeLayout']) {
    // biome-ignore lint/performance/noDynamicNamespaceImportAccess: the test compares every export by name
    assert.equal(cjs[name], api[name], name);
  }
});

test('layouts: every preset, frozen, with bigint maxId and fingerprint', () => {
  assert.deepEqual(Object.keys(layouts), ['clockseq', 'twitter', 'discord', 'sonyflake', 'baidu', 'js53']);
  const l = layouts.clockseq;
  assert.ok(Object.isFrozen(layouts) && Object.isFrozen(l) && Object.isFrozen(l.fields));
  assert.equal(l.name, 'clockseq');
  assert.deepEqual(l.fields.map((f) => [f.name, f.bits]), [['timestamp', 41], ['clock_seq', 3], ['worker', 7], ['sequence', 12]]);
  assert.equal(l.unitMs, 1);
  assert.equal(l.epochMs, 1_704_067_200_000);
  assert.equal(l.clockSeqs, 8);
  assert.equal(l.maxWorkerId, 127);
  assert.equal(l.maxId, 2n ** 63n - 1n);
  assert.equal(typeof l.fingerprint, 'bigint');
  assert.equal(layouts.js53.maxId, 2n ** 52n - 1n);
  assert.equal(describeLayout('twitter'), layouts.twitter);
  const custom = describeLayout({ fields: [{ name: 'timestamp', bits: 40 }, { name: 'sequence', bits: 10 }], unitMs: 2, epochMs: 1_704_067_200_000 });
  assert.equal(custom.name, null);
  assert.equal(custom.clockSeqs, 1);
  assert.equal(custom.maxWorkerId, 0);
});

test('nextId: a positive bigint that decodes to now, this worker, clock sequence 0', () => {
  const gen = new Generator({ workerId: 7 });
  const before = Date.now();
  const id = gen.nextId();
  const after = Date.now();
  assert.equal(typeof id, 'bigint');
  assert.ok(id > 0n && id < 2n ** 63n);
  const parts = decode(id);
  assert.ok(parts.timestampMs >= before && parts.timestampMs <= after);
  assert.equal(parts.workerId, 7);
  assert.equal(parts.clockSeq, 0);
  assert.ok(parts.date instanceof Date);
  assert.equal(parts.date.getTime(), parts.timestampMs);
  assert.equal(gen.workerId, 7);
  assert.equal(gen.layout, layouts.clockseq);
  assert.deepEqual(gen.options, { onRollback: 'clock-sequence', maxWaitMs: 5, maxDriftMs: 1000 });
});

test('decode: bigint and decimal string agree; encode inverts it', () => {
  const id = encode({ timestampMs: T, clockSeq: 5, workerId: 100, sequence: 4095 });
  assert.equal(typeof id, 'bigint');
  const parts = decode(id);
  assert.deepEqual({ ...parts }, { timestampMs: T, clockSeq: 5, workerId: 100, sequence: 4095 });
  assert.deepEqual({ ...decode(String(id)) }, { ...parts });
  assert.equal(encode(parts), id, 'a decoded object encodes back');
  assert.equal(encode({ timestampMs: T, workerId: 3 }), encode({ timestampMs: T, clockSeq: 0, workerId: 3, sequence: 0 }));
  assert.deepEqual({ ...decode(0n) }, { timestampMs: layouts.clockseq.epochMs, clockSeq: 0, workerId: 0, sequence: 0 });
  assert.deepEqual({ ...decode(2n ** 63n - 1n) }, { timestampMs: 3_903_090_455_551, clockSeq: 7, workerId: 127, sequence: 4095 });
});

test('decode: every layout, every field at its extremes, matches the core (encode)', () => {
  for (const [name, info] of Object.entries(layouts)) {
    const maxOf = (field) => 2 ** (info.fields.find((f) => f.name === field)?.bits ?? 0) - 1;
    const lastMs = info.epochMs + (2 ** info.fields[0].bits - 1) * info.unitMs;
    for (const timestampMs of [info.epochMs, info.epochMs + info.unitMs * 12345, lastMs]) {
      for (const k of [0, 1]) {
        const parts = { timestampMs, clockSeq: k * maxOf('clock_seq'), workerId: k * maxOf('worker'), sequence: (1 - k) * maxOf('sequence') };
        const id = encode(parts, name);
        assert.deepEqual({ ...decode(id, name) }, parts, `${name} ${id}`);
        assert.deepEqual({ ...decode(id, info) }, parts, `${name} by description`);
      }
    }
  }
});

test('idRange: [low, high] bigints of the window', () => {
  const [low, high] = idRange(T, T + 999);
  assert.equal(typeof low, 'bigint');
  assert.equal(decode(low).timestampMs, T);
  assert.equal(decode(high).timestampMs, T + 999);
  assert.equal(decode(high).sequence, 4095);
  throwsCoded(() => idRange(T + 1, T), 'INVALID_RANGE');
});

test('nextIdString, nextIds, nextIdAt', () => {
  const gen = new Generator({ workerId: 1 });
  const s = gen.nextIdString();
  assert.match(s, /^[1-9][0-9]*$/);
  const batch = gen.nextIds(5000);
  assert.ok(batch instanceof BigUint64Array);
  assert.equal(batch.length, 5000);
  assert.ok(batch[0] > BigInt(s));
  for (let i = 1; i < batch.length; i++) assert.ok(batch[i] > batch[i - 1]);
  assert.equal(gen.nextIds(0).length, 0);
  const at = new Generator({ workerId: 2 });
  assert.equal(at.nextIdAt(T), encode({ timestampMs: T, workerId: 2 }));
  assert.equal(at.nextIdAt(T), encode({ timestampMs: T, workerId: 2, sequence: 1 }));
});

test('state: JSON-safe, resumes without repeating', () => {
  const gen = new Generator({ workerId: 9 });
  const last = gen.nextIdAt(T);
  const state = gen.state();
  assert.deepEqual(Object.keys(state).sort(), ['clockSeq', 'highWaterMs', 'layoutFingerprint', 'workerId']);
  assert.equal(state.layoutFingerprint, String(layouts.clockseq.fingerprint));
  assert.equal(state.workerId, 9);
  assert.equal(state.clockSeq, 0);
  assert.equal(state.highWaterMs.length, 8);
  assert.deepEqual(state.highWaterMs, [T, null, null, null, null, null, null, null]);
  const copy = JSON.parse(JSON.stringify(state));
  const resumed = Generator.resume(copy);
  // The saved tick counts as full: the same ms waits for the next one, an earlier one switches.
  assert.equal(throwsCoded(() => resumed.nextIdAt(T), 'SEQUENCE_EXHAUSTED').retryAtMs, T + 1);
  const next = resumed.nextIdAt(T - 3_600_000);
  assert.notEqual(next, last);
  assert.equal(decode(next).clockSeq, 1);
  assert.ok(Generator.resume(copy).nextIdAt(T + 1) > last);
  assert.equal(Generator.resume(copy, { layout: 'clockseq', onRollback: 'fail' }).options.onRollback, 'fail');
  throwsCoded(() => Generator.resume(copy, { layout: 'twitter' }), 'INVALID_STATE');
  // The record's form is core's rule (State::from_record), with core's messages.
  assert.equal(
    throwsCoded(() => Generator.resume({ ...copy, highWaterMs: [T] }), 'INVALID_STATE').message,
    'invalid state: expected 8 high-water marks (one per clock sequence), found 1',
  );
  assert.equal(
    throwsCoded(() => Generator.resume({ ...copy, layoutFingerprint: '18446744073709551616' }), 'INVALID_STATE').message,
    'invalid state: the layout fingerprint is not a decimal number below 2^64',
  );
  throwsCoded(() => Generator.resume({ ...copy, extra: 1 }), 'INVALID_STATE');
  throwsCoded(() => Generator.resume({ ...copy, layoutFingerprint: 'x' }), 'INVALID_STATE');
  throwsCoded(() => Generator.resume({ ...copy, highWaterMs: copy.highWaterMs.map(() => -1) }), 'INVALID_STATE');
  throwsCoded(() => Generator.resume(null), 'INVALID_STATE');
  throwsCoded(() => Generator.resume(copy, { workerId: 3 }), 'UNKNOWN_OPTION', TypeError);
});

test('errors: real Errors with the core code, message, and retryAtMs', () => {
  const e = throwsCoded(() => new Generator({ workerId: 128 }), 'WORKER_ID_OUT_OF_RANGE');
  assert.match(e.message, /^worker id out of range: expected 0..=127 for this layout, found 128/);
  assert.equal(e.retryAtMs, null);
  assert.ok(e.stack.includes('Error'));
  throwsCoded(() => decode('12a'), 'INVALID_ID');
  throwsCoded(() => decode(2n ** 63n), 'INVALID_ID');
  throwsCoded(() => decode(-1n), 'INVALID_ID');
  throwsCoded(() => decode(2n ** 64n), 'INVALID_ID');
  throwsCoded(() => decode(2n ** 52n, 'js53'), 'INVALID_ID');
  throwsCoded(() => describeLayout('snowflake'), 'UNKNOWN_LAYOUT');
  throwsCoded(() => new Generator({ workerId: 1, onRollback: 'panic' }), 'UNKNOWN_POLICY');
  const full = new Generator({ workerId: 0, layout: { fields: [{ name: 'timestamp', bits: 41 }, { name: 'sequence', bits: 1 }], epochMs: 0 } });
  full.nextIdAt(T);
  full.nextIdAt(T);
  const exhausted = throwsCoded(() => full.nextIdAt(T), 'SEQUENCE_EXHAUSTED');
  assert.equal(exhausted.retryAtMs, T + 1);
  const fail = new Generator({ workerId: 1, onRollback: 'fail' });
  fail.nextIdAt(T);
  const back = throwsCoded(() => fail.nextIdAt(T - 10), 'CLOCK_MOVED_BACKWARDS');
  assert.equal(back.retryAtMs, null);
  const wait = new Generator({ workerId: 1, onRollback: 'wait', maxWaitMs: 20 });
  wait.nextIdAt(T);
  assert.equal(throwsCoded(() => wait.nextIdAt(T - 10), 'CLOCK_MOVED_BACKWARDS').retryAtMs, T + 1);
  throwsCoded(() => new Generator({ workerId: 1, layout: 'baidu' }).nextIdAt(T), 'TIMESTAMP_EXHAUSTED');
  throwsCoded(() => new Generator({ workerId: 1 }).nextIdAt(1_000), 'EPOCH_IN_FUTURE');
});

test('retryAtMs never leaks from one error to the next', () => {
  const gen = new Generator({ workerId: 0, layout: { fields: [{ name: 'timestamp', bits: 41 }, { name: 'sequence', bits: 0 }], epochMs: 0 } });
  gen.nextIdAt(T);
  assert.equal(throwsCoded(() => gen.nextIdAt(T), 'SEQUENCE_EXHAUSTED').retryAtMs, T + 1);
  assert.equal(throwsCoded(() => new Generator({ workerId: 1000 }), 'WORKER_ID_OUT_OF_RANGE').retryAtMs, null);
  gen.nextIdAt(T + 5);
  assert.equal(throwsCoded(() => gen.nextIdAt(T + 5), 'SEQUENCE_EXHAUSTED').retryAtMs, T + 6);
  assert.equal(throwsCoded(() => Generator.resume({ layoutFingerprint: '1', workerId: 0, clockSeq: 0, highWaterMs: [null, null, null, null, null, null, null, null] }), 'INVALID_STATE').retryAtMs, null);
});
