// make bench-node: clockflake against the npm peers, in one run.
//   node bench/bench.mjs [--runs N] [--write-benchmarks path/to/BENCHMARKS.md]
// Peers are installed by `make bench-node` into bench/node_modules (bench/package-lock.json).
//
// Per implementation and run:
//   sustained   ids/s of a tight nextId() loop for 1 s, and duplicates among every id of that second
//   raw         ns per call in bursts of 1,000 calls started just after the ms changes (median of 300)
//   decode      ns per decode of one of 1,000 fresh ids (median of 300 passes)
//   nextIds     clockflake only: ns per id of nextIds(1000) started just after a tick (median of 300)
//   public ids  clockflake only: ns per PublicIds encode / decode / encodeText / decodeText
// 'clockflake (leased, file://)' is Generator.open on a temporary directory: ids issued in
// JavaScript on the wasm engine within ticks the lease granted through its checks.
// Every figure reported is the median over the runs; ratios compare medians.
import { createRequire } from 'node:module';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import os from 'node:os';
import { burst, firstCall, median, perCall } from './timing.mjs';

const require = createRequire(import.meta.url);
const clockflake = require('../lib/index.cjs');
const { Snowflake: SapphireSnowflake } = require('@sapphire/snowflake');
const Snowflakify = require('snowflakify').default;
const { Snowflake: WasmSnowflake } = require('nodejs-snowflake');
const { uuidv7, UUID } = require('uuidv7');

const args = process.argv.slice(2);
const RUNS = args.includes('--runs') ? Number(args[args.indexOf('--runs') + 1]) : 5;
const writeTarget = args.includes('--write-benchmarks') ? args[args.indexOf('--write-benchmarks') + 1] : null;

const CAP = 4_096_000;
const EPOCH = 1_704_067_200_000;

const leaseDir = mkdtempSync(join(os.tmpdir(), 'clockflake-bench-lease-'));
const leased = clockflake.Generator.openSync(`file://${leaseDir}?app=bench`);
process.on('exit', () => {
  leased.closeSync();
  rmSync(leaseDir, { recursive: true, force: true });
});

function implementations() {
  const gen = new clockflake.Generator({ workerId: 7 });
  const sapphire = new SapphireSnowflake(EPOCH);
  const snowflakify = new Snowflakify();
  const wasm = new WasmSnowflake({ custom_epoch: EPOCH, instance_id: 7 });
  return [
    {
      name: 'clockflake',
      next: () => gen.nextId(),
      decode: (id) => clockflake.decode(id),
      batch: (n) => gen.nextIds(n),
    },
    {
      name: 'clockflake (leased, file://)',
      next: () => leased.nextId(),
      decode: (id) => clockflake.decode(id),
      batch: (n) => leased.nextIds(n),
    },
    { name: '@sapphire/snowflake', next: () => sapphire.generate(), decode: (id) => sapphire.deconstruct(id) },
    { name: 'snowflakify', next: () => snowflakify.nextId(), decode: (id) => snowflakify.destructure(id) },
    {
      name: 'nodejs-snowflake',
      next: () => wasm.getUniqueID(),
      decode: (id) => [WasmSnowflake.timestampFromID(id, EPOCH), WasmSnowflake.instanceIDFromID(id)],
    },
    { name: 'uuidv7', next: () => uuidv7(), decode: (id) => UUID.parse(id), strings: true },
  ];
}

function sustained(impl, seconds = 1) {
  const ids = impl.strings ? [] : new BigUint64Array(16_000_000);
  let n = 0;
  const next = impl.next;
  const cpuBefore = process.cpuUsage();
  const start = performance.now();
  const stop = start + seconds * 1000;
  let now = start;
  while (now < stop) {
    for (let i = 0; i < 1024; i++) {
      if (impl.strings) ids.push(next());
      else if (n < ids.length) ids[n++] = next();
      else next();
    }
    if (impl.strings) n = ids.length;
    now = performance.now();
  }
  const cpu = process.cpuUsage(cpuBefore);
  const rate = n / ((now - start) / 1000);
  // Share of the wall time this process was on a CPU: below 100%, other processes took whole ms.
  const cpuShare = (cpu.user + cpu.system) / 1000 / (now - start);
  const sorted = impl.strings ? ids.sort() : ids.subarray(0, n).sort();
  let duplicates = 0;
  for (let i = 1; i < sorted.length; i++) if (sorted[i] === sorted[i - 1]) duplicates++;
  return { rate, duplicates, count: n, cpuShare };
}

function decodeCost(impl, passes = 300) {
  const ids = Array.from({ length: 1000 }, () => impl.next());
  const decode = impl.decode;
  return perCall((i) => decode(ids[i]), passes);
}

/** ns per id of `nextIds(1000)` started just after a tick. */
const batchCost = (impl, bursts = 300) => burst(() => impl.batch(1000), bursts, 1) / 1000;

const results = new Map(); // name -> { rate: [], duplicates: [], raw: [], decode: [], batch: [] }
const impls = implementations();
for (const impl of impls) results.set(impl.name, { rate: [], duplicates: [], dupShare: [], cpuShare: [], raw: [], first: [], firstP99: [], decode: [], batch: [] });
const dateNow = [];
const codec = new clockflake.PublicIds(1, Buffer.from('clockflake-bench'));
const publicCost = { encode: [], decode: [], encodeText: [], decodeText: [] };

function publicIdCosts(passes = 300) {
  const ids = new clockflake.Generator({ workerId: 9 }).nextIds(1000);
  const pubs = Array.from(ids, (id) => codec.encode(id));
  const texts = Array.from(ids, (id) => codec.encodeText(id));
  const per = (fn) => perCall(fn, passes);
  return {
    encode: per((i) => codec.encode(ids[i])),
    decode: per((i) => codec.decode(pubs[i])),
    encodeText: per((i) => codec.encodeText(ids[i])),
    decodeText: per((i) => codec.decodeText(texts[i])),
  };
}

// Warm-up: every path once, so that the first run measures optimised code.
for (const impl of impls) {
  sustained(impl, 0.2);
  burst(impl.next, 20);
  decodeCost(impl, 20);
  if (impl.batch) batchCost(impl, 20);
}
publicIdCosts(20);

for (let run = 0; run < RUNS; run++) {
  dateNow.push(burst(() => Date.now()));
  for (const impl of impls) {
    const r = results.get(impl.name);
    const s = sustained(impl);
    r.rate.push(s.rate);
    r.duplicates.push(s.duplicates);
    r.dupShare.push(s.duplicates / s.count);
    r.cpuShare.push(s.cpuShare);
    r.raw.push(burst(impl.next));
    const first = firstCall(impl.next);
    r.first.push(first.median);
    r.firstP99.push(first.p99);
    r.decode.push(decodeCost(impl));
    if (impl.batch) r.batch.push(batchCost(impl));
  }
  const p = publicIdCosts();
  for (const key of Object.keys(publicCost)) publicCost[key].push(p[key]);
  process.stderr.write(`run ${run + 1}/${RUNS} done\n`);
}

const fmt = (x, digits = 1) => x.toFixed(digits);
const ours = results.get('clockflake');
const ourRaw = median(ours.raw);
const ourDecode = median(ours.decode);
const rows = [];
rows.push(
  '| package | sustained ids/s | % of 4,096,000 | CPU share | duplicates in 1 s (median, share) | raw ns/call | clockflake raw is | first call of a ms, ns (median / p99) | decode ns | clockflake decode is |',
);
rows.push('|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
for (const [name, r] of results) {
  const raw = median(r.raw);
  const decode = median(r.decode);
  // Read as written: "1.62x faster" when the peer takes longer, "1.06x slower" when it is quicker.
  const ratio = (theirs, mine) =>
    name === 'clockflake' ? '-' : theirs >= mine ? `${fmt(theirs / mine, 2)}x faster` : `${fmt(mine / theirs, 2)}x slower`;
  rows.push(
    `| ${name} | ${Math.round(median(r.rate)).toLocaleString('en-US')} | ${fmt((100 * median(r.rate)) / CAP, 2)}% | ${fmt(100 * median(r.cpuShare), 0)}% | ${median(r.duplicates).toLocaleString('en-US')} (${fmt(100 * median(r.dupShare), 1)}%) | ${fmt(raw)} | ${ratio(raw, ourRaw)} | ${fmt(median(r.first), 0)} / ${fmt(median(r.firstP99), 0)} | ${fmt(decode)} | ${ratio(decode, ourDecode)} |`,
  );
}
const batch = median(ours.batch);
const lease = results.get('clockflake (leased, file://)');
const leaseRaw = median(lease.raw);
const summary = [
  `- clockflake \`nextIds(1000)\` just after a tick: **${fmt(batch, 2)} ns per id** (${fmt((batch / ourRaw) * 100, 0)}% of one \`nextId()\` call).`,
  `- \`Date.now()\` alone, same bursts: ${fmt(median(dateNow))} ns per call; clockflake's \`nextId()\` costs ${fmt(ourRaw - median(dateNow))} ns on top of it.`,
  `- clockflake leased (\`Generator.open('file://...')\`): raw ${fmt(leaseRaw)} ns per \`nextId()\` against ${fmt(ourRaw)} ns static (${leaseRaw >= ourRaw ? '+' : ''}${fmt(leaseRaw - ourRaw)} ns: JavaScript issues the ids on the wasm engine within ticks the lease granted through its deadline and reservation checks, a native call every 100 ms; see the lone-call section); first call of a ms ${fmt(median(lease.first), 0)} ns against ${fmt(median(ours.first), 0)} ns; \`nextIds(1000)\` ${fmt(median(lease.batch), 2)} ns per id; sustained ${fmt((100 * median(lease.rate)) / CAP, 2)}% of the cap, duplicates in every run: ${lease.duplicates.join(', ')}.`,
  `- \`PublicIds\` (wasm calls): encode ${fmt(median(publicCost.encode))} ns, decode ${fmt(median(publicCost.decode))} ns, encodeText ${fmt(median(publicCost.encodeText))} ns, decodeText ${fmt(median(publicCost.decodeText))} ns per id.`,
  `- clockflake sustained per run: ${ours.rate.map((r, i) => `${fmt((100 * r) / CAP, 2)}% (CPU ${fmt(100 * ours.cpuShare[i], 0)}%)`).join(', ')}; duplicates in every run: ${ours.duplicates.join(', ')}.`,
];
const cpu = os.cpus()[0]?.model ?? 'unknown CPU';
// The same script runs in Node, Bun and Deno (make bench-node runs all three); each writes its
// own section of BENCHMARKS.md.
const runtime = globalThis.Bun
  ? { key: 'bun', title: '### Bun', name: `Bun ${globalThis.Bun.version}`, run: 'bun' }
  : globalThis.Deno
    ? { key: 'deno', title: '### Deno', name: `Deno ${globalThis.Deno.version.deno}`, run: 'deno run -A' }
    : { key: 'node', title: '## Node.js', name: `Node ${process.version}`, run: 'node' };
const when = new Date().toISOString().slice(0, 16).replace('T', ' ');
const section = [
  runtime.title,
  '',
  `Command: \`make bench-node\` (runs \`${runtime.run} bindings-node/bench/bench.mjs --runs ${RUNS} --write-benchmarks BENCHMARKS.md\` on the release build). ` +
    `${runtime.name}, ${cpu}, ${os.cpus().length} cores shared with other work; ${RUNS} runs, every figure the median over the runs; peers measured in the same run ` +
    `(@sapphire/snowflake, snowflakify, nodejs-snowflake, uuidv7 from bench/package-lock.json). Recorded ${when} UTC.`,
  '',
  ...rows,
  '',
  ...summary,
  '',
  'What the columns measure: *sustained* is a tight `nextId()` loop for 1 s, every id kept and checked for duplicates; ' +
    'the default layout allows 4,096 ids per ms per worker, so 4,096,000 ids/s is the cap, and a generator above it is issuing duplicates or borrowing future time. ' +
    '*raw* is the cost per call in bursts of 1,000 calls started just after the millisecond changes (below the cap, so nothing waits); ' +
    '*first call of a ms* is one call just after the millisecond changes, the timer cost subtracted, median and 99th percentile of 300 (what a caller needing an id now and then pays); ' +
    "a fixed-worker-id clockflake generator runs on the wasm engine (one wasm call per id), the leased one too, within ticks its lease granted; the addon's static napi engine (the *clockflake before* row of earlier runs) was removed in issue 16: the package's fixed-worker generator is the wasm engine. " +
    '*decode* is one id to its parts (clockflake `decode`, sapphire `deconstruct`, snowflakify `destructure`, nodejs-snowflake `timestampFromID` + `instanceIDFromID`, uuidv7 `UUID.parse`). ' +
    'uuidv7 ids are 128-bit strings, not 64-bit integers: listed for scale. *CPU share* is the CPU time of the process over the wall time of that loop (all generators spin or compute the whole second): on this shared 2-core machine other processes take whole milliseconds, and a millisecond the process is off the CPU is a millisecond of ids lost to every generator alike.',
].join('\n');

console.log(section);
if (writeTarget) {
  const text = readFileSync(writeTarget, 'utf8');
  const open = `<!-- section: ${runtime.key} -->`;
  const close = `<!-- /section: ${runtime.key} -->`;
  const a = text.indexOf(open);
  const b = text.indexOf(close);
  if (a < 0 || b < a) throw new Error(`no ${runtime.key} section markers in ${writeTarget}`);
  writeFileSync(writeTarget, `${text.slice(0, a + open.length)}\n${section}\n${text.slice(b)}`);
  console.error(`wrote the ${runtime.key} section of ${writeTarget}`);
}
