// The shipped index.d.ts and decode.d.ts: `tsc --noEmit` on examples/ (which also hold
// @ts-expect-error lines), with and without @types/node.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');

for (const [config, what] of [
  ['tsconfig.json', 'examples/example.ts and examples/example-esm.mts, with @types/node'],
  ['tsconfig.web.json', 'examples/example-web.ts, without @types/node and without the disposable lib'],
]) {
  test(`tsc --noEmit (strict) accepts ${what}`, () => {
    try {
      execFileSync(process.execPath, [tsc, '--noEmit', '-p', join(here, '..', 'examples', config)], { encoding: 'utf8' });
    } catch (error) {
      assert.fail(`tsc failed:\n${error.stdout}${error.stderr}`);
    }
  });
}
