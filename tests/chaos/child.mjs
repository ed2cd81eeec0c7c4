// One side of the chaos tests: see lease/examples/chaos_child.rs (same protocol, in Node).
//   node child.mjs URI MS
import { createRequire } from 'node:module';
import { performance } from 'node:perf_hooks';

const require = createRequire(import.meta.url);
const { Generator, decode } = require('../../bindings-node');

const sleep = (ms) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);

function openRetrying(uri) {
  const started = Date.now();
  for (;;) {
    try {
      // heal: false, as chaos_child.rs opens a plain leased generator: the test checks the
      // lease's deadline (LEASE_LOST), not healing.
      return Generator.openSync(uri, { heal: false });
    } catch (error) {
      if (Date.now() - started > 30_000) throw error;
      sleep(200);
    }
  }
}

const [uri, runMs] = [process.argv[2], Number(process.argv[3])];
const gen = openRetrying(uri);
process.stdout.write('ready\n');
const maxByCs = new Map();
let calls = 0, ok = 0, okAfterLost = 0, maxCall = 0, lastOkWallMs = 0, firstLostWallMs = 0;
const errors = {};
let errorBeforeLost = null;
const end = performance.now() + runMs;
while (performance.now() < end) {
  const call = performance.now();
  let id;
  try {
    id = gen.nextId();
  } catch (error) {
    maxCall = Math.max(maxCall, performance.now() - call);
    calls++;
    errors[error.code] = (errors[error.code] ?? 0) + 1;
    if (error.code === 'LEASE_LOST') firstLostWallMs ||= Date.now();
    else if (!firstLostWallMs && errorBeforeLost === null) errorBeforeLost = String(error.message);
    sleep(1);
    continue;
  }
  maxCall = Math.max(maxCall, performance.now() - call);
  calls++;
  ok++;
  lastOkWallMs = Date.now();
  if (firstLostWallMs) okAfterLost++;
  const cs = decode(id).clockSeq;
  if (!maxByCs.has(cs) || id > maxByCs.get(cs)) maxByCs.set(cs, id);
}
const worker = gen.workerId;
try { gen.closeSync(); } catch { /* a lost lease may refuse to store its state */ }
const again = openRetrying(uri);
let belowOld = 0;
for (let i = 0; i < 1000; i++) {
  const id = again.nextId();
  const parts = decode(id);
  if (parts.workerId === worker && maxByCs.has(parts.clockSeq) && id <= maxByCs.get(parts.clockSeq)) belowOld++;
}
process.stdout.write(JSON.stringify({
  language: 'node', worker, calls, ok, max_call_ms: Number(maxCall.toFixed(3)),
  last_ok_wall_ms: lastOkWallMs, first_lost_wall_ms: firstLostWallMs, ok_after_lost: okAfterLost,
  errors, error_before_lost: errorBeforeLost, new_worker: again.workerId, new_ids_below_old: belowOld,
}) + '\n');
again.closeSync();
