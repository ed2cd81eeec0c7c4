// The wasm engine's behaviour through the clockflake package (bindings-node/lib, which inlines
// it), in Node: argument types, error shape, 64-bit conversions, uniqueness under a real and an
// injected clock, state round trips, and core's messages rebuilt in JS (the package's bindings-node/js/messages.js).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import * as runtime from '../../../bindings-node/lib/index.mjs';
import { formatMessage } from '../../../bindings-node/js/messages.js';
import { throwsCoded } from './throws.mjs';

const { ClockflakeError, Generator, decode, describeLayout, encode, idRange, layouts } = runtime;

const T = 1_795_000_000_000; // 2026-11-18T...Z, inside every preset but baidu
const PRESETS = ['clockseq', 'twitter', 'discord', 'sonyflake', 'baidu', 'js53'];

test('a number where an id belongs is a TypeError INVALID_ARG_TYPE', () => {
  for (const bad of [5, 2 ** 60, 1.5, NaN, null, undefined, {}, [], true]) {
    throwsCoded(() => decode(bad), TypeError, 'INVALID_ARG_TYPE');
  }
});

test('bigint ids are range-checked, never wrapped', () => {
  const negative = throwsCoded(() => decode(-1n), ClockflakeError, 'INVALID_ID');
  assert.match(negative.message, /minus sign/);
  throwsCoded(() => decode(1n << 64n), ClockflakeError, 'INVALID_ID');
  // 2^64 + 5 would wrap to 5 (a valid id) under ToBigInt64: it must not decode.
  throwsCoded(() => decode((1n << 64n) + 5n), ClockflakeError, 'INVALID_ID');
  const sign = throwsCoded(() => decode(1n << 63n), ClockflakeError, 'INVALID_ID');
  assert.match(sign.message, /found 9223372036854775808$/);
  throwsCoded(() => decode((1n << 64n) - 1n), ClockflakeError, 'INVALID_ID');
  assert.equal(decode((1n << 63n) - 1n).sequence, 4095);
  assert.equal(decode(0n).timestampMs, layouts.clockseq.epochMs);
});

test('decimal strings are parsed strictly by core', () => {
  for (const bad of ['', ' 1', '1 ', '+1', '0x10', '1e3', '1.0', '١', '99999999999999999999', '-0']) {
    throwsCoded(() => decode(bad), ClockflakeError, 'INVALID_ID');
  }
  assert.deepEqual(decode('0007'), decode(7n));
  assert.equal(decode('9223372036854775807').workerId, 127);
});

test('errors are ClockflakeError objects with code, message and retryAtMs', () => {
  const error = throwsCoded(() => decode('12a'), ClockflakeError, 'INVALID_ID');
  assert.equal(error.message, "invalid id: expected a decimal digit, found 'a' at byte 2");
  assert.equal(error.name, 'ClockflakeError');
  assert.equal(error.retryAtMs, null);
  assert.ok(error.stack.includes('ClockflakeError'));
});

test('decode gives every field, and a Date', () => {
  const id = encode({ timestampMs: 1_735_689_600_000, clockSeq: 5, workerId: 100, sequence: 4095 });
  assert.equal(id, (31_622_400_000n << 22n) | (5n << 19n) | (100n << 12n) | 4095n);
  const parts = decode(id);
  assert.deepEqual(
    { timestampMs: parts.timestampMs, clockSeq: parts.clockSeq, workerId: parts.workerId, sequence: parts.sequence },
    { timestampMs: 1_735_689_600_000, clockSeq: 5, workerId: 100, sequence: 4095 },
  );
  assert.ok(parts.date instanceof Date);
  assert.equal(parts.date.toISOString(), '2025-01-01T00:00:00.000Z');
  assert.deepEqual(Object.keys(JSON.parse(JSON.stringify(parts))), ['timestampMs', 'clockSeq', 'workerId', 'sequence']);
});

test('encode and decode are inverse for random parts of every preset', () => {
  let seed = 12345;
  const random = (n) => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return seed % (n + 1);
  };
  for (const name of PRESETS) {
    const info = layouts[name];
    const life = Number(2n ** BigInt(info.fields[0].bits)) * info.unitMs;
    for (let i = 0; i < 300; i++) {
      const tick = Math.floor((random(2 ** 30) / 2 ** 30) * (life / info.unitMs - 1));
      const parts = {
        timestampMs: info.epochMs + tick * info.unitMs,
        clockSeq: random(info.clockSeqs - 1),
        workerId: random(Math.min(info.maxWorkerId, 2 ** 30)),
        sequence: random(2 ** info.fields.find((f) => f.name === 'sequence').bits - 1),
      };
      const id = encode(parts, name);
      assert.ok(id >= 0n && id <= info.maxId);
      const back = decode(id, name);
      assert.deepEqual([back.timestampMs, back.clockSeq, back.workerId, back.sequence], [parts.timestampMs, parts.clockSeq, parts.workerId, parts.sequence]);
      assert.deepEqual(decode(String(id), name).timestampMs, parts.timestampMs);
    }
  }
});

test('encode and idRange check their numbers', () => {
  throwsCoded(() => encode({ timestampMs: -1, workerId: 0, sequence: 0 }), RangeError, 'TIMESTAMP_OUT_OF_RANGE');
  throwsCoded(() => encode({ timestampMs: T, workerId: 1.5, sequence: 0 }), RangeError, 'WORKER_ID_OUT_OF_RANGE');
  throwsCoded(() => encode({ timestampMs: T, workerId: 0, sequence: 2 ** 53 }), RangeError, 'SEQUENCE_OUT_OF_RANGE');
  throwsCoded(() => encode({ timestampMs: BigInt(T), workerId: 0, sequence: 0 }), TypeError, 'INVALID_ARG_TYPE');
  throwsCoded(() => encode({ timestampMs: T, workerId: 128, sequence: 0 }), ClockflakeError, 'WORKER_ID_OUT_OF_RANGE');
  throwsCoded(() => encode(null), TypeError, 'INVALID_ARG_TYPE');
  throwsCoded(() => idRange(T + 1, T), ClockflakeError, 'INVALID_RANGE');
  throwsCoded(() => idRange('1', T), TypeError, 'INVALID_ARG_TYPE');
  const [low, high] = idRange(T, T + 999, 'twitter');
  assert.equal(decode(low, 'twitter').timestampMs, T);
  assert.equal(decode(high, 'twitter').timestampMs, T + 999);
});

test('layouts: presets by name, custom objects, errors', () => {
  assert.deepEqual(Object.keys(layouts), PRESETS);
  assert.ok(Object.isFrozen(layouts));
  for (const name of PRESETS) assert.deepEqual(describeLayout(name), layouts[name]);
  assert.equal(layouts.clockseq.fingerprint, 16228292317464232859n);
  assert.equal(layouts.js53.maxId, 2n ** 52n - 1n);
  const custom = { fields: [{ name: 'timestamp', bits: 41 }, { name: 'worker', bits: 10 }, { name: 'sequence', bits: 12 }], unitMs: 1, epochMs: 1288834974657 };
  assert.equal(describeLayout(custom).name, 'twitter', 'a custom layout equal to a preset is that preset');
  // The same object, changed after first use, is read again.
  custom.epochMs = 1420070400000;
  assert.equal(describeLayout(custom).name, 'discord');
  custom.fields[1].bits = 11;
  throwsCoded(() => describeLayout(custom), ClockflakeError, 'INVALID_LAYOUT');
  custom.fields[1].bits = 9;
  assert.equal(describeLayout(custom).name, null);
  assert.equal(describeLayout(custom).maxWorkerId, 511);
  throwsCoded(() => describeLayout('snowflake'), ClockflakeError, 'UNKNOWN_LAYOUT');
  throwsCoded(() => describeLayout(42), TypeError, 'INVALID_ARG_TYPE');
  throwsCoded(() => describeLayout({ fields: 'timestamp' }), TypeError, 'INVALID_ARG_TYPE');
  throwsCoded(() => describeLayout({ fields: [{ name: 'timestamp', bits: -1 }], epochMs: 0 }), RangeError, 'INVALID_LAYOUT');
  throwsCoded(() => describeLayout({ fields: [{ name: 'timestamp', bits: 41 }, { name: 'shard', bits: 3 }], epochMs: 0 }), ClockflakeError, 'INVALID_LAYOUT');
});

test('generator options are checked', () => {
  throwsCoded(() => new Generator(), TypeError, 'INVALID_ARG_TYPE');
  throwsCoded(() => new Generator({}), TypeError, 'INVALID_ARG_TYPE');
  throwsCoded(() => new Generator({ workerId: '7' }), TypeError, 'INVALID_ARG_TYPE');
  throwsCoded(() => new Generator({ workerId: -1 }), RangeError, 'WORKER_ID_OUT_OF_RANGE');
  throwsCoded(() => new Generator({ workerId: 128 }), ClockflakeError, 'WORKER_ID_OUT_OF_RANGE');
  throwsCoded(() => new Generator({ workerId: 1, onRollback: 'panic' }), ClockflakeError, 'UNKNOWN_POLICY');
  throwsCoded(() => new Generator({ workerId: 1, layout: 'nope' }), ClockflakeError, 'UNKNOWN_LAYOUT');
  throwsCoded(() => new Generator({ workerId: 1, clock: 5 }), TypeError, 'INVALID_ARG_TYPE');
  throwsCoded(() => new Generator({ workerId: 1 }).nextIdAt(2 ** 53), RangeError, 'INVALID_ARG_VALUE');
  throwsCoded(() => new Generator({ workerId: 1 }).nextIdAt('1'), TypeError, 'INVALID_ARG_TYPE');
  throwsCoded(() => new Generator({ workerId: 1, clock: () => 'now' }).nextId(), TypeError, 'INVALID_ARG_TYPE');
  throwsCoded(() => new Generator({ workerId: 1, layout: 'baidu' }).nextId(), ClockflakeError, 'TIMESTAMP_EXHAUSTED');
});

test('nextId on the real clock: 50,000 ids strictly increase (waits out full ticks)', () => {
  const gen = new Generator({ workerId: 42 });
  let last = -1n;
  for (let i = 0; i < 50_000; i++) {
    const id = gen.nextId();
    assert.ok(id > last, `id ${i} did not increase`);
    last = id;
  }
  assert.equal(decode(last).workerId, 42);
  assert.ok(Math.abs(decode(last).timestampMs - Date.now()) < 1000);
});

test('nextIds and nextId interleaved never repeat, and nextIdString decodes', () => {
  const gen = new Generator({ workerId: 3, layout: 'twitter' });
  const seen = new Set();
  for (let round = 0; round < 20; round++) {
    for (const id of gen.nextIds(round * 997)) seen.add(id);
    seen.add(gen.nextId());
    seen.add(BigInt(gen.nextIdString()));
  }
  const expected = 20 * 2 + (997 * 19 * 20) / 2;
  assert.equal(seen.size, expected);
  const ids = gen.nextIds(10_000);
  assert.ok(ids instanceof BigUint64Array);
  for (let i = 1; i < ids.length; i++) assert.ok(ids[i] > ids[i - 1]);
  for (const id of ids) assert.equal(decode(id, 'twitter').workerId, 3);
  assert.equal(gen.nextIds(0).length, 0);
  throwsCoded(() => gen.nextIds(-1), RangeError, 'INVALID_ARG_VALUE');
});

test('an injected clock that steps back: clock sequences switch and nothing repeats', () => {
  // Advances 1 ms every 1,000 reads, and steps back now and then.
  let reads = 0;
  let offset = 0;
  const gen = new Generator({ workerId: 9, clock: () => T + offset + Math.floor(reads++ / 1000) });
  const steps = [-1000, 0, -2000, 10, -10, 0, -5000, 1, -3];
  const seen = new Set();
  for (let i = 0; i < steps.length * 5000; i++) {
    if (i % 5000 === 0) offset += steps[i / 5000];
    const id = gen.nextId();
    assert.ok(!seen.has(id), `duplicate at ${i}`);
    seen.add(id);
  }
  const clockSeqs = new Set([...seen].map((id) => decode(id).clockSeq));
  assert.ok(clockSeqs.size >= 4, `clock sequences used: ${[...clockSeqs]}`);
});

test('nextIdAt never waits: a full tick is refused with retryAtMs', () => {
  const gen = new Generator({ workerId: 1 });
  for (let i = 0; i < 4096; i++) gen.nextIdAt(T);
  const error = throwsCoded(() => gen.nextIdAt(T), ClockflakeError, 'SEQUENCE_EXHAUSTED');
  assert.equal(error.retryAtMs, T + 1);
  assert.equal(error.message, `sequence exhausted: every sequence number of this tick is used, retry at ${T + 1} Unix ms`);
  const fail = new Generator({ workerId: 1, onRollback: 'fail' });
  fail.nextIdAt(T);
  const back = throwsCoded(() => fail.nextIdAt(T - 10), ClockflakeError, 'CLOCK_MOVED_BACKWARDS');
  assert.equal(back.retryAtMs, null);
});

test('a frozen injected clock is reported as CLOCK_NOT_ADVANCING, not waited on forever', () => {
  const gen = new Generator({ workerId: 1, clock: () => T });
  for (let i = 0; i < 4096; i++) gen.nextId();
  const error = throwsCoded(() => gen.nextId(), ClockflakeError, 'CLOCK_NOT_ADVANCING');
  assert.equal(error.message, `clock not advancing: waited for ${T + 1} Unix ms but the clock still reads ${T}`);
});

test('state survives JSON and resume never repeats an id', () => {
  const gen = new Generator({ workerId: 5, onRollback: 'clock-sequence' });
  const before = new Set();
  for (let i = 0; i < 100; i++) before.add(gen.nextIdAt(T));
  const state = JSON.parse(JSON.stringify(gen.state()));
  assert.deepEqual(state, { layoutFingerprint: '16228292317464232859', workerId: 5, clockSeq: 0, highWaterMs: [T, null, null, null, null, null, null, null] });
  const after = Generator.resume(state);
  assert.equal(after.workerId, 5);
  // Restarted with the clock an hour behind, and at the same ms: no repeats.
  for (const now of [T - 3_600_000, T, T]) {
    const id = after.nextIdAt(now);
    assert.ok(!before.has(id));
    before.add(id);
  }
  throwsCoded(() => Generator.resume(state, { layout: 'twitter' }), ClockflakeError, 'INVALID_STATE');
  throwsCoded(() => Generator.resume({ ...state, layoutFingerprint: 5 }), ClockflakeError, 'INVALID_STATE');
  throwsCoded(() => Generator.resume({ ...state, layoutFingerprint: '18446744073709551616' }), ClockflakeError, 'INVALID_STATE');
  throwsCoded(() => Generator.resume({ ...state, highWaterMs: [T, 'x'] }), ClockflakeError, 'INVALID_STATE');
  throwsCoded(() => Generator.resume({ ...state, clockSeq: 8 }), ClockflakeError, 'INVALID_STATE');
  const tooMany = [...state.highWaterMs, ...new Array(9).fill(null)];
  tooMany[16] = T;
  throwsCoded(() => Generator.resume({ ...state, highWaterMs: tooMany }), ClockflakeError, 'INVALID_STATE');
  throwsCoded(() => Generator.resume(null), ClockflakeError, 'INVALID_STATE');
});

test('a closed generator refuses with GENERATOR_CLOSED, and its engine slot is reused safely', () => {
  const gen = new Generator({ workerId: 1 });
  gen.nextIdAt(T);
  gen.close();
  gen.close();
  throwsCoded(() => gen.nextIdAt(T), ClockflakeError, 'GENERATOR_CLOSED');
  const next = new Generator({ workerId: 2 });
  assert.equal(decode(next.nextIdAt(T)).workerId, 2);
  throwsCoded(() => gen.nextIdAt(T), ClockflakeError, 'GENERATOR_CLOSED');
});

test('wasm memory growth does not break the scratch views', () => {
  const gens = [];
  for (let i = 0; i < 20_000; i++) gens.push(new Generator({ workerId: i % 128 }));
  const id = encode({ timestampMs: T, clockSeq: 2, workerId: 77, sequence: 9 });
  assert.equal(decode(id).workerId, 77);
  assert.equal(gens[19_999].nextIds(3).length, 3);
  assert.deepEqual(gens[5].state().workerId, 5);
  for (const gen of gens) gen.close();
});

test("core's messages are rebuilt exactly in JS, for every error kind", () => {
  const path = fileURLToPath(new URL('../../pkg/core-messages.jsonl', import.meta.url));
  const lines = readFileSync(path, 'utf8').trim().split('\n').map((line) => JSON.parse(line));
  assert.ok(lines.length >= 50);
  for (const { code, kind, fields, message } of lines) {
    assert.equal(formatMessage(code, kind, fields.map(BigInt)), message, `${code} kind ${kind}`);
  }
});

test("the package's index.d.ts declares exactly what it exports", async () => {
  const dts = readFileSync(fileURLToPath(new URL('../../../bindings-node/index.d.ts', import.meta.url)), 'utf8');
  const declared = [...dts.matchAll(/^export declare (?:function|class|const) (\w+)/gm)].map((m) => m[1]);
  // Node's ES module entry also has a default export (the CommonJS module), for older imports.
  assert.deepEqual([...declared].sort(), Object.keys(runtime).filter((name) => name !== 'default').sort());
  // Every class: its declared methods and properties are exactly its runtime ones.
  const getters = ['workerId', 'isActive', 'coordinator', 'leaseRemainingMs', 'layout', 'options'];
  for (const [name, Class, skip] of [['Generator', Generator, getters], ['PublicIds', runtime.PublicIds, ['currentVersion']]]) {
    const start = dts.indexOf(`export declare class ${name} {`);
    const body = dts.slice(start, dts.indexOf('\n}', start));
    const methods = [...body.matchAll(/^ {2}(?:static )?(\w+)(?:<[^(]*>)?\(/gm)].map((m) => m[1]).filter((n) => n !== 'constructor');
    const actual = [...Object.getOwnPropertyNames(Class.prototype), ...Object.getOwnPropertyNames(Class)]
      .filter((n) => !['constructor', 'length', 'name', 'prototype', ...skip].includes(n));
    assert.deepEqual([...new Set(methods)].sort(), [...new Set(actual)].sort(), name);
    for (const property of skip) {
      assert.match(body, new RegExp(`^ {2}readonly ${property}: `, 'm'), `${name}.${property}`);
      assert.equal(typeof Object.getOwnPropertyDescriptor(Class.prototype, property)?.get, 'function', `${name}.${property}`);
    }
  }
});

test("the 'wait' policy waits out a short step back in nextId() and refuses a long one", () => {
  let reads = 0;
  let offset = 0;
  const gen = new Generator({ workerId: 4, layout: 'twitter', onRollback: 'wait', maxWaitMs: 5, clock: () => T + offset + Math.floor(reads++ / 100) });
  const first = gen.nextId();
  offset = -3; // 3 ms back: within maxWaitMs, so nextId() spins until the clock passes the last id
  const second = gen.nextId();
  assert.ok(second > first);
  assert.ok(decode(second, 'twitter').timestampMs > decode(first, 'twitter').timestampMs);
  offset -= 1000; // far back: final refusal
  const error = throwsCoded(() => gen.nextId(), ClockflakeError, 'CLOCK_MOVED_BACKWARDS');
  assert.equal(error.retryAtMs, null);
  const logical = new Generator({ workerId: 4, onRollback: 'logical', clock: () => T });
  const ids = logical.nextIds(3 * 4096);
  for (let i = 1; i < ids.length; i++) assert.ok(ids[i] > ids[i - 1]);
  assert.equal(decode(ids[ids.length - 1]).timestampMs, T + 2, 'logical runs ahead of a frozen clock');
});
