// Layouts the JavaScript lease suites build, by the two numbers that set them apart.

/**
 * A 41-bit timestamp in units of `unitMs` from 2024-01-01 (the default epoch), `workerBits`
 * worker bits (a pool of 2 ** workerBits worker ids) and a 12-bit sequence.
 */
export function workerLayout(workerBits, unitMs = 1) {
  return {
    fields: [
      { name: 'timestamp', bits: 41 },
      { name: 'worker', bits: workerBits },
      { name: 'sequence', bits: 12 },
    ],
    unitMs,
    epochMs: 1_704_067_200_000,
  };
}
