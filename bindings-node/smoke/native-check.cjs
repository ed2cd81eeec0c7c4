// Loads one native addon directly and leases a worker id through it: for addons built for
// another CPU, run by a runtime of that CPU under qemu-user (make check-node-arm64 runs the
// linux-arm64-gnu addon in Bun for aarch64). The ids are decoded by the package's own decode
// (lib/, the wasm engine: make build-js), which must read back the leased worker id and the
// time they were taken at. Prints one line; exits non-zero on any failure.
//   <runtime> native-check.cjs path/to/clockflake.<platform>.node
'use strict';
const { mkdtempSync, rmSync } = require('node:fs');
const { tmpdir } = require('node:os');
const { join, resolve } = require('node:path');
const { pathToFileURL } = require('node:url');
const { decode } = require('../lib/index.cjs');

const native = require(resolve(process.argv[2]));
const dir = mkdtempSync(join(tmpdir(), 'clockflake-native-check-'));
try {
  const before = Date.now();
  const gen = native.openLeased(native.presetLayout('clockseq'), `${pathToFileURL(dir).href}?app=native-check`);
  const first = native.leasedNextId(gen);
  const second = native.leasedNextId(gen);
  const after = Date.now();
  if (!(second > first)) throw new Error(`ids not increasing: ${first} then ${second}`);
  const worker = native.leasedWorkerId(gen);
  const state = native.leasedState(gen);
  native.leasedClose(gen);
  if (state.workerId !== worker) throw new Error(`state's worker ${state.workerId}, leased ${worker}`);
  for (const id of [first, second]) {
    const parts = decode(id);
    if (parts.workerId !== worker) throw new Error(`${id}: decoded worker ${parts.workerId}, leased ${worker}`);
    // The lease keeps its own time (on CLOCK_BOOTTIME, set from the wall clock at open), which may
    // read a few ms off Date.now(): a second either way still tells a right decode from a wrong one.
    if (parts.timestampMs < before - 1000 || parts.timestampMs > after + 1000) {
      throw new Error(`${id}: decoded time ${parts.timestampMs}, taken between ${before} and ${after}`);
    }
  }
  console.log(`${process.arch}: leased worker ${worker}, ids ${first} < ${second}, ${native.errorCodes().length} error codes`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
