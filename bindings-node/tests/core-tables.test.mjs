// Core's tables in the package's JavaScript: the message templates, the preset layouts and the
// names of fields and policies come from core at build time (make build-js writes wasm/core.js
// with bindings-wasm/examples/core_tables.rs), never from a copy typed into js/. Whether the
// messages rebuilt from those templates are core's own is checked against core's output by
// bindings-wasm's api.test.mjs (every error kind) and errors.test.mjs (every refusal the API
// can provoke); the presets here against the shared vectors, worked out by hand.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import * as full from '../lib/index.mjs';
import * as decodeOnly from '../lib/decode.mjs';

const tablesPath = fileURLToPath(new URL('../wasm/core.js', import.meta.url));
assert.ok(existsSync(tablesPath), `${tablesPath} is missing: make build-js writes it from core`);
const core = await import(tablesPath);

const jsDir = new URL('../js/', import.meta.url);
const sources = readdirSync(jsDir)
  .filter((name) => /\.m?js$/.test(name))
  .map((name) => [name, readFileSync(new URL(name, jsDir), 'utf8')]);

/** Every template of core's tables (the `some` and `none` of optional fields too). */
function templates() {
  return Object.values(core.MESSAGES).flatMap((kinds) => kinds.flatMap((entry) => (typeof entry === 'string' ? [entry] : [entry.some, entry.none])));
}

test("core's tables list every code, each with its templates", () => {
  assert.deepEqual(Object.keys(core.MESSAGES).sort(), [...core.CODES].sort());
  assert.ok(templates().length >= 40);
  assert.equal(core.PRESETS[0].name, core.DEFAULT_PRESET);
});

test("js/ holds no copy of core's messages, preset names or preset values", () => {
  // The literal text of every template, cut at its placeholders: pieces long enough to be a copy.
  const pieces = new Set(templates().flatMap((t) => t.split(/\{[^}]*\}/)).filter((piece) => piece.trim().length >= 24));
  assert.ok(pieces.size >= 30);
  const names = core.PRESETS.map((p) => p.name);
  const values = core.PRESETS.flatMap((p) => [String(p.epochMs), String(p.maxId), String(p.fingerprint)]).filter((v) => v.length >= 10);
  for (const [file, text] of sources) {
    for (const piece of pieces) assert.ok(!text.includes(piece), `js/${file} copies core's message text ${JSON.stringify(piece)}`);
    assert.ok(!text.includes(names.join(', ')), `js/${file} lists the preset names`);
    assert.ok(!text.includes(names.map((n) => `'${n}'`).join(', ')), `js/${file} lists the preset names`);
    for (const value of values) {
      assert.ok(!text.includes(value) && !text.includes(value.replace(/\B(?=(\d{3})+$)/g, '_')), `js/${file} copies a preset's ${value}`);
    }
  }
});

test('the preset layouts are the shared vectors\', in the full package and the decode-only entry alike', () => {
  const vectors = JSON.parse(readFileSync(fileURLToPath(new URL('../../tests/vectors/layouts.json', import.meta.url)), 'utf8'));
  const cases = vectors.cases.filter((c) => c.op === 'layout' && typeof c.in === 'string' && c.out !== undefined);
  assert.deepEqual(cases.map((c) => c.in).sort(), core.PRESETS.map((p) => p.name).sort());
  for (const { in: name, out } of cases) {
    const expected = { fields: out.fields, unitMs: out.unit_ms, epochMs: Number(out.epoch_ms), maxId: BigInt(out.max_id), fingerprint: BigInt(out.fingerprint) };
    for (const [where, info] of [['wasm/core.js', core.PRESETS.find((p) => p.name === name)], ['layouts', full.layouts[name]], ['decode-only layouts', decodeOnly.layouts[name]]]) {
      const got = { fields: info.fields.map((f) => ({ ...f })), unitMs: info.unitMs, epochMs: info.epochMs, maxId: info.maxId, fingerprint: info.fingerprint };
      assert.deepEqual(got, expected, `${name} in ${where}`);
    }
  }
  assert.deepEqual(decodeOnly.layouts, full.layouts);
  assert.deepEqual(Object.keys(full.layouts), core.PRESETS.map((p) => p.name));
});

test("index.d.ts's PresetName is core's presets", () => {
  const dts = readFileSync(fileURLToPath(new URL('../index.d.ts', import.meta.url)), 'utf8');
  const union = /^export type PresetName = (.*);$/m.exec(dts)?.[1];
  assert.ok(union !== undefined, 'PresetName not found');
  assert.deepEqual(union.split(' | ').map((n) => n.replaceAll("'", '')), core.PRESETS.map((p) => p.name));
});
