// Each JavaScript recipe of docs/recipes/, run against its real framework. The node-postgres one
// needs CLOCKFLAKE_PG_URL (make test-recipes starts a throwaway PostgreSQL and sets it).
import { test } from 'node:test';
import assert from 'node:assert/strict';
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
