// `await Generator.open(uri)` and `await gen.close()` leave the event loop running while the
// coordinator does not answer (issue 38): a 10 ms timer keeps firing throughout. Their I/O runs on
// a thread of the native addon; the synchronous forms (`openSync`, `closeSync`) held the loop for
// as long as the coordinator took (measured: a gap of about 5,000 ms here, the open's whole wait).
//
// A coordinator that does not answer: a TCP server on loopback that accepts connections and never
// replies (as a frozen PostgreSQL does: its kernel still accepts), so the client waits out its
// patience (half the TTL) instead of being refused at once. For close, a generator leased through a
// proxy to the suite's PostgreSQL (CLOCKFLAKE_PG_URL, which `make test-node` starts), which then
// stops forwarding.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { Generator } from '../lib/index.mjs';

/** Longest gap between two ticks of a 10 ms timer that still counts as a running event loop. */
const MAX_GAP_MS = 200;

/**
 * Runs `work()` (a promise) while a 10 ms interval ticks; returns its outcome, how long it took
 * and the longest gap between ticks (the start and the end count as ticks).
 */
async function whileTicking(work) {
  const started = performance.now();
  let last = started;
  let longest = 0;
  const tick = () => {
    const now = performance.now();
    longest = Math.max(longest, now - last);
    last = now;
  };
  const timer = setInterval(tick, 10);
  let outcome;
  try {
    outcome = { value: await work() };
  } catch (error) {
    outcome = { error };
  }
  clearInterval(timer);
  tick();
  return { ...outcome, tookMs: performance.now() - started, longestGapMs: longest };
}

/** A TCP server that accepts every connection and never says a word. */
async function silentServer() {
  const sockets = new Set();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => {});
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: server.address().port,
    close() {
      for (const socket of sockets) socket.destroy();
      server.close();
    },
  };
}

/** A TCP proxy to `host:port` that can be frozen: from then on it forwards nothing, either way. */
async function freezableProxy(host, port) {
  const sockets = new Set();
  let frozen = false;
  const pairs = [];
  const server = net.createServer((client) => {
    sockets.add(client);
    client.on('error', () => {});
    if (frozen) return;
    const upstream = net.connect(port, host);
    sockets.add(upstream);
    upstream.on('error', () => {});
    client.pipe(upstream);
    upstream.pipe(client);
    pairs.push([client, upstream]);
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: server.address().port,
    freeze() {
      frozen = true;
      for (const [client, upstream] of pairs) {
        client.unpipe(upstream);
        upstream.unpipe(client);
        client.pause();
        upstream.pause();
      }
    },
    close() {
      for (const socket of sockets) socket.destroy();
      server.close();
    },
  };
}

test('await Generator.open keeps the event loop running while the coordinator does not answer', async (t) => {
  const silent = await silentServer();
  try {
    // ttl=10s: the connection is given up after its patience, half the TTL (5 s).
    const uri = `postgres://clockflake@127.0.0.1:${silent.port}/ids?app=loop&ttl=10s&sslmode=disable`;
    const run = await whileTicking(() => Generator.open(uri));
    t.diagnostic(`open waited ${Math.round(run.tookMs)} ms; longest gap between 10 ms ticks: ${Math.round(run.longestGapMs)} ms`);
    assert.equal(run.error?.code, 'COORDINATOR_UNAVAILABLE', String(run.error ?? 'opened'));
    assert.ok(run.tookMs >= 4000, `open gave up after ${Math.round(run.tookMs)} ms, not at the patience`);
    assert.ok(
      run.longestGapMs < MAX_GAP_MS,
      `the event loop stalled for ${Math.round(run.longestGapMs)} ms while open waited ${Math.round(run.tookMs)} ms`,
    );
  } finally {
    silent.close();
  }
});

const url = process.env.CLOCKFLAKE_PG_URL;
const skip = url ? false : 'CLOCKFLAKE_PG_URL not set (make test-node starts a server)';

test('the event-loop tests ran against a server when make asked for one', () => {
  if (process.env.CLOCKFLAKE_PG_REQUIRED === '1') assert.ok(url, 'CLOCKFLAKE_PG_URL must be set');
});

test('await gen.close() keeps the event loop running while the coordinator does not answer', { skip }, async (t) => {
  const target = new URL(url);
  const proxy = await freezableProxy(target.hostname, Number(target.port));
  try {
    const through = new URL(url);
    through.port = String(proxy.port);
    const uri = `${through.href}?app=loop${process.pid}&ttl=10s&sslmode=disable`;
    // Opening is set-up here, not the subject: a loaded machine may miss the 5 s patience once.
    let gen;
    for (let attempt = 1; !gen; attempt++) {
      try {
        gen = await Generator.open(uri);
      } catch (error) {
        if (error.code !== 'COORDINATOR_UNAVAILABLE' || attempt === 3) throw error;
      }
    }
    gen.nextId();
    proxy.freeze();
    const run = await whileTicking(() => gen.close());
    t.diagnostic(`close waited ${Math.round(run.tookMs)} ms; longest gap between 10 ms ticks: ${Math.round(run.longestGapMs)} ms`);
    // Ids stopped at the call, whatever the coordinator does.
    assert.throws(() => gen.nextId(), { code: 'GENERATOR_CLOSED' });
    assert.equal(gen.isActive, false);
    // Given up after a renewal in flight (2 s) or the release's patience (5 s): the worker id is
    // released by the lease's expiry instead.
    assert.equal(run.error?.code, 'COORDINATOR_UNAVAILABLE', String(run.error ?? 'closed'));
    assert.ok(run.tookMs >= 1500, `close gave up after ${Math.round(run.tookMs)} ms`);
    assert.ok(
      run.longestGapMs < MAX_GAP_MS,
      `the event loop stalled for ${Math.round(run.longestGapMs)} ms while close waited ${Math.round(run.tookMs)} ms`,
    );
  } finally {
    proxy.close();
  }
});

test('open resolves and close settles off the event loop with a coordinator that answers', async (t) => {
  const { mkdtempSync, rmSync } = await import('node:fs');
  const { tmpdir } = await import('node:os');
  const { join } = await import('node:path');
  const dir = mkdtempSync(join(tmpdir(), 'clockflake-loop-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const uri = `file://${dir}?app=loop`;
  const pending = Generator.open(uri);
  assert.ok(pending instanceof Promise);
  const gen = await pending;
  const first = gen.nextId();
  const closing = gen.close();
  assert.ok(closing instanceof Promise);
  // Ids stop at the call, before the release settles; every later close is the same promise.
  assert.throws(() => gen.nextId(), { code: 'GENERATOR_CLOSED' });
  assert.equal(gen.close(), closing);
  assert.equal(await closing, undefined);
  // Released: the next open takes the same worker id, above the first generator's ids.
  const again = await Generator.open(uri);
  assert.equal(again.workerId, gen.workerId);
  assert.ok(again.nextId() > first);
  const asyncDispose = typeof Symbol.asyncDispose === 'symbol' ? Symbol.asyncDispose : Symbol.for('nodejs.asyncDispose');
  await again[asyncDispose]();
  assert.equal(again.isActive, false);
});

test('every refusal of Generator.open is a rejection with the synchronous form\'s code', async () => {
  const rejects = (promise, code, ErrorClass = Error) =>
    assert.rejects(promise, (error) => error instanceof ErrorClass && error.code === code);
  await rejects(Generator.open(42), 'INVALID_ARG_TYPE', TypeError);
  await rejects(Generator.open('bogus://x'), 'INVALID_URI');
  await rejects(Generator.open('file:///tmp/x', { workerId: 1 }), 'UNKNOWN_OPTION', TypeError);
  await rejects(Generator.open('file:///proc/clockflake-cannot-exist'), 'COORDINATOR_UNAVAILABLE');
  // A refused connection fails at once, with the password nowhere in the message.
  await assert.rejects(Generator.open('postgres://someone:secret@127.0.0.1:1/ids?app=orders&ttl=10s'), (error) => {
    assert.equal(error.code, 'COORDINATOR_UNAVAILABLE');
    assert.doesNotMatch(error.message, /secret/);
    assert.equal(error.retryAtMs, null);
    return true;
  });
  assert.throws(() => Generator.openSync('bogus://x'), { code: 'INVALID_URI' });
});
