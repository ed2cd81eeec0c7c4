// The leased generator (`Generator.open(uri)`): a worker id leased through the native addon,
// whose ids JavaScript issues itself, on the wasm engine, within ticks the lease granted.
//
// The grant (the addon's `leasedGrant`): the lease parks its generator at a tick ahead of its
// time (`#parkMs`, at most SPAN_MS ahead and never past the persisted reservation or near the
// deadline), taking one id there through every check the lease makes; the ticks between its
// last id and the parked one are then this side's. A wasm generator resumed at the lease's
// state (`#sub`: same worker id, same clock sequence, above the lease's last id) issues them,
// so a lone call of a new millisecond costs what a fixed worker id's does, with no native call.
// Every id it issues is checked against:
//   - the park: below the parked id (so before the parked tick, the timestamp being every
//     layout's most significant field, and inside the reservation and its clock sequence);
//   - the time: `performance.now()` below `#perfUntil`, the earliest of the parked tick, the
//     deadline handed over (less DEADLINE_GUARD_MS) and the next look at the lease (EXTEND_MS
//     on); `Date.now()` below `#wallUntil`, the same deadline on the wall clock, which counts a
//     suspended machine that the monotonic clock does not (not read for `file://`: no deadline);
//   - `restored()` (generator.js), and `close()`, which drop the grant first.
// The time an id carries is `performance.now() + #offset`, the lease's own time (a clock
// that keeps counting when the wall clock steps back) read by the addon, never ahead of it:
// when this side reaches the parked tick, the lease's time has too, so the lease continues
// above the park without seeing its clock go back. Every EXTEND_MS the addon looks at the lease
// again (active, not forked, deadline, reservation) and moves the park on; a lease lost,
// closed or forked grants nothing, and the next id goes to the addon, which refuses. (A lease
// found lost before its deadline is so noticed here up to EXTEND_MS late; its ids until then lie
// inside the persisted reservation, above which any later holder starts.)
// Anything else the grant cannot serve (an explicit time going back, a tick full up to the
// park, the deadline near) drops the grant, and the lease decides as for any id.
import { debuglog } from 'node:util';
import * as engine from './engine.js';
import { coded, integer, plainObject, typeError } from './errors.js';
import { call, failed, fromNative, nativeAddon } from './native.js';
import { generatorOptions } from './options.js';
import { waitUntil } from './wait.js';

const OPEN_OPTION_NAMES = ['layout', 'onRollback', 'maxWaitMs', 'maxDriftMs', 'maxHandoverWaitMs', 'heal'];

/** The options of `Generator.open`: those of the constructor that make sense with a lease. */
function openOptions(options) {
  plainObject(options, 'options');
  if (Object.hasOwn(options, 'workerId')) {
    throw coded(
      TypeError,
      'UNKNOWN_OPTION',
      'unknown option: Generator.open leases its worker id from the coordinator, so options.workerId cannot be given; use new Generator({ workerId }) for a fixed worker id',
    );
  }
  if (Object.hasOwn(options, 'clock')) {
    throw coded(
      TypeError,
      'UNKNOWN_OPTION',
      'unknown option: a leased generator reads the system clock (its lease deadline and renewals depend on it), so options.clock cannot be given; use nextIdAt(ms) for explicit times',
    );
  }
  const { heal } = options;
  if (heal !== undefined && typeof heal !== 'boolean') throw typeError('options.heal', 'a boolean', heal);
  const parsed = generatorOptions(options, OPEN_OPTION_NAMES, 'options');
  parsed.heal = heal !== false;
  const { maxHandoverWaitMs } = options;
  parsed.maxHandoverWaitMs = maxHandoverWaitMs === undefined ? undefined : integer(maxHandoverWaitMs, 'maxHandoverWaitMs', 'INVALID_ARG_VALUE');
  return parsed;
}

/** The native addon's handle of a layout, made once per layout record. */
function nativeLayout(native, record) {
  if (record.nativeHandle === null) {
    record.nativeHandle = typeof record.spec === 'string' ? call(native.presetLayout, record.spec) : call(native.customLayout, ...record.spec);
  }
  return record.nativeHandle;
}

/** How far ahead of the lease's time a grant parks the lease's generator (ms). */
const SPAN_MS = 200;
/** How often the addon looks at the lease again while a grant is served (ms). */
const EXTEND_MS = 100;
/** Kept between the deadline handed over and the last id served here: the clocks' rounding (ms). */
const DEADLINE_GUARD_MS = 2;

/** `NODE_DEBUG=clockflake`: a line on stderr per event of a healing generator; silent otherwise. */
const debug = debuglog('clockflake');

/**
 * The `NODE_DEBUG=clockflake` line of an event from the addon (`HealEventOut`): the wording of
 * the Python package's log records, then the fields as JSON for a machine.
 */
function logEvent(event) {
  const { kind, coordinator, workerId = null, retryInMs } = event;
  const fields = JSON.stringify(
    kind === 'attemptFailed' ? { event: kind, coordinator, code: event.code, retryInMs } : { event: kind, coordinator, workerId },
  );
  if (kind === 'lost') {
    debug('lease lost (worker id %s, %s): %s; refusing ids and leasing again %s', workerId ?? 'none', coordinator, event.reason, fields);
  } else if (kind === 'attemptFailed') {
    debug('leasing again failed (%s): %s; next attempt in %d ms %s', coordinator, event.message, retryInMs, fields);
  } else {
    debug('leased worker id %s again (%s) %s', workerId, coordinator, fields);
  }
}

/** An event from the addon as the generator emits it: its name and what its listeners get. */
function eventPayload(event) {
  if (event.kind === 'lost') return { workerId: event.workerId ?? null, reason: event.reason };
  if (event.kind === 'attemptFailed') {
    return { error: failed({ code: event.code, message: event.message, retryAtMs: event.retryAtMs ?? null }), retryInMs: event.retryInMs };
  }
  return { workerId: event.workerId };
}

/**
 * A healing generator's events on their way from the addon's threads (a weak threadsafe
 * function: it never keeps the process alive; released at close) to the generator's listeners,
 * each logged first. One that arrives before the generator exists (a lease lost while it opened)
 * waits for it, and goes out after the code that awaited the open has run, to its listeners.
 */
class HealEvents {
  /** The generator's emit, once a listener was added (null: none, the event is only logged). */
  #emit = null;
  /** Events received before the generator and its first listeners were there (null: no more). */
  #pending = [];
  /** Set by close: events still on their way are logged, never emitted. */
  #closed = false;

  /** The function the addon calls on the event loop, one event at a time. */
  receive = (event) => {
    logEvent(event);
    if (this.#closed) return;
    if (this.#pending !== null) this.#pending.push(event);
    else this.#emit?.(event.kind, eventPayload(event));
  };

  /** The generator exists: after the code that awaited it has run, waiting events go to its listeners. */
  opened() {
    setImmediate(() => {
      const pending = this.#pending ?? [];
      this.#pending = null;
      for (const event of pending) {
        if (!this.#closed) this.#emit?.(event.kind, eventPayload(event));
      }
    });
  }

  /** From now on, events go to `emit(name, payload)` (the generator's, at its first listener). */
  listen(emit) {
    this.#emit = emit;
  }

  close() {
    this.#closed = true;
    this.#pending = null;
  }
}

/** What every id call of a closed generator throws: core's GENERATOR_CLOSED, as the addon's. */
function closedError() {
  return engine.coreError('GENERATOR_CLOSED');
}

export class Leased {
  #native;
  #lease;
  #record;
  #options;
  /**
   * The addon's answer to a grant: lease time, ms to the deadline, parked tick, clock sequence,
   * last mark, the number of the lease that granted, its worker id.
   */
  #meta = new Float64Array(7);
  /** The number of the lease the grant is under (a healing generator numbers its leases from 1). */
  #leaseNumber = 0;
  /** The grant's wasm generator, or null: no grant. */
  #sub = null;
  /** Every id served from the grant is below it (0n: no grant). */
  #parked = 0n;
  /** The parked tick's start on the lease's time (-1: no grant). */
  #parkMs = -1;
  /** The lease's time is `performance.now() + #offset` (never ahead of the lease's own clock). */
  #offset = 0;
  #perfUntil = -Infinity;
  #wallUntil = -Infinity;
  /** Set by close: no id from here on, even while the addon is still releasing the worker id. */
  #closed = false;
  /** The promise of the first `closeAsync()`, which every later one returns. */
  #closing = null;
  /** A healing generator's events (null: `heal: false`, no events). */
  #events;

  /** What an open needs, checked: the addon, the layout's handle, the options. */
  static #prepare(uri, options) {
    if (typeof uri !== 'string') throw typeError('uri', 'a string such as "file:///var/lib/app/ids?app=orders"', uri);
    const parsed = openOptions(options);
    const native = nativeAddon();
    const layout = nativeLayout(native, parsed.record);
    const resolved = call(native.resolveOptions, layout, parsed.onRollback, parsed.maxWaitMs, parsed.maxDriftMs);
    return { native, layout, parsed, resolved };
  }

  /** Leases a worker id from `uri` with `Generator.open`'s options, on this thread (`Generator.openSync`). */
  static open(uri, options) {
    const { native, layout, parsed, resolved } = Leased.#prepare(uri, options);
    const events = parsed.heal ? new HealEvents() : null;
    const lease = call(native.openLeased, layout, uri, parsed.onRollback, parsed.maxWaitMs, parsed.maxDriftMs, parsed.maxHandoverWaitMs, parsed.heal, events?.receive);
    return new Leased(native, lease, parsed.record, resolved, events);
  }

  /**
   * The same on a thread of the addon (`Generator.open`): the coordinator's I/O, and a
   * handover's wait, never hold the event loop. Every refusal is a rejection.
   */
  static async openAsync(uri, options) {
    const { native, layout, parsed, resolved } = Leased.#prepare(uri, options);
    const events = parsed.heal ? new HealEvents() : null;
    const outcome = await call(native.openLeasedAsync, layout, uri, parsed.onRollback, parsed.maxWaitMs, parsed.maxDriftMs, parsed.maxHandoverWaitMs, parsed.heal, events?.receive);
    const error = failed(outcome);
    if (error !== null) throw error;
    return new Leased(native, outcome, parsed.record, resolved, events);
  }

  constructor(native, lease, record, options, events) {
    this.#native = native;
    this.#lease = lease;
    this.#record = record;
    this.#options = options;
    this.#events = events;
  }

  /** Called by the generator (generator.js) once it exists. */
  opened() {
    this.#events?.opened();
  }

  /** Called by the generator at its first listener: a healing generator's events go to `emit(name, payload)`. */
  listen(emit) {
    this.#events?.listen(emit);
  }

  nextId() {
    const perf = performance.now();
    // The wall clock is read only for a lease with a deadline (`file://` has none).
    if (perf < this.#perfUntil && (this.#wallUntil === Infinity || Date.now() < this.#wallUntil)) {
      const id = engine.nextIdAt(this.#sub, Math.floor(perf + this.#offset));
      if (id >= 0n && id < this.#parked) return id;
    }
    return this.#slowId();
  }

  nextIdAt(now) {
    if (this.#closed) throw closedError();
    if (this.#serving()) {
      const id = engine.nextIdAt(this.#sub, now);
      if (id >= 0n && id < this.#parked) return id;
      // A time the grant cannot serve (before its last id, or at the park): the lease decides.
      this.#drop();
    }
    return call(this.#native.leasedNextIdAt, this.#lease, now);
  }

  nextIds(n) {
    const out = new BigUint64Array(n);
    let filled = 0;
    while (filled < n) {
      if (this.#serving()) {
        const got = engine.fill(this.#sub, this.#now(), Math.min(n - filled, engine.ID_BUFFER_LEN));
        if (got > 0) {
          engine.copyIds(out, filled, got);
          // One tick's ids: all below the park, or (run ahead to it: `logical`) none issued.
          if (out[filled + got - 1] < this.#parked) {
            filled += got;
            continue;
          }
          this.#drop();
        }
      }
      out[filled] = this.#slowId();
      filled += 1;
    }
    return out;
  }

  /**
   * An id where the fast path could not serve one: from the grant after a wait for the next
   * tick or a look at the lease, from a new grant, or else from the lease itself.
   */
  #slowId() {
    if (this.#closed) throw closedError();
    let granted = false;
    for (;;) {
      if (this.#sub !== null) {
        if (!this.#serving() && !this.#extend()) {
          this.#drop();
          continue;
        }
        const now = this.#now();
        const id = engine.nextIdAt(this.#sub, now);
        if (id >= 0n && id < this.#parked) return id;
        const at = id < 0n ? engine.blockingRetryAt(now) : -1;
        if (at >= 0 && at <= this.#parkMs) {
          // A full tick: wait for the next (core's rule), here or, at the park, from the lease.
          waitUntil(at, now, () => this.#now());
          if (at === this.#parkMs) this.#drop();
          continue;
        }
        this.#drop();
      }
      if (!granted && this.#grant(false)) {
        granted = true;
        continue;
      }
      return call(this.#native.leasedNextId, this.#lease);
    }
  }

  /** Whether the grant may serve an id now (its park, its deadline, and the next look at the lease). */
  #serving() {
    return performance.now() < this.#perfUntil && (this.#wallUntil === Infinity || Date.now() < this.#wallUntil);
  }

  #now() {
    return Math.floor(performance.now() + this.#offset);
  }

  /** Looks at the lease again and moves the park on; false: the grant ends here. */
  #extend() {
    return this.#grant(true) && this.#serving();
  }

  /**
   * Asks the addon for a grant, or (`extending`) to look at the lease again and move the
   * current one on; false where the lease grants nothing now.
   */
  #grant(extending) {
    const meta = this.#meta;
    const perfBefore = performance.now();
    const wallBefore = Date.now();
    let parked;
    try {
      parked = this.#native.leasedGrant(this.#lease, SPAN_MS, extending ? this.#parked : 0n, this.#leaseNumber, meta);
    } catch (error) {
      this.#drop();
      throw fromNative(error);
    }
    const perfAfter = performance.now();
    if (parked === 0n) return false;
    const [leaseNowMs, deadlineInMs, parkMs, clockSeq, lastMs, leaseNumber, workerId] = meta;
    // Read after the lease's time: the sum is never ahead of it. Kept from earlier grants
    // when larger (each is such a bound), so the time never goes back under the wasm generator.
    const offset = leaseNowMs - perfAfter;
    if (!extending) {
      // The worker id of the lease that granted (after a heal, perhaps another than before).
      this.#sub = this.#resumeSub(clockSeq, lastMs, workerId);
      this.#leaseNumber = leaseNumber;
      this.#offset = offset;
    } else {
      this.#offset = Math.max(this.#offset, offset);
    }
    this.#parked = parked;
    this.#parkMs = parkMs;
    const deadlinePerf = deadlineInMs < 0 ? Infinity : perfBefore + deadlineInMs - DEADLINE_GUARD_MS;
    this.#perfUntil = Math.min(perfAfter + EXTEND_MS, parkMs - this.#offset, deadlinePerf);
    this.#wallUntil = deadlineInMs < 0 ? Infinity : wallBefore + deadlineInMs - DEADLINE_GUARD_MS;
    return true;
  }

  /**
   * The wasm generator of a grant: the lease's worker id and clock sequence, above its last id
   * (`lastMs`, -1: none). It never switches clock sequence (`fail`; `logical` keeps to its own):
   * whatever it refuses, the lease decides.
   */
  #resumeSub(clockSeq, lastMs, workerId) {
    const info = this.#record.info;
    const marks = Array.from({ length: info.clockSeqs }, (_, k) => (k === clockSeq && lastMs >= 0 ? lastMs : null));
    const { onRollback, maxWaitMs, maxDriftMs } = this.#options;
    const policy = onRollback === 'logical' ? 'logical' : 'fail';
    return engine.resumeGenerator(this, this.#record.handle, String(info.fingerprint), workerId, clockSeq, marks, policy, maxWaitMs, maxDriftMs);
  }

  /** Ends the grant: no id of it is served after this. */
  #drop() {
    if (this.#sub !== null) engine.freeGenerator(this, this.#sub);
    this.#sub = null;
    this.#parked = 0n;
    this.#parkMs = -1;
    this.#perfUntil = -Infinity;
    this.#wallUntil = -Infinity;
  }

  /** The layout's record (generator.js describes the layout from it). */
  get record() {
    return this.#record;
  }

  state() {
    return call(this.#native.leasedState, this.#lease);
  }

  /** Closes on this thread (`closeSync`). */
  close() {
    this.#closed = true;
    this.#events?.close();
    this.#drop();
    call(this.#native.leasedClose, this.#lease);
  }

  /**
   * Closes on a thread of the addon (`close()`): ids stop here, now; the state is stored and
   * the worker id released off the event loop (a renewal in flight is waited for up to 2 s,
   * then the coordinator's own request timeout). Every call returns the first one's promise.
   */
  closeAsync() {
    if (this.#closing === null) {
      this.#closed = true;
      this.#events?.close();
      this.#drop();
      this.#closing = (async () => {
        const error = failed(await call(this.#native.leasedCloseAsync, this.#lease));
        if (error !== null) throw error;
      })();
    }
    return this.#closing;
  }

  /** After `restored()`: the grant goes (the addon refuses from now on). */
  invalidate() {
    this.#drop();
  }

  get workerId() {
    return call(this.#native.leasedWorkerId, this.#lease);
  }

  get isActive() {
    return this.#native.leasedIsActive(this.#lease);
  }

  get leaseRemainingMs() {
    return this.#native.leasedRemainingMs(this.#lease);
  }

  get coordinator() {
    return this.#native.leasedCoordinator(this.#lease);
  }

  get options() {
    return { ...this.#options };
  }

  stats() {
    const stats = this.#native.leasedStats(this.#lease);
    // napi leaves out an absent Option: null, as the .d.ts says.
    return {
      ...stats,
      workerId: stats.workerId < 0 ? null : stats.workerId,
      leased: true,
      deadlineInMs: stats.deadlineInMs ?? null,
      measuredSkewMs: stats.measuredSkewMs ?? null,
      lastLoss: stats.lastLoss ?? null,
      lastHealError: stats.lastHealError ?? null,
    };
  }
}
