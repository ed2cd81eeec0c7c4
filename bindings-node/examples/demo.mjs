// make demo-node: a few ids from Node, with what they decode to.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Generator, PublicIds, decode, layouts } from '../lib/index.mjs';

const gen = new Generator({ workerId: 7 });
console.log(`node: layout ${gen.layout.name}, worker ${gen.workerId}`);
for (const id of [gen.nextId(), gen.nextId(), ...gen.nextIds(2)]) {
  const { timestampMs, date, clockSeq, workerId, sequence } = decode(id);
  console.log(`  ${id}  ${date.toISOString()} (${timestampMs})  clockSeq=${clockSeq} worker=${workerId} sequence=${sequence}`);
}
const sony = new Generator({ workerId: 42, layout: 'sonyflake' });
const id = sony.nextId();
console.log(`  sonyflake ${id} -> ${JSON.stringify(decode(id, layouts.sonyflake))}`);

// A leased worker id from the embedded coordinator (a lock file per worker id in a directory).
{
  const dir = mkdtempSync(join(tmpdir(), 'clockflake-demo-'));
  const first = await Generator.open(`file://${dir}?app=orders`);
  const second = await Generator.open(`file://${dir}?app=orders`);
  const leasedId = first.nextId();
  console.log(`  leased: ${first.coordinator} gave worker ids ${first.workerId} and ${second.workerId}; ${leasedId} decodes to worker ${decode(leasedId).workerId}`);
  await first.close();
  await second.close();
  rmSync(dir, { recursive: true, force: true });
  const codec = new PublicIds(1, new TextEncoder().encode('demo-key-0123456'));
  console.log(`  public id of ${leasedId}: ${codec.encode(leasedId)} / ${codec.encodeText(leasedId)} -> ${codec.decodeText(codec.encodeText(leasedId))}`);
}
