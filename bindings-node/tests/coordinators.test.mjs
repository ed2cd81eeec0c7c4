// The one list of coordinators: every scheme the lease accepts (its own refusal of an unknown
// scheme names them all) is named where the package lists coordinators, and nothing else is.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { Generator } from '../lib/index.mjs';

function leaseSchemes() {
  try {
    Generator.openSync('nosuch:///x');
  } catch (error) {
    assert.equal(error.code, 'INVALID_URI');
    const listed = /unknown scheme "nosuch": expected ([a-z0-9, ]+?), found/.exec(error.message);
    assert.ok(listed, error.message);
    return listed[1].split(/, | or /);
  }
  assert.fail('an unknown scheme was accepted');
}

const read = (path) => readFileSync(new URL(path, import.meta.url), 'utf8');
const schemesIn = (text) => new Set([...text.matchAll(/`([a-z0-9]+):\/\//g)].map((m) => m[1]));

test('every coordinator the lease accepts, and only those, is listed in the README, the .d.ts and Generator.open', () => {
  const schemes = leaseSchemes();
  assert.ok(schemes.length >= 6, `schemes: ${schemes}`);
  const readme = read('../README.md').split('\n').find((line) => line.startsWith('- **Leased worker ids**'));
  const dts = /\/\*\*(?:(?!\*\/)[\s\S])*\*\/\nexport type CoordinatorUri/.exec(read('../index.d.ts'))[0];
  const open = /\/\*\*(?:(?!\*\/)[\s\S])*\*\/\n {2}static async open\(/.exec(read('../js/generator.js'))[0];
  for (const [where, text] of [['README.md', readme], ['index.d.ts CoordinatorUri', dts], ['generator.js Generator.open', open]]) {
    // `rediss://` and `etcds://` are redis and etcd over TLS, not coordinators of their own.
    const named = [...schemesIn(text)].filter((scheme) => scheme !== 'rediss' && scheme !== 'etcds');
    assert.deepEqual(named.sort(), [...schemes].sort(), `${where} names ${named}`);
  }
});
