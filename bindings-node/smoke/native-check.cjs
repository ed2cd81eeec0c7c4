// Loads one native addon directly and leases a worker id through it: for addons built for
// another CPU, run by a runtime of that CPU under qemu-user (make check-node-arm64 runs the
// linux-arm64-gnu addon in Bun for aarch64). Prints one line; exits non-zero on any failure.
//   <runtime> native-check.cjs path/to/clockflake.<platform>.node
'use strict';
const { mkdtempSync, rmSync } = require('node:fs');
const { tmpdir } = require('node:os');
const { join } = require('node:path');

const native = require(require('node:path').resolve(process.argv[2]));
const dir = mkdtempSync(join(tmpdir(), 'clockflake-native-check-'));
try {
  const layout = native.presetLayout('clockseq');
  const gen = native.openLeased(layout, `file://${dir}?app=native-check`);
  const first = native.leasedNextId(gen);
  const second = native.leasedNextId(gen);
  if (!(second > first)) throw new Error(`ids not increasing: ${first} then ${second}`);
  const worker = native.leasedWorkerId(gen);
  native.leasedClose(gen);
  const parts = native.decodeBigint(layout, second);
  if (parts.workerId !== worker) throw new Error(`decoded worker ${parts.workerId}, leased ${worker}`);
  console.log(`${process.arch}: leased worker ${worker}, ids ${first} < ${second}, ${native.errorCodes().length} error codes`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
