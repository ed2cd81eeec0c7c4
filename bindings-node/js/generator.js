// `Generator`, the one public generator class: it checks arguments and options, then hands each
// call to what the generator holds, with one interface (nextId, nextIdAt, nextIds, state,
// close, invalidate, and the descriptive getters):
//   - a fixed worker id (`new Generator({ workerId })`, `Generator.resume`): fixed.js, the wasm engine;
//   - a leased worker id (`Generator.open(uri)`): leased.js, the native addon's lease with ids
//     issued in JavaScript within the ticks it grants (handed over by the entry point that can
//     load the addon, see native.js).
import { coded, integer, shown, typeError } from './errors.js';
import { FixedWorker } from './fixed.js';
import { generatorOptions } from './options.js';
import { openLease, openLeaseAsync, restores } from './native.js';
import * as engine from './engine.js';

/** Most ids one `nextIds` call returns. */
const MAX_BATCH = 1 << 26;
const OPTION_NAMES = ['workerId', 'layout', 'onRollback', 'maxWaitMs', 'maxDriftMs', 'clock'];
const RESUME_OPTION_NAMES = OPTION_NAMES.filter((name) => name !== 'workerId');
const STATE_KEYS = ['layoutFingerprint', 'workerId', 'clockSeq', 'highWaterMs'];
/** `Symbol.dispose` where the runtime has it (Node >= 20.4, 18.18), else the registered name Node and TypeScript use. */
const DISPOSE = typeof Symbol.dispose === 'symbol' ? Symbol.dispose : Symbol.for('nodejs.dispose');
/** `Symbol.asyncDispose` likewise (`await using`). */
const ASYNC_DISPOSE = typeof Symbol.asyncDispose === 'symbol' ? Symbol.asyncDispose : Symbol.for('nodejs.asyncDispose');
/** The constructor's first argument from `Generator.resume` and `Generator.open`, which pass what the generator holds as the second. */
const HOLDING = Symbol('clockflake.holding');
/** The events a healing generator emits (`gen.on(name, listener)`). */
const EVENT_NAMES = ['lost', 'attemptFailed', 'healed'];

/** An event name checked: a typo (or `'error'`, which no generator emits) is refused, never a listener that never runs. */
function eventName(name) {
  if (!EVENT_NAMES.includes(name)) {
    throw coded(TypeError, 'INVALID_ARG_VALUE', `unknown event: expected one of ${EVENT_NAMES.map((known) => `'${known}'`).join(', ')}, found ${shown(name)}`);
  }
  return name;
}

function listenerFunction(listener) {
  if (typeof listener !== 'function') throw typeError('listener', 'a function', listener);
  return listener;
}

function stateError(message) {
  return coded(Error, 'INVALID_STATE', `invalid state: ${message}`);
}

/** A state record's form checked: `{ layoutFingerprint, workerId, clockSeq, marks }`. */
function checkedState(state) {
  if (state === null || typeof state !== 'object' || Array.isArray(state)) throw stateError(`expected an object, found ${shown(state)}`);
  for (const key of Object.keys(state)) {
    if (!STATE_KEYS.includes(key)) throw stateError(`unexpected key ${JSON.stringify(key)}: expected ${STATE_KEYS.join(', ')}`);
  }
  const { layoutFingerprint, workerId, clockSeq, highWaterMs } = state;
  if (typeof layoutFingerprint !== 'string') throw stateError(`layoutFingerprint: expected a decimal string, found ${shown(layoutFingerprint)}`);
  for (const [name, value] of [['workerId', workerId], ['clockSeq', clockSeq]]) {
    if (!Number.isSafeInteger(value) || value < 0) throw stateError(`${name}: expected an integer 0..=9007199254740991, found ${shown(value)}`);
  }
  if (!Array.isArray(highWaterMs)) throw stateError(`highWaterMs: expected an array, found ${shown(highWaterMs)}`);
  const marks = highWaterMs.map((mark, i) => {
    if (mark === null) return null;
    if (!Number.isSafeInteger(mark) || mark < 0) throw stateError(`highWaterMs[${i}]: expected null or an integer Unix ms, found ${shown(mark)}`);
    return mark;
  });
  return { layoutFingerprint, workerId, clockSeq, marks };
}

/**
 * Generates ids for one worker id. Not shareable between threads: each worker thread or cluster
 * worker creates its own, with its own worker id (structured clone copies none of its state).
 */
export class Generator {
  /** What the generator holds: a FixedWorker or a Leased. */
  #held;
  #record;
  /** `restores` when the generator was made (see `restored`). */
  #restores = restores;
  /** Event name to its listeners, in the order added (null: none yet). */
  #listeners = null;

  /**
   * @param {object} options `{ workerId, layout?, onRollback?, maxWaitMs?, maxDriftMs?, clock? }`
   */
  constructor(options, held) {
    if (options === HOLDING) {
      this.#held = held.generator;
      this.#record = held.record;
      this.#held.opened?.();
      return;
    }
    const parsed = generatorOptions(options, OPTION_NAMES, 'options');
    const workerId = integer(options.workerId, 'workerId', 'WORKER_ID_OUT_OF_RANGE');
    this.#held = FixedWorker.create(parsed, workerId);
    this.#record = parsed.record;
  }

  /**
   * Continues from a saved `state()` (after a restart, or taking over a worker id): never
   * reissues an id at or below the state's high-water marks.
   * @param {object} state the record `state()` returned (it survives JSON)
   * @param {object} [options] as the constructor's, without `workerId`
   */
  static resume(state, options = {}) {
    const parsed = generatorOptions(options, RESUME_OPTION_NAMES, 'options');
    const generator = FixedWorker.resume(parsed, checkedState(state));
    return new Generator(HOLDING, { generator, record: parsed.record });
  }

  /**
   * A promise of a generator whose worker id is leased from a coordinator, continuing above
   * every id that worker id ever issued. The coordinator's I/O (and, after a handover, the wait
   * for this host's clock, up to `maxHandoverWaitMs`) runs on a thread of the native addon,
   * never on the event loop; every refusal is a rejection. The coordinators (README's list,
   * kept true by tests/coordinators.test.mjs):
   * `file:///var/lib/app/ids?app=orders` (one host: a lock file per worker id),
   * `postgres://user@db:5432/ids?app=orders&ttl=10s` (row leases),
   * `redis://db:6379/0?app=orders&ttl=10s` (key leases),
   * `zookeeper://zk1:2181,zk2:2181/snowflake/orders?ttl=10s` (ephemeral nodes),
   * `etcd://etcd1:2379,etcd2:2379/?app=orders&ttl=10s` (keys bound to etcd leases),
   * `k8s:///var/lib/app/ids?app=orders` (a StatefulSet pod's ordinal),
   * `env:///var/lib/app/ids?app=orders` (`CLOCKFLAKE_WORKER_ID`).
   * A background thread renews the lease; past its deadline the lease issues nothing more and
   * is leased again in the background (`heal`, the default: calls throw the retryable
   * `COORDINATOR_UNAVAILABLE` meanwhile), or with `heal: false` every call throws `LEASE_LOST`.
   * Call `close()` (or `await using`) to release the worker id. Each cluster worker and each
   * worker_thread opens its own.
   * @param {string} uri the coordinator
   * @param {object} [options] `{ layout?, onRollback?, maxWaitMs?, maxDriftMs?, maxHandoverWaitMs? }`
   */
  static async open(uri, options = {}) {
    const generator = await openLeaseAsync(uri, options);
    return new Generator(HOLDING, { generator, record: generator.record });
  }

  /**
   * `Generator.open` on the calling thread: blocks it for the coordinator's I/O. For scripts
   * and CommonJS modules that cannot await, and a `file://` pool (local lock files, no
   * network); a server's event loop wants `await Generator.open(uri)`.
   */
  static openSync(uri, options = {}) {
    const generator = openLease(uri, options);
    return new Generator(HOLDING, { generator, record: generator.record });
  }

  /** The worker id (for `Generator.open`, the leased one). */
  get workerId() {
    return this.#held.workerId;
  }

  /**
   * Whether the generator can still issue ids: false once closed, and for a leased generator
   * once its lease is lost.
   */
  get isActive() {
    return this.#held.isActive;
  }

  /**
   * For a leased generator whose lease expires (`postgres://`, `redis://`, `zookeeper://`): how
   * many ms are left before its deadline if no renewal succeeds meanwhile (the renewal thread
   * moves it on; 0 once lost or closed). null for a lease held until the process ends
   * (`file://`) and for a fixed worker id.
   */
  get leaseRemainingMs() {
    return this.#held.leaseRemainingMs;
  }

  /**
   * Counters for metrics: `workerId`, `state` ('active', 'lost', 'closed' or 'forked'),
   * `leased`, and for a leased generator renewals and their failures, clock steps back,
   * clock-sequence switches, waits and their time (µs), ms to the lease deadline (null: never
   * expires), the reservation (Unix ms; 0 for a fixed worker id) and the skew measured by the
   * start-up clock check (local minus the coordinator's clock, ms; null when not measured:
   * file://, max_skew=off, a fixed worker id). Counted on slow paths
   * only; reading them never waits.
   */
  stats() {
    return this.#held.stats();
  }

  /** The coordinator of a leased generator (`file:///...?app=...`, no password), or null. */
  get coordinator() {
    return this.#held.coordinator;
  }

  /**
   * Stops issuing ids at once (later calls throw `GENERATOR_CLOSED`), and returns a promise
   * that settles once a leased generator has stopped its renewal thread, stored its state with
   * the coordinator and released its worker id, all off the event loop. Idempotent: every
   * call returns the first one's promise. `await using` calls it (`Symbol.asyncDispose`).
   */
  close() {
    return this.#held.closeAsync();
  }

  /**
   * `close()` on the calling thread: returns once the worker id is released (or throws why
   * not), blocking the thread for the coordinator's I/O meanwhile. `using` calls it
   * (`Symbol.dispose`), and so may a process's last lines, which cannot await.
   */
  closeSync() {
    this.#held.close();
  }

  /** The layout's description (see `describeLayout`). */
  get layout() {
    return this.#record.info;
  }

  /** The rollback policy in force, and the waits it allows. */
  get options() {
    return this.#held.options;
  }

  /**
   * The next id, at the clock's time. Waits (at most until the next tick) when the tick is full
   * and the next one starts within a second; otherwise throws SEQUENCE_EXHAUSTED with `retryAtMs`.
   */
  nextId() {
    if (this.#restores !== restores) this.#refuseRestored();
    return this.#held.nextId();
  }

  /** The next id at an explicit time (Unix ms). Never blocks: a refusal throws, with `retryAtMs`. */
  nextIdAt(nowMs) {
    const now = integer(nowMs, 'nowMs', 'INVALID_ARG_VALUE');
    if (this.#restores !== restores) this.#refuseRestored();
    return this.#held.nextIdAt(now);
  }

  /** The next id as a decimal string, for JSON. */
  nextIdString() {
    return String(this.nextId());
  }

  /** `count` new ids, strictly increasing within one clock sequence; waits for the next tick when one is full. */
  nextIds(count) {
    const n = integer(count, 'count', 'INVALID_ARG_VALUE');
    if (n > MAX_BATCH) throw coded(RangeError, 'INVALID_ARG_VALUE', `count out of range: expected at most ${MAX_BATCH}, found ${n}`);
    if (this.#restores !== restores) this.#refuseRestored();
    return this.#held.nextIds(n);
  }

  /**
   * A JSON-safe snapshot to persist: `{ layoutFingerprint, workerId, clockSeq, highWaterMs }`.
   * Give it to `Generator.resume` after a restart.
   */
  state() {
    return this.#held.state();
  }

  /**
   * Adds a listener of a healing generator's event (`Generator.open`, `heal` on): `'lost'`
   * (`{ workerId, reason }`: ids are refused until a new lease is held), `'attemptFailed'`
   * (`{ error, retryInMs }`: an attempt to lease again failed) or `'healed'` (`{ workerId }`: ids
   * again). Listeners run on the event loop, in the order added, with the generator as `this`;
   * one that throws is reported as an uncaught exception, as an EventEmitter's listener is. They
   * never keep the process alive. Returns the generator.
   */
  on(event, listener) {
    const name = eventName(event);
    listenerFunction(listener);
    if (this.#listeners === null) {
      this.#listeners = new Map();
      // A healing generator's events (leased.js) come to the listeners from now on. Held
      // weakly: the addon's function for them is a GC root while the lease lives, and a
      // generator dropped without close() must still be collected (which releases its lease).
      // (Made here, not in the constructor: a new WeakRef keeps its target to the end of the
      // job, which would delay that for every generator.)
      if (typeof this.#held.listen === 'function') {
        const generator = new WeakRef(this);
        this.#held.listen((name, payload) => generator.deref()?.#emit(name, payload));
      }
    }
    const listeners = this.#listeners.get(name);
    if (listeners === undefined) this.#listeners.set(name, [listener]);
    else listeners.push(listener);
    return this;
  }

  /** `on`, for the next such event only. */
  once(event, listener) {
    const name = eventName(event);
    listenerFunction(listener);
    const generator = this;
    function onceListener(payload) {
      generator.off(name, onceListener);
      return listener.call(this, payload);
    }
    onceListener.listener = listener;
    return this.on(name, onceListener);
  }

  /** Removes a listener (the one added last, if added more than once; `once`'s too). Returns the generator. */
  off(event, listener) {
    const name = eventName(event);
    listenerFunction(listener);
    const listeners = this.#listeners?.get(name);
    for (let at = (listeners?.length ?? 0) - 1; at >= 0; at -= 1) {
      if (listeners[at] === listener || listeners[at].listener === listener) {
        listeners.splice(at, 1);
        break;
      }
    }
    return this;
  }

  /** Calls the listeners of `name` (a copy of the list: one may remove itself); a throw goes to the uncaught exception handler. */
  #emit(name, payload) {
    const listeners = this.#listeners?.get(name);
    if (listeners === undefined) return;
    for (const listener of [...listeners]) {
      try {
        listener.call(this, payload);
      } catch (error) {
        queueMicrotask(() => {
          throw error;
        });
      }
    }
  }

  /** Made before `restored()`: what the generator holds is dropped, and every call refuses. */
  #refuseRestored() {
    this.#held.invalidate();
    throw engine.coreError('WORKER_ID_INVALIDATED');
  }
}

/** `using gen = Generator.openSync(...)` closes the generator at the end of the block (`closeSync`). */
Object.defineProperty(Generator.prototype, DISPOSE, {
  value: function dispose() {
    this.closeSync();
  },
  writable: true,
  configurable: true,
});

/** `await using gen = await Generator.open(...)` closes it at the end of the block (`close`). */
Object.defineProperty(Generator.prototype, ASYNC_DISPOSE, {
  value: function asyncDispose() {
    return this.close();
  },
  writable: true,
  configurable: true,
});
