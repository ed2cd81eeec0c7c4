// The one error shape of the package, whichever engine (wasm or native) runs a call.
//
// Every error the package throws is branded: `error instanceof ClockflakeError` is true for all
// of them, including argument errors, which are real `TypeError`s and `RangeError`s too (a
// class cannot extend both ClockflakeError and TypeError, so `ClockflakeError` answers
// `instanceof` through `Symbol.hasInstance` from the brand). The brand is a registered symbol,
// so two copies of the package (its ESM and CJS builds in one bundle, or two realms) agree.
// `.code` is always a stable SCREAMING_SNAKE string and `.retryAtMs` a Unix ms or null.

const BRAND = Symbol.for('clockflake.error');

function brand(error, code, retryAtMs) {
  error.code = code;
  error.retryAtMs = retryAtMs;
  Object.defineProperty(error, BRAND, { value: true });
  return error;
}

/**
 * Every error the package throws: `instanceof ClockflakeError` is true for each, with `.code`
 * and `.retryAtMs`. The core's refusals are instances of this class; argument errors are
 * `TypeError`s or `RangeError`s that also answer `instanceof ClockflakeError`.
 */
export class ClockflakeError extends Error {
  constructor(code, message, retryAtMs = null) {
    super(message);
    this.name = 'ClockflakeError';
    brand(this, code, retryAtMs);
  }

  static [Symbol.hasInstance](value) {
    return value instanceof Error && value[BRAND] === true;
  }
}

/** An error of `ErrorClass` (Error, TypeError, RangeError) carrying the package's brand. */
export function coded(ErrorClass, code, message) {
  if (ErrorClass === Error) return new ClockflakeError(code, message);
  return brand(new ErrorClass(message), code, null);
}

/** Brands an error thrown by the native module (which sets `.code`) with `retryAtMs`. */
export function adopt(error, retryAtMs = null) {
  if (error instanceof Error && typeof error.code === 'string' && error[BRAND] !== true) {
    brand(error, error.code, retryAtMs);
  }
  return error;
}

/** How a value reads in a message. */
export function shown(value) {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  switch (typeof value) {
    case 'string':
      return `the string ${JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}...` : value)}`;
    case 'bigint':
      return `the bigint ${value}n`;
    case 'number':
    case 'boolean':
      return `the ${typeof value} ${value}`;
    case 'undefined':
      return 'undefined';
    case 'function':
      return 'a function';
    default:
      return 'an object';
  }
}

export function typeError(name, expected, found) {
  return coded(TypeError, 'INVALID_ARG_TYPE', `invalid argument type: ${name}: expected ${expected}, found ${shown(found)}`);
}

/**
 * A JavaScript number that must be a whole number 0..=2^53-1: anything else is refused, never
 * rounded or wrapped. Not a number: TypeError INVALID_ARG_TYPE; a number that is negative,
 * fractional, NaN, infinite or above 2^53-1: RangeError with `code`.
 */
export function integer(value, name, code) {
  if (typeof value !== 'number') throw typeError(name, 'a number', value);
  if (!Number.isSafeInteger(value) || value < 0) {
    throw coded(RangeError, code, `${name} out of range: expected an integer 0..=9007199254740991, found ${value}`);
  }
  return value;
}

export function plainObject(value, name) {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw typeError(name, 'an object', value);
  return value;
}

/** Refuses keys that are not in `allowed` (a typo must not silently fall back to a default). */
export function onlyKnownKeys(object, allowed, name) {
  for (const key of Object.keys(object)) {
    if (!allowed.includes(key)) {
      throw coded(
        TypeError,
        'UNKNOWN_OPTION',
        `unknown option: ${name} has no option ${JSON.stringify(key)}: expected one of ${allowed.join(', ')}`,
      );
    }
  }
}
