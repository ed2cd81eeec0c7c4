//! The server's one generator in shared memory, and the id path every backend runs.
//!
//! Unleased (`clockflake.worker_id_unleased`): core's [`Generator`], made by the postmaster.
//!
//! Leased (`clockflake.lease`): the lease worker (lease_worker.rs) places core's generator,
//! resumed from the lease's state record, in one of [`SLOTS`] slots, each with the limits its
//! lease publishes: `clockflake_lease::limits::Limits`, the type `LeasedGenerator`'s id path
//! reads (the deadline on the boot clock, the persisted reservation and its clock sequence),
//! and names it in `current`: a generation number and the slot. An id is handed out only if
//! it passes `Limits::may_issue` before core issues it and `Limits::covers` after, on its
//! slot's limits, and the generation it started under is still the current one.
//!
//! When the lease is lost the worker stops the slot's limits (every check fails from then
//! on) and publishes a new generation without a slot: backends refuse at once, with a
//! retryable error, while the worker leases again (perhaps another worker id). The next lease
//! goes into a slot no backend is reading: each backend counts itself in its slot's `readers`
//! before it touches the generator there and checks `current` again after, and the worker
//! rewrites only a slot that is not current and has no readers (both sequentially consistent,
//! so one of the two always sees the other). So no backend can issue an id under a lost
//! lease, or read a generator being rewritten.
//!
//! Time: ids carry the system's wall clock as each process reads it (backends and the worker
//! read the same clock); the deadline is on the boot clock (`clockflake_lease::boot_ms`,
//! which counts through a SIGSTOP or a suspend). Not the anchored clock of `LeasedGenerator`,
//! which would need one anchor every process follows: a step back of any size here moves the
//! generator to another clock sequence, as core does.

use std::cell::UnsafeCell;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::time::Duration;

use clockflake::{Error, Field, Generator, IdBlock, Layout};
use clockflake_lease::limits::Limits;
use clockflake_lease::{boot_ms, wall_ms, LeaseError};
use pgrx::pg_sys::panic::ErrorReport;
use pgrx::prelude::*;
use pgrx::PGRXSharedMemory;

/// Generator slots: the current lease's, and room to place the next while a backend that
/// started under an earlier one finishes its call.
pub const SLOTS: usize = 4;

/// `current`'s slot part when no lease is held.
const NO_SLOT: u64 = 0xff;

/// The lease worker has not held a lease yet.
pub const STARTING: u32 = 0;
/// A lease is held and its generator current.
pub const ACTIVE: u32 = 1;
/// The lease was lost (or the worker exited on an error): leasing again.
pub const HEALING: u32 = 2;
/// The lease worker was stopped (SIGTERM) and gave its worker id back.
pub const STOPPED: u32 = 3;

/// What kind of refusal the lease worker's last failed attempt was, for its SQLSTATE.
pub const PROBLEM_RETRYABLE: u32 = 0;
pub const PROBLEM_STATE: u32 = 1;
pub const PROBLEM_INPUT: u32 = 2;

/// The longest an id call waits for the lease worker to persist a reservation it needs (after
/// the clock stepped back into a new clock sequence): clockflake-lease's `RENEWAL_WAIT`.
/// Never waited while no lease is held.
const RENEWAL_WAIT_MS: u64 = clockflake_lease::RENEWAL_WAIT.as_millis() as u64;

/// Room for a message the lease worker leaves for the id path.
const TEXT_BYTES: usize = 480;

/// A short text written by the lease worker and read by backends (a torn read only garbles a
/// message).
pub struct Text {
    bytes: [AtomicU8; TEXT_BYTES],
    len: AtomicU32,
}

impl Text {
    const fn new() -> Text {
        Text {
            bytes: [const { AtomicU8::new(0) }; TEXT_BYTES],
            len: AtomicU32::new(0),
        }
    }

    pub fn set(&self, text: &str) {
        let mut len = text.len().min(TEXT_BYTES);
        while !text.is_char_boundary(len) {
            len -= 1;
        }
        for (slot, byte) in self.bytes.iter().zip(&text.as_bytes()[..len]) {
            slot.store(*byte, Ordering::Relaxed);
        }
        self.len.store(len as u32, Ordering::Release);
    }

    pub fn get(&self) -> Option<String> {
        let len = (self.len.load(Ordering::Acquire) as usize).min(TEXT_BYTES);
        (len > 0).then(|| {
            let bytes: Vec<u8> = self.bytes[..len]
                .iter()
                .map(|slot| slot.load(Ordering::Relaxed))
                .collect();
            String::from_utf8_lossy(&bytes).into_owned()
        })
    }
}

/// One lease's generator and the limits its lease publishes.
pub struct Slot {
    /// Backends inside a call on this slot's generator.
    readers: AtomicU32,
    /// Written by the lease worker only while the slot is not current and has no readers.
    generator: UnsafeCell<MaybeUninit<Generator>>,
    /// The deadline, the persisted reservation and its clock sequence: clockflake-lease's own
    /// limits, published by the lease worker in the order the leased generator's renewal
    /// thread publishes them (and its loom models check); stopped: 0.
    limits: Limits,
    /// The worker id the slot's generator holds.
    worker_id: AtomicU64,
}

impl Slot {
    const fn new() -> Slot {
        Slot {
            readers: AtomicU32::new(0),
            generator: UnsafeCell::new(MaybeUninit::uninit()),
            limits: Limits::new(0, 0, 0),
            worker_id: AtomicU64::new(0),
        }
    }

    /// What the lease publishes to this slot's id path.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The slot's generator. For the lease worker, which wrote it, and for a backend counted
    /// in `readers` of the current slot.
    pub fn generator(&self) -> &Generator {
        // SAFETY: only called on a slot the lease worker has written (the worker on its own
        // lease's slot; backends on the slot `current` names, which the worker wrote before it
        // published it), and never rewritten while it is current or has readers.
        unsafe { (*self.generator.get()).assume_init_ref() }
    }
}

/// What the postmaster puts in shared memory at start.
pub struct Shared {
    /// The generator under a worker id typed by hand; `None` when leased or not configured.
    unleased: Option<Generator>,
    /// [`STARTING`], [`ACTIVE`], [`HEALING`] or [`STOPPED`] (leased only).
    state: AtomicU32,
    /// `(generation << 8) | slot`, the slot [`NO_SLOT`] while no lease is held.
    current: AtomicU64,
    slots: [Slot; SLOTS],
    /// Wall ms an id call needs a reservation to cover: the worker's next renewal reaches it.
    wanted_wall_ms: AtomicU64,
    /// The lease worker's latch (a pointer into shared memory), to wake it; 0 when it runs not.
    worker_latch: AtomicUsize,
    /// When the worker's next attempt to lease starts (Unix ms; 0: under way or none due).
    retry_at_ms: AtomicU64,
    /// The kind of the last failed attempt's error ([`PROBLEM_RETRYABLE`], ...).
    problem_kind: AtomicU32,
    /// Leases lost, leases taken again after a loss, failed attempts.
    pub losses: AtomicU64,
    pub heals: AtomicU64,
    pub failed_attempts: AtomicU64,
    /// Set once a lease was ever held.
    pub ever_leased: AtomicBool,
    /// The last failed attempt's error, `CODE: message`.
    pub problem: Text,
    /// Why the last lease was lost.
    pub last_loss: Text,
    /// The coordinator, without secrets.
    pub coordinator: Text,
}

// SAFETY: a `Generator` is atomics (the last id issued, the high-water marks, the slow path's
// spin flag) and plain data (the layout, the worker id and constants derived from them): no
// pointer into any process's own memory, and its atomics work across processes sharing the
// memory. `unleased` is written by the postmaster before any backend exists; a slot's
// generator by the lease worker only while no backend may read it (see the module's docs).
// Everything else is atomics.
unsafe impl PGRXSharedMemory for Shared {}

/// Why one attempt on the leased generator gave no id.
enum Miss {
    /// No lease is held: refuse at once.
    NoLease(u32),
    /// The generation changed under the call: try again (a few times).
    Moved,
    /// The deadline passed: the lease is lost (the worker stops it within its next turn).
    PastDeadline,
    /// The reservation must grow first (or cover a new clock sequence): the worker is asked.
    Renewal,
    /// Core's own refusal (a full tick, the clock far back).
    Core(Error),
}

impl From<Error> for Miss {
    fn from(error: Error) -> Miss {
        Miss::Core(error)
    }
}

/// A backend counted in a slot's readers; uncounted when dropped.
struct Reading<'a>(&'a Slot);

impl Drop for Reading<'_> {
    fn drop(&mut self) {
        self.0.readers.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Shared {
    pub fn new(unleased: Option<Generator>) -> Shared {
        Shared {
            unleased,
            state: AtomicU32::new(STARTING),
            current: AtomicU64::new(NO_SLOT),
            slots: [const { Slot::new() }; SLOTS],
            wanted_wall_ms: AtomicU64::new(0),
            worker_latch: AtomicUsize::new(0),
            retry_at_ms: AtomicU64::new(0),
            problem_kind: AtomicU32::new(PROBLEM_RETRYABLE),
            losses: AtomicU64::new(0),
            heals: AtomicU64::new(0),
            failed_attempts: AtomicU64::new(0),
            ever_leased: AtomicBool::new(false),
            problem: Text::new(),
            last_loss: Text::new(),
            coordinator: Text::new(),
        }
    }

    pub fn unleased(&self) -> Option<&Generator> {
        self.unleased.as_ref()
    }

    pub fn state(&self) -> u32 {
        self.state.load(Ordering::Acquire)
    }

    pub fn set_state(&self, state: u32) {
        self.state.store(state, Ordering::Release);
    }

    /// The generator's time (Unix ms): the system's wall clock.
    pub fn now_ms(&self) -> u64 {
        wall_ms()
    }

    pub fn wanted_wall_ms(&self) -> u64 {
        self.wanted_wall_ms.load(Ordering::Acquire)
    }

    /// The current lease's slot and generation, if one is held.
    pub fn current_slot(&self) -> Option<(&Slot, u64)> {
        let current = self.current.load(Ordering::SeqCst);
        let slot = (current & 0xff) as usize;
        self.slots.get(slot).map(|slot| (slot, current >> 8))
    }

    /// A slot no backend reads, for the next lease: not the current one, no reader. `None`
    /// while every other slot still has a reader (a backend paused inside a call): the worker
    /// tries again a moment later.
    pub fn free_slot(&self) -> Option<usize> {
        let current_slot = (self.current.load(Ordering::SeqCst) & 0xff) as usize;
        (0..SLOTS)
            .find(|&at| at != current_slot && self.slots[at].readers.load(Ordering::SeqCst) == 0)
    }

    /// The lease worker's: places a new lease's generator and limits in the slot
    /// [`Shared::free_slot`] found, and makes it current.
    pub fn install(&self, free: usize, generator: Generator, limits: &Limits) {
        let current = self.current.load(Ordering::SeqCst);
        let slot = &self.slots[free % SLOTS];
        let worker_id = generator.worker_id();
        // SAFETY: the slot is not current and has no reader; a backend that read an earlier
        // `current` naming it counts itself in and then finds `current` changed (SeqCst on
        // both sides), so it never reads the generator while it is written.
        unsafe { (*slot.generator.get()).write(generator) };
        slot.worker_id.store(worker_id, Ordering::Relaxed);
        slot.limits.restart(limits);
        self.wanted_wall_ms.store(0, Ordering::Release);
        let generation = (current >> 8) + 1;
        self.current
            .store((generation << 8) | (free % SLOTS) as u64, Ordering::SeqCst);
        self.set_state(ACTIVE);
        self.ever_leased.store(true, Ordering::Release);
    }

    pub fn slot(&self, at: usize) -> &Slot {
        &self.slots[at % SLOTS]
    }

    /// The lease worker's: no lease from now on. Stops the current slot's limits, then
    /// publishes a new generation without a slot, in `state` ([`HEALING`] or [`STOPPED`]).
    pub fn drop_lease(&self, state: u32) {
        let current = self.current.load(Ordering::SeqCst);
        if let Some(slot) = self.slots.get((current & 0xff) as usize) {
            slot.limits.stop();
        }
        let generation = (current >> 8) + 1;
        self.current
            .store((generation << 8) | NO_SLOT, Ordering::SeqCst);
        self.set_state(state);
    }

    /// The worker id held now.
    pub fn worker_id(&self) -> Option<u64> {
        self.current_slot()
            .map(|(slot, _)| slot.worker_id.load(Ordering::Relaxed))
    }

    /// The lease worker's: where its latch is (0: gone).
    pub fn set_worker_latch(&self, latch: usize) {
        self.worker_latch.store(latch, Ordering::Release);
    }

    pub fn set_retry_at_ms(&self, at_ms: u64) {
        self.retry_at_ms.store(at_ms, Ordering::Release);
    }

    /// The lease worker's: the last failed attempt.
    pub fn set_problem(&self, error: &LeaseError) {
        let kind = match error.code() {
            // A stored record of another layout or a corrupt one (core counts a record as input).
            "INVALID_STATE" => PROBLEM_STATE,
            _ if error.is_input_error() => PROBLEM_INPUT,
            _ => PROBLEM_RETRYABLE,
        };
        self.problem_kind.store(kind, Ordering::Release);
        self.problem.set(&format!("{}: {error}", error.code()));
    }

    /// Asks the lease worker for a renewal reaching `wanted_ms`, and wakes it.
    fn want(&self, wanted_ms: u64) {
        self.wanted_wall_ms.fetch_max(wanted_ms, Ordering::AcqRel);
        let latch = self.worker_latch.load(Ordering::Acquire);
        if latch != 0 {
            // SAFETY: the lease worker's own latch, in its PGPROC in shared memory, published
            // by the worker while it runs; setting a latch of another process is how
            // PostgreSQL wakes one.
            unsafe { pg_sys::SetLatch(latch as *mut pg_sys::Latch) };
        }
    }

    /// One attempt: `issue` on the current slot's generator, given the slot, the generator's
    /// time and the boot clock as read once. The generation is checked before and after.
    fn attempt<T>(
        &self,
        issue: impl FnOnce(&Slot, &Generator) -> Result<T, Miss>,
    ) -> Result<T, Miss> {
        let current = self.current.load(Ordering::SeqCst);
        let Some(slot) = self.slots.get((current & 0xff) as usize) else {
            return Err(Miss::NoLease(self.state()));
        };
        slot.readers.fetch_add(1, Ordering::SeqCst);
        let _reading = Reading(slot);
        if self.current.load(Ordering::SeqCst) != current {
            return Err(Miss::Moved);
        }
        let made = issue(slot, slot.generator())?;
        // The generation tag: a lease dropped meanwhile stopped this slot's limits before it
        // moved `current`, so the coverage check has already refused; checked again anyway.
        if self.current.load(Ordering::SeqCst) != current {
            return Err(Miss::Moved);
        }
        Ok(made)
    }

    /// The generator's time as core reads it, or why not: past the deadline (less
    /// `margin_ms`) or the reservation.
    fn limited_now(&self, slot: &Slot, margin_ms: u64) -> Result<u64, Miss> {
        let boot = boot_ms();
        let wall = wall_ms();
        if slot.limits.may_issue(boot, wall, margin_ms) {
            Ok(wall)
        } else if boot.saturating_add(margin_ms) >= slot.limits.deadline_boot_ms() {
            Err(Miss::PastDeadline)
        } else {
            self.want(wall);
            Err(Miss::Renewal)
        }
    }

    /// Whether the slot's persisted reservation covers `id` (its clock sequence reserved, its
    /// tick within the reservation); if not, asks the worker for one.
    fn covered(&self, slot: &Slot, layout: &Layout, id: u64) -> Result<u64, Miss> {
        let cs_bits = id & (layout.field_max(Field::ClockSeq) << layout.shift(Field::ClockSeq));
        let issued_ms =
            (id >> layout.shift(Field::Timestamp)) * layout.unit_ms() + layout.epoch_ms();
        // Nothing ahead of the clock: the extension's generator runs core's default policy
        // (clock sequences).
        if slot.limits.covers(cs_bits, issued_ms, 0) {
            return Ok(id);
        }
        // Dropped: the worker persists a reservation covering its clock sequence and time.
        self.want(self.now_ms().max(issued_ms));
        Err(Miss::Renewal)
    }
}

/// The id path's refusals, as PostgreSQL ERRORs.
fn report(shared: &Shared, miss: Miss) -> ErrorReport {
    match miss {
        Miss::Core(error) => crate::refusal(error),
        Miss::NoLease(state) => no_lease(shared, state),
        Miss::PastDeadline => lease_report(
            PgSqlErrorCode::ERRCODE_LOCK_NOT_AVAILABLE,
            &LeaseError::Healing {
                coordinator: shared.coordinator.get().unwrap_or_default(),
                lost: "no renewal before the lease deadline".into(),
                last_error: None,
                retry_at_ms: wall_ms() + clockflake_lease::FIRST_BACKOFF.as_millis() as u64,
            },
        ),
        Miss::Moved | Miss::Renewal => {
            let now_ms = shared.now_ms();
            let reserved_until_ms = shared
                .current_slot()
                .map_or(0, |(slot, _)| slot.limits.reserved_wall_ms());
            lease_report(
                PgSqlErrorCode::ERRCODE_LOCK_NOT_AVAILABLE,
                &LeaseError::RenewalLate {
                    coordinator: shared.coordinator.get().unwrap_or_default(),
                    reserved_until_ms,
                    last_error: None,
                    retry_at_ms: now_ms + RENEWAL_WAIT_MS,
                },
            )
        }
    }
}

/// A lease refusal: its SQLSTATE, clockflake's code in the DETAIL, the retry time in the HINT.
fn lease_report(sqlstate: PgSqlErrorCode, error: &LeaseError) -> ErrorReport {
    let report = ErrorReport::new(sqlstate, format!("clockflake: {error}"), "clockflake")
        .set_detail(format!("clockflake code: {}", error.code()));
    match error.retry_at_ms() {
        Some(at_ms) => report.set_hint(format!("retry at Unix ms {at_ms}")),
        None => report,
    }
}

/// The refusal while no lease is held: retryable (55P03, lock_not_available) while the worker
/// is taking one, with the last attempt's code; 55000 once stopped, or when the last attempt
/// was refused for good (a record of another layout: `INVALID_STATE`), 22023 for a bad URI.
fn no_lease(shared: &Shared, state: u32) -> ErrorReport {
    let now_ms = wall_ms();
    let retry_at_ms = match shared.retry_at_ms.load(Ordering::Acquire) {
        0 => now_ms + clockflake_lease::FIRST_BACKOFF.as_millis() as u64,
        at => at.max(now_ms + 1),
    };
    let coordinator = shared.coordinator.get().unwrap_or_default();
    match state {
        STOPPED => lease_report(
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            &LeaseError::LeaseLost {
                reason: "the lease worker was stopped and gave its worker id back; ids \
                         resume after a server restart"
                    .into(),
            },
        ),
        HEALING if shared.ever_leased.load(Ordering::Acquire) => lease_report(
            PgSqlErrorCode::ERRCODE_LOCK_NOT_AVAILABLE,
            &LeaseError::Healing {
                coordinator,
                lost: shared.last_loss.get().unwrap_or_default(),
                last_error: shared.problem.get(),
                retry_at_ms,
            },
        ),
        _ => match shared.problem.get() {
            None => lease_report(
                PgSqlErrorCode::ERRCODE_LOCK_NOT_AVAILABLE,
                &LeaseError::RenewalLate {
                    coordinator,
                    reserved_until_ms: 0,
                    last_error: Some("the lease worker holds no worker id yet".into()),
                    retry_at_ms,
                },
            ),
            Some(problem) => {
                let code = problem
                    .split_once(':')
                    .map_or("COORDINATOR_UNAVAILABLE", |(code, _)| code)
                    .to_owned();
                let (sqlstate, retry) = match shared.problem_kind.load(Ordering::Acquire) {
                    PROBLEM_INPUT => (PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE, false),
                    PROBLEM_STATE => (
                        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                        false,
                    ),
                    _ => (PgSqlErrorCode::ERRCODE_LOCK_NOT_AVAILABLE, true),
                };
                let report = ErrorReport::new(
                    sqlstate,
                    format!(
                        "clockflake: no worker id leased (the lease worker tries again): \
                         {problem}"
                    ),
                    "clockflake",
                )
                .set_detail(format!("clockflake code: {code}"));
                if retry {
                    report.set_hint(format!("retry at Unix ms {retry_at_ms}"))
                } else {
                    report
                }
            }
        },
    }
}

/// How many times a call tries again when the generation moved under it (a heal swapped the
/// generator in): more would only mean the lease is flapping.
const MOVED_TRIES: u32 = 8;

/// Runs `issue` on the leased generator until it gives ids: waits out a full tick as core's
/// blocking calls do, and a renewal the call needs at most [`RENEWAL_WAIT_MS`]; never waits
/// while no lease is held.
fn leased<T>(
    shared: &Shared,
    mut issue: impl FnMut(&Shared, &Slot, &Generator) -> Result<T, Miss>,
) -> Result<T, ErrorReport> {
    let started_ms = boot_ms();
    let mut moved = 0;
    loop {
        let miss = match shared.attempt(|slot, generator| issue(shared, slot, generator)) {
            Ok(made) => return Ok(made),
            Err(miss) => miss,
        };
        let pause_ms = match &miss {
            Miss::Moved if moved < MOVED_TRIES => {
                moved += 1;
                continue;
            }
            Miss::Renewal if boot_ms() < started_ms + RENEWAL_WAIT_MS => 1,
            Miss::Core(error) => {
                let now_ms = shared.now_ms();
                match Generator::blocking_retry_at(error, now_ms) {
                    Some(at_ms) if at_ms.saturating_sub(now_ms) <= Generator::MAX_TICK_WAIT_MS => {
                        at_ms.saturating_sub(now_ms).max(1)
                    }
                    _ => return Err(report(shared, miss)),
                }
            }
            _ => return Err(report(shared, miss)),
        };
        std::thread::sleep(Duration::from_millis(pause_ms));
        pgrx::check_for_interrupts!();
    }
}

/// One id from the leased generator.
pub fn next_leased_id(shared: &Shared, layout: &Layout) -> Result<u64, ErrorReport> {
    leased(shared, |shared, slot, generator| {
        let id = generator.try_next_id_from(|| shared.limited_now(slot, 0))?;
        shared.covered(slot, layout, id)
    })
}

/// `ids.len()` ids from the leased generator, a tick's run at a time (core's blocks, granted
/// only while the deadline is `holder::block_margin_ms` away, as `LeasedGenerator` grants
/// them; closer, one id at a time).
pub fn next_leased_ids(
    shared: &Shared,
    layout: &Layout,
    ids: &mut [u64],
) -> Result<(), ErrorReport> {
    let margin_ms = clockflake_lease::holder::block_margin_ms(layout);
    let mut filled = 0;
    while filled < ids.len() {
        let wanted = (ids.len() - filled) as u64;
        let block: IdBlock = leased(shared, |shared, slot, generator| {
            let block = match generator
                .try_next_block_from(|| shared.limited_now(slot, margin_ms), wanted)
            {
                Err(Miss::PastDeadline) | Err(Miss::Renewal) if wanted > 1 => {
                    generator.try_next_block_from(|| shared.limited_now(slot, 0), 1)?
                }
                other => other?,
            };
            if let Some(first) = block.peek() {
                // Every id of a block has the first's tick and clock sequence.
                shared.covered(slot, layout, first)?;
            }
            Ok(block)
        })?;
        for id in block {
            if let Some(slot) = ids.get_mut(filled) {
                *slot = id;
                filled += 1;
            }
        }
    }
    Ok(())
}
