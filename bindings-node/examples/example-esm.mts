// The same types through the package's ESM entry (`import` condition).
import { Generator, PublicIds, decode } from 'clockflake';

const id: bigint = new Generator({ workerId: 1 }).nextId();
const workerId: number = decode(id).workerId;
const leased: Generator = await Generator.open('file:///tmp/ids?app=esm', { onRollback: 'wait' });
await leased.close();
const text: string = new PublicIds(0, new Uint8Array(16)).encodeText(id);
// @ts-expect-error a number is not an id
decode(1);
console.log(workerId, text);
