// The timing primitives of bench.mjs and compare.mjs: medians, calls in bursts started just
// after the millisecond changes, and the first call of a millisecond.

export const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
};

/** Spins until `Date.now()` moves on. */
export function nextTick() {
  const t = Date.now();
  while (Date.now() === t);
}

/** Keeps what the measured calls return alive, so that no engine can drop the calls. */
export const keep = { sink: undefined };

/** ns per call of `fn`: the median of `bursts` bursts of `per` calls, each started just after a tick. */
export function burst(fn, bursts = 300, per = 1000) {
  const samples = [];
  for (let b = 0; b < bursts; b++) {
    nextTick();
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < per; i++) keep.sink = fn(i);
    samples.push(Number(process.hrtime.bigint() - t0) / per);
  }
  return median(samples);
}

/**
 * One call just after the ms changes (the cost a caller needing one id now and then pays), timer
 * cost subtracted: { median, p99 } in ns.
 */
export function firstCall(fn, samples = 300) {
  const took = [];
  const timer = [];
  for (let k = 0; k < samples; k++) {
    nextTick();
    const t0 = process.hrtime.bigint();
    keep.sink = fn();
    const t1 = process.hrtime.bigint();
    const t2 = process.hrtime.bigint();
    took.push(Number(t1 - t0));
    timer.push(Number(t2 - t1));
  }
  const timerCost = median(timer);
  const sorted = took.map((t) => Math.max(0, t - timerCost)).sort((a, b) => a - b);
  return { median: median(sorted), p99: sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.99))] };
}

/** ns per call of `fn(i)` for i in 0..1000, the median of `passes` passes (no waiting for a tick). */
export function perCall(fn, passes = 300) {
  const samples = [];
  for (let p = 0; p < passes; p++) {
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < 1000; i++) keep.sink = fn(i);
    samples.push(Number(process.hrtime.bigint() - t0) / 1000);
  }
  return median(samples);
}
