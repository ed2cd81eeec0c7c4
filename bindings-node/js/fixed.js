// The generator with a fixed worker id (`new Generator({ workerId })`, `Generator.resume`):
// core's generator on the wasm engine, one wasm call per id (or per batch), on `Date.now()` or
// the caller's clock. Its interface (nextId, nextIdAt, nextIds, state, close, and the
// descriptive getters) is the leased generator's too (leased.js); generator.js checks the
// arguments and serves both under one public `Generator`.
import * as engine from './engine.js';
import { coded, typeError } from './errors.js';
import { retry } from './wait.js';

/** A wasm generator slot that never exists: a closed generator's handle. */
const CLOSED_HANDLE = 0xffffffff;

export class FixedWorker {
  #handle;
  #workerId;
  /** The caller's clock (a function returning Unix ms), or null for `Date.now()`. */
  #clock;
  #closed = false;

  /** A new generator: `parsed` is generator.js's parsed options. */
  static create(parsed, workerId) {
    return new FixedWorker(parsed, workerId, (owner) =>
      engine.createGenerator(owner, parsed.record.handle, workerId, parsed.onRollback, parsed.maxWaitMs, parsed.maxDriftMs),
    );
  }

  /** A generator continuing from a checked state record `{ layoutFingerprint, workerId, clockSeq, marks }`. */
  static resume(parsed, state) {
    const { layoutFingerprint, workerId, clockSeq, marks } = state;
    return new FixedWorker(parsed, workerId, (owner) =>
      engine.resumeGenerator(owner, parsed.record.handle, layoutFingerprint, workerId, clockSeq, marks, parsed.onRollback, parsed.maxWaitMs, parsed.maxDriftMs),
    );
  }

  /** `makeHandle(owner)` makes the engine's generator, freed when `owner` (this) is collected. */
  constructor(parsed, workerId, makeHandle) {
    this.#handle = makeHandle(this);
    this.#workerId = workerId;
    this.#clock = parsed.clock;
  }

  nextId() {
    const handle = this.#handle;
    const now = this.#clock === null ? Date.now() : this.#readClock();
    const id = engine.nextIdAt(handle, now);
    return id >= 0n ? id : retry(now, (ms) => engine.nextIdAt(handle, ms), () => this.#now());
  }

  nextIdAt(now) {
    const id = engine.nextIdAt(this.#handle, now);
    if (id < 0n) throw engine.takeError();
    return id;
  }

  nextIds(n) {
    const out = new BigUint64Array(n);
    const handle = this.#handle;
    let filled = 0;
    while (filled < n) {
      const wanted = Math.min(n - filled, engine.ID_BUFFER_LEN);
      const now = this.#now();
      let got = engine.fill(handle, now, wanted);
      if (got < 0) got = retry(now, (ms) => engine.fill(handle, ms, wanted), () => this.#now());
      engine.copyIds(out, filled, got);
      filled += got;
    }
    return out;
  }

  state() {
    return engine.generatorState(this.#handle);
  }

  close() {
    if (this.#closed) return;
    this.#closed = true;
    engine.freeGenerator(this, this.#handle);
    // Never a valid slot: the next call fails in the engine with core's GENERATOR_CLOSED.
    this.#handle = CLOSED_HANDLE;
  }

  /** `close()`: nothing to wait for. */
  async closeAsync() {
    this.close();
  }

  /** After `restored()`: nothing is held outside the engine, which refuses through generator.js. */
  invalidate() {}

  get workerId() {
    return this.#workerId;
  }

  get isActive() {
    return !this.#closed;
  }

  get leaseRemainingMs() {
    return null;
  }

  get coordinator() {
    return null;
  }

  get options() {
    return engine.generatorOptions(this.#handle);
  }

  stats() {
    return {
      workerId: this.#workerId,
      state: this.#closed ? 'closed' : 'active',
      leased: false,
      renewals: 0,
      renewalFailures: 0,
      clockStepsBack: 0,
      clockSeqSwitches: 0,
      waits: 0,
      waitUs: 0,
      deadlineInMs: null,
      reservedUntilMs: 0,
      measuredSkewMs: null,
    };
  }

  #now() {
    return this.#clock === null ? Date.now() : this.#readClock();
  }

  #readClock() {
    const now = this.#clock();
    if (typeof now !== 'number') throw typeError('clock()', 'a number of Unix ms', now);
    if (!Number.isSafeInteger(now) || now < 0) {
      throw coded(RangeError, 'INVALID_ARG_VALUE', `clock() out of range: expected an integer 0..=9007199254740991 Unix ms, found ${now}`);
    }
    return now;
  }
}
