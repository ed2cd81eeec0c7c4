//! The leased generator: a core [`Generator`] whose every id is checked against the lease
//! deadline and the persisted reservation, with renewal on a background thread.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use clockflake::{
    Clock, Error, Field, Generator, IdBlock, Layout, Options, Policy, State, MAX_CLOCK_SEQS,
};

use crate::clock::{boot_ms, wall_ms};
use crate::coordinator::choose_clock_seq;
use crate::{Coordinator, LeaseError};

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
    /// and the deadline check. The offset only grows (re-anchored by the renewal thread when
    /// the wall clock is found ahead), so this time never steps back.
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
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Status {
    Active,
    Lost(String),
    Closed,
}

struct Control {
    coordinator: Box<dyn Coordinator>,
    /// The reservation last persisted: no id carries a later time.
    until_ms: u64,
    status: Status,
    last_error: Option<String>,
    /// How long the last renewal took: reservations are made that much longer, so that a
    /// slow disk or network never leaves them expired by the time they are persisted.
    latency_ms: u64,
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
    /// Set in a forked child: the worker id belongs to the parent.
    forked: AtomicBool,
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
    stop: Mutex<bool>,
    wake: Condvar,
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

    /// An id issued in another clock sequence than the reservation's (only possible when the
    /// time can go back: injected clocks, explicit times) is returned only once a reservation
    /// covering its clock sequence is persisted.
    #[inline(always)]
    fn covered(&self, id: u64) -> Result<u64, LeaseError> {
        if id & self.cs_mask == self.reserved_cs_bits.load(Ordering::Acquire) {
            return Ok(id);
        }
        let mut control = self.checked_control()?;
        if id & self.cs_mask != self.reserved_cs_bits.load(Ordering::Acquire) {
            let wall = self.wall_now();
            self.renew_locked(&mut control, wall)?;
        }
        Ok(id)
    }

    fn checked_control(&self) -> Result<MutexGuard<'_, Control>, LeaseError> {
        if self.forked.load(Ordering::Acquire) || std::process::id() != self.pid {
            self.forked.store(true, Ordering::Release);
            self.deadline_boot_ms.store(0, Ordering::Release);
            self.reserved_wall_ms.store(0, Ordering::Release);
            return Err(LeaseError::Core(Error::WorkerIdInvalidated));
        }
        let control = lock(&self.control);
        match &control.status {
            Status::Active => Ok(control),
            Status::Lost(reason) => Err(LeaseError::lost(reason.clone())),
            Status::Closed => Err(LeaseError::Closed),
        }
    }

    /// The slow path after [`Miss::Limit`]: lost, or renew the reservation now.
    fn refresh(&self, target_ms: Option<u64>) -> Result<(), LeaseError> {
        let mut control = self.checked_control()?;
        if boot_ms() >= self.deadline_boot_ms.load(Ordering::Acquire) {
            let reason = match &control.last_error {
                Some(error) => {
                    format!("no renewal before the lease deadline (last error: {error})")
                }
                None => "no renewal before the lease deadline".to_owned(),
            };
            return Err(self.lose(&mut control, reason));
        }
        let wall = self.wall_now().max(target_ms.unwrap_or(0));
        if wall <= self.reserved_wall_ms.load(Ordering::Acquire) {
            return Ok(()); // renewed meanwhile
        }
        self.renew_locked(&mut control, wall)
    }

    fn lose(&self, control: &mut Control, reason: String) -> LeaseError {
        self.deadline_boot_ms.store(0, Ordering::Release);
        self.reserved_wall_ms.store(0, Ordering::Release);
        control.status = Status::Lost(reason.clone());
        LeaseError::lost(reason)
    }

    /// Persists a reservation from `wall_ms` on (and renews the lease with it), then lets ids
    /// use it. The reservation never shrinks.
    fn renew_locked(&self, control: &mut Control, wall_ms: u64) -> Result<(), LeaseError> {
        let sent_boot_ms = boot_ms();
        let until_ms = control
            .until_ms
            .max(wall_ms.saturating_add(self.reserve_ms + self.ahead_ms + 2 * control.latency_ms));
        let mut state = self.gen.state();
        state.reserve(until_ms);
        match control.coordinator.renew(&state) {
            Ok(()) => {
                control.latency_ms = boot_ms().saturating_sub(sent_boot_ms);
                control.until_ms = until_ms;
                control.last_error = None;
                if let Some(ttl_ms) = self.ttl_ms {
                    let deadline = sent_boot_ms + ttl_ms.saturating_sub(self.margin_ms);
                    self.deadline_boot_ms.store(deadline, Ordering::Release);
                }
                let cs_bits = self.layout().compose_clock_seq(state.clock_seq);
                self.reserved_cs_bits.store(cs_bits, Ordering::Release);
                self.reserved_wall_ms
                    .fetch_max(until_ms - self.ahead_ms, Ordering::AcqRel);
                Ok(())
            }
            Err(LeaseError::LeaseLost { reason }) => Err(self.lose(control, reason)),
            Err(error) => {
                control.last_error = Some(error.to_string());
                Err(error)
            }
        }
    }

    fn layout(&self) -> &Layout {
        self.gen.layout()
    }

    /// Waits until the wall clock reads `at_ms`, with patience for the wait plus a second.
    fn wait_until(&self, at_ms: u64) -> Result<(), LeaseError> {
        let started = boot_ms();
        let mut now = self.wall_now();
        let patience = at_ms.saturating_sub(now) + 1000;
        while now < at_ms {
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
        if let Some(at) = error.retry_at_ms() {
            return Some(at);
        }
        // A handover whose clock is behind every stored mark: wait for the first to pass.
        let handover = matches!(
            error,
            Error::ClockMovedBackwards { .. } | Error::ClockSequenceExhausted { .. }
        );
        let now = self.wall_now();
        (handover && now < self.ready_at_ms && self.ready_at_ms - now <= self.max_handover_wait_ms)
            .then_some(self.ready_at_ms)
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
        let grant = coordinator.acquire(&layout, Time::new(&options).now_ms())?;
        let build = match Self::resume_grant(
            &mut coordinator,
            layout,
            &options,
            reserve,
            sent_boot_ms,
            &grant,
        ) {
            Ok(build) => build,
            Err(error) => {
                // Give the worker id back untouched; a broken record stays as it is.
                let _ = coordinator.release(None);
                return Err(error);
            }
        };
        let shared = Arc::new(build(coordinator, describe));
        let runner = Arc::clone(&shared);
        let renewer = std::thread::Builder::new()
            .name(format!("clockflake-lease-{}", grant.worker_id))
            .spawn(move || renew_loop(&runner))
            .map_err(|error| LeaseError::unavailable(&shared.describe, error))?;
        Ok(LeasedGenerator {
            shared,
            renewer: Mutex::new(Some(renewer)),
            worker_id: grant.worker_id,
            layout,
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
    ) -> Result<impl FnOnce(Box<dyn Coordinator>, String) -> Shared, LeaseError> {
        let time = Time::new(options);
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
            // The first reservation, persisted before any id.
            let until_ms = now_ms.max(ready_at_ms) + reserve_ms + ahead_ms;
            let mut first = gen.state();
            first.reserve(until_ms);
            coordinator.renew(&first)?;
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
                forked: AtomicBool::new(false),
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
                    status: Status::Active,
                    last_error: None,
                    latency_ms: 0,
                }),
                stop: Mutex::new(false),
                wake: Condvar::new(),
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
        // The process id first: in a forked child the control mutex may have been copied
        // locked (a parent thread held it at the fork) and must not be touched.
        !self.shared.forked.load(Ordering::Acquire)
            && std::process::id() == self.shared.pid
            && lock(&self.shared.control).status == Status::Active
    }

    /// The next id. Waits out sequence exhaustion and, right after a handover, for the clock
    /// to pass the previous holder's marks; renews the reservation itself if the background
    /// thread is late. Refuses with `LEASE_LOST` once the lease deadline has passed.
    #[inline]
    pub fn next_id(&self) -> Result<u64, LeaseError> {
        loop {
            match self.shared.attempt(None) {
                Ok(id) => return self.finish(id),
                Err(Miss::Limit) => self.shared.refresh(None)?,
                Err(Miss::Core(error)) => match self.shared.retry_at(&error) {
                    Some(at) => self.shared.wait_until(at)?,
                    None => return Err(LeaseError::Core(error)),
                },
            }
        }
    }

    /// The next id, never waiting for the clock: where [`LeasedGenerator::next_id`] would
    /// wait, it refuses with the time to retry at ([`LeaseError::retry_at_ms`]).
    #[inline]
    pub fn try_next_id(&self) -> Result<u64, LeaseError> {
        loop {
            match self.shared.attempt(None) {
                Ok(id) => return self.finish(id),
                Err(Miss::Limit) => self.shared.refresh(None)?,
                Err(Miss::Core(error)) => return Err(LeaseError::Core(error)),
            }
        }
    }

    /// The next id at an explicit time (Unix ms), for tests. Never waits; the lease deadline
    /// and the reservation apply as to every id.
    pub fn next_id_at(&self, now_ms: u64) -> Result<u64, LeaseError> {
        loop {
            match self.shared.attempt(Some(now_ms)) {
                Ok(id) => return self.finish(id),
                Err(Miss::Limit) => self.shared.refresh(Some(now_ms))?,
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
        if max_count == 0 {
            // Still refuse once lost, closed or forked: an empty block is no licence.
            drop(self.shared.checked_control()?);
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
                Ok(block) => return self.finish_block(block),
                Err(Miss::Limit) if !single => single = true,
                Err(Miss::Limit) => {
                    self.shared.refresh(explicit_ms)?;
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
    fn finish_block(&self, block: IdBlock) -> Result<IdBlock, LeaseError> {
        // Every id of a block has the same tick and clock sequence: check the first.
        if let Some(first) = block.peek() {
            self.shared.covered(first)?;
        }
        Ok(block)
    }

    #[inline(always)]
    fn finish(&self, id: u64) -> Result<u64, LeaseError> {
        // On the boot-based time the clock sequence never changes after start, so this is
        // one load and a compare; it matters for injected clocks and explicit times, which
        // can go back and move the generator to another clock sequence.
        self.shared.covered(id)
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
        self.shared.forked.store(true, Ordering::Release);
        self.shared.deadline_boot_ms.store(0, Ordering::Release);
        self.shared.reserved_wall_ms.store(0, Ordering::Release);
    }

    /// Stops issuing ids, stops the renewal thread, stores the state and releases the worker
    /// id. Idempotent; later calls to `next_id` refuse with `GENERATOR_CLOSED`.
    pub fn close(&self) -> Result<(), LeaseError> {
        self.shutdown(false)
    }

    fn shutdown(&self, exclusive: bool) -> Result<(), LeaseError> {
        let shared = &self.shared;
        if shared.forked.load(Ordering::Acquire) || std::process::id() != shared.pid {
            self.invalidate_after_fork();
            return Ok(());
        }
        shared.deadline_boot_ms.store(0, Ordering::Release);
        shared.reserved_wall_ms.store(0, Ordering::Release);
        *lock(&shared.stop) = true;
        shared.wake.notify_all();
        if let Some(handle) = lock(&self.renewer).take() {
            let _ = handle.join();
        }
        let mut control = lock(&shared.control);
        let previous = std::mem::replace(&mut control.status, Status::Closed);
        match previous {
            Status::Active => {
                let mut state = shared.gen.state();
                if !exclusive {
                    // Another thread may be between its check and its id: keep the
                    // reservation, which covers it.
                    state.reserve(control.until_ms);
                }
                control.coordinator.release(Some(&state))
            }
            Status::Lost(_) => control.coordinator.release(None),
            Status::Closed => Ok(()),
        }
    }
}

impl Drop for LeasedGenerator {
    fn drop(&mut self) {
        if self.shared.forked.load(Ordering::Acquire) || std::process::id() != self.shared.pid {
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

fn renew_loop(shared: &Shared) {
    let interval_ms = match shared.ttl_ms {
        Some(ttl) => (ttl / 4).min(shared.reserve_ms / 4),
        None => shared.reserve_ms / 4,
    }
    .max(5);
    let mut wait_ms = interval_ms;
    loop {
        {
            let stop = lock(&shared.stop);
            if *stop {
                return;
            }
            let (stop, _) = shared
                .wake
                .wait_timeout(stop, Duration::from_millis(wait_ms))
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            if *stop {
                return;
            }
        }
        let mut control = lock(&shared.control);
        if control.status != Status::Active || shared.forked.load(Ordering::Acquire) {
            return;
        }
        if let Time::Boot { anchor } = &shared.time {
            anchor.fetch_max(wall_ms().saturating_sub(boot_ms()), Ordering::Relaxed);
        }
        if boot_ms() >= shared.deadline_boot_ms.load(Ordering::Acquire) {
            let reason = format!(
                "no renewal before the lease deadline (last error: {})",
                control.last_error.as_deref().unwrap_or("none")
            );
            shared.lose(&mut control, reason);
            return;
        }
        let wall = shared.wall_now();
        let due = shared.ttl_ms.is_some()
            || wall + shared.reserve_ms / 2 >= shared.reserved_wall_ms.load(Ordering::Acquire);
        if !due {
            wait_ms = interval_ms;
            continue;
        }
        match shared.renew_locked(&mut control, wall) {
            Ok(()) => wait_ms = interval_ms,
            Err(LeaseError::LeaseLost { .. }) => return,
            // Unreachable coordinator: try again soon; ids go on until the deadline.
            Err(_) => wait_ms = (interval_ms / 4).max(5),
        }
    }
}
