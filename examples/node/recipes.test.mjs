// Each JavaScript recipe of docs/recipes/, run against its real framework. The node-postgres one
// needs CLOCKFLAKE_PG_URL (make test-recipes starts a throwaway PostgreSQL and sets it).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, unlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import express from 'express';
import pg from 'pg';
import { Generator, decode, idRange } from 'clockflake';
import { createApp as expressApp } from './express.mjs';
import { createApp as fastifyApp } from './fastify.mjs';
import { example as drizzleExample } from './drizzle.mjs';
import { ordersBetween, saveOrders } from './node-postgres.mjs';

const TWO_53 = 2n ** 53n;

test('express: without the replacer res.json fails on a bigint; with it, ids are strings', async () => {
  const plain = express();
  plain.get('/', (_req, res) => res.json({ id: 1n }));
  plain.use((_error, _req, res, _next) => res.status(500).end()); // quiet: the 500 is expected
  const ids = new Generator({ workerId: 3 });
  const servers = [plain.listen(0), expressApp(ids).listen(0)];
  try {
    await Promise.all(servers.map((s) => new Promise((resolve) => s.once('listening', resolve))));
    const [bare, app] = servers.map((s) => `http://127.0.0.1:${s.address().port}`);
    assert.equal((await fetch(`${bare}/`)).status, 500); // the problem the recipe solves
    const made = [];
    for (let i = 0; i < 50; i++) {
      const response = await fetch(`${app}/orders`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ item: `item ${i}` }) });
      assert.equal(response.status, 201);
      made.push(await response.json());
    }
    assert.ok(made.every((o) => typeof o.id === 'string' && BigInt(o.id) > TWO_53));
    assert.equal(new Set(made.map((o) => o.id)).size, 50);
    const again = await (await fetch(`${app}/orders/${made[7].id}`)).json();
    assert.deepEqual(again, made[7]);
    assert.equal(decode(again.id).workerId, 3);
    assert.equal((await fetch(`${app}/orders/12.5`)).status, 400);
    assert.equal((await fetch(`${app}/orders/12`)).status, 404);
  } finally {
    for (const s of servers) s.close();
    ids.close();
  }
});

test('fastify: the reply serializer and a string schema send ids as strings', async () => {
  const ids = new Generator({ workerId: 4 });
  const app = fastifyApp(ids);
  try {
    const created = await app.inject({ method: 'POST', url: '/orders', payload: { item: 'book' } });
    assert.equal(created.statusCode, 201);
    const order = created.json();
    assert.equal(typeof order.id, 'string');
    assert.equal(decode(order.id).workerId, 4);
    const fetched = await app.inject({ method: 'GET', url: `/orders/${order.id}` });
    assert.equal(fetched.statusCode, 200);
    assert.equal(fetched.json().id, order.id); // exact: a JSON number would have been rounded
  } finally {
    await app.close();
    ids.close();
  }
});

// Runs a recipe as `node FILE` would be run, with its lease in `uri` and a free port; `started`
// resolves with the URL and worker id it prints once it listens.
function start(file, uri) {
  const path = fileURLToPath(new URL(file, import.meta.url));
  const env = { ...process.env, CLOCKFLAKE_URI: uri, PORT: '0' };
  const child = spawn(process.execPath, [path], { env, stdio: ['ignore', 'pipe', 'inherit'] });
  let output = '';
  const exited = new Promise((resolve) => {
    child.once('exit', (code, signal) => resolve({ code, signal }));
  });
  const started = new Promise((resolve, reject) => {
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (chunk) => {
      output += chunk;
      const listening = /(http:\/\/\S+) worker (\d+)/.exec(output);
      if (listening) resolve({ url: listening[1], workerId: Number(listening[2]) });
    });
    child.once('exit', (code) => reject(new Error(`${file} exited (${code}): ${output}`)));
  });
  return { child, started, exited, output: () => output };
}

for (const file of ['./express.mjs', './fastify.mjs']) {
  test(`${file}: a leased worker id, /readyz, and SIGTERM that closes the generator`, async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'clockflake-recipe-'));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    const uri = `file://${dir}/ids?app=orders`;
    const run = start(file, uri);
    try {
      const { url, workerId } = await run.started;
      assert.equal(workerId, 0);
      const ready = await fetch(`${url}/readyz`);
      assert.equal(ready.status, 200);
      assert.deepEqual(await ready.json(), { state: 'active', workerId: 0, lastLoss: null });
      const created = await fetch(`${url}/orders`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ item: 'book' }),
      });
      assert.equal(created.status, 201);
      assert.equal(decode((await created.json()).id).workerId, 0);
      run.child.kill('SIGTERM');
      // Exits by itself (nothing left on the event loop) once close() has released the worker id.
      assert.deepEqual(await run.exited, { code: 0, signal: null });
      assert.match(run.output(), /worker 0 released/);
      const newcomer = await Generator.open(uri);
      assert.equal(newcomer.workerId, 0);
      await newcomer.close();
    } finally {
      run.child.kill('SIGKILL'); // only if a check failed before it exited
    }
  });
}

test('express and fastify: /readyz answers 503 while a lost lease heals, 200 once it has', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'clockflake-recipe-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const uri = `file://${dir}/ids?app=orders`;
  // Two worker ids in all (one worker bit), so that healing waits while both are held.
  const layout = {
    fields: [
      { name: 'timestamp', bits: 41 },
      { name: 'worker', bits: 1 },
      { name: 'sequence', bits: 12 },
    ],
    epochMs: Date.UTC(2024, 0, 1),
  };
  const ids = await Generator.open(uri, { layout });
  const other = await Generator.open(uri, { layout });
  const server = expressApp(ids).listen(0);
  const fastify = fastifyApp(ids);
  let newcomer = null;
  const until = async (ready, what) => {
    const deadline = Date.now() + 10_000;
    while ((await viaExpress()).status !== (ready ? 200 : 503)) {
      assert.ok(Date.now() < deadline, `not ${what} 10 s later`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  };
  const viaExpress = () => fetch(`http://127.0.0.1:${server.address().port}/readyz`);
  const viaFastify = () => fastify.inject({ method: 'GET', url: '/readyz' });
  try {
    await new Promise((resolve) => server.once('listening', resolve));
    assert.equal((await viaExpress()).status, 200);
    assert.equal((await viaFastify()).statusCode, 200);
    unlinkSync(join(dir, 'ids', 'orders', 'worker-0.lock')); // lost at the next renewal
    newcomer = await Generator.open(uri, { layout }); // takes worker id 0: the pool is full
    assert.equal(newcomer.workerId, 0);
    await until(false, 'unready');
    const unready = await viaExpress();
    const body = await unready.json();
    assert.equal(unready.status, 503);
    assert.equal(body.state, 'healing');
    assert.equal(body.workerId, null);
    assert.match(body.lastLoss, /worker-0.lock was removed/);
    const fromFastify = await viaFastify();
    assert.equal(fromFastify.statusCode, 503);
    assert.equal(fromFastify.json().state, 'healing');
    await other.close(); // frees worker id 1: the generator heals onto it
    await until(true, 'ready again');
    assert.deepEqual((await viaFastify()).json().workerId, 1);
    assert.equal(decode(ids.nextId(), layout).workerId, 1);
  } finally {
    server.close();
    await fastify.close();
    await ids.close();
    await other.close();
    await newcomer?.close();
  }
});

test('node-postgres: bigint ids in and out of a BIGINT column, and a time-range scan', async (t) => {
  const url = process.env.CLOCKFLAKE_PG_URL;
  if (!url) return t.skip('no CLOCKFLAKE_PG_URL (make test-recipes starts a PostgreSQL)');
  const pool = new pg.Pool({ connectionString: url });
  const ids = new Generator({ workerId: 5 });
  try {
    await pool.query('DROP TABLE IF EXISTS orders');
    const from = Date.now();
    const saved = await saveOrders(pool, ids, ['a', 'b', 'c']);
    const [low, high] = idRange(from, Date.now() + 1000);
    const rows = await ordersBetween(pool, low, high);
    assert.deepEqual(rows.map((r) => r.id), saved);
    assert.ok(rows.every((r) => typeof r.id === 'bigint' && r.id > TWO_53));
  } finally {
    await pool.query('DROP TABLE IF EXISTS orders');
    await pool.end();
    ids.close();
  }
});

test('drizzle: a bigint primary key defaulting to the next id, read back as bigints', async (t) => {
  const url = process.env.CLOCKFLAKE_PG_URL;
  if (!url) return t.skip('no CLOCKFLAKE_PG_URL (make test-recipes starts a PostgreSQL)');
  const pool = new pg.Pool({ connectionString: url });
  const ids = new Generator({ workerId: 6 });
  try {
    await pool.query('DROP TABLE IF EXISTS drizzle_orders');
    const { made, one, all } = await drizzleExample(pool, ids);
    assert.equal(made.length, 2);
    assert.ok(made.every((o) => typeof o.id === 'bigint' && o.id > TWO_53 && decode(o.id).workerId === 6));
    assert.ok(made[0].id < made[1].id);
    assert.deepEqual(one, made[0]);
    assert.deepEqual(all, made);
  } finally {
    await pool.query('DROP TABLE IF EXISTS drizzle_orders');
    await pool.end();
    ids.close();
  }
});
