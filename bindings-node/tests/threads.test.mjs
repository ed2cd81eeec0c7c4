// worker_threads: each thread loads the native module and uses its own generator and worker id;
// a Generator cannot be handed to another thread (structured clone copies none of its state).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Worker } from 'node:worker_threads';
import { Generator, decode } from '../lib/index.mjs';

const indexUrl = new URL('../lib/index.mjs', import.meta.url).href;

function runWorker(code, workerData) {
  return new Promise((resolve, reject) => {
    const worker = new Worker(code, { eval: true, workerData });
    let result;
    worker.on('message', (message) => {
      result = message;
    });
    worker.on('error', reject);
    worker.on('exit', (exitCode) => (exitCode === 0 ? resolve(result) : reject(new Error(`worker exited with ${exitCode}`))));
  });
}

test('four threads, four worker ids: 4 x 200,000 ids, no duplicates', async () => {
  const code = `
    const { parentPort, workerData, threadId } = require('node:worker_threads');
    import(${JSON.stringify(indexUrl)}).then(({ Generator }) => {
      // The recipe from the README: a base worker id per process plus the thread's index.
      const gen = new Generator({ workerId: workerData.base + workerData.index });
      parentPort.postMessage(gen.nextIds(200000));
    });
  `;
  const results = await Promise.all([0, 1, 2, 3].map((index) => runWorker(code, { base: 16, index })));
  const all = new BigUint64Array(800_000);
  results.forEach((ids, i) => {
    assert.equal(ids.length, 200_000);
    assert.equal(decode(ids[0]).workerId, 16 + i);
    all.set(ids, i * 200_000);
  });
  all.sort();
  for (let i = 1; i < all.length; i++) assert.notEqual(all[i], all[i - 1]);
});

test('a Generator posted to a thread arrives as an inert plain object', async () => {
  const gen = new Generator({ workerId: 3 });
  gen.nextId();
  const code = `
    const { parentPort, workerData } = require('node:worker_threads');
    parentPort.postMessage({
      keys: Object.keys(workerData),
      hasNextId: typeof workerData.nextId,
      proto: Object.getPrototypeOf(workerData) === Object.prototype,
    });
  `;
  const seen = await runWorker(code, gen);
  assert.deepEqual(seen, { keys: [], hasNextId: 'undefined', proto: true });
  assert.equal(typeof gen.nextId(), 'bigint', 'the original still works');
});
