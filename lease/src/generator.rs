//! The leased generator: a core [`Generator`] whose every id is checked against the lease
//! deadline and the persisted reservation, with renewal on a background thread.
//!
//! Who may wait on what: calls that issue ids read atomics only. They never take the mutex
//! around the coordinator (`Control`), which the renewal thread holds during coordinator I/O;
//! when they need a renewal (the reservation ran out, or the clock stepped back into a new
//! clock sequence) they ask the renewal thread and wait at most [`RENEWAL_WAIT`] for it, so a
//! frozen coordinator can never hold an id call for longer. Past the lease deadline they
//! refuse at once.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use clockflake::{
    Clock, Error, Field, Generator, IdBlock, Layout, Options, Policy, State, MAX_CLOCK_SEQS,
};

use crate::clock::{boot_ms, wall_ms};
use crate::coordinator::choose_clock_seq;
use crate::{Coordinator, LeaseError};

/// Longest an id call waits for the renewal thread to persist a reservation it needs; past it
/// the call refuses with [`LeaseError::RenewalLate`] (retryable).
pub const RENEWAL_WAIT: Duration = Duration::from_millis(50);

/// How far the wall clock must be behind the generator's time before the generator's time
/// follows it back (a clock excursion to the future, corrected). Smaller steps back (NTP
/// slews) stay smoothed: the generator's time waits for the wall clock to catch up.
pub const FOLLOW_BACK_MS: u64 = 1000;

/// Longest [`LeasedGenerator::close`] waits for a renewal in flight to finish; past it, ids
/// have stopped but the worker id is released by the renewal thread once the coordinator
/// answers (or by the lease's expiry).
pub const CLOSE_WAIT: Duration = Duration::from_secs(2);

/// How often the renewal thread looks at the wall clock (to follow it forward or back), even
/// when no renewal is due.
const LOOK_INTERVAL_MS: u64 = 100;

const ACTIVE: u8 = 0;
const LOST: u8 = 1;
const CLOSED: u8 = 2;

/// How a leased generator is built, besides its URI and layout.
#[derive(Clone)]
pub struct LeaseOptions {
    /// The core generator's options (rollback policy, waits).
    pub generator: Options,
    /// A wall clock to use instead of the system's (tests inject clocks that run ahead or
    /// jump back). Lease deadlines are measured on the boot clock whatever this says.
    /// It is called from the renewal thread too (each renewal reads the time its reservation
    /// starts from), so it must be `Send + Sync` and safe to call concurrently with the
    /// threads taking ids.
    pub clock: Option<Arc<dyn Clock + Send + Sync>>,
    /// Longest a new holder waits at its first id for its clock to pass the stored
    /// high-water marks when no clock sequence is free (default 15 s); beyond it the id is
    /// refused (`CLOCK_SEQUENCE_EXHAUSTED` or `CLOCK_MOVED_BACKWARDS`).
    pub max_handover_wait: Duration,
}

impl Default for LeaseOptions {
    fn default() -> Self {
        LeaseOptions {
            generator: Options::default(),
            clock: None,
            max_handover_wait: Duration::from_secs(15),
        }
    }
}

impl std::fmt::Debug for LeaseOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaseOptions")
            .field("generator", &self.generator)
            .field("clock", &self.clock.as_ref().map(|_| "injected"))
            .field("max_handover_wait", &self.max_handover_wait)
            .finish()
    }
}

/// Where wall time comes from.
enum Time {
    /// The boot clock plus an offset to Unix time: one clock read gives both the id's time
    /// and the deadline check. The renewal thread re-anchors it to the wall clock when the
    /// wall clock is ahead, or behind by more than [`FOLLOW_BACK_MS`]: small steps back are
    /// smoothed, an excursion to the future is not kept for the rest of the process.
    Boot { anchor: AtomicU64 },
    /// An injected clock; the boot clock is read besides it for the deadline.
    Injected(Arc<dyn Clock + Send + Sync>),
}

impl Time {
    fn new(options: &LeaseOptions) -> Time {
        match &options.clock {
            Some(clock) => Time::Injected(Arc::clone(clock)),
            None => Time::Boot {
                anchor: AtomicU64::new(wall_ms().saturating_sub(boot_ms())),
            },
        }
    }

    #[inline(always)]
    fn now_ms(&self) -> u64 {
        match self {
            Time::Boot { anchor } => anchor.load(Ordering::Relaxed) + boot_ms(),
            Time::Injected(clock) => clock.now_ms(),
        }
    }

    /// Follows the wall clock (see [`Time::Boot`]); only the renewal thread calls it.
    /// Returns whether it stepped back.
    fn follow_wall_clock(&self) -> bool {
        if let Time::Boot { anchor } = self {
            let target = wall_ms().saturating_sub(boot_ms());
            let current = anchor.load(Ordering::Relaxed);
            if target > current || current - target > FOLLOW_BACK_MS {
                anchor.store(target, Ordering::Relaxed);
                return target < current;
            }
        }
        false
    }
}

/// The coordinator and what only the renewal thread (and close) touch. Its mutex is held
/// during coordinator I/O: no id call ever takes it.
struct Control {
    coordinator: Box<dyn Coordinator>,
    /// The reservation last persisted: no id of `reserved_cs` carries a later time.
    until_ms: u64,
    /// The clock sequence the last persisted reservation is for.
    reserved_cs: u64,
    /// How long the last renewal took: reservations are made that much longer, so that a
    /// slow disk or network never leaves them expired by the time they are persisted.
    latency_ms: u64,
    /// Boot ms the last successful renewal was sent at.
    renewed_boot_ms: u64,
}

/// Words for people, behind a mutex never held across I/O.
#[derive(Default)]
struct Notes {
    lost_reason: Option<String>,
    last_error: Option<String>,
}

/// Between id calls, `close` and the renewal thread; never held across I/O.
#[derive(Default)]
struct Signal {
    /// Close asked the renewal thread to stop.
    stop: bool,
    /// An id call asked for a renewal now.
    kick: bool,
    /// The renewal thread has exited.
    exited: bool,
    /// Close stopped waiting for a renewal in flight: the renewal thread releases the worker
    /// id itself when that renewal returns.
    release_on_exit: bool,
}

struct Shared {
    gen: Generator,
    time: Time,
    /// Boot ms before which ids may be issued: the lease deadline (`u64::MAX` when the lease
    /// never expires); 0 once lost or closed.
    deadline_boot_ms: AtomicU64,
    /// Latest wall ms at which an id may be issued: the persisted reservation less what the
    /// policy may run ahead of the clock; 0 once lost or closed.
    reserved_wall_ms: AtomicU64,
    /// Clock-sequence bits (in place) of the persisted reservation.
    reserved_cs_bits: AtomicU64,
    /// `ACTIVE`, `LOST` or `CLOSED`.
    lifecycle: AtomicU8,
    /// Wall ms an id call needs a reservation to cover: the renewal thread's next target.
    wanted_wall_ms: AtomicU64,
    /// Set in a forked child: the worker id belongs to the parent.
    forked: AtomicBool,
    /// The process's fork generation ([`crate::fork`]) when the generator was made.
    fork_generation: u64,
    pid: u32,
    cs_mask: u64,
    ahead_ms: u64,
    reserve_ms: u64,
    ttl_ms: Option<u64>,
    margin_ms: u64,
    /// Wall ms from which the first id can be issued after a handover (0: at once).
    ready_at_ms: u64,
    max_handover_wait_ms: u64,
    describe: String,
    control: Mutex<Control>,
    notes: Mutex<Notes>,
    signal: Mutex<Signal>,
    /// Wakes the renewal thread (stop, kick).
    wake: Condvar,
    /// Wakes id calls and close (a renewal done, the renewal thread gone).
    renewed: Condvar,
    counters: Counters,
}

/// Counters of the slow paths (never touched by an id that takes the fast path).
#[derive(Default)]
struct Counters {
    renewals: AtomicU64,
    renewal_failures: AtomicU64,
    clock_steps_back: AtomicU64,
    clock_seq_switches: AtomicU64,
    waits: AtomicU64,
    wait_us: AtomicU64,
}

/// What a leased generator has been through, for metrics ([`LeasedGenerator::stats`]).
/// Everything here is counted on slow paths only: reading it costs a few atomic loads, and
/// keeping it costs the ids nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct LeaseStats {
    /// The leased worker id.
    pub worker_id: u64,
    /// `"active"`, `"lost"`, `"closed"` or `"forked"` (this process is a fork of the holder).
    pub state: &'static str,
    /// The counters (add them up across generators with `+=`).
    pub counters: LeaseCounters,
    /// Milliseconds until the lease deadline (0 once passed, lost or closed); `None` when the
    /// lease never expires (`file://`).
    pub deadline_in_ms: Option<u64>,
    /// Wall ms up to which the persisted reservation lets ids be issued (0 once stopped).
    pub reserved_until_ms: u64,
    /// The start-up clock check: the generator's clock minus the coordinator's, ms (positive:
    /// the local clock is ahead); `None` when not measured (`file://`, `max_skew=off`).
    pub measured_skew_ms: Option<i64>,
}

/// The counters of [`LeaseStats`]; `+=` adds another generator's (a service that re-leases
/// keeps totals across its generators).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LeaseCounters {
    /// Successful renewals (lease and reservation), the first one at start included.
    pub renewals: u64,
    /// Renewals that failed (coordinator unreachable or slow); ids go on until the deadline.
    pub renewal_failures: u64,
    /// Times the generator's time source was found behind its own last reading by more than
    /// the smoothing bound ([`FOLLOW_BACK_MS`]), and followed it back.
    pub clock_steps_back: u64,
    /// Reservations persisted for a new clock sequence (after the time went back).
    pub clock_seq_switches: u64,
    /// Waits of id calls (for the clock, a full tick, a handover, or the renewal thread).
    pub waits: u64,
    /// Their total time, in microseconds.
    pub wait_us: u64,
}

impl std::ops::AddAssign for LeaseCounters {
    fn add_assign(&mut self, other: LeaseCounters) {
        self.renewals += other.renewals;
        self.renewal_failures += other.renewal_failures;
        self.clock_steps_back += other.clock_steps_back;
        self.clock_seq_switches += other.clock_seq_switches;
        self.waits += other.waits;
        self.wait_us += other.wait_us;
    }
}

/// Why an attempt did not produce an id.
enum Miss {
    /// The deadline or the reservation: the slow path decides which.
    Limit,
    Core(Error),
}

/// A generator holding a leased worker id. Share it between threads by reference (or `Arc`).
///
/// Every id is checked against the lease deadline (measured on a clock that counts through
/// suspend) and against the persisted reservation; past either it refuses (`LEASE_LOST`) or
/// renews first. A background thread renews the lease and the reservation; it stops on
/// [`LeasedGenerator::close`] or drop.
pub struct LeasedGenerator {
    shared: Arc<Shared>,
    renewer: Mutex<Option<JoinHandle<()>>>,
    worker_id: u64,
    layout: Layout,
    /// The start-up clock check's skew (see [`LeaseStats::measured_skew_ms`]).
    measured_skew_ms: Option<i64>,
}

impl std::fmt::Debug for LeasedGenerator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeasedGenerator")
            .field("coordinator", &self.shared.describe)
            .field("worker_id", &self.worker_id)
            .field("layout", &self.layout)
            .finish_non_exhaustive()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic elsewhere while holding the lock leaves consistent data here.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Shared {
    #[inline(always)]
    fn wall_now(&self) -> u64 {
        self.time.now_ms()
    }

    /// One try on the fast path: the core generator, on a clock that fails every id once
    /// the deadline or the reservation has passed.
    #[inline(always)]
    fn attempt(&self, explicit_ms: Option<u64>) -> Result<u64, Miss> {
        let clock = self.limited(explicit_ms, 0);
        clock.judge(self.gen.try_next_id_with(&clock))
    }

    /// One try at a block of up to `max_count` ids of one tick: as [`Shared::attempt`], but
    /// the deadline must be at least `margin_ms` away (see [`block_margin_ms`]).
    #[inline(always)]
    fn attempt_block(
        &self,
        explicit_ms: Option<u64>,
        max_count: u64,
        margin_ms: u64,
    ) -> Result<IdBlock, Miss> {
        let clock = self.limited(explicit_ms, margin_ms);
        clock.judge(self.gen.try_next_block_with(&clock, max_count))
    }

    #[inline(always)]
    fn limited(&self, explicit_ms: Option<u64>, margin_ms: u64) -> LimitedClock<'_> {
        LimitedClock {
            shared: self,
            explicit_ms,
            margin_ms,
            passed: Cell::new(false),
        }
    }

    /// An id issued in another clock sequence than the reservation's (the time went back:
    /// the wall clock returning from an excursion, injected clocks, explicit times) is
    /// returned only once a reservation covering its clock sequence is persisted; the renewal
    /// thread persists it, this call waits for it at most [`RENEWAL_WAIT`] when `wait`.
    #[inline(always)]
    fn covered(&self, id: u64, wait: bool) -> Result<u64, LeaseError> {
        let cs_bits = id & self.cs_mask;
        if cs_bits == self.reserved_cs_bits.load(Ordering::Acquire) {
            return Ok(id);
        }
        self.cover_clock_seq(id, cs_bits, wait)
    }

    #[cold]
    fn cover_clock_seq(&self, id: u64, cs_bits: u64, wait: bool) -> Result<u64, LeaseError> {
        self.check_alive()?;
        let issued_ms = self
            .layout()
            .decode(id)
            .map_or(0, |parts| parts.timestamp_ms);
        let wanted = self.wall_now().max(issued_ms);
        self.await_renewal(wanted, wait, || {
            cs_bits == self.reserved_cs_bits.load(Ordering::Acquire)
        })?;
        Ok(id)
    }

    /// Whether this process is a fork of the one that made the generator: the fork
    /// generation (a `pthread_atfork` child handler, so a fork from C counts too), or the
    /// process id as a second opinion.
    fn is_forked(&self) -> bool {
        crate::fork::generation() != self.fork_generation
            || self.forked.load(Ordering::Acquire)
            || std::process::id() != self.pid
    }

    /// The fast path's fork check: one relaxed load and a compare.
    #[inline(always)]
    fn check_fork(&self) -> Result<(), LeaseError> {
        if crate::fork::generation() == self.fork_generation {
            Ok(())
        } else {
            Err(self.refuse_forked())
        }
    }

    #[cold]
    fn refuse_forked(&self) -> LeaseError {
        self.invalidate_after_fork();
        LeaseError::Core(Error::WorkerIdInvalidated)
    }

    fn invalidate_after_fork(&self) {
        self.forked.store(true, Ordering::Release);
        self.stop_ids();
    }

    /// Stops ids at once: a deadline and a reservation that every id has passed.
    fn stop_ids(&self) {
        self.deadline_boot_ms.store(0, Ordering::Release);
        self.reserved_wall_ms.store(0, Ordering::Release);
    }

    /// Refuses once forked, lost or closed; reads atomics (and, once lost, the reason).
    fn check_alive(&self) -> Result<(), LeaseError> {
        if self.is_forked() {
            return Err(self.refuse_forked());
        }
        match self.lifecycle.load(Ordering::Acquire) {
            ACTIVE => Ok(()),
            LOST => Err(LeaseError::lost(
                lock(&self.notes).lost_reason.clone().unwrap_or_default(),
            )),
            _ => Err(LeaseError::Closed),
        }
    }

    /// The slow path after [`Miss::Limit`]: lost at the deadline, or a reservation reaching
    /// `target_ms` (or the clock) is needed from the renewal thread.
    fn refresh(&self, target_ms: Option<u64>, wait: bool) -> Result<(), LeaseError> {
        self.check_alive()?;
        if boot_ms() >= self.deadline_boot_ms.load(Ordering::Acquire) {
            return Err(self.lose_at_deadline());
        }
        let wanted = self.wall_now().max(target_ms.unwrap_or(0));
        self.await_renewal(wanted, wait, || {
            wanted <= self.reserved_wall_ms.load(Ordering::Acquire)
        })
    }

    /// Asks the renewal thread for a reservation reaching `wanted_ms` (in the current clock
    /// sequence) and, when `wait`, waits at most [`RENEWAL_WAIT`] until `done` holds. Never
    /// takes the coordinator's mutex.
    fn await_renewal(
        &self,
        wanted_ms: u64,
        wait: bool,
        done: impl Fn() -> bool,
    ) -> Result<(), LeaseError> {
        if done() {
            return Ok(());
        }
        self.wanted_wall_ms.fetch_max(wanted_ms, Ordering::AcqRel);
        let started = Instant::now();
        let _timer = wait.then(|| WaitTimer::new(&self.counters, started));
        let give_up = started + if wait { RENEWAL_WAIT } else { Duration::ZERO };
        let mut signal = lock(&self.signal);
        signal.kick = true;
        self.wake.notify_all();
        loop {
            if done() {
                return Ok(());
            }
            if signal.exited {
                drop(signal);
                self.check_alive()?;
                return Err(LeaseError::lost("the renewal thread has stopped"));
            }
            drop(signal);
            self.check_alive()?;
            if boot_ms() >= self.deadline_boot_ms.load(Ordering::Acquire) {
                return Err(self.lose_at_deadline());
            }
            signal = lock(&self.signal);
            let now = Instant::now();
            if now >= give_up {
                break;
            }
            signal = self
                .renewed
                .wait_timeout(signal, give_up - now)
                .map_or_else(|poisoned| poisoned.into_inner().0, |(guard, _)| guard);
        }
        drop(signal);
        Err(LeaseError::RenewalLate {
            coordinator: self.describe.clone(),
            reserved_until_ms: self.reserved_wall_ms.load(Ordering::Acquire),
            last_error: lock(&self.notes).last_error.clone(),
            retry_at_ms: self.wall_now() + RENEWAL_WAIT.as_millis() as u64,
        })
    }

    fn lose_at_deadline(&self) -> LeaseError {
        let reason = match &lock(&self.notes).last_error {
            Some(error) => format!("no renewal before the lease deadline (last error: {error})"),
            None => "no renewal before the lease deadline".to_owned(),
        };
        self.lose(reason)
    }

    /// Stops ids at once (atomics first) and records why; the first reason stays.
    fn lose(&self, reason: String) -> LeaseError {
        self.stop_ids();
        let mut notes = lock(&self.notes);
        if self
            .lifecycle
            .compare_exchange(ACTIVE, LOST, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            notes.lost_reason = Some(reason);
        }
        match self.lifecycle.load(Ordering::Acquire) {
            LOST => LeaseError::lost(notes.lost_reason.clone().unwrap_or_default()),
            _ => LeaseError::Closed,
        }
    }

    /// Persists a reservation from `wall_ms` on (and renews the lease with it), then lets ids
    /// use it. Called with the coordinator's mutex held, by the renewal thread (and once at
    /// start). A reservation never shrinks within one clock sequence; in a new clock sequence
    /// (the time went back) it starts from `wall_ms`, so an excursion to the future does not
    /// mark the new clock sequence far ahead.
    fn renew_locked(&self, control: &mut Control, wall_ms: u64) -> Result<(), LeaseError> {
        let sent_boot_ms = boot_ms();
        let mut state = self.gen.state();
        let horizon =
            wall_ms.saturating_add(self.reserve_ms + self.ahead_ms + 2 * control.latency_ms);
        let same_clock_seq = state.clock_seq == control.reserved_cs;
        let until_ms = if same_clock_seq {
            control.until_ms.max(horizon)
        } else {
            horizon
        };
        state.reserve(until_ms);
        match control.coordinator.renew(&state) {
            Ok(()) => {
                control.latency_ms = boot_ms().saturating_sub(sent_boot_ms);
                self.counters.renewals.fetch_add(1, Ordering::Relaxed);
                if !same_clock_seq {
                    self.counters
                        .clock_seq_switches
                        .fetch_add(1, Ordering::Relaxed);
                }
                control.until_ms = until_ms;
                control.reserved_cs = state.clock_seq;
                control.renewed_boot_ms = sent_boot_ms;
                lock(&self.notes).last_error = None;
                if self.lifecycle.load(Ordering::Acquire) != ACTIVE {
                    // A late answer never revives a lease found lost (or closed) meanwhile.
                    return Ok(());
                }
                if let Some(ttl_ms) = self.ttl_ms {
                    let deadline = sent_boot_ms + ttl_ms.saturating_sub(self.margin_ms);
                    self.deadline_boot_ms.store(deadline, Ordering::Release);
                }
                let reserved = until_ms - self.ahead_ms;
                if same_clock_seq {
                    self.reserved_wall_ms.fetch_max(reserved, Ordering::AcqRel);
                } else {
                    // Lower the time limit before ids of the new clock sequence pass the
                    // coverage check, so none of them goes past this reservation.
                    self.reserved_wall_ms.store(reserved, Ordering::Release);
                }
                let cs_bits = self.layout().compose_clock_seq(state.clock_seq);
                self.reserved_cs_bits.store(cs_bits, Ordering::Release);
                if self.lifecycle.load(Ordering::Acquire) != ACTIVE {
                    self.stop_ids();
                }
                let _signal = lock(&self.signal);
                self.renewed.notify_all();
                Ok(())
            }
            Err(LeaseError::LeaseLost { reason }) => Err(self.lose(reason)),
            Err(error) => {
                self.counters
                    .renewal_failures
                    .fetch_add(1, Ordering::Relaxed);
                lock(&self.notes).last_error = Some(error.to_string());
                Err(error)
            }
        }
    }

    fn layout(&self) -> &Layout {
        self.gen.layout()
    }

    /// Waits until the wall clock reads `at_ms`, with patience for the wait plus a second.
    fn wait_until(&self, at_ms: u64) -> Result<(), LeaseError> {
        let _timer = WaitTimer::new(&self.counters, Instant::now());
        let started = boot_ms();
        let mut now = self.wall_now();
        let patience = at_ms.saturating_sub(now) + 1000;
        while now < at_ms {
            self.check_alive()?;
            if boot_ms() - started > patience {
                return Err(LeaseError::Core(Error::ClockNotAdvancing {
                    waiting_for_ms: at_ms,
                    now_ms: now,
                }));
            }
            let remaining = at_ms - now;
            if remaining > 2 {
                std::thread::sleep(Duration::from_millis(remaining - 1));
            } else {
                std::hint::spin_loop();
            }
            now = self.wall_now();
        }
        Ok(())
    }

    /// After a core refusal: when to try again, if waiting is what the caller wants.
    fn retry_at(&self, error: &Error) -> Option<u64> {
        let now = self.wall_now();
        if error.retry_at_ms().is_some() {
            // Core's bound: a full tick only when the next starts within a second.
            return Generator::blocking_retry_at(error, now);
        }
        // A handover whose clock is behind every stored mark: wait for the first to pass.
        let handover = matches!(
            error,
            Error::ClockMovedBackwards { .. } | Error::ClockSequenceExhausted { .. }
        );
        (handover && now < self.ready_at_ms && self.ready_at_ms - now <= self.max_handover_wait_ms)
            .then_some(self.ready_at_ms)
    }

    /// Gives the worker id back: with the state (and, unless `exact`, the reservation, which
    /// covers a thread between its check and its id) when the lease was active, untouched
    /// when it was lost.
    fn release(
        &self,
        control: &mut Control,
        was_active: bool,
        exact: bool,
    ) -> Result<(), LeaseError> {
        if !was_active {
            return control.coordinator.release(None);
        }
        let mut state = self.gen.state();
        if !exact && state.clock_seq == control.reserved_cs {
            state.reserve(control.until_ms);
        }
        control.coordinator.release(Some(&state))
    }
}

trait ComposeClockSeq {
    fn compose_clock_seq(&self, clock_seq: u64) -> u64;
}

impl ComposeClockSeq for Layout {
    fn compose_clock_seq(&self, clock_seq: u64) -> u64 {
        (clock_seq & self.field_max(Field::ClockSeq)) << self.shift(Field::ClockSeq)
    }
}

/// See [`LeasedGenerator::block_margin_ms`].
fn block_margin_ms(layout: &Layout) -> u64 {
    2 * layout.unit_ms() + 10
}

impl LeasedGenerator {
    /// Takes a worker id from `coordinator` and starts generating under it, continuing from
    /// the worker's stored state. `reserve` is how far ahead of the clock the state record is
    /// kept (and renewed before the clock reaches it).
    pub fn start(
        mut coordinator: Box<dyn Coordinator>,
        layout: Layout,
        options: LeaseOptions,
        reserve: Duration,
    ) -> Result<LeasedGenerator, LeaseError> {
        let workers = layout.max_worker_id() + 1;
        if workers > crate::MAX_LEASED_WORKERS {
            return Err(LeaseError::TooManyWorkers { workers });
        }
        let describe = coordinator.describe();
        let sent_boot_ms = boot_ms();
        let time = Time::new(&options);
        let grant = coordinator.acquire(&layout, time.now_ms())?;
        // The start-up clock check (`max_skew`), then the worker's record. Refused, the worker
        // id goes back untouched (a broken record stays as it is).
        let prepared = crate::coordinator::check_clock(coordinator.as_mut(), || time.now_ms())
            .and_then(|skew| {
                let build = Self::resume_grant(
                    &mut coordinator,
                    layout,
                    &options,
                    reserve,
                    sent_boot_ms,
                    &grant,
                    time,
                )?;
                Ok((skew, build))
            });
        let (measured_skew_ms, build) = match prepared {
            Ok(prepared) => prepared,
            Err(error) => {
                let _ = coordinator.release(None);
                return Err(error);
            }
        };
        let shared = Arc::new(build(coordinator, describe));
        let runner = Arc::clone(&shared);
        let renewer = std::thread::Builder::new()
            .name(format!("clockflake-lease-{}", grant.worker_id))
            .spawn(move || renew_thread(&runner))
            .map_err(|error| LeaseError::unavailable(&shared.describe, error))?;
        Ok(LeasedGenerator {
            shared,
            renewer: Mutex::new(Some(renewer)),
            worker_id: grant.worker_id,
            layout,
            measured_skew_ms,
        })
    }

    /// Resumes the worker's state under the grant and persists the first reservation; returns
    /// what builds the shared part once given the coordinator back (which the caller keeps
    /// until then, to release the worker id if this fails).
    fn resume_grant(
        coordinator: &mut Box<dyn Coordinator>,
        layout: Layout,
        options: &LeaseOptions,
        reserve: Duration,
        sent_boot_ms: u64,
        grant: &Grant,
        time: Time,
    ) -> Result<impl FnOnce(Box<dyn Coordinator>, String) -> Shared, LeaseError> {
        let now_ms = time.now_ms();
        layout.check_time(now_ms)?;
        let mut state = match grant.state {
            Some(state) => {
                if state.worker_id != grant.worker_id {
                    return Err(LeaseError::corrupt(
                        format!("{} worker id {}", coordinator.describe(), grant.worker_id),
                        format!("the record names worker id {}", state.worker_id),
                    ));
                }
                state
            }
            None => State {
                layout_fingerprint: layout.fingerprint(),
                worker_id: grant.worker_id,
                clock_seq: 0,
                high_water_ms: [None; MAX_CLOCK_SEQS],
            },
        };
        if state.layout_fingerprint == layout.fingerprint() && state.clock_seq < layout.clock_seqs()
        {
            let (clock_seq, ready_at_ms) = choose_clock_seq(&layout, &state, now_ms);
            state.clock_seq = clock_seq;
            let gen = Generator::resume(layout, &state, options.generator)?;
            let policy = gen.policy();
            let ahead_ms = if policy == Policy::Logical {
                options.generator.max_drift_ms
            } else {
                0
            };
            let reserve_ms = reserve.as_millis() as u64;
            let ttl_ms = grant.ttl.map(|ttl| ttl.as_millis() as u64);
            // Stop a tenth of the TTL (at least 20 ms) before the lease could expire.
            let margin_ms = ttl_ms.map_or(0, |ttl| (ttl / 10).max(20));
            // The first reservation, persisted before any id. When that write was slow (a
            // quarter of the reservation or more), once more with room for its latency, so
            // that the first ids do not find it spent before the renewal thread's first turn.
            let mut until_ms = 0;
            let mut latency_ms = 0;
            for _ in 0..2 {
                let start_ms = time.now_ms().max(now_ms).max(ready_at_ms);
                until_ms = until_ms.max(start_ms + reserve_ms + ahead_ms + 2 * latency_ms);
                let mut first = gen.state();
                first.reserve(until_ms);
                let renew_sent_ms = boot_ms();
                coordinator.renew(&first)?;
                latency_ms = boot_ms().saturating_sub(renew_sent_ms);
                if latency_ms < reserve_ms / 4 {
                    break;
                }
            }
            let deadline = match ttl_ms {
                Some(ttl) => sent_boot_ms + ttl.saturating_sub(margin_ms),
                None => u64::MAX,
            };
            let max_handover_wait_ms = options.max_handover_wait.as_millis() as u64;
            return Ok(move |coordinator, describe| Shared {
                gen,
                time,
                deadline_boot_ms: AtomicU64::new(deadline),
                reserved_wall_ms: AtomicU64::new(until_ms - ahead_ms),
                reserved_cs_bits: AtomicU64::new(layout.compose_clock_seq(clock_seq)),
                lifecycle: AtomicU8::new(ACTIVE),
                wanted_wall_ms: AtomicU64::new(0),
                forked: AtomicBool::new(false),
                fork_generation: crate::fork::watch(),
                pid: std::process::id(),
                cs_mask: layout.field_max(Field::ClockSeq) << layout.shift(Field::ClockSeq),
                ahead_ms,
                reserve_ms,
                ttl_ms,
                margin_ms,
                ready_at_ms,
                max_handover_wait_ms,
                describe,
                control: Mutex::new(Control {
                    coordinator,
                    until_ms,
                    reserved_cs: clock_seq,
                    latency_ms,
                    renewed_boot_ms: sent_boot_ms,
                }),
                notes: Mutex::new(Notes::default()),
                signal: Mutex::new(Signal::default()),
                wake: Condvar::new(),
                renewed: Condvar::new(),
                counters: Counters {
                    renewals: AtomicU64::new(1),
                    ..Counters::default()
                },
            });
        }
        // Let core name the problem (layout mismatch, clock sequence out of range).
        Generator::resume(layout, &state, options.generator)?;
        Err(LeaseError::Core(Error::InvalidState(
            clockflake::StateProblem::ClockSeqOutOfRange,
        )))
    }

    /// The leased worker id.
    pub fn worker_id(&self) -> u64 {
        self.worker_id
    }

    /// The layout ids are issued under.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The coordinator, as `file:///...?app=...` or `postgres://...?app=...` (no password).
    pub fn coordinator(&self) -> &str {
        &self.shared.describe
    }

    /// Whether ids can still be issued (not lost, closed or invalidated by a fork).
    pub fn is_active(&self) -> bool {
        // Atomics only: the coordinator's mutex may be held by a renewal in flight (or, in a
        // forked child, have been copied locked).
        !self.shared.is_forked()
            && self.shared.lifecycle.load(Ordering::Acquire) == ACTIVE
            && boot_ms() < self.shared.deadline_boot_ms.load(Ordering::Acquire)
    }

    /// The next id. Waits out sequence exhaustion and, right after a handover, for the clock
    /// to pass the previous holder's marks; waits at most [`RENEWAL_WAIT`] for the renewal
    /// thread when the reservation must grow, never for coordinator I/O itself. Refuses with
    /// `LEASE_LOST` once the lease deadline has passed.
    #[inline]
    pub fn next_id(&self) -> Result<u64, LeaseError> {
        self.shared.check_fork()?;
        loop {
            match self.shared.attempt(None) {
                Ok(id) => return self.finish(id, true),
                Err(Miss::Limit) => self.shared.refresh(None, true)?,
                Err(Miss::Core(error)) => match self.shared.retry_at(&error) {
                    Some(at) => self.shared.wait_until(at)?,
                    None => return Err(LeaseError::Core(error)),
                },
            }
        }
    }

    /// The next id, never waiting: where [`LeasedGenerator::next_id`] would wait (for the
    /// clock or the renewal thread), it refuses with the time to retry at
    /// ([`LeaseError::retry_at_ms`]).
    #[inline]
    pub fn try_next_id(&self) -> Result<u64, LeaseError> {
        self.shared.check_fork()?;
        loop {
            match self.shared.attempt(None) {
                Ok(id) => return self.finish(id, false),
                Err(Miss::Limit) => self.shared.refresh(None, false)?,
                Err(Miss::Core(error)) => return Err(LeaseError::Core(error)),
            }
        }
    }

    /// The next id at an explicit time (Unix ms), for tests. Never waits for the clock (at
    /// most [`RENEWAL_WAIT`] for the renewal thread); the lease deadline and the reservation
    /// apply as to every id.
    pub fn next_id_at(&self, now_ms: u64) -> Result<u64, LeaseError> {
        self.shared.check_fork()?;
        loop {
            match self.shared.attempt(Some(now_ms)) {
                Ok(id) => return self.finish(id, true),
                Err(Miss::Limit) => self.shared.refresh(Some(now_ms), true)?,
                Err(Miss::Core(error)) => return Err(LeaseError::Core(error)),
            }
        }
    }

    /// Up to `max_count` consecutive ids of one tick (at least one when `max_count` is not 0),
    /// for a binding that hands them out one by one (the Node package serves them from
    /// JavaScript without a native call per id). Waits like [`LeasedGenerator::next_id`].
    ///
    /// The deadline check is stricter than for one id, because the caller keeps serving the
    /// block after this returns: more than one id is granted only while the deadline is more
    /// than [`LeasedGenerator::block_margin_ms`] away, and the caller must hand the ids out
    /// only while its clock still reads the block's tick (on the time base of
    /// [`LeasedGenerator::clock_offset_ms`]) and never after [`LeasedGenerator::close`].
    /// Closer to the deadline it returns a block of one id, checked exactly as `next_id`'s;
    /// past the deadline it refuses with `LEASE_LOST`. Every id of a block is inside the
    /// persisted reservation and its clock sequence, like every id of `next_id`.
    pub fn next_block(&self, max_count: u64) -> Result<IdBlock, LeaseError> {
        self.block(None, max_count, true)
    }

    /// [`LeasedGenerator::next_block`], never waiting for the clock: where it would wait, it
    /// refuses with the time to retry at ([`LeaseError::retry_at_ms`]).
    pub fn try_next_block(&self, max_count: u64) -> Result<IdBlock, LeaseError> {
        self.block(None, max_count, false)
    }

    /// [`LeasedGenerator::try_next_block`] at an explicit time (Unix ms), for tests and for
    /// bindings that read the clock themselves. Never waits.
    pub fn next_block_at(&self, now_ms: u64, max_count: u64) -> Result<IdBlock, LeaseError> {
        self.block(Some(now_ms), max_count, false)
    }

    /// How long before the lease deadline (boot ms) blocks of more than one id stop being
    /// granted: two ticks of the layout plus 10 ms.
    ///
    /// Why that much: a binding serves a block's ids only while its own clock reads the
    /// block's tick, so the last id of a block goes out at most one tick after the block was
    /// granted. Its clock (JavaScript's `Date.now()`) is not the lease's time: the binding
    /// shifts its readings by [`LeasedGenerator::clock_offset_ms`], and what is left between
    /// the two is the truncation of two millisecond clocks read at slightly different moments
    /// (under 2 ms). The second tick and the 10 ms cover that with room to spare, plus a
    /// caller that read its clock just before the tick ended. So no id of a block is handed
    /// out after the deadline, as long as the system's wall clock does not step back while a
    /// block is partly served (see the README); even then such ids lie inside the persisted
    /// reservation, above which any later holder starts, so they cannot repeat.
    pub fn block_margin_ms(&self) -> u64 {
        block_margin_ms(&self.layout)
    }

    /// The lease deadline on the boot clock ([`crate::boot_ms`]): ids are refused from then on
    /// unless a renewal moves it. `None` when the lease never expires (`file://`); 0 once
    /// lost, closed or invalidated by a fork.
    pub fn deadline_boot_ms(&self) -> Option<u64> {
        match self.shared.deadline_boot_ms.load(Ordering::Acquire) {
            u64::MAX => None,
            deadline => Some(deadline),
        }
    }

    /// How far this generator's time (the boot clock anchored to the wall clock, or the
    /// injected clock) is ahead of the system's wall clock now, in ms (negative: behind). A
    /// binding that tests "still inside the block's tick" on the system clock adds this to
    /// its readings: after the wall clock steps back, the generator's time does not.
    pub fn clock_offset_ms(&self) -> i64 {
        let system = crate::clock::wall_ms();
        let own = self.shared.wall_now();
        if own >= system {
            i64::try_from(own - system).unwrap_or(i64::MAX)
        } else {
            i64::try_from(system - own).map_or(i64::MIN, |d| -d)
        }
    }

    fn block(
        &self,
        explicit_ms: Option<u64>,
        max_count: u64,
        wait: bool,
    ) -> Result<IdBlock, LeaseError> {
        self.shared.check_fork()?;
        if max_count == 0 {
            // Still refuse once lost, closed or forked: an empty block is no licence.
            self.shared.check_alive()?;
            return Ok(self.shared.gen.next_block_at(0, 0)?);
        }
        let margin_ms = self.block_margin_ms();
        // Set once the deadline is within the margin: then one id at a time, each checked as
        // `next_id` checks it, until a renewal moves the deadline.
        let mut single = max_count == 1;
        loop {
            let attempt = if single {
                self.shared.attempt_block(explicit_ms, 1, 0)
            } else {
                self.shared.attempt_block(explicit_ms, max_count, margin_ms)
            };
            match attempt {
                Ok(block) => return self.finish_block(block, wait || explicit_ms.is_some()),
                Err(Miss::Limit) if !single => single = true,
                Err(Miss::Limit) => {
                    self.shared
                        .refresh(explicit_ms, wait || explicit_ms.is_some())?;
                    single = max_count == 1;
                }
                Err(Miss::Core(error)) => match self.shared.retry_at(&error).filter(|_| wait) {
                    Some(at) => self.shared.wait_until(at)?,
                    None => return Err(LeaseError::Core(error)),
                },
            }
        }
    }

    #[inline(always)]
    fn finish_block(&self, block: IdBlock, wait: bool) -> Result<IdBlock, LeaseError> {
        // Every id of a block has the same tick and clock sequence: check the first.
        if let Some(first) = block.peek() {
            self.shared.covered(first, wait)?;
        }
        Ok(block)
    }

    #[inline(always)]
    fn finish(&self, id: u64, wait: bool) -> Result<u64, LeaseError> {
        // One load and a compare while the clock sequence stays the reservation's; it
        // changes when the time goes back (the wall clock returning from an excursion,
        // injected clocks, explicit times).
        self.shared.covered(id, wait)
    }

    /// Counters and lease figures for metrics (see [`LeaseStats`]).
    pub fn stats(&self) -> LeaseStats {
        let shared = &self.shared;
        let counters = &shared.counters;
        let state = if shared.is_forked() {
            "forked"
        } else {
            match shared.lifecycle.load(Ordering::Acquire) {
                ACTIVE => "active",
                LOST => "lost",
                _ => "closed",
            }
        };
        let deadline_in_ms = match shared.deadline_boot_ms.load(Ordering::Acquire) {
            u64::MAX => None,
            deadline => Some(deadline.saturating_sub(boot_ms())),
        };
        LeaseStats {
            worker_id: self.worker_id,
            state,
            counters: LeaseCounters {
                renewals: counters.renewals.load(Ordering::Relaxed),
                renewal_failures: counters.renewal_failures.load(Ordering::Relaxed),
                clock_steps_back: counters.clock_steps_back.load(Ordering::Relaxed),
                clock_seq_switches: counters.clock_seq_switches.load(Ordering::Relaxed),
                waits: counters.waits.load(Ordering::Relaxed),
                wait_us: counters.wait_us.load(Ordering::Relaxed),
            },
            deadline_in_ms,
            reserved_until_ms: shared.reserved_wall_ms.load(Ordering::Acquire),
            measured_skew_ms: self.measured_skew_ms,
        }
    }

    /// A snapshot of the generator's state (what [`LeasedGenerator::close`] stores, less the
    /// reservation).
    pub fn state(&self) -> State {
        self.shared.gen.state()
    }

    /// Marks the generator as belonging to the parent after a `fork()`: every call in this
    /// process refuses with `WORKER_ID_INVALIDATED`, and dropping it neither releases nor
    /// touches the parent's lease. Call it from an at-fork hook in the child (the Python
    /// binding does); the slow path also notices a changed process id on its own.
    pub fn invalidate_after_fork(&self) {
        self.shared.invalidate_after_fork();
    }

    /// Stops issuing ids, stops the renewal thread, stores the state and releases the worker
    /// id. Idempotent; later calls to `next_id` refuse with `GENERATOR_CLOSED`.
    pub fn close(&self) -> Result<(), LeaseError> {
        self.shutdown(false)
    }

    fn shutdown(&self, exclusive: bool) -> Result<(), LeaseError> {
        let shared = &self.shared;
        if shared.is_forked() {
            shared.invalidate_after_fork();
            return Ok(());
        }
        shared.stop_ids();
        let previous = shared.lifecycle.swap(CLOSED, Ordering::AcqRel);
        if previous == CLOSED {
            return Ok(());
        }
        // Stop the renewal thread; wait for a renewal in flight at most CLOSE_WAIT.
        let handle = lock(&self.renewer).take();
        {
            let give_up = Instant::now() + CLOSE_WAIT;
            let mut signal = lock(&shared.signal);
            signal.stop = true;
            shared.wake.notify_all();
            while handle.is_some() && !signal.exited {
                let now = Instant::now();
                if now >= give_up {
                    // The renewal thread releases the worker id once its call returns.
                    signal.release_on_exit = true;
                    return Err(LeaseError::unavailable(
                        &shared.describe,
                        format!(
                            "closed: no more ids are issued, but the coordinator has not \
                             answered for {} ms; worker id {} is released when it answers or \
                             its lease expires",
                            CLOSE_WAIT.as_millis(),
                            self.worker_id
                        ),
                    ));
                }
                signal = shared
                    .renewed
                    .wait_timeout(signal, give_up - now)
                    .map_or_else(|poisoned| poisoned.into_inner().0, |(guard, _)| guard);
            }
        }
        if let Some(handle) = handle {
            let _ = handle.join();
        }
        let mut control = lock(&shared.control);
        shared.release(&mut control, previous == ACTIVE, exclusive)
    }
}

impl Drop for LeasedGenerator {
    fn drop(&mut self) {
        if self.shared.is_forked() {
            // The lock file descriptor and the database connection are the parent's: never
            // unlock or close them from here.
            std::mem::forget(Arc::clone(&self.shared));
            if let Some(handle) = lock(&self.renewer).take() {
                std::mem::forget(handle);
            }
            return;
        }
        // Nobody else holds a reference: the exact state is safe to store.
        let _ = self.shutdown(true);
    }
}

/// The generator's time as the core reads it (explicit, boot-anchored or injected), turned
/// into a time no layout holds once the deadline (less `margin_ms`) or the reservation has
/// passed, so that the core refuses without issuing; `passed` tells the two refusals apart.
struct LimitedClock<'a> {
    shared: &'a Shared,
    explicit_ms: Option<u64>,
    margin_ms: u64,
    passed: Cell<bool>,
}

impl Clock for LimitedClock<'_> {
    #[inline(always)]
    fn now_ms(&self) -> u64 {
        let shared = self.shared;
        let boot = boot_ms();
        let wall = match (self.explicit_ms, &shared.time) {
            (Some(ms), _) => ms,
            (None, Time::Boot { anchor }) => anchor.load(Ordering::Relaxed) + boot,
            (None, Time::Injected(clock)) => clock.now_ms(),
        };
        let ok = boot.saturating_add(self.margin_ms)
            < shared.deadline_boot_ms.load(Ordering::Acquire)
            && wall <= shared.reserved_wall_ms.load(Ordering::Acquire);
        self.passed.set(ok);
        if ok {
            wall
        } else {
            u64::MAX
        }
    }
}

impl LimitedClock<'_> {
    /// The core's answer: a refusal caused by the limit is [`Miss::Limit`].
    #[inline(always)]
    fn judge<T>(&self, issued: Result<T, Error>) -> Result<T, Miss> {
        match issued {
            Ok(value) => Ok(value),
            Err(_) if !self.passed.get() => Err(Miss::Limit),
            Err(error) => Err(Miss::Core(error)),
        }
    }
}

use crate::coordinator::Grant;

/// Counts one wait and its time when dropped.
struct WaitTimer<'a> {
    counters: &'a Counters,
    started: Instant,
}

impl<'a> WaitTimer<'a> {
    fn new(counters: &'a Counters, started: Instant) -> WaitTimer<'a> {
        WaitTimer { counters, started }
    }
}

impl Drop for WaitTimer<'_> {
    fn drop(&mut self) {
        self.counters.waits.fetch_add(1, Ordering::Relaxed);
        let us = self.started.elapsed().as_micros() as u64;
        self.counters.wait_us.fetch_add(us, Ordering::Relaxed);
    }
}

/// The renewal thread: renews the lease and the reservation on time, persists what id calls
/// ask for, follows the wall clock, and finds the lease lost at its deadline. It alone holds
/// the coordinator's mutex during I/O (besides `start` and `close`).
fn renew_thread(shared: &Shared) {
    renew_loop(shared);
    let mut signal = lock(&shared.signal);
    signal.exited = true;
    let release = signal.release_on_exit;
    shared.renewed.notify_all();
    drop(signal);
    if release {
        // `close` stopped waiting for this thread's last call: give the worker id back now,
        // keeping the reservation (ids may have been issued up to it).
        let mut control = lock(&shared.control);
        let was_active = lock(&shared.notes).lost_reason.is_none();
        let _ = shared.release(&mut control, was_active, false);
    }
}

fn renew_loop(shared: &Shared) {
    let interval_ms = match shared.ttl_ms {
        Some(ttl) => (ttl / 4).min(shared.reserve_ms / 4),
        None => shared.reserve_ms / 4,
    }
    .max(5);
    let mut retry_boot_ms = 0;
    loop {
        {
            let mut signal = lock(&shared.signal);
            if !signal.kick && !signal.stop {
                signal = shared
                    .wake
                    .wait_timeout(
                        signal,
                        Duration::from_millis(LOOK_INTERVAL_MS.min(interval_ms)),
                    )
                    .map_or_else(|poisoned| poisoned.into_inner().0, |(guard, _)| guard);
            }
            if signal.stop {
                return;
            }
            signal.kick = false;
        }
        if shared.lifecycle.load(Ordering::Acquire) != ACTIVE || shared.is_forked() {
            return;
        }
        if shared.time.follow_wall_clock() {
            shared
                .counters
                .clock_steps_back
                .fetch_add(1, Ordering::Relaxed);
        }
        if boot_ms() >= shared.deadline_boot_ms.load(Ordering::Acquire) {
            shared.lose_at_deadline();
            return;
        }
        let mut control = lock(&shared.control);
        let wall = shared.wall_now();
        let boot = boot_ms();
        let wanted = shared.wanted_wall_ms.load(Ordering::Acquire);
        let reserved = shared.reserved_wall_ms.load(Ordering::Acquire);
        let due = boot >= retry_boot_ms
            && (shared.ttl_ms.is_some() && boot >= control.renewed_boot_ms + interval_ms
                // Early enough that a renewal as slow as the last one lands in time.
                || wall + shared.reserve_ms / 2 + 2 * control.latency_ms >= reserved
                || wanted > reserved
                || shared.gen.state().clock_seq != control.reserved_cs);
        if !due {
            // Between renewals, the coordinator's own cheap check (a lock file removed).
            if let Err(LeaseError::LeaseLost { reason }) = control.coordinator.check() {
                shared.lose(reason);
                return;
            }
            continue;
        }
        match shared.renew_locked(&mut control, wall.max(wanted)) {
            Ok(()) => retry_boot_ms = 0,
            Err(LeaseError::LeaseLost { .. }) => return,
            // Unreachable coordinator: try again soon; ids go on until the deadline.
            Err(_) => retry_boot_ms = boot_ms() + (interval_ms / 4).max(5),
        }
    }
}
