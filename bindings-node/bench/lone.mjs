// Lone calls: what a server issuing one id per request pays. Each call is the only one of its
// millisecond (the script spins until Date.now() moves on before each), timed alone.
//
//   node bindings-node/bench/lone.mjs [--before DIR] [--rounds 3] [--calls 2000]
//
// Every generator runs in its own fresh Node process, one after another, round after round
// (processes taking turns, so that the machine's noise falls on all alike): clockflake with a
// fixed worker id, clockflake leased (`Generator.open('file://...')` on a temporary directory),
// and the npm peers of bench/ (installed by `make setup-bench-node`). With `--before DIR` (the
// bindings-node folder of another checkout, built: lib/ and the native addon) its two
// clockflake rows run in the same turns. Reported: per generator the median over the rounds of
// each round's median ns per call, and its ratio to the fixed-worker generator of the same build.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { firstCall, keep, median } from './timing.mjs';

const args = process.argv.slice(2);
const option = (name, fallback) => (args.includes(name) ? args[args.indexOf(name) + 1] : fallback);
const ROUNDS = Number(option('--rounds', 3));
const CALLS = Number(option('--calls', 2000));
const EPOCH = 1_704_067_200_000;
const here = dirname(fileURLToPath(import.meta.url));

/** A `next()` for generator `name` of the package in `dir` (peers: from bench/node_modules), and its clean-up. */
function generator(name, dir) {
  const require = createRequire(join(here, 'lone.mjs'));
  if (name === 'fixed') {
    const gen = new (require(resolve(dir, 'lib/index.cjs')).Generator)({ workerId: 7 });
    return { next: () => gen.nextId() };
  }
  if (name === 'leased') {
    const { Generator } = require(resolve(dir, 'lib/index.cjs'));
    const leaseDir = mkdtempSync(join(os.tmpdir(), 'clockflake-lone-'));
    // openSync where the package has it (a checkout from before the asynchronous open has only open).
    const gen = (Generator.openSync ?? Generator.open).call(Generator, `file://${leaseDir}?app=lone`);
    const done = () => {
      (gen.closeSync ?? gen.close).call(gen);
      rmSync(leaseDir, { recursive: true, force: true });
    };
    return { next: () => gen.nextId(), done };
  }
  if (name === '@sapphire/snowflake') {
    const sapphire = new (require('@sapphire/snowflake').Snowflake)(EPOCH);
    return { next: () => sapphire.generate() };
  }
  if (name === 'snowflakify') {
    const snowflakify = new (require('snowflakify').default)();
    return { next: () => snowflakify.nextId() };
  }
  if (name === 'nodejs-snowflake') {
    const wasm = new (require('nodejs-snowflake').Snowflake)({ custom_epoch: EPOCH, instance_id: 7 });
    return { next: () => wasm.getUniqueID() };
  }
  throw new Error(`unknown generator ${name}`);
}

/** In a child: `CALLS` lone calls (warmed up first), the median ns of one, timer cost subtracted. */
function measure(name, dir) {
  const { next, done } = generator(name, dir);
  for (let i = 0; i < 2000; i++) keep.sink = next(); // warm-up: optimised code, as a server's
  firstCall(next, 200);
  const { median: ns } = firstCall(next, CALLS);
  done?.();
  return ns;
}

if (args[0] === '--child') {
  process.stdout.write(JSON.stringify(measure(args[1], args[2])));
} else {
  const after = resolve(here, '..');
  const before = option('--before', null);
  const runs = [];
  for (const [side, dir] of before === null ? [['', after]] : [['before', resolve(before)], ['after', after]]) {
    for (const name of ['fixed', 'leased']) runs.push({ label: `clockflake ${name === 'fixed' ? 'fixed worker id' : 'leased (file://)'}${side ? `, ${side}` : ''}`, name, dir, side });
  }
  for (const name of ['@sapphire/snowflake', 'snowflakify', 'nodejs-snowflake']) runs.push({ label: name, name, dir: after, side: null });
  const results = new Map(runs.map((run) => [run.label, []]));
  for (let round = 0; round < ROUNDS; round++) {
    // Alternate the order between rounds, so that no generator always runs right after another.
    for (const run of round % 2 ? [...runs].reverse() : runs) {
      const out = execFileSync(process.execPath, [fileURLToPath(import.meta.url), '--child', run.name, run.dir], { encoding: 'utf8' });
      results.get(run.label).push(JSON.parse(out));
    }
    process.stderr.write(`round ${round + 1}/${ROUNDS} done\n`);
  }
  // Peers (side null) are compared with this build's fixed-worker generator.
  const fixedOf = (side) => {
    const build = side ?? (before === null ? '' : 'after');
    return median(results.get(runs.find((r) => r.name === 'fixed' && r.side === build).label));
  };
  console.log(`Node ${process.version}, ${os.cpus()[0]?.model ?? 'unknown CPU'}, ${os.cpus().length} cores; ${ROUNDS} rounds of ${CALLS} lone calls per generator, each in its own process, in turns.\n`);
  console.log('| generator | lone call, ns (median of round medians) | per round | / fixed worker id (same build) |');
  console.log('|---|---:|---|---:|');
  for (const run of runs) {
    const values = results.get(run.label);
    const ratio = median(values) / fixedOf(run.side);
    console.log(`| ${run.label} | ${median(values).toFixed(0)} | ${values.map((v) => v.toFixed(0)).join(', ')} | ${ratio.toFixed(2)}x |`);
  }
}
