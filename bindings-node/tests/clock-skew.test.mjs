// The start-up clock check (max_skew) through the Node addon: CLOCK_SKEW reaches JS as an Error
// with that code (the addon maps lease codes generically), and stats() reports the measured
// skew. Against the PostgreSQL `make test-node` starts (CLOCKFLAKE_PG_URL); a process whose
// clock runs 10 s ahead is a child under libfaketime (skipped where `faketime` is missing).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Generator } from '../lib/index.mjs';
import native from '../binding.js';

const url = process.env.CLOCKFLAKE_PG_URL;
const skip = url ? false : 'CLOCKFLAKE_PG_URL not set (make test-node starts a server)';
const hasFaketime = spawnSync('faketime', ['-h']).error === undefined;
const app = `node-skew${process.pid}`;

test('CLOCK_SKEW is one of the codes the addon throws', () => {
  assert.ok(native.errorCodes().includes('CLOCK_SKEW'));
});

test('file:// measures no skew and refuses max_skew', () => {
  const dir = mkdtempSync(join(tmpdir(), 'clockflake-node-skew-'));
  try {
    const gen = Generator.openSync(`file://${dir}?app=a`);
    assert.equal(gen.stats().measuredSkewMs, null);
    gen.closeSync();
    assert.throws(() => Generator.openSync(`file://${dir}?app=a&max_skew=5s`), (error) => {
      assert.equal(error.code, 'INVALID_URI');
      assert.match(error.message, /file:\/\/ has no clock/);
      return true;
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('postgres: stats() reports the measured skew (same machine: near 0), null when off', { skip }, () => {
  const gen = Generator.openSync(`${url}?app=${app}&ttl=2s`);
  const skew = gen.stats().measuredSkewMs;
  assert.equal(typeof skew, 'number');
  assert.ok(Math.abs(skew) <= 300, `${skew}`);
  gen.closeSync();
  const off = Generator.openSync(`${url}?app=${app}&ttl=2s&max_skew=off`);
  assert.equal(off.stats().measuredSkewMs, null);
  off.closeSync();
});

test('postgres: a process 10 s ahead is refused with CLOCK_SKEW (an Error with that code)', {
  skip: skip || (hasFaketime ? false : 'faketime is not installed'),
}, () => {
  const uri = `${url}?app=${app}-ahead&ttl=2s`;
  const index = fileURLToPath(new URL('../lib/index.mjs', import.meta.url));
  const child = `
    import { Generator } from ${JSON.stringify(index)};
    try { Generator.openSync(${JSON.stringify(uri)}); console.log('opened'); }
    catch (error) { console.log(JSON.stringify({ code: error.code, isError: error instanceof Error, message: error.message })); }
  `;
  const run = spawnSync('faketime', ['-f', '+10s', process.execPath, '--input-type=module', '-e', child], {
    encoding: 'utf8',
  });
  assert.equal(run.status, 0, run.stderr);
  const seen = JSON.parse(run.stdout.trim());
  assert.equal(seen.code, 'CLOCK_SKEW', run.stdout);
  assert.ok(seen.isError);
  assert.match(seen.message, /the local clock is \d+ ms ahead/);
  // With the real clock the same URI opens.
  Generator.openSync(uri).closeSync();
});
