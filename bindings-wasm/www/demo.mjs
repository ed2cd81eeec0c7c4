// `make demo-wasm`: generates and decodes a few ids through the wasm package (Node build).
import { Generator, decode, describeLayout, layouts } from '../../bindings-node/lib/index.mjs';
import { statSync } from 'node:fs';

const wasm = new URL('../pkg/web/clockflake_wasm_bg.wasm', import.meta.url);
console.log(`wasm: the engine the clockflake package inlines (bindings-wasm/pkg/web, .wasm ${statSync(wasm).size} bytes)`);
const gen = new Generator({ workerId: 7 });
for (const id of [gen.nextId(), gen.nextId(), ...gen.nextIds(2)]) {
  const p = decode(id);
  console.log(`wasm: ${id} -> ${p.date.toISOString()} clock_seq ${p.clockSeq} worker ${p.workerId} sequence ${p.sequence}`);
}
for (const name of Object.keys(layouts)) {
  const info = describeLayout(name);
  console.log(`wasm: layout ${name.padEnd(9)} ${info.fields.map((f) => `${f.name}:${f.bits}`).join(' ')} unit ${info.unitMs} ms`);
}
