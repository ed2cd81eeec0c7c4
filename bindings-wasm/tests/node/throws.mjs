// The error check of the wasm engine's Node suites, on the one every Node suite shares
// (tests/harness/node-errors.mjs), with what these suites add to it.
import assert from 'node:assert/strict';
import { throwsCoded as throwsCodedWith } from '../../../tests/harness/node-errors.mjs';

/**
 * Asserts `run` throws an instance of `Kind` that is also an `Error`, with `.code === code`, a
 * message of more than 10 characters (exactly `message` if given) and `retryAtMs`; returns it.
 */
export function throwsCoded(run, Kind, code, message) {
  const caught = throwsCodedWith(run, code, Kind, { minMessageLength: 11 });
  assert.ok(caught instanceof Error, `${code}: an Error`);
  if (message !== undefined) assert.equal(caught.message, message);
  return caught;
}
