// Registers one node:test test per shared vector case, for any JS binding running in Node.
//   import { registerVectorTests } from '../../tests/harness/node-vectors.mjs';
//   registerVectorTests(api, 'native');
import { readdirSync, readFileSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';
import { allCases, runCase, runPublicCase } from './vectors.mjs';

export const VECTORS_DIR = join(dirname(fileURLToPath(import.meta.url)), '..', 'vectors');

export function loadVectorFiles(dir = VECTORS_DIR) {
  return readdirSync(dir)
    .filter((f) => f.endsWith('.json'))
    .sort()
    .map((f) => [f, JSON.parse(readFileSync(join(dir, f), 'utf8'))]);
}

export function registerVectorTests(api, label) {
  const cases = allCases(loadVectorFiles());
  test(`${label}: at least 80 shared vector cases loaded`, (t) => {
    if (cases.length < 80) throw new Error(`only ${cases.length} cases`);
  });
  for (const [file, layout, testCase] of cases) {
    test(`${label} vector ${file} ${testCase.id}`, () => runCase(api, layout, testCase));
  }
}

export function registerPublicVectorTests(api, label) {
  const files = loadVectorFiles(join(VECTORS_DIR, 'public'));
  const cases = allCases(files);
  test(`${label}: at least 40 public-id vector cases loaded`, () => {
    if (cases.length < 40) throw new Error(`only ${cases.length} cases`);
  });
  for (const [file, , testCase] of cases) {
    test(`${label} public vector ${file} ${testCase.id}`, () => runPublicCase(api, testCase));
  }
}
