// The ID inspector page in a real headless Chromium (Debian's /usr/bin/chromium, driven by
// playwright-core): decoding every preset cell by cell, junk lines, generating ids, a custom
// layout, and the shared vectors run inside the page. Saves a screenshot to test-output/.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { startServer } from '../../www/serve.mjs';
import { CHROMIUM_ARGS } from './args.mjs';

const HERE = dirname(fileURLToPath(import.meta.url));
const WASM_DIR = join(HERE, '..', '..');
const VECTORS = join(WASM_DIR, '..', 'tests', 'vectors');
const OUTPUT = join(WASM_DIR, 'test-output');
const PRESETS = ['clockseq', 'twitter', 'discord', 'sonyflake', 'baidu', 'js53'];
const TIME_ZONE = 'Asia/Kolkata'; // UTC+05:30 all year: the local column is checkable

let server;
let origin;
let context;
let page;
let userDataDir;
const requests = [];
const pageErrors = [];

before(async () => {
  const started = await startServer(0);
  server = started.server;
  origin = started.url;
  userDataDir = mkdtempSync(join(tmpdir(), 'clockflake-chromium-'));
  context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    headless: true,
    args: CHROMIUM_ARGS,
    timezoneId: TIME_ZONE,
    viewport: { width: 1360, height: 900 },
  });
  page = context.pages()[0] ?? (await context.newPage());
  page.on('request', (request) => requests.push(request.url()));
  page.on('pageerror', (error) => pageErrors.push(String(error)));
  page.on('console', (message) => {
    if (message.type() === 'error') pageErrors.push(message.text());
  });
  const t0 = Date.now();
  await page.goto(origin);
  await page.waitForSelector('body[data-ready="true"]', { timeout: 15_000 });
  console.log(`# page ready ${Date.now() - t0} ms after navigation (${await page.textContent('#status')})`);
});

after(async () => {
  await context?.close();
  server?.close();
  if (userDataDir) rmSync(userDataDir, { recursive: true, force: true });
});

async function show(layout, text) {
  await page.selectOption('#layout', layout);
  await page.fill('#ids', text);
}

/** Every row of the table as { line, cells: {col: text}, invalid }. */
function readRows() {
  return page.$$eval('#rows tr', (rows) =>
    rows.map((row) => ({
      invalid: row.classList.contains('invalid'),
      cells: Object.fromEntries([...row.querySelectorAll('td')].map((td) => [td.dataset.col, td.textContent])),
    })),
  );
}

const utcCell = (ms) => new Date(ms).toISOString().replace('T', ' ').replace('Z', ' UTC');
const kolkataCell = (ms) => new Date(ms + 5.5 * 3_600_000).toISOString().replace('T', ' ').replace('Z', ' UTC+05:30');

/** Age as the page words it, for a given "now". */
function ageCell(ms) {
  let rest = Math.abs(ms);
  if (rest < 1000) return ms < 0 ? `in ${rest} ms` : `${rest} ms`;
  const units = [['y', 31_536_000_000], ['d', 86_400_000], ['h', 3_600_000], ['min', 60_000], ['s', 1000]];
  const parts = [];
  for (const [name, size] of units) {
    if (rest >= size && parts.length < 2) {
      parts.push(`${Math.floor(rest / size)} ${name}`);
      rest %= size;
    } else if (parts.length > 0) break;
  }
  return (ms < 0 ? 'in ' : '') + parts.join(' ');
}

for (const preset of PRESETS) {
  test(`decodes the ${preset} vector ids, every cell checked`, async () => {
    const file = JSON.parse(readFileSync(join(VECTORS, `${preset}.json`), 'utf8'));
    const cases = file.cases.filter((c) => c.op === 'decode' && 'out' in c);
    assert.ok(cases.length >= 3);
    const before = Date.now();
    await show(preset, cases.map((c) => c.in).join('\n'));
    const rows = await readRows();
    const afterMs = Date.now();
    assert.equal(rows.length, cases.length);
    cases.forEach((c, i) => {
      const { cells, invalid } = rows[i];
      const ts = Number(c.out.timestamp_ms);
      assert.equal(invalid, false, c.id);
      assert.equal(cells.n, String(i + 1));
      assert.equal(cells.id, c.in);
      assert.equal(cells.utc, utcCell(ts), c.id);
      assert.equal(cells.local, kolkataCell(ts), c.id);
      assert.equal(cells['clock-seq'], String(c.out.clock_seq), c.id);
      assert.equal(cells.worker, String(c.out.worker_id), c.id);
      assert.equal(cells.sequence, String(c.out.sequence), c.id);
      assert.ok([ageCell(before - ts), ageCell(afterMs - ts)].includes(cells.age), `${c.id}: age ${cells.age}`);
    });
    assert.match(await page.textContent('#status'), new RegExp(`^${cases.length} ids, 0 invalid`));
  });
}

test('junk lines show their error in place; good lines around them still decode', async () => {
  await show('clockseq', ['hello', '362387865602658307', '-1', '99999999999999999999', '9223372036854775808', '12 34'].join('\n'));
  const rows = await readRows();
  assert.equal(rows.length, 6);
  assert.equal(rows[1].invalid, false);
  assert.equal(rows[1].cells.worker, '9');
  const expected = {
    0: "INVALID_IDinvalid id: expected a decimal digit, found 'h' at byte 0",
    2: 'INVALID_IDinvalid id: expected a non-negative decimal integer, found a minus sign',
    3: 'INVALID_IDinvalid id: expected an integer below 2^63, found one of more than 64 bits',
    4: 'INVALID_IDinvalid id: expected an integer below 2^63 (9223372036854775808), found 9223372036854775808',
    5: "INVALID_IDinvalid id: expected a decimal digit, found ' ' at byte 2",
  };
  for (const [i, text] of Object.entries(expected)) {
    assert.equal(rows[i].invalid, true);
    assert.equal(rows[i].cells.id, ['hello', '', '-1', '99999999999999999999', '9223372036854775808', '12 34'][i]);
    assert.equal(rows[i].cells.error, text);
  }
  assert.match(await page.textContent('#status'), /^6 ids, 5 invalid/);
  // js53 ids are below 2^53: a clockseq id is beyond its layout.
  await page.selectOption('#layout', 'js53');
  const js53 = await readRows();
  assert.match(js53[1].cells.error, /^INVALID_IDinvalid id: expected at most 4503599627370495 for this layout/);
});

test('a custom layout decodes like the preset it equals, and a bad one says why', async () => {
  await show('twitter', '1541815603606036480');
  const preset = await readRows();
  await page.selectOption('#layout', 'custom');
  await page.fill('#custom-fields', 'timestamp:41,worker:10,sequence:12');
  await page.fill('#custom-unit', '1');
  await page.fill('#custom-epoch', '1288834974657');
  const custom = await readRows();
  assert.deepEqual(custom, preset);
  assert.equal(await page.textContent('#layout-error'), '');
  await page.fill('#custom-fields', 'timestamp:41,worker:99,sequence:12');
  assert.equal(await page.textContent('#layout-error'), 'INVALID_LAYOUT: invalid layout: expected worker to be at most 32 bits, found 99');
  await page.fill('#custom-fields', 'timestamp:41,worker:10,sequence:12');
});

test('an id whose time is implausible for the layout is flagged, with the preset that fits', async () => {
  const twitterId = '2125537250721665024'; // 2026-11-25T10:29:05.801Z as twitter, 2040 as clockseq
  await show('clockseq', [twitterId, '362387865602658307'].join('\n'));
  const [flagged, fine] = await readRows();
  assert.equal(flagged.cells.utc, utcCell(2210834771144));
  assert.equal(flagged.cells.note, `after now for this layout; as twitter: ${utcCell(1795602545801)}`);
  assert.equal(fine.cells.note, '');
  await page.selectOption('#layout', 'twitter');
  assert.equal((await readRows())[0].cells.note, '');
});

test('the layout is drawn bit by bit, and a time range gives its id range', async () => {
  await show('clockseq', '');
  const bits = await page.$$eval('#bits span', (spans) => spans.map((s) => s.textContent));
  assert.deepEqual(bits, ['0', 'timestamp 41 (62–22)', 'clock_seq 3 (21–19)', 'worker 7 (18–12)', 'sequence 12 (11–0)']);
  await page.selectOption('#layout', 'sonyflake');
  const sony = await page.$$eval('#bits span', (spans) => spans.map((s) => s.textContent));
  assert.deepEqual(sony, ['0', 'timestamp 39 (62–24)', 'sequence 8 (23–16)', 'worker 16 (15–0)']);
  await page.selectOption('#layout', 'clockseq');
  await page.fill('#range-from', '2026-01-01T00:00:00Z');
  await page.fill('#range-to', '2026-01-01T23:59:59.999Z');
  const expected = await page.evaluate(() => window.clockflake.idRange(Date.parse('2026-01-01T00:00:00Z'), Date.parse('2026-01-01T23:59:59.999Z')).join(' … '));
  assert.equal(await page.textContent('#range'), expected);
  assert.match(expected, /^\d+ … \d+$/);
  await page.fill('#range-to', 'not a date');
  assert.match(await page.textContent('#range'), /^dates as /);
});

/** Empties the ids box and generates `count` clockseq ids for `worker` (`clicks` times). */
async function generate(worker, count, clicks = 1) {
  await page.selectOption('#layout', 'clockseq');
  await page.fill('#ids', '');
  await page.fill('#worker', worker);
  await page.fill('#count', count);
  for (let i = 0; i < clicks; i++) await page.click('#generate');
}

test('generated ids are unique and decode to the chosen worker', async () => {
  await generate('77', '3000', 2);
  const ids = (await page.inputValue('#ids')).split('\n');
  assert.equal(ids.length, 6000);
  assert.equal(new Set(ids).size, 6000);
  const rows = await readRows();
  assert.equal(rows.length, 5000, 'the table shows the first 5000');
  for (const row of rows) {
    assert.equal(row.invalid, false);
    assert.equal(row.cells.worker, '77');
    assert.ok(Math.abs(Date.parse(row.cells.utc.replace(' UTC', 'Z').replace(' ', 'T')) - Date.now()) < 60_000);
  }
  const workers = await page.evaluate((list) => [...new Set(list.map((id) => window.clockflake.decode(id).workerId))], ids);
  assert.deepEqual(workers, [77]);
  // Strictly increasing, as generated by one generator kept across clicks.
  for (let i = 1; i < ids.length; i++) assert.ok(BigInt(ids[i]) > BigInt(ids[i - 1]));
  await page.fill('#worker', '128');
  await page.click('#generate');
  assert.match(await page.textContent('#layout-error'), /^WORKER_ID_OUT_OF_RANGE: worker id out of range: expected 0..=127/);
});

test('ages keep moving after the table is drawn', async () => {
  await generate('5', '1');
  assert.match((await readRows())[0].cells.age, /^\d+ ms$/);
  await page.waitForFunction(() => /^\d+ s$/.test(document.querySelector('td[data-col="age"]').textContent), null, { timeout: 5000 });
});

test('with a public-id key, pasted public ids decode to their raw ids; bad ones say why', async () => {
  const { cases } = JSON.parse(readFileSync(join(VECTORS, 'public', 'codec.json'), 'utf8'));
  // The page's codec takes FF1 keys (the legacy construction's cases are for the API).
  const ff1 = (c) => c.op === 'public_encode' && 'out' in c && c.in.keys[0].construction === 'ff1';
  const v1 = cases.filter((c) => ff1(c) && c.in.keys.length === 1 && c.in.keys[0].version === 1);
  const v2 = cases.find((c) => ff1(c) && c.in.keys[0].version === 2);
  assert.ok(v1.length >= 5);
  const keyHex = v1[0].in.keys[0].key_hex;
  await page.selectOption('#layout', 'clockseq');
  await page.fill('#public-key', keyHex);
  await page.fill('#public-version', '1');
  // Each public text, then its raw id: both rows must say the same.
  const lines = v1.flatMap((c, i) => [i % 2 ? c.out.text.toLowerCase() : c.out.text, c.in.id]);
  const good = v1[7].out.text;
  const typo = `${good.slice(0, 6)}${good[6] === 'A' ? 'B' : 'A'}${good.slice(7)}`;
  await page.fill('#ids', [...lines, typo, v2.out.text].join('\n'));
  const rows = await readRows();
  assert.equal(rows.length, lines.length + 2);
  assert.equal(await page.textContent('#public-error'), '');
  v1.forEach((c, i) => {
    const [pub, raw] = [rows[2 * i], rows[2 * i + 1]];
    assert.equal(pub.invalid, false, c.id);
    assert.equal(pub.cells['raw-id'], c.in.id, c.id);
    assert.equal(raw.cells['raw-id'], '', 'a decimal line is a raw id');
    for (const col of ['utc', 'local', 'clock-seq', 'worker', 'sequence', 'age']) assert.equal(pub.cells[col], raw.cells[col], `${c.id} ${col}`);
  });
  const [typoRow, v2Row] = rows.slice(lines.length);
  assert.equal(typoRow.invalid, true);
  assert.equal(typoRow.cells.error, 'INVALID_PUBLIC_IDinvalid public id: the check characters do not match: a character was mistyped or two were swapped');
  assert.equal(v2Row.cells.error, 'UNKNOWN_KEY_VERSIONunknown key version: the public id was made with key version 2, which this codec does not hold');
  // A key that is not 32 hex digits is refused, and lines are read as raw ids again.
  await page.fill('#public-key', keyHex.slice(2));
  assert.equal(await page.textContent('#public-error'), 'INVALID_ARG_TYPE: expected 32 hex digits (16 bytes), found 30 characters');
  assert.match((await readRows())[0].cells.error, /^INVALID_IDinvalid id: expected a decimal digit/);
  await page.fill('#public-key', keyHex);
  await page.fill('#public-version', '32');
  assert.equal(await page.textContent('#public-error'), 'INVALID_KEY_VERSION: invalid key version: expected 0..=31 and not already in the key ring, found 32');
  await page.fill('#public-version', '1');
  assert.equal((await readRows())[0].cells['raw-id'], v1[0].in.id);
  await page.fill('#public-key', '');
  assert.equal(await page.textContent('#public-error'), '');
  assert.equal((await readRows())[0].invalid, true, 'without a key a public text is not an id');
});

test('the shared vectors pass inside the page', async () => {
  const result = await page.evaluate(async () => {
    const harness = await import('/harness/vectors.mjs');
    const names = await (await fetch('/vectors/index.json')).json();
    const files = await Promise.all(names.map(async (name) => [name, await (await fetch(`/vectors/${name}`)).json()]));
    const failures = [];
    let count = 0;
    for (const [, layout, testCase] of harness.allCases(files)) {
      count++;
      try {
        harness.runCase(window.clockflake, layout, testCase);
      } catch (error) {
        failures.push(String(error.message));
      }
    }
    return { count, failures };
  });
  assert.deepEqual(result.failures, []);
  assert.ok(result.count >= 80, `only ${result.count} cases`);
  console.log(`# ${result.count} shared vector cases passed in Chromium`);
});

test('the shared public-id vectors pass inside the page', async () => {
  const result = await page.evaluate(async () => {
    const harness = await import('/harness/vectors.mjs');
    const names = await (await fetch('/vectors/public/index.json')).json();
    const files = await Promise.all(names.map(async (name) => [name, await (await fetch(`/vectors/public/${name}`)).json()]));
    const failures = [];
    let count = 0;
    for (const [, , testCase] of harness.allCases(files)) {
      count++;
      try {
        harness.runPublicCase(window.clockflake, testCase);
      } catch (error) {
        failures.push(String(error.message));
      }
    }
    return { count, failures };
  });
  assert.deepEqual(result.failures, []);
  assert.ok(result.count >= 40, `only ${result.count} cases`);
  console.log(`# ${result.count} public-id vector cases passed in Chromium`);
});

test('screenshot, no outside requests, no page errors', async () => {
  await page.selectOption('#layout', 'clockseq');
  await page.fill('#count', '4');
  await page.fill('#worker', '7');
  await page.fill('#public-key', '636c6f636b666c616b652d6b65792d31');
  await page.fill('#public-version', '1');
  await page.fill('#ids', '362387865602658307\nnot-an-id\n383191637666328576\n17T3G30P67GKXXA6');
  await page.click('#generate');
  mkdirSync(OUTPUT, { recursive: true });
  await page.screenshot({ path: join(OUTPUT, 'inspector.png'), fullPage: true });
  const outside = requests.filter((url) => !url.startsWith(origin));
  assert.deepEqual(outside, []);
  assert.deepEqual(pageErrors, []);
});
