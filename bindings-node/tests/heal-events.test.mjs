// A healing generator's events (`gen.on('lost' | 'attemptFailed' | 'healed', listener)`) and its
// NODE_DEBUG=clockflake log lines, on a real file:// coordinator whose lock file is removed while
// held (the lease's check then finds it lost, and the generator leases again); and that a
// generator with listeners never keeps the process alive.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Generator } from '../lib/index.mjs';
import { workerLayout } from '../../tests/harness/layouts.mjs';

const LIB = new URL('../lib/index.mjs', import.meta.url).href;

/** A temporary directory, removed when test `t` ends (whether it passed or not). */
function tempDir(t) {
  const dir = mkdtempSync(join(tmpdir(), 'clockflake-node-events-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** Resolves once `done()` is true (checked every 10 ms on the event loop); rejects after `ms`. */
async function until(done, ms, what) {
  const deadline = Date.now() + ms;
  while (!done()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

// 2 worker bits: a pool of 4 worker ids.
const SMALL = workerLayout(2);

test('events: a lost lease emits lost, attemptFailed while the pool is full, then healed', async (t) => {
  const dir = tempDir(t);
  const uri = `file://${dir}?app=orders`;
  const gen = await Generator.open(uri, { layout: SMALL });
  assert.equal(gen.workerId, 0);
  const events = [];
  const healedOnce = [];
  for (const name of ['lost', 'attemptFailed', 'healed']) {
    assert.equal(
      gen.on(name, function listener(payload) {
        assert.equal(this, gen);
        events.push([name, payload]);
      }),
      gen,
    );
  }
  gen.once('healed', (payload) => healedOnce.push(payload));
  // Every other worker id held (without healing: they stay quiet), then worker id 0's lock file
  // removed and taken by a newcomer: the lease is lost and the pool is full.
  const others = [];
  for (let i = 0; i < 3; i += 1) others.push(await Generator.open(uri, { layout: SMALL, heal: false }));
  // Closed at the end (and, should the test fail first, here; the directory may be gone by then).
  t.after(() => Promise.allSettled(others.map((other) => other.close())));
  rmSync(join(dir, 'orders', 'worker-0.lock'));
  const newcomer = await Generator.open(uri, { layout: SMALL, heal: false });
  t.after(() => Promise.allSettled([newcomer.close()]));
  assert.equal(newcomer.workerId, 0);

  await until(() => events.some(([name]) => name === 'attemptFailed'), 15_000, 'a failed attempt');
  assert.equal(gen.isActive, false);
  const [lostName, lost] = events[0];
  assert.equal(lostName, 'lost');
  assert.equal(lost.workerId, 0);
  assert.match(lost.reason, /worker-0\.lock was removed or replaced while held/);
  const [, failed] = events.find(([name]) => name === 'attemptFailed');
  assert.equal(failed.error.code, 'WORKER_POOL_EXHAUSTED');
  assert.ok(failed.error instanceof Error && failed.error.message.length > 20, failed.error.message);
  assert.ok(Number.isSafeInteger(failed.retryInMs) && failed.retryInMs >= 100, String(failed.retryInMs));

  // A worker id freed: the next attempt takes it.
  await others[0].close();
  await until(() => events.some(([name]) => name === 'healed'), 15_000, 'the heal');
  const [, healed] = events.at(-1);
  assert.deepEqual(healed, { workerId: 1 });
  assert.deepEqual(healedOnce, [{ workerId: 1 }]);
  assert.deepEqual(
    events.map(([name]) => name).filter((name, i, names) => name !== 'attemptFailed' || names[i - 1] !== 'attemptFailed'),
    ['lost', 'attemptFailed', 'healed'],
  );
  assert.equal(gen.workerId, 1);
  assert.ok(gen.isActive);
  const stats = gen.stats();
  assert.equal(stats.losses, 1);
  assert.equal(stats.heals, 1);
  assert.equal(stats.healFailures, events.filter(([name]) => name === 'attemptFailed').length);
  assert.ok(gen.nextId() > 0n);
  await Promise.all([gen.close(), newcomer.close(), ...others.map((other) => other.close())]);
});

test('events: names and listeners are checked; off and once remove; a fixed generator takes listeners', () => {
  const gen = new Generator({ workerId: 1 });
  assert.throws(() => gen.on('error', () => {}), { name: 'TypeError', code: 'INVALID_ARG_VALUE', message: /unknown event: expected one of 'lost', 'attemptFailed', 'healed', found the string "error"/ });
  assert.throws(() => gen.on('lost', 'log'), { name: 'TypeError', code: 'INVALID_ARG_TYPE' });
  assert.throws(() => gen.off('heal', () => {}), { code: 'INVALID_ARG_VALUE' });
  const listener = () => {};
  assert.equal(gen.on('lost', listener).off('lost', listener).once('healed', listener).off('healed', listener), gen);
});

/** Runs `source` (an ES module importing the package as `clockflake`) in a child process of its own. */
function runChild(source, env = {}) {
  const script = `import * as clockflake from ${JSON.stringify(LIB)};\n${source}`;
  const childEnv = { ...process.env, ...env };
  if (env.NODE_DEBUG === undefined) delete childEnv.NODE_DEBUG;
  return spawnSync(process.execPath, ['--input-type=module', '-e', script], { env: childEnv, encoding: 'utf8', timeout: 30_000 });
}

// The lock file removed and taken by a newcomer; the healing generator takes worker id 1.
const LOSE_AND_HEAL = (dir) => `
const uri = ${JSON.stringify(`file://${dir}?app=orders`)};
// What a server's listening socket does: the events keep nothing alive by themselves.
const alive = setInterval(() => {}, 1000);
const gen = await clockflake.Generator.open(uri);
const healed = new Promise((resolve) => gen.on('healed', resolve));
(await import('node:fs')).rmSync(${JSON.stringify(join(dir, 'orders', 'worker-0.lock'))});
const newcomer = await clockflake.Generator.open(uri, { heal: false });
await healed;
await gen.close();
await newcomer.close();
clearInterval(alive);
console.log('healed');
`;

test('NODE_DEBUG=clockflake: a line on stderr for the loss and the heal; nothing without it', (t) => {
  const logged = runChild(LOSE_AND_HEAL(tempDir(t)), { NODE_DEBUG: 'clockflake' });
  assert.equal(logged.status, 0, logged.stderr);
  assert.equal(logged.stdout, 'healed\n');
  const lines = logged.stderr.trim().split('\n');
  assert.equal(lines.length, 2, logged.stderr);
  const pid = String(logged.pid);
  assert.match(lines[0], new RegExp(`^CLOCKFLAKE ${pid}: lease lost \\(worker id 0, file://.*\\?app=orders\\): .*worker-0\\.lock was removed or replaced while held.*; refusing ids and leasing again \\{`));
  assert.match(lines[1], new RegExp(`^CLOCKFLAKE ${pid}: leased worker id 1 again \\(file://.*\\?app=orders\\) \\{`));
  const fields = lines.map((line) => JSON.parse(line.slice(line.indexOf(' {') + 1)));
  assert.equal(fields[0].event, 'lost');
  assert.equal(fields[0].workerId, 0);
  assert.match(fields[0].coordinator, /^file:\/\/.*\?app=orders$/);
  assert.deepEqual(fields[1], { event: 'healed', coordinator: fields[0].coordinator, workerId: 1 });

  const quiet = runChild(LOSE_AND_HEAL(tempDir(t)));
  assert.equal(quiet.status, 0, quiet.stderr);
  assert.equal(quiet.stdout, 'healed\n');
  assert.equal(quiet.stderr, '');
});

test('a generator with listeners keeps no process alive: closed or left open, the process exits', (t) => {
  const dir = tempDir(t);
  const started = Date.now();
  const child = runChild(`
const uri = ${JSON.stringify(`file://${dir}?app=orders`)};
const closed = await clockflake.Generator.open(uri);
const leftOpen = await clockflake.Generator.open(uri);
for (const gen of [closed, leftOpen]) {
  for (const name of ['lost', 'attemptFailed', 'healed']) gen.on(name, () => {});
}
closed.nextId();
leftOpen.nextId();
await closed.close();
console.log('done');
`);
  assert.equal(child.error, undefined, 'the child did not exit by itself');
  assert.equal(child.signal, null);
  assert.equal(child.status, 0, child.stderr);
  assert.equal(child.stdout, 'done\n');
  assert.ok(Date.now() - started < 20_000);
});
