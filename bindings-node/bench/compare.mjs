// Before and after a change, in one command: the package built in another checkout (BEFORE, its
// bindings-node folder with lib/ and, for the leased row, its native addon built) and this one's,
// each measured in a fresh Node process (so that neither shares the other's JIT state), in turns,
// so that the machine's noise falls on both alike.
//
//   node bindings-node/bench/compare.mjs /path/to/before/bindings-node [--runs 5]
//
// Rows: nextId() in bursts of 1,000 started just after the millisecond changes (ns per call), the
// first call of a millisecond (median ns), nextIds(1000) (ns per id), decode (ns per id), and the
// same nextId() bursts on a leased generator (file:// in a temp dir). Medians over the runs.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { burst, firstCall, median, perCall } from './timing.mjs';

const args = process.argv.slice(2);
const RUNS = args.includes('--runs') ? Number(args[args.indexOf('--runs') + 1]) : 5;

/** One process's measurements of the package in `dir`: { row: value }. */
function measure(dir) {
  const lib = createRequire(import.meta.url)(resolve(dir, 'lib/index.cjs'));
  const gen = new lib.Generator({ workerId: 7 });
  const ids = Array.from({ length: 1000 }, () => gen.nextId());
  const rows = {
    '`nextId()`, bursts (ns per call)': burst(() => gen.nextId(), 200),
    '`nextId()`, first call of a ms (ns)': firstCall(() => gen.nextId(), 200).median,
    '`nextIds(1000)` (ns per id)': burst(() => gen.nextIds(1000), 50, 1) / 1000,
    '`decode` (ns per id)': perCall((i) => lib.decode(ids[i]), 200),
  };
  const leaseDir = mkdtempSync(join(os.tmpdir(), 'clockflake-compare-'));
  try {
    // openSync where the package has it (a checkout from before the asynchronous open has only open).
    const leased = (lib.Generator.openSync ?? lib.Generator.open).call(lib.Generator, `file://${leaseDir}?app=compare`);
    rows['leased `nextId()` (file://), bursts (ns per call)'] = burst(() => leased.nextId(), 200);
    (leased.closeSync ?? leased.close).call(leased);
  } catch (error) {
    console.error(`${dir}: no leased row (${error.code ?? error.message})`);
  } finally {
    rmSync(leaseDir, { recursive: true, force: true });
  }
  return rows;
}

if (args[0] === '--child') {
  process.stdout.write(JSON.stringify(measure(args[1])));
} else {
  const before = args.find((arg) => !arg.startsWith('--') && !/^\d+$/.test(arg));
  if (before === undefined) {
    console.error('usage: node bench/compare.mjs BEFORE_BINDINGS_NODE_DIR [--runs N]');
    process.exit(2);
  }
  const sides = [
    ['before', resolve(before)],
    ['after', resolve(dirname(fileURLToPath(import.meta.url)), '..')],
  ];
  const results = { before: [], after: [] };
  for (let run = 0; run < RUNS; run++) {
    for (const [side, dir] of run % 2 ? [...sides].reverse() : sides) {
      const out = execFileSync(process.execPath, [fileURLToPath(import.meta.url), '--child', dir], { encoding: 'utf8' });
      results[side].push(JSON.parse(out));
    }
  }
  console.log(`Node ${process.version}, ${RUNS} runs of each side in turns (a fresh process each), medians.\n`);
  console.log('| row | before | after | after / before |');
  console.log('|---|---|---|---|');
  for (const row of Object.keys(results.after[0])) {
    if (!(row in results.before[0])) continue;
    const b = median(results.before.map((r) => r[row]));
    const a = median(results.after.map((r) => r[row]));
    console.log(`| ${row} | ${b.toFixed(1)} | ${a.toFixed(1)} | ${(a / b).toFixed(2)} |`);
  }
}
