// The clock in ways a mocked clock cannot show, for the static generator (`new Generator`).
// - An excursion: the wall clock jumps an hour ahead for 1.5 s and comes back (libfaketime,
//   Debian's `faketime`) while a child process issues ids; within 2 s of the return its ids
//   carry the real time again, and no id repeats. (`Date.now()` follows the wall clock back at
//   once; the core's rollback policy moves to another clock sequence.)
// - Long ticks: with a 1-day unit and no sequence bits, the second `nextId()` of the day throws
//   SEQUENCE_EXHAUSTED with `retryAtMs` at once, rather than spinning until tomorrow.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const INDEX = require.resolve('../lib/index.cjs');
const { decode } = require('../lib/index.cjs');
const LIBFAKETIME = '/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1';
const HOUR_MS = 3_600_000;
const DAY_MS = 86_400_000;

// The child: 64 ids per timer turn (about a millisecond), a sample on stdout every 5 ms, every
// id into ids.bin at the end; stops when the parent creates `stop`.
const CHILD = `
const { Generator } = require(${JSON.stringify(INDEX)});
const fs = require('node:fs');
const dir = process.argv[1];
const gen = new Generator({ workerId: 5 });
const ids = [];
const started = performance.now();
let lastSample = -Infinity;
function turn() {
  for (let i = 0; i < 64; i++) ids.push(gen.nextId());
  if (performance.now() - lastSample >= 5) {
    lastSample = performance.now();
    process.stdout.write('id ' + ids[ids.length - 1] + '\\n');
  }
  if (performance.now() - started < 10000 && !fs.existsSync(dir + '/stop')) {
    setTimeout(turn, 1);
    return;
  }
  fs.writeFileSync(dir + '/ids.bin', new BigUint64Array(ids));
  process.stdout.write('done ' + ids.length + '\\n');
}
turn();
`;

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function setOffset(file, offset) {
  writeFileSync(`${file}.part`, `${offset}\n`);
  renameSync(`${file}.part`, file);
}

test('static generator: ids follow the wall clock back after an excursion to the future', async () => {
  assert.ok(existsSync(LIBFAKETIME), `${LIBFAKETIME} is missing: apt-get install -y faketime`);
  const dir = mkdtempSync(join(tmpdir(), 'clockflake-excursion-'));
  try {
    const offset = join(dir, 'faketime.rc');
    setOffset(offset, '+0s');
    const child = spawn(process.execPath, ['-e', CHILD, dir], {
      env: {
        ...process.env,
        LD_PRELOAD: LIBFAKETIME,
        FAKETIME_TIMESTAMP_FILE: offset,
        FAKETIME_NO_CACHE: '1',
        FAKETIME_DONT_FAKE_MONOTONIC: '1',
      },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const exited = new Promise((resolve) => child.on('exit', resolve));
    // Every line, stamped with the real time it arrived at (this process is not faked).
    const lines = [];
    let pending = '';
    let firstLine;
    const first = new Promise((resolve) => (firstLine = resolve));
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (chunk) => {
      const at = Date.now();
      pending += chunk;
      const parts = pending.split('\n');
      pending = parts.pop();
      for (const line of parts) lines.push([at, line]);
      firstLine();
    });
    await first;
    await sleep(300);
    setOffset(offset, '+3600s');
    const away = Date.now();
    await sleep(1500);
    setOffset(offset, '+0s');
    const back = Date.now();
    await sleep(2400);
    writeFileSync(join(dir, 'stop'), '');
    assert.equal(await exited, 0, 'the child failed');

    const samples = lines.filter(([, line]) => line.startsWith('id ')).map(([at, line]) => [at, decode(BigInt(line.slice(3)))]);
    const ahead = samples.filter(([at, parts]) => at > away && at < back && parts.timestampMs > at + HOUR_MS - 5000);
    assert.ok(ahead.length > 0, 'no id carried the excursion time: did libfaketime load?');
    const late = samples.filter(([at]) => at >= back + 2000);
    assert.ok(late.length >= 20, `only ${late.length} samples after the return`);
    for (const [at, parts] of late) {
      assert.ok(
        Math.abs(parts.timestampMs - at) < 1000,
        `${at - back} ms after the return an id carries ${parts.timestampMs} Unix ms, ${parts.timestampMs - at} ms from the real time`,
      );
    }
    const buffer = readFileSync(join(dir, 'ids.bin'));
    const ids = new BigUint64Array(buffer.buffer, buffer.byteOffset, buffer.length / 8);
    assert.ok(ids.length > 10_000, `only ${ids.length} ids`);
    assert.equal(new Set(ids).size, ids.length, 'an id repeated');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

// Runs in a child with a deadline: before the bound, the second id would spin for half a day.
const DAILY = `
const { Generator } = require(${JSON.stringify(INDEX)});
const epochMs = Date.now() - ${DAY_MS / 2};
const layout = { fields: [{ name: 'timestamp', bits: 20 }, { name: 'worker', bits: 4 }, { name: 'sequence', bits: 0 }], unitMs: ${DAY_MS}, epochMs };
const outcome = { nextDay: epochMs + ${DAY_MS}, calls: [] };
function attempt(name, fn) {
  const started = performance.now();
  try {
    fn();
    outcome.calls.push({ name, ok: true });
  } catch (error) {
    outcome.calls.push({ name, class: error.constructor.name, code: error.code, retryAtMs: error.retryAtMs, message: error.message, tookMs: performance.now() - started });
  }
}
const gen = new Generator({ workerId: 3, layout });
gen.nextId();
attempt('nextId', () => gen.nextId());
attempt('nextIds', () => gen.nextIds(1));
attempt('fresh nextIds(2)', () => new Generator({ workerId: 4, layout }).nextIds(2));
const clocked = new Generator({ workerId: 3, layout, clock: () => outcome.nextDay - 3 * ${HOUR_MS} });
clocked.nextId();
attempt('nextId on options.clock', () => clocked.nextId());
process.stdout.write(JSON.stringify(outcome));
`;

test('static generator: a full tick whose successor is a day away throws SEQUENCE_EXHAUSTED at once', () => {
  const run = spawnSync(process.execPath, ['-e', DAILY], { encoding: 'utf8', timeout: 5000 });
  assert.equal(run.error, undefined, `the child was still waiting after 5 s: ${run.error}`);
  assert.equal(run.status, 0, run.stderr);
  const { nextDay, calls } = JSON.parse(run.stdout);
  assert.equal(calls.length, 4);
  for (const call of calls) {
    assert.equal(call.code, 'SEQUENCE_EXHAUSTED', `${call.name}: ${JSON.stringify(call)}`);
    assert.equal(call.class, 'ClockflakeError', call.name);
    assert.equal(call.retryAtMs, nextDay, call.name);
    assert.ok(call.message.includes(String(nextDay)), call.message);
    assert.ok(call.tookMs < 100, `${call.name} took ${call.tookMs} ms`);
  }
});
