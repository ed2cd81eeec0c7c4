// `make bench-wasm`: the same measurements in Node (the `--target nodejs` build) and in headless
// Chromium (the browser build, in a worker), each next to the peer nodejs-snowflake.
//   node bench/run.mjs [--quick]
import { createRequire } from 'node:module';
import { chromium } from 'playwright-core';
import * as api from '../../bindings-node/lib/index.mjs';
import { measureAll } from './measure.mjs';
import { startServer } from '../www/serve.mjs';
import { CHROMIUM_ARGS } from '../tests/browser/args.mjs';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const quick = process.argv.includes('--quick');
const { Snowflake } = createRequire(import.meta.url)('nodejs-snowflake');
const { default: Hashids } = await import('hashids');
const CAP = 4_096_000;

function report(where, r) {
  const f = (ns) => `${ns.toFixed(1)} ns`;
  const rate = (n) => `${Math.round(n).toLocaleString('en-US')} ids/s`;
  console.log(`\n## ${where}`);
  console.log(`decode()          ${f(r.decode)}  (peer timestampFromID + instanceIDFromID: ${f(r.peerDecode)}; budget 40 ns)`);
  console.log(`decode(string)    ${f(r.decodeString)}  (a decimal id string; no budget)`);
  console.log(`nextId() raw      ${f(r.raw)}  (peer getUniqueID: ${f(r.peerRaw)}; ratio ${(r.peerRaw / r.raw).toFixed(2)}x; budget 60 ns)`);
  console.log(`nextId() sustained ${rate(r.sustained)} = ${((100 * r.sustained) / CAP).toFixed(2)}% of 4,096,000 (peer: ${rate(r.peerSustained)}; ratio ${(r.sustained / r.peerSustained).toFixed(2)}x)`);
  console.log(`Date.now()        ${f(r.dateNow)} (reference: every nextId() reads it)`);
  console.log(`PublicIds encode()      ${f(r.publicEncode)}   decode()     ${f(r.publicDecode)}  (bigint -> bigint)`);
  console.log(`PublicIds encodeText()  ${f(r.publicEncodeText)}  (peer hashids.encode: ${f(r.peerEncodeText)}; ratio ${(r.peerEncodeText / r.publicEncodeText).toFixed(2)}x)`);
  console.log(`PublicIds decodeText()  ${f(r.publicDecodeText)}  (peer hashids.decode: ${f(r.peerDecodeText)}; ratio ${(r.peerDecodeText / r.publicDecodeText).toFixed(2)}x)`);
}

const wasmBytes = statSync(new URL('../pkg/web/clockflake_wasm_bg.wasm', import.meta.url)).size;
console.log(`clockflake_wasm_bg.wasm: ${wasmBytes} bytes (${(wasmBytes / 1024).toFixed(1)} KiB of the 44 KiB budget)`);
console.log(`node ${process.version}`);
report('Node', measureAll({ api, Snowflake, Hashids, quick }));

const { server, url } = await startServer(0);
const userDataDir = mkdtempSync(join(tmpdir(), 'clockflake-bench-'));
const context = await chromium.launchPersistentContext(userDataDir, {
  executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
  headless: true,
  args: CHROMIUM_ARGS,
});
try {
  const page = context.pages()[0] ?? (await context.newPage());
  const t0 = Date.now();
  await page.goto(url);
  await page.waitForSelector('body[data-ready="true"]');
  console.log(`\ninspector page ready ${Date.now() - t0} ms after navigation`);
  await page.goto(`${url}bench/page.html${quick ? '?quick' : ''}`);
  await page.evaluate(() => 0);
  const result = await page.evaluate(() => window.benchResult);
  console.log(`${result.userAgent}; crossOriginIsolated ${result.crossOriginIsolated} (performance.now() resolution 5 us if true)`);
  report('Chromium (headless, dedicated worker)', result);
} finally {
  await context.close();
  server.close();
  rmSync(userDataDir, { recursive: true, force: true });
}
