// restored(): after a snapshot restore (which nothing inside the process can see), every
// generator made before refuses with WORKER_ID_INVALIDATED, static and leased alike, including
// the ticks a leased generator was granted to issue in JavaScript. Its own file: node --test runs each
// file in a process of its own, and restored() touches every generator of the process.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Generator, decode, restored } from '../lib/index.mjs';

test('restored() invalidates the static and leased generators made before it', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'clockflake-node-restored-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const fixed = new Generator({ workerId: 5 });
  const leased = Generator.openSync(`file://${dir}?app=restored`);
  fixed.nextId();
  leased.nextId();
  leased.nextId(); // served from a grant: JavaScript holds the ticks ahead
  restored();
  for (const gen of [fixed, leased]) {
    for (const call of [() => gen.nextId(), () => gen.nextIdAt(Date.now()), () => gen.nextIds(3), () => gen.nextIdString()]) {
      assert.throws(call, (error) => error.code === 'WORKER_ID_INVALIDATED' && error instanceof Error);
    }
  }
  // Generators made after the restore belong to this copy.
  assert.equal(decode(new Generator({ workerId: 6 }).nextId()).workerId, 6);
  const again = Generator.openSync(`file://${dir}?app=restored`);
  assert.notEqual(again.workerId, leased.workerId, 'the old lease is not taken over in this copy');
  again.nextId();
  again.closeSync();
  leased.closeSync();
});
