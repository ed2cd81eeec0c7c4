// The same types through the package's ESM entry (`import` condition).
import { Generator, decode } from 'clockflake';

const id: bigint = new Generator({ workerId: 1 }).nextId();
const workerId: number = decode(id).workerId;
// @ts-expect-error a number is not an id
decode(1);
console.log(workerId);
