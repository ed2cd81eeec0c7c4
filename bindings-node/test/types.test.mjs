// The shipped index.d.ts: `tsc --noEmit` on examples/ (which also holds @ts-expect-error lines).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');

test('tsc --noEmit accepts examples/example.ts and examples/example-esm.mts', () => {
  try {
    execFileSync(process.execPath, [tsc, '--noEmit', '-p', join(here, '..', 'examples', 'tsconfig.json')], { encoding: 'utf8' });
  } catch (error) {
    assert.fail(`tsc failed:\n${error.stdout}${error.stderr}`);
  }
});
