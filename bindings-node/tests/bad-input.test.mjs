// Every bad input gets a typed, coded error: never a crash, a truncation or a silent default.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Generator, decode, encode, idRange, describeLayout } from '../lib/index.mjs';

const T = 1_795_000_000_000;
const gen = () => new Generator({ workerId: 1 });
const okLayout = { fields: [{ name: 'timestamp', bits: 41 }, { name: 'sequence', bits: 12 }], unitMs: 1, epochMs: 0 };

// [name, thunk, error class, code]
const cases = [
  // ids
  ['decode(number)', () => decode(123), TypeError, 'INVALID_ARG_TYPE'],
  ['decode(safe number)', () => decode(2 ** 53), TypeError, 'INVALID_ARG_TYPE'],
  ['decode(null)', () => decode(null), TypeError, 'INVALID_ARG_TYPE'],
  ['decode(undefined)', () => decode(), TypeError, 'INVALID_ARG_TYPE'],
  ['decode({})', () => decode({}), TypeError, 'INVALID_ARG_TYPE'],
  ['decode(-1n)', () => decode(-1n), Error, 'INVALID_ID'],
  ['decode(2^63)', () => decode(2n ** 63n), Error, 'INVALID_ID'],
  ['decode(2^64)', () => decode(2n ** 64n), Error, 'INVALID_ID'],
  ['decode(2^64 + 5)', () => decode(2n ** 64n + 5n), Error, 'INVALID_ID'],
  ['decode(-(2^64))', () => decode(-(2n ** 64n)), Error, 'INVALID_ID'],
  ['decode("")', () => decode(''), Error, 'INVALID_ID'],
  ['decode(" 1")', () => decode(' 1'), Error, 'INVALID_ID'],
  ['decode("1e3")', () => decode('1e3'), Error, 'INVALID_ID'],
  ['decode("0x10")', () => decode('0x10'), Error, 'INVALID_ID'],
  ['decode("-5")', () => decode('-5'), Error, 'INVALID_ID'],
  ['decode("1.5")', () => decode('1.5'), Error, 'INVALID_ID'],
  ['decode("٣")', () => decode('٣'), Error, 'INVALID_ID'],
  ['decode(99999999999999999999)', () => decode('99999999999999999999'), Error, 'INVALID_ID'],
  ['decode(id, "nope")', () => decode(1n, 'nope'), Error, 'UNKNOWN_LAYOUT'],
  ['decode(id, 5)', () => decode(1n, 5), TypeError, 'INVALID_ARG_TYPE'],
  ['decode(id, null)', () => decode(1n, null), TypeError, 'INVALID_ARG_TYPE'],
  // generator options
  ['new Generator()', () => new Generator(), TypeError, 'INVALID_ARG_TYPE'],
  ['new Generator(7)', () => new Generator(7), TypeError, 'INVALID_ARG_TYPE'],
  ['workerId missing', () => new Generator({}), TypeError, 'INVALID_ARG_TYPE'],
  ['workerId "7"', () => new Generator({ workerId: '7' }), TypeError, 'INVALID_ARG_TYPE'],
  ['workerId 7n', () => new Generator({ workerId: 7n }), TypeError, 'INVALID_ARG_TYPE'],
  ['workerId -1', () => new Generator({ workerId: -1 }), RangeError, 'WORKER_ID_OUT_OF_RANGE'],
  ['workerId 1.5', () => new Generator({ workerId: 1.5 }), RangeError, 'WORKER_ID_OUT_OF_RANGE'],
  ['workerId NaN', () => new Generator({ workerId: NaN }), RangeError, 'WORKER_ID_OUT_OF_RANGE'],
  ['workerId Infinity', () => new Generator({ workerId: Infinity }), RangeError, 'WORKER_ID_OUT_OF_RANGE'],
  ['workerId 2^53', () => new Generator({ workerId: 2 ** 53 }), RangeError, 'WORKER_ID_OUT_OF_RANGE'],
  ['workerId 2^32 + 7 (no wrap to 7)', () => new Generator({ workerId: 2 ** 32 + 7 }), Error, 'WORKER_ID_OUT_OF_RANGE'],
  ['workerId 128', () => new Generator({ workerId: 128 }), Error, 'WORKER_ID_OUT_OF_RANGE'],
  ['unknown option', () => new Generator({ workerId: 1, workerID: 2 }), TypeError, 'UNKNOWN_OPTION'],
  ['misspelt option', () => new Generator({ workerId: 1, onRollBack: 'fail' }), TypeError, 'UNKNOWN_OPTION'],
  ['onRollback 1', () => new Generator({ workerId: 1, onRollback: 1 }), TypeError, 'INVALID_ARG_TYPE'],
  ['onRollback "nope"', () => new Generator({ workerId: 1, onRollback: 'nope' }), Error, 'UNKNOWN_POLICY'],
  ['maxWaitMs "5"', () => new Generator({ workerId: 1, maxWaitMs: '5' }), TypeError, 'INVALID_ARG_TYPE'],
  ['maxWaitMs -1', () => new Generator({ workerId: 1, maxWaitMs: -1 }), RangeError, 'INVALID_ARG_VALUE'],
  ['maxDriftMs 0.5', () => new Generator({ workerId: 1, maxDriftMs: 0.5 }), RangeError, 'INVALID_ARG_VALUE'],
  ['clock 5', () => new Generator({ workerId: 1, clock: 5 }), TypeError, 'INVALID_ARG_TYPE'],
  ['layout 5', () => new Generator({ workerId: 1, layout: 5 }), TypeError, 'INVALID_ARG_TYPE'],
  ['layout "Twitter"', () => new Generator({ workerId: 1, layout: 'Twitter' }), Error, 'UNKNOWN_LAYOUT'],
  // layouts
  ['layout unknown key', () => describeLayout({ ...okLayout, unit: 1 }), TypeError, 'UNKNOWN_OPTION'],
  ['layout fields missing', () => describeLayout({ epochMs: 0 }), TypeError, 'INVALID_ARG_TYPE'],
  ['layout field not object', () => describeLayout({ ...okLayout, fields: ['timestamp'] }), TypeError, 'INVALID_ARG_TYPE'],
  ['layout field name 1', () => describeLayout({ ...okLayout, fields: [{ name: 1, bits: 41 }] }), TypeError, 'INVALID_ARG_TYPE'],
  ['layout field unknown key', () => describeLayout({ ...okLayout, fields: [{ name: 'timestamp', bits: 41, width: 3 }] }), TypeError, 'UNKNOWN_OPTION'],
  ['layout bits 1.5', () => describeLayout({ ...okLayout, fields: [{ name: 'timestamp', bits: 1.5 }, { name: 'sequence', bits: 1 }] }), RangeError, 'INVALID_LAYOUT'],
  ['layout bits 2^32 + 12', () => describeLayout({ ...okLayout, fields: [{ name: 'timestamp', bits: 41 }, { name: 'sequence', bits: 2 ** 32 + 12 }] }), RangeError, 'INVALID_LAYOUT'],
  ['layout epochMs -1', () => describeLayout({ ...okLayout, epochMs: -1 }), RangeError, 'INVALID_LAYOUT'],
  ['layout epochMs "0"', () => describeLayout({ ...okLayout, epochMs: '0' }), TypeError, 'INVALID_ARG_TYPE'],
  ['layout unitMs 0', () => describeLayout({ ...okLayout, unitMs: 0 }), Error, 'INVALID_LAYOUT'],
  ['layout unknown field', () => describeLayout({ ...okLayout, fields: [{ name: 'timestamp', bits: 41 }, { name: 'shard', bits: 3 }] }), Error, 'INVALID_LAYOUT'],
  // encode / idRange
  ['encode(null)', () => encode(null), TypeError, 'INVALID_ARG_TYPE'],
  ['encode unknown key', () => encode({ timestampMs: T, workerId: 1, seq: 1 }), TypeError, 'UNKNOWN_OPTION'],
  ['encode timestampMs -1', () => encode({ timestampMs: -1, workerId: 1 }), RangeError, 'TIMESTAMP_OUT_OF_RANGE'],
  ['encode timestampMs 1.5', () => encode({ timestampMs: T + 0.5, workerId: 1 }), RangeError, 'TIMESTAMP_OUT_OF_RANGE'],
  ['encode timestampMs bigint', () => encode({ timestampMs: BigInt(T), workerId: 1 }), TypeError, 'INVALID_ARG_TYPE'],
  ['encode timestampMs Date', () => encode({ timestampMs: new Date(T), workerId: 1 }), TypeError, 'INVALID_ARG_TYPE'],
  ['encode workerId missing', () => encode({ timestampMs: T }), TypeError, 'INVALID_ARG_TYPE'],
  ['encode sequence -1', () => encode({ timestampMs: T, workerId: 1, sequence: -1 }), RangeError, 'SEQUENCE_OUT_OF_RANGE'],
  ['encode sequence 4096', () => encode({ timestampMs: T, workerId: 1, sequence: 4096 }), Error, 'SEQUENCE_OUT_OF_RANGE'],
  ['encode clockSeq NaN', () => encode({ timestampMs: T, workerId: 1, clockSeq: NaN }), RangeError, 'CLOCK_SEQ_OUT_OF_RANGE'],
  ['encode clockSeq 2^32 (no wrap)', () => encode({ timestampMs: T, workerId: 1, clockSeq: 2 ** 32 }), Error, 'CLOCK_SEQ_OUT_OF_RANGE'],
  ['idRange("a", 1)', () => idRange('a', 1), TypeError, 'INVALID_ARG_TYPE'],
  ['idRange(-1, 1)', () => idRange(-1, 1), RangeError, 'TIMESTAMP_OUT_OF_RANGE'],
  ['idRange(T, 2^53)', () => idRange(T, 2 ** 53), RangeError, 'TIMESTAMP_OUT_OF_RANGE'],
  // generator calls
  ['nextIdAt("1")', () => gen().nextIdAt('1'), TypeError, 'INVALID_ARG_TYPE'],
  ['nextIdAt(-1)', () => gen().nextIdAt(-1), RangeError, 'INVALID_ARG_VALUE'],
  ['nextIdAt(T + 0.5)', () => gen().nextIdAt(T + 0.5), RangeError, 'INVALID_ARG_VALUE'],
  ['nextIdAt(NaN)', () => gen().nextIdAt(NaN), RangeError, 'INVALID_ARG_VALUE'],
  ['nextIdAt(2^53)', () => gen().nextIdAt(2 ** 53), RangeError, 'INVALID_ARG_VALUE'],
  ['nextIdAt(BigInt)', () => gen().nextIdAt(BigInt(T)), TypeError, 'INVALID_ARG_TYPE'],
  ['nextIds(-1)', () => gen().nextIds(-1), RangeError, 'INVALID_ARG_VALUE'],
  ['nextIds(1.5)', () => gen().nextIds(1.5), RangeError, 'INVALID_ARG_VALUE'],
  ['nextIds("3")', () => gen().nextIds('3'), TypeError, 'INVALID_ARG_TYPE'],
  ['nextIds(2^40)', () => gen().nextIds(2 ** 40), RangeError, 'INVALID_ARG_VALUE'],
  ['clock returns a string', () => new Generator({ workerId: 1, clock: () => String(T) }).nextId(), TypeError, 'INVALID_ARG_TYPE'],
  ['clock returns a fraction', () => new Generator({ workerId: 1, clock: () => T + 0.25 }).nextId(), RangeError, 'INVALID_ARG_VALUE'],
  ['clock returns NaN', () => new Generator({ workerId: 1, clock: () => NaN }).nextIds(3), RangeError, 'INVALID_ARG_VALUE'],
  ['clock returns a bigint', () => new Generator({ workerId: 1, clock: () => BigInt(T) }).nextIdString(), TypeError, 'INVALID_ARG_TYPE'],
  ['clock before the epoch', () => new Generator({ workerId: 1, clock: () => 0 }).nextId(), Error, 'EPOCH_IN_FUTURE'],
];

for (const [name, thunk, ErrorClass, code] of cases) {
  test(`bad input: ${name} -> ${ErrorClass.name} ${code}`, () => {
    let caught;
    try {
      thunk();
    } catch (error) {
      caught = error;
    }
    assert.ok(caught !== undefined, 'expected a throw');
    assert.ok(caught instanceof ErrorClass, `expected ${ErrorClass.name}, got ${caught?.constructor?.name}: ${caught?.message}`);
    assert.equal(caught.code, code, caught.message);
    assert.ok(caught.message.length > 10);
    assert.ok('retryAtMs' in caught);
  });
}
