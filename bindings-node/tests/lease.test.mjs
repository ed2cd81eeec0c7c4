// Generator.open: worker ids leased from a real file:// coordinator (lock files and state files in
// a temporary directory), close / Symbol.dispose, pool exhaustion, and the error shape.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { Generator, decode } from '../lib/index.mjs';
import { throwsCoded as throwsCodedWith } from '../../tests/harness/node-errors.mjs';
import { workerLayout } from '../../tests/harness/layouts.mjs';

/** A temporary directory, removed when test `t` ends (whether it passed or not). */
function tempDir(t) {
  const dir = mkdtempSync(join(tmpdir(), 'clockflake-node-lease-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/**
 * Runs an id call that needs a new reservation persisted first (a step back to another clock
 * sequence): the call waits at most 50 ms for the renewal thread, and on a loaded machine the
 * write can take longer, so it refuses with the retryable COORDINATOR_UNAVAILABLE. A caller
 * retries; so does the test, for up to 10 s.
 */
function patiently(call) {
  const pause = new Int32Array(new SharedArrayBuffer(4));
  const until = Date.now() + 10_000;
  for (;;) {
    try {
      return call();
    } catch (error) {
      if (error.code !== 'COORDINATOR_UNAVAILABLE' || Date.now() > until) throw error;
      Atomics.wait(pause, 0, 0, 10);
    }
  }
}

const throwsCoded = (fn, code, ErrorClass = Error) => throwsCodedWith(fn, code, ErrorClass, { minMessageLength: 21 });

// 2 worker bits: a pool of 4 worker ids.
const SMALL = workerLayout(2);

test('open: leases distinct worker ids, ids carry them, close releases them for reuse', (t) => {
  const dir = tempDir(t);
  const uri = `file://${dir}?app=orders`;
  const a = Generator.openSync(uri);
  const b = Generator.openSync(uri);
  assert.ok(a instanceof Generator);
  assert.notEqual(a.workerId, b.workerId);
  assert.ok(a.isActive && b.isActive);
  assert.equal(a.coordinator, `file://${dir}?app=orders`);
  assert.equal(new Generator({ workerId: 3 }).coordinator, null);
  assert.equal(a.leaseRemainingMs, null, "a file:// lease never expires");
  assert.equal(new Generator({ workerId: 3 }).leaseRemainingMs, null);

  const fromA = a.nextIds(1000);
  const one = a.nextId();
  assert.equal(typeof one, 'bigint');
  assert.ok(one > fromA[999], 'strictly increasing');
  for (const id of [fromA[0], one]) assert.equal(decode(id).workerId, a.workerId);
  assert.equal(decode(b.nextId()).workerId, b.workerId);
  assert.equal(typeof a.nextIdString(), 'string');
  assert.deepEqual(a.options, { onRollback: 'clock-sequence', maxWaitMs: 5, maxDriftMs: 1000 });
  const state = a.state();
  assert.equal(state.workerId, a.workerId);
  assert.equal(typeof state.layoutFingerprint, 'string');

  const released = a.workerId;
  const last = a.nextId();
  a.closeSync();
  assert.equal(a.isActive, false);
  a.closeSync(); // idempotent
  const c = Generator.openSync(uri);
  assert.equal(c.workerId, released, 'the lowest free worker id is reused');
  const next = c.nextId();
  assert.equal(decode(next).workerId, released);
  assert.ok(next > last, 'the next holder continues above every id the previous one issued');

  // Another app namespace has its own pool.
  const other = Generator.openSync(`file://${dir}?app=billing`);
  assert.equal(other.workerId, 0);
  for (const g of [b, c, other]) g.closeSync();
});

test('open: a custom layout of 4 worker ids: the 5th holder gets WORKER_POOL_EXHAUSTED', (t) => {
  const dir = tempDir(t);
  const uri = `file://${dir}?app=small`;
  const held = [0, 1, 2, 3].map(() => Generator.openSync(uri, { layout: SMALL }));
  assert.deepEqual(held.map((g) => g.workerId).sort(), [0, 1, 2, 3]);
  assert.equal(held[0].layout.maxWorkerId, 3);
  const error = throwsCoded(() => Generator.openSync(uri, { layout: SMALL }), 'WORKER_POOL_EXHAUSTED');
  assert.match(error.message, /4 worker ids/);
  held[2].closeSync();
  const again = Generator.openSync(uri, { layout: SMALL });
  assert.equal(again.workerId, held[2].workerId);
  again.closeSync();
  for (const g of held) g.closeSync();
});

test('close: every later call throws GENERATOR_CLOSED; Symbol.dispose closes', (t) => {
  const dir = tempDir(t);
  const gen = Generator.openSync(`file://${dir}`);
  gen.nextId();
  gen.closeSync();
  throwsCoded(() => gen.nextId(), 'GENERATOR_CLOSED');
  throwsCoded(() => gen.nextIds(10), 'GENERATOR_CLOSED');
  throwsCoded(() => gen.nextIdAt(Date.now()), 'GENERATOR_CLOSED');
  throwsCoded(() => gen.nextIdString(), 'GENERATOR_CLOSED');

  assert.equal(typeof Symbol.dispose, 'symbol');
  const disposed = Generator.openSync(`file://${dir}`);
  assert.equal(typeof disposed[Symbol.dispose], 'function');
  disposed[Symbol.dispose]();
  assert.equal(disposed.isActive, false);
  throwsCoded(() => disposed.nextId(), 'GENERATOR_CLOSED');

  // A fixed-worker-id generator closes the same way (no lease to release).
  const fixed = new Generator({ workerId: 5 });
  fixed.nextIds(100);
  assert.equal(fixed.isActive, true);
  fixed[Symbol.dispose]();
  assert.equal(fixed.isActive, false);
  throwsCoded(() => fixed.nextId(), 'GENERATOR_CLOSED');
  throwsCoded(() => fixed.nextIdAt(Date.now() + 10), 'GENERATOR_CLOSED');
  throwsCoded(() => fixed.nextIds(3), 'GENERATOR_CLOSED');
});

test('open: the state is stored on close and resumed by the next holder (no id repeats)', (t) => {
  const dir = tempDir(t);
  const uri = `file://${dir}?app=resume`;
  const first = Generator.openSync(uri);
  const future = Date.now() + 500;
  // An explicit time ahead of the clock: the next holder must not reissue it.
  const ahead = first.nextIdAt(future);
  first.closeSync();
  const second = Generator.openSync(uri, { maxHandoverWaitMs: 2000 });
  assert.equal(second.workerId, first.workerId);
  const after = second.nextId();
  assert.notEqual(after, ahead);
  const parts = decode(after);
  // Either a later time, or the same time range under another clock sequence.
  assert.ok(parts.timestampMs > future || parts.clockSeq !== decode(ahead).clockSeq, JSON.stringify(parts));
  second.closeSync();
});

test('open: a corrupt state file is refused with INVALID_STATE, never reset', (t) => {
  const dir = tempDir(t);
  const uri = `file://${dir}?app=corrupt`;
  Generator.openSync(uri).closeSync();
  const stateFiles = readdirSync(join(dir, 'corrupt')).filter((f) => !f.endsWith('.lock'));
  assert.ok(stateFiles.length >= 1, `state file written: ${readdirSync(join(dir, 'corrupt'))}`);
  for (const file of stateFiles) writeFileSync(join(dir, 'corrupt', file), '{"not": "a state"');
  throwsCoded(() => Generator.openSync(uri), 'INVALID_STATE');
});

test('open: bad uris and options are refused with codes', (t) => {
  const dir = tempDir(t);
  throwsCoded(() => Generator.openSync(), 'INVALID_ARG_TYPE', TypeError);
  throwsCoded(() => Generator.openSync(42), 'INVALID_ARG_TYPE', TypeError);
  throwsCoded(() => Generator.openSync(new URL(`file://${dir}`)), 'INVALID_ARG_TYPE', TypeError);
  throwsCoded(() => Generator.openSync('bogus://x'), 'INVALID_URI');
  throwsCoded(() => Generator.openSync(''), 'INVALID_URI');
  throwsCoded(() => Generator.openSync(`file://${dir}?app=../etc`), 'INVALID_URI');
  throwsCoded(() => Generator.openSync(`file://${dir}?reserve=1ms`), 'INVALID_URI');
  throwsCoded(() => Generator.openSync(`file://${dir}?colour=blue`), 'INVALID_URI');
  const fixed = throwsCoded(() => Generator.openSync(`file://${dir}`, { workerId: 1 }), 'UNKNOWN_OPTION', TypeError);
  assert.match(fixed.message, /leases its worker id/);
  const clock = throwsCoded(() => Generator.openSync(`file://${dir}`, { clock: Date.now }), 'UNKNOWN_OPTION', TypeError);
  assert.match(clock.message, /system clock/);
  throwsCoded(() => Generator.openSync(`file://${dir}`, { workerid: 1 }), 'UNKNOWN_OPTION', TypeError);
  throwsCoded(() => Generator.openSync(`file://${dir}`, null), 'INVALID_ARG_TYPE', TypeError);
  throwsCoded(() => Generator.openSync(`file://${dir}`, { layout: 'nope' }), 'UNKNOWN_LAYOUT');
  throwsCoded(() => Generator.openSync(`file://${dir}`, { onRollback: 'sometimes' }), 'UNKNOWN_POLICY');
  throwsCoded(() => Generator.openSync(`file://${dir}`, { maxHandoverWaitMs: -1 }), 'INVALID_ARG_VALUE', RangeError);
  throwsCoded(() => Generator.openSync(`file://${dir}`, { maxHandoverWaitMs: '1' }), 'INVALID_ARG_TYPE', TypeError);
  // A directory that cannot be created.
  throwsCoded(() => Generator.openSync('file:///proc/clockflake-cannot-exist'), 'COORDINATOR_UNAVAILABLE');
  // Nothing was leased by the refusals: the pool starts at 0.
  const gen = Generator.openSync(`file://${dir}`);
  assert.equal(gen.workerId, 0);
  throwsCoded(() => gen.nextIdAt(-1), 'INVALID_ARG_VALUE', RangeError);
  throwsCoded(() => gen.nextIds(-1), 'INVALID_ARG_VALUE', RangeError);
  gen.closeSync();
});

test('open: a postgres:// coordinator that is not there: COORDINATOR_UNAVAILABLE, password not shown', () => {
  // Port 1 on loopback: nothing listens, the connection is refused at once.
  const error = throwsCoded(
    () => Generator.openSync('postgres://someone:secret@127.0.0.1:1/ids?app=orders&ttl=10s&connect_timeout=2'),
    'COORDINATOR_UNAVAILABLE',
  );
  assert.doesNotMatch(error.message, /secret/);
});

test('a leased generator left open is released when its thread ends, or when it is garbage-collected', async (t) => {
  const dir = tempDir(t);
  const uri = `file://${dir}?app=left-open`;
  const indexUrl = new URL('../lib/index.mjs', import.meta.url).href;
  const code = `
    const { parentPort, workerData } = require('node:worker_threads');
    import(${JSON.stringify(indexUrl)}).then(({ Generator }) => {
      const gen = Generator.openSync(workerData);
      gen.nextId();
      parentPort.postMessage(gen.workerId); // and exit without close()
    });
  `;
  const inThread = await new Promise((resolve, reject) => {
    let got;
    const worker = new Worker(code, { eval: true, workerData: uri });
    worker.on('message', (m) => (got = m));
    worker.on('error', reject);
    worker.on('exit', () => resolve(got));
  });
  assert.equal(inThread, 0);
  const after = Generator.openSync(uri);
  assert.equal(after.workerId, 0, 'worker id 0 is free again once the thread ended');
  after.closeSync();

  const indexPath = fileURLToPath(new URL('../lib/index.cjs', import.meta.url));
  const script = `
    const { Generator } = require(${JSON.stringify(indexPath)});
    (() => { Generator.openSync(process.argv[1]).nextId(); })();
    global.gc();
    setTimeout(() => { global.gc(); console.log(Generator.openSync(process.argv[1]).workerId); }, 20);
  `;
  const out = execFileSync(process.execPath, ['--expose-gc', '-e', script, uri], { encoding: 'utf8' });
  assert.equal(out.trim(), '0', 'worker id 0 is free again once the generator was collected');
});

test('leased: a generator dropped without close() stores a state above every id JavaScript issued (the park)', async (t) => {
  // A thread issues lone ids for 400 ms (from grants: JavaScript holds the ticks up to the park)
  // and ends without close(): the lease stores its generator's exact state. One worker id only,
  // so the next holder takes the same one; asked for an id at each tick the thread used, it
  // must refuse or give a new id, never one of the thread's.
  const dir = tempDir(t);
  const layout = workerLayout(0);
  const uri = `file://${dir}?app=dropped`;
  const indexUrl = new URL('../lib/index.mjs', import.meta.url).href;
  const code = `
    const { parentPort, workerData } = require('node:worker_threads');
    import(${JSON.stringify(indexUrl)}).then(({ Generator }) => {
      const gen = Generator.openSync(workerData.uri, { layout: workerData.layout });
      const ids = [];
      // 400 ms and at least 60 ids (a loaded machine may run this thread for a few ms of the
      // 400), within 20 s.
      const until = Date.now() + 400;
      const giveUp = Date.now() + 20_000;
      while ((Date.now() < until || ids.length < 60) && Date.now() < giveUp) {
        ids.push(gen.nextId());
        const ms = Date.now();
        while (Date.now() === ms);
      }
      parentPort.postMessage(ids); // and exit without close()
    });
  `;
  const issued = await new Promise((resolve, reject) => {
    let got;
    const worker = new Worker(code, { eval: true, workerData: { uri, layout } });
    worker.on('message', (m) => (got = m));
    worker.on('error', reject);
    worker.on('exit', () => resolve(got));
  });
  assert.ok(issued.length > 50, `only ${issued.length} ids`);
  const seen = new Set(issued);
  const next = Generator.openSync(uri, { layout });
  let refused = 0;
  for (const id of issued) {
    try {
      const again = next.nextIdAt(decode(id, layout).timestampMs);
      assert.ok(!seen.has(again), `id ${again} issued twice`);
    } catch (error) {
      assert.equal(error.code, 'CLOCK_MOVED_BACKWARDS', error.message);
      refused++;
    }
  }
  assert.ok(refused > 0);
  next.closeSync();
});

test('leased nextIdAt: a full tick refuses with SEQUENCE_EXHAUSTED and the retry time; the clock going back moves to another clock sequence', (t) => {
  const dir = tempDir(t);
  const gen = Generator.openSync(`file://${dir}?app=explicit`);
  const at = Date.now() + 5;
  const ids = Array.from({ length: 4096 }, () => gen.nextIdAt(at));
  assert.equal(new Set(ids).size, 4096);
  const full = throwsCoded(() => gen.nextIdAt(at), 'SEQUENCE_EXHAUSTED');
  assert.equal(full.retryAtMs, at + 1);
  const next = gen.nextIdAt(at + 1);
  assert.ok(next > ids[4095]);
  // Back by 3 ms: another clock sequence (persisted before the id is returned), never a repeat.
  const back = patiently(() => gen.nextIdAt(at - 3));
  assert.notEqual(decode(back).clockSeq, decode(next).clockSeq);
  assert.ok(!ids.includes(back));
  gen.closeSync();
});

/** Waits until `Date.now()` has just moved to a new millisecond. */
function msStart() {
  const t = Date.now();
  let now;
  do now = Date.now();
  while (now === t);
  return now;
}

test('close: no id of a grant being served goes out after close()', (t) => {
  const dir = tempDir(t);
  const realNow = Date.now;
  t.after(() => {
    Date.now = realNow;
  });
  let servedFromGrant = 0;
  for (let round = 0; round < 30; round++) {
    const gen = Generator.openSync(`file://${dir}?app=close-block-${round}`);
    gen.nextId(); // the first call of a lease (handover checks) may take longer
    msStart();
    // Hold Date.now() still (a grant is served on performance.now()): the case tested is ids being
    // served in JavaScript from a grant when close() comes.
    const frozen = realNow();
    Date.now = () => frozen;
    gen.nextId();
    const second = gen.nextId(); // from the grant
    const third = gen.nextId(); // from the grant
    if (decode(third).sequence === decode(second).sequence + 1) servedFromGrant++;
    gen.closeSync();
    throwsCoded(() => gen.nextId(), 'GENERATOR_CLOSED');
    throwsCoded(() => gen.nextIds(2), 'GENERATOR_CLOSED');
    Date.now = realNow;
  }
  // The test proves something only when a grant was being served at close().
  assert.ok(servedFromGrant >= 5, `a grant served at close() in only ${servedFromGrant} of 30 rounds`);
});

test('leased: ids from grants, nextIds and nextIdAt (the clock back too) never repeat', (t) => {
  const dir = tempDir(t);
  const gen = Generator.openSync(`file://${dir}?app=mixed`);
  const seen = new Set();
  const keep = (id) => {
    assert.ok(!seen.has(id), `duplicate ${id}`);
    seen.add(id);
  };
  let previous = 0n;
  let explicit = 0;
  for (let round = 0; round < 2000; round++) {
    // A run of nextId(): served from the grant, strictly increasing.
    for (let i = 0; i < 40; i++) {
      const id = gen.nextId();
      if (decode(id).clockSeq === decode(previous || id).clockSeq) assert.ok(id > previous);
      previous = id;
      keep(id);
    }
    // At the tick of the last id (the lease's time, which may read 1 ms ahead of Date.now()):
    // from the grant, or the tick is full.
    const tick = decode(previous).timestampMs;
    try {
      keep(gen.nextIdAt(tick));
      explicit++;
    } catch (error) {
      assert.equal(error.code, 'SEQUENCE_EXHAUSTED', error.message);
    }
    // Back 2 s, five times: another clock sequence each time (8 in all, each reserved 1 s ahead).
    if (round % 400 === 0) keep(patiently(() => gen.nextIdAt(tick - 2000)));
    for (const id of gen.nextIds(1 + (round % 300))) keep(id);
    previous = 0n;
  }
  assert.ok(seen.size > 2000 * 40);
  assert.ok(explicit > 1000, `nextIdAt at the last id's tick: ${explicit} of 2000`);
  gen.closeSync();
});

test('leased: the wall clock stepping back does not take ids back (they carry the lease\'s time)', (t) => {
  // JavaScript issues a leased generator's ids on the lease's own time (a clock that keeps
  // counting when the wall clock steps back), as the lease does: a step back of the wall clock
  // changes nothing, neither the ids' times nor their clock sequence.
  const dir = tempDir(t);
  const realNow = Date.now;
  t.after(() => {
    Date.now = realNow;
  });
  const gen = Generator.openSync(`file://${dir}?app=wall-back`);
  let previous = gen.nextId();
  const before = decode(previous);
  Date.now = () => realNow() - 5000;
  for (let i = 0; i < 2000; i++) {
    const id = gen.nextId();
    assert.ok(id > previous, 'strictly increasing');
    previous = id;
  }
  Date.now = realNow;
  const after = decode(previous);
  assert.equal(after.clockSeq, before.clockSeq, 'no clock-sequence switch');
  assert.ok(after.timestampMs >= before.timestampMs && after.timestampMs <= realNow() + 1, `time ${after.timestampMs - realNow()} ms from now`);
  gen.closeSync();
});

test('leased: every id is inside the persisted reservation (the state file), lone calls and bursts alike', (t) => {
  // A short reservation (20 ms), so that grants keep meeting its end: ids served in JavaScript
  // never go past what the lease persisted before granting them.
  const dir = tempDir(t);
  const gen = Generator.openSync(`file://${dir}?app=reserved&reserve=20ms`);
  const stateFile = join(dir, 'reserved', `worker-${gen.workerId}.state`);
  const persisted = (clockSeq) => {
    const line = readFileSync(stateFile, 'utf8').split('\n').find((l) => l.startsWith('high_water_ms '));
    const mark = line.split(' ')[1 + clockSeq];
    return mark === '-' ? -1 : Number(mark);
  };
  const until = Date.now() + 300;
  let checked = 0;
  while (Date.now() < until) {
    const ids = checked % 2 ? [gen.nextId()] : gen.nextIds(50);
    for (const id of ids) {
      const parts = decode(id);
      assert.ok(parts.timestampMs <= persisted(parts.clockSeq), `id at ${parts.timestampMs} past the reservation ${persisted(parts.clockSeq)}`);
    }
    checked++;
    msStart();
  }
  assert.ok(checked > 50, `only ${checked} rounds`);
  gen.closeSync();
});

test('stats(): a leased generator counts renewals and clock-sequence switches; a fixed one reports zeros', (t) => {
  const dir = tempDir(t);
  const gen = Generator.openSync(`file://${dir}?app=stats`);
  const now = Date.now();
  gen.nextIdAt(now);
  patiently(() => gen.nextIdAt(now - 5000)); // back 5 s: a new clock sequence, persisted first
  const stats = gen.stats();
  assert.equal(stats.leased, true);
  assert.equal(stats.state, 'active');
  assert.equal(stats.workerId, gen.workerId);
  assert.ok(stats.renewals >= 2, JSON.stringify(stats));
  assert.equal(stats.clockSeqSwitches, 1);
  assert.equal(stats.deadlineInMs, null);
  assert.ok(stats.reservedUntilMs > now);
  gen.closeSync();
  assert.equal(gen.stats().state, 'closed');
  const fixed = new Generator({ workerId: 3 });
  assert.deepEqual(fixed.stats(), {
    workerId: 3, state: 'active', leased: false, renewals: 0, renewalFailures: 0,
    clockStepsBack: 0, clockSeqSwitches: 0, waits: 0, waitUs: 0, deadlineInMs: null, reservedUntilMs: 0,
    measuredSkewMs: null,
  });
});
