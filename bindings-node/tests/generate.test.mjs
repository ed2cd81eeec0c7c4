// Generation: uniqueness and order at volume, and rollback schedules driven through `clock`.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Generator, decode, encode } from '../lib/index.mjs';

const T = 1_795_000_000_000;

/** Asserts no two ids are equal (sorting a copy), and returns how many distinct ticks they span. */
function assertUnique(ids) {
  const sorted = BigUint64Array.from(ids).sort();
  for (let i = 1; i < sorted.length; i++) {
    if (sorted[i] === sorted[i - 1]) assert.fail(`duplicate id ${sorted[i]}`);
  }
}

test('1,000,000 nextId() calls: unique and strictly increasing', () => {
  const gen = new Generator({ workerId: 3 });
  const ids = new BigUint64Array(1_000_000);
  for (let i = 0; i < ids.length; i++) ids[i] = gen.nextId();
  for (let i = 1; i < ids.length; i++) {
    // Strictly increasing within a clock sequence; a wall-clock step back during the run would
    // switch clock sequence, which is the only way an id may be smaller than the one before.
    if (!(ids[i] > ids[i - 1]) && decode(ids[i]).clockSeq === decode(ids[i - 1]).clockSeq) {
      assert.fail(`id ${i} (${ids[i]}) is not above ${ids[i - 1]}`);
    }
  }
  assertUnique(ids);
  const first = decode(ids[0]);
  const last = decode(ids.at(-1));
  // 4096 ids per ms at most: a million ids span at least 245 ms, never borrowed from the future.
  assert.ok(last.timestampMs - first.timestampMs >= 244, `${last.timestampMs - first.timestampMs} ms`);
  assert.ok(last.timestampMs <= Date.now());
});

test('nextIds, nextId and nextIdString mixed: one strictly increasing sequence', () => {
  const gen = new Generator({ workerId: 4 });
  const all = [];
  for (let round = 0; round < 200; round++) {
    all.push(gen.nextId());
    all.push(...gen.nextIds(round * 37));
    all.push(BigInt(gen.nextIdString()));
  }
  for (let i = 1; i < all.length; i++) assert.ok(all[i] > all[i - 1], `at ${i}`);
  assertUnique(all);
});

test('every id carries the time of its own call (a block is never served after its tick)', () => {
  // A clock that advances 1 ms every 7 reads, with steps back now and then.
  let reads = 0;
  let last = 0;
  const clock = () => {
    reads++;
    last = T + Math.floor(reads / 7) - (reads % 500 < 50 ? 3 : 0);
    return last;
  };
  const gen = new Generator({ workerId: 5, clock, maxWaitMs: 0 });
  const ids = [];
  for (let i = 0; i < 20_000; i++) {
    const id = gen.nextId();
    assert.equal(decode(id).timestampMs, last, `call ${i}`);
    ids.push(id);
  }
  assertUnique(ids);
  assert.ok(new Set(ids.map((id) => decode(id).clockSeq)).size > 1, 'the steps back switched clock sequence');
});

test('sequence exhaustion waits for the next tick instead of repeating or borrowing time', () => {
  let reads = 0;
  const clock = () => T + Math.floor(reads++ / 10_000); // 1 ms per 10,000 reads
  const gen = new Generator({ workerId: 6, clock });
  const ids = gen.nextIds(10_000);
  for (let i = 1; i < ids.length; i++) assert.ok(ids[i] > ids[i - 1]);
  const parts = [...ids].map((id) => decode(id));
  assert.equal(parts[4095].timestampMs, T);
  assert.equal(parts[4095].sequence, 4095);
  assert.ok(parts[4096].timestampMs > T);
  assert.equal(parts[4096].sequence, 0);
  // The same through nextId.
  const single = new Generator({ workerId: 6, clock: (() => { let r = 0; return () => T + Math.floor(r++ / 5_000); })() });
  let previous = 0n;
  for (let i = 0; i < 9000; i++) {
    const id = single.nextId();
    assert.ok(id > previous);
    previous = id;
  }
});

test('clock-sequence policy: a step back switches clock sequence, ids stay unique', () => {
  const times = [T, T, T - 1000, T - 1000, T, T - 5, T + 1];
  let i = 0;
  const gen = new Generator({ workerId: 7, clock: () => times[i] });
  const got = [];
  for (i = 0; i < times.length; i++) got.push(decode(gen.nextId()));
  assert.deepEqual(got.map((p) => [p.timestampMs, p.clockSeq, p.sequence]), [
    [T, 0, 0],
    [T, 0, 1],
    [T - 1000, 1, 0],
    [T - 1000, 1, 1],
    [T, 1, 0],
    [T - 5, 2, 0],
    [T + 1, 2, 0],
  ]);
});

test('wait policy: waits out a short step back on the clock; refuses a long one', () => {
  let now = T;
  let back = false;
  // After the step back, the clock catches up 1 ms per read.
  const clock = () => (back ? now++ : now);
  const gen = new Generator({ workerId: 8, onRollback: 'wait', maxWaitMs: 5, clock });
  const a = gen.nextId();
  back = true;
  now = T - 3;
  const b = gen.nextId();
  assert.ok(b > a);
  assert.ok(decode(b).timestampMs > T);
  back = false;
  now = T - 1000;
  assert.throws(() => gen.nextId(), (e) => e.code === 'CLOCK_MOVED_BACKWARDS' && e.retryAtMs === null);
});

test('fail policy: any step back refuses at once', () => {
  let now = T;
  const gen = new Generator({ workerId: 9, onRollback: 'fail', clock: () => now });
  gen.nextId();
  now = T - 1;
  assert.throws(() => gen.nextId(), (e) => e instanceof Error && e.code === 'CLOCK_MOVED_BACKWARDS' && e.retryAtMs === null);
  now = T + 1;
  assert.equal(decode(gen.nextId()).timestampMs, T + 1);
});

test('logical policy: never goes back; runs ahead of a stuck clock up to maxDriftMs', () => {
  let now = T;
  const gen = new Generator({ workerId: 10, onRollback: 'logical', maxDriftMs: 2, clock: () => now });
  const first = gen.nextIds(10);
  now = T - 50; // back: keeps issuing after the last id, in the tick of T
  const next = gen.nextId();
  assert.ok(next > first.at(-1));
  assert.deepEqual([decode(next).timestampMs, decode(next).sequence], [T, 10]);
  now = T; // stuck: T's sequence runs out, then T + 1 and T + 2 (maxDriftMs), then it must wait
  const more = gen.nextIds(4096 * 3 - 11);
  for (let i = 1; i < more.length; i++) assert.ok(more[i] > more[i - 1]);
  assert.equal(decode(more.at(-1)).timestampMs, T + 2);
  assert.equal(decode(more.at(-1)).sequence, 4095);
  // The clock reads behind the last id (T + 2): retry once it is within maxDriftMs again.
  assert.throws(() => gen.nextIdAt(T), (e) => e.code === 'CLOCK_MOVED_BACKWARDS' && e.retryAtMs === T + 1);
  assert.throws(() => gen.nextIdAt(T - 50), (e) => e.code === 'CLOCK_MOVED_BACKWARDS');
});

test('a frozen clock is reported (CLOCK_NOT_ADVANCING), not waited on forever', () => {
  const gen = new Generator({ workerId: 0, layout: { fields: [{ name: 'timestamp', bits: 41 }, { name: 'sequence', bits: 2 }], epochMs: 0 }, clock: () => T });
  for (let i = 0; i < 4; i++) gen.nextId();
  const started = Date.now();
  assert.throws(() => gen.nextId(), (e) => e.code === 'CLOCK_NOT_ADVANCING' && e.message.startsWith('clock not advancing'));
  assert.ok(Date.now() - started < 5000);
});

test('layouts with coarse ticks: sonyflake (10 ms) and js53 (1 s) serve ids of the right tick', () => {
  let now = T + 7;
  const sony = new Generator({ workerId: 300, layout: 'sonyflake', clock: () => now });
  const a = decode(sony.nextId(), 'sonyflake');
  now = T + 9; // same 10 ms tick
  const b = decode(sony.nextId(), 'sonyflake');
  now = T + 10; // next tick
  const c = decode(sony.nextId(), 'sonyflake');
  assert.deepEqual([a.timestampMs, a.sequence, b.timestampMs, b.sequence, c.timestampMs, c.sequence], [T, 0, T, 1, T + 10, 0]);
  const js53 = new Generator({ workerId: 15, layout: 'js53', clock: () => now });
  const ids = js53.nextIds(10_000); // more than one 4096-id block within one 1 s tick
  assert.equal(decode(ids.at(-1), 'js53').sequence, 9999);
  assert.ok(ids.every((id) => id < 2n ** 53n));
  assert.equal(encode({ timestampMs: T, workerId: 15, sequence: 9999 }, 'js53'), ids.at(-1));
});
