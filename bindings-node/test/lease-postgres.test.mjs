// Generator.open against a real PostgreSQL: row leases, reuse after close, and LEASE_LOST when the
// server goes away for longer than the TTL (no id after the deadline), then a new lease once it
// is back. `make test-node` starts a throwaway server (scripts/postgres.sh) and sets
// CLOCKFLAKE_PG_URL / CLOCKFLAKE_PG_DIR; run by hand without them, these tests are skipped.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Generator, decode } from '../index.mjs';

const url = process.env.CLOCKFLAKE_PG_URL;
const skip = url ? false : 'CLOCKFLAKE_PG_URL not set (make test-node starts a server)';
const script = fileURLToPath(new URL('../../scripts/postgres.sh', import.meta.url));
const app = `node${process.pid}`;

test('postgres: the suite ran against a server when make asked for one', () => {
  if (process.env.CLOCKFLAKE_PG_REQUIRED === '1') assert.ok(url, 'CLOCKFLAKE_PG_URL must be set');
});

test('postgres: distinct leased worker ids, reuse after close, ids above the previous holder', { skip }, () => {
  const uri = `${url}?app=${app}-a&ttl=5s`;
  const a = Generator.open(uri);
  const b = Generator.open(uri);
  assert.notEqual(a.workerId, b.workerId);
  assert.doesNotMatch(a.coordinator, /password/);
  const ids = a.nextIds(10_000);
  for (let i = 1; i < ids.length; i++) assert.ok(ids[i] > ids[i - 1]);
  assert.equal(decode(ids[0]).workerId, a.workerId);
  const last = a.nextId();
  const released = a.workerId;
  a.close();
  const c = Generator.open(uri);
  assert.equal(c.workerId, released);
  assert.ok(c.nextId() > last);
  b.close();
  c.close();
});

test('postgres: server down past the TTL -> LEASE_LOST, no id after the deadline; a new lease once it is back', { skip }, async () => {
  const env = { ...process.env };
  const uri = `${url}?app=${app}-b&ttl=1s`;
  const gen = Generator.open(uri);
  gen.nextId();
  const haltedAt = performance.now();
  execFileSync(script, ['halt'], { env, stdio: 'inherit' });
  let lastIdAt = haltedAt;
  let error;
  try {
    const giveUp = haltedAt + 10_000;
    while (performance.now() < giveUp) {
      gen.nextId();
      lastIdAt = performance.now();
      await new Promise((resolve) => setTimeout(resolve, 1)); // let time pass at a few ids per ms
    }
  } catch (caught) {
    error = caught;
  }
  try {
    assert.ok(error, 'generation stops');
    assert.equal(error.code, 'LEASE_LOST', error.message);
    assert.match(error.message, /lease lost/);
    // The last renewal was sent before the halt, so the deadline is at most one TTL after it.
    assert.ok(lastIdAt - haltedAt < 1000, `last id ${Math.round(lastIdAt - haltedAt)} ms after the halt`);
    assert.equal(gen.isActive, false);
    assert.throws(() => gen.nextId(), { code: 'LEASE_LOST' });
    assert.throws(() => gen.nextIds(5), { code: 'LEASE_LOST' });
  } finally {
    execFileSync(script, ['resume'], { env, stdio: 'inherit' });
  }
  const again = Generator.open(uri);
  assert.equal(typeof again.nextId(), 'bigint');
  again.close();
  gen.close(); // a lost generator closes without error
});
