// make demo-node: a few ids from Node, with what they decode to.
import { Generator, decode, layouts } from '../index.mjs';

const gen = new Generator({ workerId: 7 });
console.log(`node: layout ${gen.layout.name}, worker ${gen.workerId}`);
for (const id of [gen.nextId(), gen.nextId(), ...gen.nextIds(2)]) {
  const { timestampMs, date, clockSeq, workerId, sequence } = decode(id);
  console.log(`  ${id}  ${date.toISOString()} (${timestampMs})  clockSeq=${clockSeq} worker=${workerId} sequence=${sequence}`);
}
const sony = new Generator({ workerId: 42, layout: 'sonyflake' });
const id = sony.nextId();
console.log(`  sonyflake ${id} -> ${JSON.stringify(decode(id, layouts.sonyflake))}`);
