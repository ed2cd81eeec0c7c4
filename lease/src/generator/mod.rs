//! The leased generator: a core [`Generator`] whose every id is checked against the lease
//! deadline and the persisted reservation, with renewal on a background thread.
//!
//! Who may wait on what: calls that issue ids read atomics only. They never take the mutex
//! around the coordinator (`Control`), which the renewal thread holds during coordinator I/O;
//! when they need a renewal (the reservation ran out, or the clock stepped back into a new
//! clock sequence) they ask the renewal thread and wait at most [`RENEWAL_WAIT`] for it, so a
//! frozen coordinator can never hold an id call for longer. Past the lease deadline they
//! refuse at once.
//!
//! Split along the generator's data: `time.rs` (the time source, and that time limited by the
//! deadline and the reservation as the core reads it), `reservation.rs` (the id path's guard:
//! deadline, persisted reservation and its clock sequence, lifecycle, forks), `renewer.rs`
//! (the renewal thread and the coordinator behind its mutex), `stats.rs` (slow-path counters);
//! this file holds the generator itself: start-up, the id calls, close.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use clockflake::{Clock, Error, Field, Generator, IdBlock, Layout, Options, State};

use crate::clock::boot_ms;
use crate::holder::{self, Park, Started, TickSpan};
use crate::protocol::Terms;
use crate::{Coordinator, LeaseError};

mod renewer;
mod reservation;
mod stats;
mod time;

use crate::limits::Limits;
use renewer::{renew_thread, Control, Notes, Signal};
use stats::Counters;
pub use stats::{LeaseCounters, LeaseStats};
use time::Time;
pub use time::FOLLOW_BACK_MS;

/// Longest an id call waits for the renewal thread to persist a reservation it needs; past it
/// the call refuses with [`LeaseError::RenewalLate`] (retryable).
pub const RENEWAL_WAIT: Duration = Duration::from_millis(50);

/// Longest [`LeasedGenerator::close`] waits for a renewal in flight to finish; past it, ids
/// have stopped but the worker id is released by the renewal thread once the coordinator
/// answers (or by the lease's expiry).
pub const CLOSE_WAIT: Duration = Duration::from_secs(2);

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

struct Shared {
    gen: Generator,
    time: Time,
    /// The deadline and the persisted reservation, as id calls read them.
    limits: Limits,
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
    timestamp_shift: u32,
    terms: Terms,
    /// Wall ms from which the first id can be issued after a handover (0: at once).
    ready_at_ms: u64,
    max_handover_wait_ms: u64,
    redacted_uri: String,
    control: Mutex<Control>,
    notes: Mutex<Notes>,
    signal: Mutex<Signal>,
    /// Wakes the renewal thread (stop, kick).
    wake: Condvar,
    /// Wakes id calls and close (a renewal done, the renewal thread gone).
    renewed: Condvar,
    counters: Counters,
    /// Called once by the renewal thread when it stops because the lease was lost (never on
    /// close or in a forked child): a [`crate::HealingGenerator`] leases again from there.
    on_lost: Option<LostHook>,
}

/// What a healing generator hands its leases: told the reason once a lease is lost.
pub(crate) type LostHook = Box<dyn Fn(String) + Send + Sync>;

impl Shared {
    /// The shared part of a lease that has started, its limits as the start published them.
    fn started(
        started: Started,
        time: Time,
        options: &LeaseOptions,
        coordinator: Box<dyn Coordinator>,
        redacted_uri: String,
        on_lost: Option<LostHook>,
    ) -> Shared {
        let layout = *started.generator.layout();
        let limits = started.limits();
        let terms = *started.holder.terms();
        Shared {
            gen: started.generator,
            time,
            limits,
            lifecycle: AtomicU8::new(ACTIVE),
            wanted_wall_ms: AtomicU64::new(0),
            forked: AtomicBool::new(false),
            fork_generation: crate::fork::watch(),
            pid: std::process::id(),
            cs_mask: layout.field_max(Field::ClockSeq) << layout.shift(Field::ClockSeq),
            timestamp_shift: layout.shift(Field::Timestamp),
            terms,
            ready_at_ms: started.ready_at_ms,
            max_handover_wait_ms: u64::try_from(options.max_handover_wait.as_millis())
                .unwrap_or(u64::MAX),
            redacted_uri,
            control: Mutex::new(Control {
                coordinator,
                holder: started.holder,
            }),
            notes: Mutex::new(Notes::default()),
            signal: Mutex::new(Signal::default()),
            wake: Condvar::new(),
            renewed: Condvar::new(),
            counters: Counters {
                renewals: AtomicU64::new(1),
                ..Counters::default()
            },
            on_lost,
        }
    }
}

/// Why an attempt did not produce an id.
enum Miss {
    /// The deadline or the reservation: the slow path decides which.
    Limit,
    Core(Error),
}

/// What [`LeasedGenerator::grant_ticks`] grants, and what it read of the lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TickGrant {
    /// The parked id: the ticks after the generator's last id and before this id's tick are
    /// the binding's to issue; 0: none.
    pub parked_id: u64,
    /// The parked id's tick (Unix ms).
    pub parked_tick_ms: Option<u64>,
    /// The lease's time when it was read (Unix ms).
    pub now_ms: u64,
    /// Ms left to the deadline when it was read (`None`: never expires).
    pub deadline_in_ms: Option<u64>,
    /// The clock sequence of the grant.
    pub clock_seq: u64,
    /// That clock sequence's high-water mark before the park (Unix ms).
    pub last_ms: Option<u64>,
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
            .field("coordinator", &self.shared.redacted_uri)
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

impl LeasedGenerator {
    /// Takes a worker id from `coordinator` and starts generating under it, continuing from
    /// the worker's stored state. `reserve` is how far ahead of the clock the state record is
    /// kept (and renewed before the clock reaches it).
    pub fn start(
        coordinator: Box<dyn Coordinator>,
        layout: Layout,
        options: LeaseOptions,
        reserve: Duration,
    ) -> Result<LeasedGenerator, LeaseError> {
        Self::start_with(coordinator, layout, options, reserve, None)
    }

    /// [`LeasedGenerator::start`], with `on_lost` called by the renewal thread once the lease
    /// is lost.
    pub(crate) fn start_with(
        mut coordinator: Box<dyn Coordinator>,
        layout: Layout,
        options: LeaseOptions,
        reserve: Duration,
        on_lost: Option<LostHook>,
    ) -> Result<LeasedGenerator, LeaseError> {
        let time = Time::new(&options);
        let started = crate::start_lease(
            coordinator.as_mut(),
            layout,
            options.generator,
            reserve,
            || time.now_ms(),
        )?;
        let worker_id = started.worker_id;
        let measured_skew_ms = started.measured_skew_ms;
        let redacted_uri = coordinator.redacted_uri();
        let shared = Arc::new(Shared::started(
            started,
            time,
            &options,
            coordinator,
            redacted_uri,
            on_lost,
        ));
        let runner = Arc::clone(&shared);
        let renewer = std::thread::Builder::new()
            .name(format!("clockflake-lease-{worker_id}"))
            .spawn(move || renew_thread(&runner))
            .map_err(|error| LeaseError::unavailable(&shared.redacted_uri, error))?;
        Ok(LeasedGenerator {
            shared,
            renewer: Mutex::new(Some(renewer)),
            worker_id,
            layout,
            measured_skew_ms,
        })
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
        &self.shared.redacted_uri
    }

    /// Whether ids can still be issued (not lost, closed or invalidated by a fork).
    pub fn is_active(&self) -> bool {
        // Atomics only: the coordinator's mutex may be held by a renewal in flight (or, in a
        // forked child, have been copied locked).
        !self.shared.is_forked()
            && self.shared.lifecycle.load(Ordering::Acquire) == ACTIVE
            && boot_ms() < self.shared.limits.deadline_boot_ms()
    }

    /// The next id. Waits out sequence exhaustion and, right after a handover, for the clock
    /// to pass the previous holder's marks; waits at most [`RENEWAL_WAIT`] for the renewal
    /// thread when the reservation must grow, never for coordinator I/O itself. Refuses with
    /// `LEASE_LOST` once the lease deadline has passed.
    #[inline]
    pub fn next_id(&self) -> Result<u64, LeaseError> {
        self.one(None, true)
    }

    /// The next id, never waiting: where [`LeasedGenerator::next_id`] would wait (for the
    /// clock or the renewal thread), it refuses with the time to retry at
    /// ([`LeaseError::retry_at_ms`]).
    #[inline]
    pub fn try_next_id(&self) -> Result<u64, LeaseError> {
        self.one(None, false)
    }

    /// The next id at an explicit time (Unix ms), for tests. Never waits for the clock (at
    /// most [`RENEWAL_WAIT`] for the renewal thread); the lease deadline and the reservation
    /// apply as to every id.
    pub fn next_id_at(&self, now_ms: u64) -> Result<u64, LeaseError> {
        self.one(Some(now_ms), false)
    }

    /// One id at the generator's time or `explicit_ms`; `wait`: for the clock as well as for
    /// the renewal thread (an explicit time is never waited for, the renewal thread is).
    #[inline(always)]
    fn one(&self, explicit_ms: Option<u64>, wait: bool) -> Result<u64, LeaseError> {
        self.shared.check_fork()?;
        let wait_for_renewal = wait || explicit_ms.is_some();
        loop {
            match self.shared.attempt(explicit_ms) {
                Ok(id) => return self.finish(id, wait_for_renewal),
                Err(Miss::Limit) => self.shared.refresh(explicit_ms, wait_for_renewal)?,
                Err(Miss::Core(error)) => self.wait_or_refuse(error, wait)?,
            }
        }
    }

    /// After a core refusal: waits until its retry time when `wait` and core's bound allow
    /// it, or gives the refusal.
    #[cold]
    fn wait_or_refuse(&self, error: Error, wait: bool) -> Result<(), LeaseError> {
        match self.shared.retry_at(&error).filter(|_| wait) {
            Some(at) => self.shared.wait_until(at),
            None => Err(LeaseError::Core(error)),
        }
    }

    /// Up to `max_count` consecutive ids of one tick (at least one when `max_count` is not 0),
    /// in one step, for bulk calls (Python's `next_ids` fills its buffer from blocks). Waits
    /// like [`LeasedGenerator::next_id`]. Use the ids at once: they are checked now, not when
    /// they are handed out later.
    ///
    /// More than one id is granted only while the deadline is more than two ticks + 10 ms
    /// away; closer, a block of one id, checked exactly as `next_id`'s; past the deadline it
    /// refuses with `LEASE_LOST`. Every id of a block is inside the persisted reservation and
    /// its clock sequence, like every id of `next_id`.
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

    /// Ticks a binding issues on its own (the Node package, on the wasm engine): parks the
    /// generator at a tick ahead of its time (one id taken there at an explicit time, through
    /// every check of [`LeasedGenerator::next_block_at`]), so that the ticks between its last id
    /// and that one are the binding's, in the same clock sequence; the generator continues
    /// above the parked id, and everything it stores or persists is at or above it. The park
    /// is decided by [`holder::park`]: at most `span_ms` ahead, within the reservation, and
    /// [`holder::block_margin_ms`] before the deadline. `parked_id` is the binding's current
    /// parked id (0: none): the grant is then only extended, while the generator issued
    /// nothing since.
    ///
    /// `None` where nothing can be granted now (the lease inactive, the generator issued since
    /// the park, its last id in the current tick); otherwise the grant, whose
    /// [`TickGrant::parked_id`] is 0 when the park could not move and there was none.
    pub fn grant_ticks(
        &self,
        span_ms: u64,
        parked_id: u64,
    ) -> Result<Option<TickGrant>, LeaseError> {
        if !self.is_active() {
            return Ok(None);
        }
        let layout = self.layout;
        let deadline_in_ms = self.deadline_in_ms();
        let state = self.state();
        let last_ms = (state.marks(&layout).get(state.clock_seq as usize).copied()).flatten();
        let now_ms = self.now_ms();
        let parked_ms = match parked_id {
            0 => None,
            id => Some(layout.decode(id)?.timestamp_ms),
        };
        let span = TickSpan {
            now_ms,
            span_ms,
            parked_ms,
            last_ms,
            reserved_wall_ms: self.shared.limits.reserved_wall_ms(),
            deadline_in_ms,
        };
        let mut grant = TickGrant {
            parked_id,
            parked_tick_ms: parked_ms,
            now_ms,
            deadline_in_ms,
            clock_seq: state.clock_seq,
            last_ms,
        };
        match holder::park(&layout, &span) {
            Park::Nothing => return Ok(None),
            Park::At(park_ms) => {
                let block = self.next_block_at(park_ms, 1)?;
                if let Some(id) = block.peek() {
                    grant.parked_id = id;
                    grant.parked_tick_ms = Some(block.tick_ms());
                }
            }
            Park::Keep => {}
        }
        Ok(Some(grant))
    }

    /// This generator's time, Unix ms: the boot clock anchored to the wall clock (or the
    /// injected clock). Ids carry it, and refusals express `retry_at_ms` on it; after the
    /// system's wall clock steps back it does not (see the README's clock excursions).
    pub fn now_ms(&self) -> u64 {
        self.shared.wall_now()
    }

    /// The lease deadline on the boot clock ([`crate::boot_ms`]): ids are refused from then on
    /// unless a renewal moves it. `None` when the lease never expires (`file://`); 0 once
    /// lost, closed or invalidated by a fork.
    pub fn deadline_boot_ms(&self) -> Option<u64> {
        self.shared.deadline()
    }

    /// Milliseconds until the lease deadline (0 once passed, lost or closed); `None` when the
    /// lease never expires (`file://`).
    pub fn deadline_in_ms(&self) -> Option<u64> {
        self.deadline_boot_ms()
            .map(|deadline| deadline.saturating_sub(boot_ms()))
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
        let margin_ms = holder::block_margin_ms(&self.layout);
        // Set once the deadline is within the margin: then one id at a time, each checked as
        // `next_id` checks it, until a renewal moves the deadline.
        let mut single = max_count == 1;
        let wait_for_renewal = wait || explicit_ms.is_some();
        loop {
            let attempt = if single {
                self.shared.attempt_block(explicit_ms, 1, 0)
            } else {
                self.shared.attempt_block(explicit_ms, max_count, margin_ms)
            };
            match attempt {
                Ok(block) => return self.finish_block(block, wait_for_renewal),
                Err(Miss::Limit) if !single => single = true,
                Err(Miss::Limit) => {
                    self.shared.refresh(explicit_ms, wait_for_renewal)?;
                    single = max_count == 1;
                }
                Err(Miss::Core(error)) => self.wait_or_refuse(error, wait)?,
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

    /// A snapshot of the generator's state (what [`LeasedGenerator::close`] stores, less the
    /// reservation).
    pub fn state(&self) -> State {
        self.shared.gen.state()
    }

    /// Whether this process is a copy of the one that made the generator (a fork, or a restore
    /// announced with `fork::restored`): then every call refuses with `WORKER_ID_INVALIDATED`.
    /// Why this lease stopped issuing ids (for a healing generator's `stats()` before its
    /// healer has taken the loss in).
    pub(crate) fn loss_reason(&self) -> String {
        self.shared.loss_reason()
    }

    pub(crate) fn is_copy(&self) -> bool {
        self.shared.is_forked()
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
                        &shared.redacted_uri,
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
