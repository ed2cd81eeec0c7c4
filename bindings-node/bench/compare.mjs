// Before and after a change, in one process: the package built in another checkout (BEFORE, its
// bindings-node folder with lib/ and, for the leased rows, its native addon built) beside this
// one's, measured in turns so that the machine's noise falls on both alike.
//
//   node bindings-node/bench/compare.mjs /path/to/before/bindings-node [--runs 5]
//
// Rows: nextId() in bursts of 1,000 started just after the millisecond changes (ns per call), the
// first call of a millisecond (median ns), nextIds(1000) (ns per id), decode (ns per id), and the
// same nextId() bursts on a leased generator (file:// in a temp dir). Medians over the runs.
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import { join, resolve } from 'node:path';
import { burst, firstCall, median, perCall } from './timing.mjs';

const args = process.argv.slice(2);
const beforeDir = args.find((arg) => !arg.startsWith('--') && !/^\d+$/.test(arg));
if (beforeDir === undefined) {
  console.error('usage: node bench/compare.mjs BEFORE_BINDINGS_NODE_DIR [--runs N]');
  process.exit(2);
}
const RUNS = args.includes('--runs') ? Number(args[args.indexOf('--runs') + 1]) : 5;
const require = createRequire(import.meta.url);
const builds = [
  ['before', require(resolve(beforeDir, 'lib/index.cjs'))],
  ['after', require('../lib/index.cjs')],
];

function decodeCost(lib, gen) {
  const ids = Array.from({ length: 1000 }, () => gen.nextId());
  return perCall((i) => lib.decode(ids[i]), 200);
}

const dirs = [];
const rows = new Map(); // row -> { before: [], after: [] }
const record = (row, which, value) => {
  if (!rows.has(row)) rows.set(row, { before: [], after: [] });
  rows.get(row)[which].push(value);
};
const subjects = builds.map(([which, lib]) => {
  const dir = mkdtempSync(join(os.tmpdir(), `clockflake-compare-${which}-`));
  dirs.push(dir);
  let leased = null;
  try {
    leased = lib.Generator.open(`file://${dir}?app=compare`);
  } catch (error) {
    console.error(`${which}: no leased rows (${error.code ?? error.message})`);
  }
  return { which, lib, gen: new lib.Generator({ workerId: 7 }), leased };
});

try {
  for (let run = 0; run < RUNS; run++) {
    for (const { which, lib, gen, leased } of run % 2 ? [...subjects].reverse() : subjects) {
      record('`nextId()`, bursts (ns per call)', which, burst(() => gen.nextId(), 200));
      record('`nextId()`, first call of a ms (ns)', which, firstCall(() => gen.nextId(), 200).median);
      record('`nextIds(1000)` (ns per id)', which, burst(() => gen.nextIds(1000), 50, 1) / 1000);
      record('`decode` (ns per id)', which, decodeCost(lib, gen));
      if (leased !== null) record('leased `nextId()` (file://), bursts (ns per call)', which, burst(() => leased.nextId(), 200));
    }
  }
} finally {
  for (const { leased } of subjects) leased?.close();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
}

console.log(`Node ${process.version}, ${RUNS} runs in turns, medians over the runs.\n`);
console.log('| row | before | after | after / before |');
console.log('|---|---|---|---|');
for (const [row, { before, after }] of rows) {
  if (before.length === 0 || after.length === 0) continue;
  const [b, a] = [median(before), median(after)];
  console.log(`| ${row} | ${b.toFixed(1)} | ${a.toFixed(1)} | ${(a / b).toFixed(2)} |`);
}
