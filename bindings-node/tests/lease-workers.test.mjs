// Every cluster worker and every worker_thread opens its own lease on one file:// directory:
// 8 x 100,000 ids through nextId() in each case, zero duplicates, 8 distinct worker ids.
// Each child keeps its lease until the parent has every child's ids, so all 8 hold at once.
//
// This file is also the cluster workers' script: with CLOCKFLAKE_LEASE_CHILD set it generates
// instead of registering tests.
import cluster from 'node:cluster';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';

const CHILDREN = 8;
const PER_CHILD = 100_000;
const indexUrl = new URL('../lib/index.mjs', import.meta.url).href;

/** What each child runs: open, generate through nextId(), report, close when told. */
function generate(Generator, uri) {
  const gen = Generator.openSync(uri);
  const ids = new BigUint64Array(PER_CHILD);
  for (let i = 0; i < PER_CHILD; i++) ids[i] = gen.nextId();
  return { gen, result: { workerId: gen.workerId, pid: process.pid, ids } };
}

if (cluster.isWorker && process.env.CLOCKFLAKE_LEASE_CHILD) {
  const { Generator } = await import(indexUrl);
  const { gen, result } = generate(Generator, process.env.CLOCKFLAKE_LEASE_CHILD);
  process.on('message', (message) => {
    if (message === 'close') {
      gen.closeSync();
      process.disconnect();
    }
  });
  process.send(result);
} else {
  const { test } = await import('node:test');
  const assert = (await import('node:assert/strict')).default;
  const { decode } = await import(indexUrl);

  function checkAll(results) {
    assert.equal(results.length, CHILDREN);
    const workerIds = new Set(results.map((r) => r.workerId));
    assert.equal(workerIds.size, CHILDREN, `8 distinct worker ids, got ${[...workerIds]}`);
    const all = new BigUint64Array(CHILDREN * PER_CHILD);
    results.forEach((r, i) => {
      assert.equal(r.ids.length, PER_CHILD);
      for (let j = 1; j < PER_CHILD; j++) assert.ok(r.ids[j] > r.ids[j - 1], 'strictly increasing within a child');
      assert.equal(decode(r.ids[0]).workerId, r.workerId);
      assert.equal(decode(r.ids[PER_CHILD - 1]).workerId, r.workerId);
      all.set(r.ids, i * PER_CHILD);
    });
    all.sort();
    let duplicates = 0;
    for (let i = 1; i < all.length; i++) if (all[i] === all[i - 1]) duplicates++;
    assert.equal(duplicates, 0, 'no duplicate among 800,000 ids');
  }

  /**
   * Starts CHILDREN children with `start(uri)` on a fresh lease directory, checks the results
   * they send, then tells each to close (`tell(child)`) and waits until every one has exited.
   * A child that fails or exits non-zero before reporting fails the test.
   */
  async function leaseInChildren(t, what, start, tell) {
    const dir = mkdtempSync(join(tmpdir(), `clockflake-node-${what}-`));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    const uri = `file://${dir}?app=${what}`;
    const children = [];
    const results = await new Promise((resolve, reject) => {
      const got = [];
      for (let i = 0; i < CHILDREN; i++) {
        const child = start(uri);
        children.push(child);
        child.on('message', (message) => {
          got.push(message);
          if (got.length === CHILDREN) resolve(got);
        });
        child.on('error', reject);
        child.on('exit', (code) => {
          if (code !== 0) reject(new Error(`a child (${what}) exited with ${code}`));
        });
      }
    });
    checkAll(results);
    const exits = children.map((child) => new Promise((resolve) => child.on('exit', resolve)));
    for (const child of children) tell(child);
    await Promise.all(exits);
    return results;
  }

  test('cluster: 8 workers each open their own lease, 8 x 100,000 ids, no duplicates', async (t) => {
    cluster.setupPrimary({ exec: fileURLToPath(import.meta.url), execArgv: [], serialization: 'advanced', silent: false });
    const results = await leaseInChildren(
      t,
      'cluster',
      (uri) => cluster.fork({ CLOCKFLAKE_LEASE_CHILD: uri, NODE_TEST_CONTEXT: '' }),
      (worker) => worker.send('close'),
    );
    assert.equal(new Set(results.map((r) => r.pid)).size, CHILDREN, '8 processes');
  });

  test('worker_threads: 8 threads each open their own lease, 8 x 100,000 ids, no duplicates', async (t) => {
    const code = `
      const { parentPort, workerData } = require('node:worker_threads');
      import(${JSON.stringify(indexUrl)}).then(({ Generator }) => {
        const gen = Generator.openSync(workerData.uri);
        const ids = new BigUint64Array(workerData.count);
        for (let i = 0; i < ids.length; i++) ids[i] = gen.nextId();
        parentPort.once('message', () => { gen.closeSync(); parentPort.close(); });
        parentPort.postMessage({ workerId: gen.workerId, pid: process.pid, ids });
      });
    `;
    const results = await leaseInChildren(
      t,
      'threads',
      (uri) => new Worker(code, { eval: true, workerData: { uri, count: PER_CHILD } }),
      (thread) => thread.postMessage('close'),
    );
    assert.equal(new Set(results.map((r) => r.pid)).size, 1, 'one process');
  });
}
