// Waiting for the clock, shared by both generators: whether and until when to wait is core's
// rule (the wasm engine's `blockingRetryAt` and `waitStep`); this side only sleeps and reads.
import * as engine from './engine.js';

/** For sleeping through long waits where the runtime allows it (not on a page's main thread). */
const SLEEPER = typeof SharedArrayBuffer === 'function' ? new Int32Array(new SharedArrayBuffer(4)) : null;
let canSleep = SLEEPER !== null;

function sleep(ms) {
  if (!canSleep) return;
  try {
    Atomics.wait(SLEEPER, 0, 0, ms);
  } catch {
    canSleep = false; // a browser's main thread: spin instead
  }
}

/**
 * Waits until `readClock()` reads `atMs` (from `now`), on core's rule (`engine.waitStep`, which
 * throws CLOCK_NOT_ADVANCING when the clock does not get there); returns the last reading.
 */
export function waitUntil(atMs, now, readClock) {
  const start = now;
  const began = performance.now();
  let reading = now;
  for (;;) {
    const step = engine.waitStep(atMs, start, reading, performance.now() - began);
    if (step < 0) return reading;
    if (step > 0) sleep(step);
    reading = readClock();
  }
}

/**
 * After a refusal at `now`: waits for the time core names and tries again with `attempt(ms)`
 * (an id >= 0n, or a count >= 0), until success or a final refusal, which it throws. Core's
 * rule (`Generator::blocking_retry_at`): a full tick only if the next starts within a second,
 * a clock step back only within `maxWaitMs`.
 */
export function retry(now, attempt, readClock) {
  let reading = now;
  for (;;) {
    const at = engine.blockingRetryAt(reading);
    if (at < 0) throw engine.takeError();
    reading = waitUntil(at, reading, readClock);
    const outcome = attempt(reading);
    if (outcome >= 0) return outcome;
  }
}
