// Generator.open('etcd://...') on a real three-member etcd cluster: three holders issue ids
// continuously while the cluster's leader is killed and restarted, then the new leader is frozen
// for 3 s and thawed. A majority serves throughout, so no lease may be lost: no id repeats, no
// refusal (`heal: false`, so a lost lease would show as LEASE_LOST), no id call takes 100 ms, and
// every holder is still active with its lease renewed. Closed, the worker ids are released (no
// key left under workers/), their records stay, and a newcomer on a released worker id issues
// ids above its previous holder's.
// `make test-node-etcd` starts the cluster (scripts/etcd-cluster.sh) and sets CLOCKFLAKE_ETCD_URL
// and CLOCKFLAKE_ETCD_DIR; run by hand without them, these tests are skipped.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { Generator, decode } from '../lib/index.mjs';

const url = process.env.CLOCKFLAKE_ETCD_URL;
const skip = url && process.env.CLOCKFLAKE_ETCD_DIR ? false : 'CLOCKFLAKE_ETCD_URL not set (make test-node-etcd starts a cluster)';
const script = fileURLToPath(new URL('../../scripts/etcd-cluster.sh', import.meta.url));
const run = promisify(execFile);

/** scripts/etcd-cluster.sh ARGS, without blocking the event loop (the holders keep issuing). */
async function cluster(...args) {
  const { stdout } = await run(script, args, { env: process.env });
  return stdout.trim();
}

const pause = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** One leased generator: every id kept, every call timed, every refusal counted by code. */
class Holder {
  constructor(gen) {
    this.gen = gen;
    this.workerId = gen.workerId;
    this.ids = new BigUint64Array(1 << 16);
    this.count = 0;
    this.longestMs = 0;
    this.refusals = new Map();
  }

  issue(count) {
    for (let i = 0; i < count; i++) {
      const asked = performance.now();
      try {
        const id = this.gen.nextId();
        if (this.count === this.ids.length) {
          const grown = new BigUint64Array(this.ids.length * 2);
          grown.set(this.ids);
          this.ids = grown;
        }
        this.ids[this.count++] = id;
      } catch (error) {
        this.refusals.set(error.code, (this.refusals.get(error.code) ?? 0) + 1);
      }
      this.longestMs = Math.max(this.longestMs, performance.now() - asked);
    }
  }

  issued() {
    return this.ids.subarray(0, this.count);
  }
}

test('etcd: the suite ran against a cluster when make asked for one', () => {
  if (process.env.CLOCKFLAKE_ETCD_REQUIRED === '1') assert.ok(!skip, 'CLOCKFLAKE_ETCD_URL and CLOCKFLAKE_ETCD_DIR must be set');
});

test('etcd: the leader killed and restarted, then frozen, under live holders: no id repeats, no lease lost, no call over 100 ms', { skip, timeout: 60_000 }, async (t) => {
  const app = `node-${process.pid}-${Date.now()}`;
  const uri = `${url}/?app=${app}&ttl=6s`;
  const holders = [];
  for (let i = 0; i < 3; i++) holders.push(new Holder(await Generator.open(uri, { heal: false })));
  const workers = holders.map((holder) => holder.workerId);
  assert.equal(new Set(workers).size, holders.length, `worker ids ${workers}`);
  const renewalsAtStart = holders.map((holder) => holder.gen.stats().renewals);
  const held = await cluster('etcdctl', 'get', '--prefix', '--keys-only', `/clockflake/${app}/workers/`);
  assert.deepEqual(held.split('\n').filter(Boolean).sort(), workers.map((w) => `/clockflake/${app}/workers/${w}`).sort());

  // Issues ids from every holder, a batch each per millisecond or so, until told to stop.
  let issuing = true;
  const loop = (async () => {
    while (issuing) {
      for (const holder of holders) holder.issue(20);
      await pause(1);
    }
  })();
  const steps = [];
  try {
    await pause(1500);
    const killed = await cluster('leader');
    await cluster('kill', killed);
    steps.push(`killed leader ${killed}`);
    await pause(3000);
    await cluster('restart', killed);
    steps.push(`restarted ${killed}`);
    await pause(1000);
    const frozen = await cluster('leader');
    await cluster('freeze', frozen);
    steps.push(`froze leader ${frozen}`);
    try {
      await pause(3000);
    } finally {
      await cluster('thaw', frozen);
    }
    steps.push(`thawed ${frozen}`);
    await pause(1500);
  } finally {
    issuing = false;
    await loop;
  }

  const every = [];
  for (const holder of holders) {
    const ids = holder.issued();
    const what = `worker id ${holder.workerId} (${steps.join(', ')})`;
    assert.ok(ids.length > 1000, `${what}: ${ids.length} ids`);
    assert.deepEqual(Object.fromEntries(holder.refusals), {}, `${what}: refusals`);
    assert.ok(holder.longestMs < 100, `${what}: an id call took ${holder.longestMs.toFixed(1)} ms`);
    for (let i = 1; i < ids.length; i++) assert.ok(ids[i] > ids[i - 1], `${what}: ids out of order at ${i}`);
    assert.equal(decode(ids[0]).workerId, holder.workerId);
    assert.equal(decode(ids[ids.length - 1]).workerId, holder.workerId);
    // Still held, and renewed through the kill and the freeze (the run is longer than the TTL).
    assert.equal(holder.gen.isActive, true, what);
    assert.ok(holder.gen.leaseRemainingMs > 0, `${what}: ${holder.gen.leaseRemainingMs} ms left`);
    const renewals = holder.gen.stats().renewals - renewalsAtStart[holders.indexOf(holder)];
    assert.ok(renewals >= 3, `${what}: ${renewals} renewals during the run`);
    every.push(ids);
    t.diagnostic(`${what}: ${ids.length} ids, longest call ${holder.longestMs.toFixed(2)} ms, ${renewals} renewals, ${holder.gen.stats().renewalFailures} failed`);
  }
  const all = new BigUint64Array(every.reduce((sum, ids) => sum + ids.length, 0));
  let at = 0;
  for (const ids of every) {
    all.set(ids, at);
    at += ids.length;
  }
  all.sort();
  for (let i = 1; i < all.length; i++) assert.notEqual(all[i], all[i - 1], `id ${all[i]} issued twice`);

  // Closed: every worker key deleted (the lease revoked), every record kept.
  for (const holder of holders) await holder.gen.close();
  assert.equal(await cluster('etcdctl', 'get', '--prefix', '--keys-only', `/clockflake/${app}/workers/`), '');
  const records = await cluster('etcdctl', 'get', '--prefix', '--keys-only', `/clockflake/${app}/state/`);
  assert.deepEqual(records.split('\n').filter(Boolean).sort(), workers.map((w) => `/clockflake/${app}/state/${w}`).sort());
  // A newcomer takes one of the released worker ids and issues above its previous holder's ids.
  const newcomer = await Generator.open(uri, { heal: false });
  try {
    const previous = holders.find((holder) => holder.workerId === newcomer.workerId);
    assert.ok(previous, `the newcomer took worker id ${newcomer.workerId}, none of ${workers}`);
    assert.ok(newcomer.nextId() > previous.issued().at(-1));
  } finally {
    await newcomer.close();
  }
});
