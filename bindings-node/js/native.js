// The native addon (leased worker ids only): loaded on first use through the loader an entry
// point provides (`setNativeLoader`: node.js does, with the leased generator, `setLeased`, so
// that leased.js is in no bundle that cannot load the addon); elsewhere `Generator.open` throws
// NATIVE_UNAVAILABLE. Its errors get the package's brand and `retryAtMs` here; `restored()`
// (snapshot restores) is counted here for every generator, and passed on to the addon.
import { ClockflakeError, adopt } from './errors.js';

let loadNative = null;
let native = null;
/** The leased generator's class (leased.js): `open` (on this thread) and `openAsync`. */
let Leased = null;

/** Called by an entry point that can load the native addon (Node): `load()` returns it or throws. */
export function setNativeLoader(load) {
  loadNative = load;
}

/** Called by the same entry point: the class of leased generators (leased.js). */
export function setLeased(leased) {
  Leased = leased;
}

/** A leased generator, leased on this thread (`Generator.openSync`); NATIVE_UNAVAILABLE where there is no addon. */
export function openLease(uri, options) {
  nativeAddon();
  return Leased.open(uri, options);
}

/** A promise of a leased generator, leased on a thread of the addon (`Generator.open`). */
export function openLeaseAsync(uri, options) {
  nativeAddon();
  return Leased.openAsync(uri, options);
}

/** The native addon, loaded on first use; NATIVE_UNAVAILABLE where there is none. */
export function nativeAddon() {
  if (native !== null) return native;
  if (loadNative === null) {
    throw new ClockflakeError(
      'NATIVE_UNAVAILABLE',
      'native addon unavailable: Generator.open (leased worker ids) needs the native addon, which this runtime cannot load (no Node-API here); everything else works without it: new Generator({ workerId }), decode, encode, idRange, layouts, PublicIds',
    );
  }
  native = loadNative();
  CORE_CODES = new Set(native.errorCodes());
  return native;
}

let CORE_CODES = new Set();

/** How many times `restored()` was called: a generator made before refuses. */
export let restores = 0;

/**
 * Tells clockflake that this process was restored from a snapshot (a VM or container snapshot,
 * serverless snapshot-restore): copies made from outside, which nothing inside the process can
 * see. Every generator made before refuses from now on with `WORKER_ID_INVALIDATED` (its
 * worker id may be another copy's too); make new ones, with their own worker ids (leased ones
 * with `Generator.open`). Call it first thing after a restore, before any id.
 */
export function restored() {
  restores += 1;
  // Leased generators' native side refuses too (and so would a generator of another copy of
  // this module in the process).
  if (native !== null) native.restored();
}

/** Gives an error thrown by the native module its brand and `retryAtMs`. */
export function fromNative(error) {
  return adopt(error, error !== null && typeof error === 'object' && CORE_CODES.has(error.code) ? native.lastRetryAtMs() : null);
}

/**
 * The error an asynchronous native call settled with (`{ code, message, retryAtMs }`, see the
 * addon's `LeaseFailure`), as the synchronous calls throw it; null when it settled with a value.
 */
export function failed(outcome) {
  if (outcome === null || typeof outcome !== 'object' || typeof outcome.code !== 'string') return null;
  const error = new Error(outcome.message);
  error.code = outcome.code;
  return adopt(error, outcome.retryAtMs ?? null);
}

/** Runs a native call, rethrowing its error with `retryAtMs` set. */
export function call(fn, a, b, c, d, e, f, g, h) {
  try {
    return fn(a, b, c, d, e, f, g, h);
  } catch (error) {
    throw fromNative(error);
  }
}
