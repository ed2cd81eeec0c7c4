// The error shape every Node suite checks: a real Error subclass with the core's code, a
// message, and `retryAtMs` (null where none applies).
import assert from 'node:assert/strict';

/** Runs `fn`, expects it to throw `ErrorClass` with `code`; returns the error. */
export function throwsCoded(fn, code, ErrorClass = Error, { minMessageLength = 0 } = {}) {
  let caught;
  try {
    fn();
  } catch (error) {
    caught = error;
  }
  assert.ok(caught instanceof ErrorClass, `expected a ${ErrorClass.name} with code ${code}, got ${caught}`);
  assert.equal(caught.code, code, caught.message);
  assert.equal(typeof caught.message, 'string');
  assert.ok(caught.message.length >= minMessageLength, `a message that says what went wrong: ${caught.message}`);
  assert.ok('retryAtMs' in caught, 'every error has retryAtMs');
  return caught;
}
