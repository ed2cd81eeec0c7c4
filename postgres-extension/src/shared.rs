//! The server's one generator in shared memory, and the id path every backend runs.
//!
//! Unleased (`clockflake.worker_id_unleased`): core's [`Generator`], made by the postmaster.
//! Leased (`clockflake.lease`): the lease worker (lease_worker.rs) writes core's generator
//! here once it holds a worker id, resumed from the lease's state record, and publishes the
//! reservation it persisted with the coordinator: the clock sequence and the Unix ms up to
//! which the stored record covers ids. An id is handed out only if its clock sequence is the
//! reserved one and its time is below the reservation, so a restart (or the next holder of
//! the worker id) that resumes from the stored record never repeats it.

use std::cell::UnsafeCell;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::time::{Duration, Instant};

use clockflake::{Clock, Generator, Layout, SystemClock};
use clockflake_lease::LeaseError;
use pgrx::pg_sys::panic::ErrorReport;
use pgrx::prelude::*;
use pgrx::PGRXSharedMemory;

/// The lease worker has not published a generator yet.
pub const STARTING: u32 = 0;
/// The leased generator is in place and the reservation published.
pub const READY: u32 = 1;
/// Ids stopped for good: the lease was lost or released.
pub const STOPPED: u32 = 2;

/// The longest an id call waits for the lease worker (a renewal after the clock stepped back,
/// a lease being taken at start) before it refuses.
const WAIT_FOR_LEASE: Duration = Duration::from_millis(500);

/// Room for the lease worker's last refusal, for the id path's ERROR.
const PROBLEM_BYTES: usize = 480;

/// What the postmaster puts in shared memory at start.
pub struct Shared {
    /// The generator under a worker id typed by hand; `None` when leased or not configured.
    unleased: Option<Generator>,
    /// [`STARTING`], [`READY`] or [`STOPPED`] (leased only).
    phase: AtomicU32,
    /// Written once by the lease worker before `phase` becomes [`READY`], read only after.
    leased: UnsafeCell<MaybeUninit<Generator>>,
    /// `(until_ms << 4) | clock_seq`: the reservation the coordinator has stored.
    reservation: AtomicU64,
    /// The lease worker's last refusal, `CODE: message`, and its length.
    problem: [AtomicU8; PROBLEM_BYTES],
    problem_len: AtomicU32,
}

// SAFETY: a `Generator` is atomics (the last id issued, the high-water marks, the slow path's
// spin flag) and plain data (the layout, the worker id and constants derived from them): no
// pointer into any process's own memory, and its atomics work across processes sharing the
// memory. `unleased` is written by the postmaster before any backend exists; `leased` once by
// the lease worker, published by a release store of `phase` that readers acquire before they
// touch it. Everything else is atomics.
unsafe impl PGRXSharedMemory for Shared {}

/// A reservation as one word: the clock sequence in the low 4 bits (core's maximum), the
/// Unix ms above (at most 2^53).
pub fn pack(until_ms: u64, clock_seq: u64) -> u64 {
    (until_ms << 4) | (clock_seq & 0xf)
}

fn unpack(word: u64) -> (u64, u64) {
    (word >> 4, word & 0xf)
}

impl Shared {
    pub fn new(unleased: Option<Generator>) -> Shared {
        Shared {
            unleased,
            phase: AtomicU32::new(STARTING),
            leased: UnsafeCell::new(MaybeUninit::uninit()),
            reservation: AtomicU64::new(0),
            problem: [const { AtomicU8::new(0) }; PROBLEM_BYTES],
            problem_len: AtomicU32::new(0),
        }
    }

    pub fn unleased(&self) -> Option<&Generator> {
        self.unleased.as_ref()
    }

    /// The lease worker's: places the leased generator and publishes its first reservation.
    ///
    /// # Safety
    /// Called at most once per shared-memory lifetime, by the lease worker only.
    pub unsafe fn publish_leased(&self, generator: Generator, reservation: u64) {
        // SAFETY: no reader touches `leased` before `phase` is READY (below), and the caller
        // writes it once.
        unsafe { (*self.leased.get()).write(generator) };
        self.reservation.store(reservation, Ordering::Release);
        self.phase.store(READY, Ordering::Release);
    }

    /// The leased generator, once published.
    pub fn leased(&self) -> Option<&Generator> {
        // SAFETY: the reservation is non-zero only once `publish_leased` wrote the generator
        // (its release store is after the write; this load acquires it).
        self.is_published()
            .then(|| unsafe { (*self.leased.get()).assume_init_ref() })
    }

    /// Whether the lease worker has published a generator (and so ever handed out ids).
    pub fn is_published(&self) -> bool {
        self.reservation.load(Ordering::Acquire) != 0
    }

    pub fn phase(&self) -> u32 {
        self.phase.load(Ordering::Acquire)
    }

    pub fn reservation(&self) -> (u64, u64) {
        unpack(self.reservation.load(Ordering::Acquire))
    }

    /// The lease worker's: a renewal the coordinator stored.
    pub fn renewed(&self, reservation: u64) {
        self.reservation.store(reservation, Ordering::Release);
    }

    /// Stops ids for good (the lease is lost, or released at shutdown).
    pub fn stop(&self) {
        self.phase.store(STOPPED, Ordering::Release);
    }

    /// Keeps the lease worker's refusal for the id path's messages.
    pub fn set_problem(&self, text: &str) {
        let bytes = text.as_bytes();
        let len = bytes.len().min(PROBLEM_BYTES);
        for (slot, byte) in self.problem.iter().zip(&bytes[..len]) {
            slot.store(*byte, Ordering::Relaxed);
        }
        self.problem_len.store(len as u32, Ordering::Release);
    }

    pub fn problem(&self) -> Option<String> {
        let len = self.problem_len.load(Ordering::Acquire) as usize;
        (len > 0).then(|| {
            let bytes: Vec<u8> = self.problem[..len.min(PROBLEM_BYTES)]
                .iter()
                .map(|slot| slot.load(Ordering::Relaxed))
                .collect();
            String::from_utf8_lossy(&bytes).into_owned()
        })
    }
}

/// One id from the leased generator, waiting up to [`WAIT_FOR_LEASE`] for the lease worker
/// (and for the next tick when one is full, as core's blocking calls do).
pub fn next_leased_id(shared: &Shared, layout: &Layout) -> Result<u64, ErrorReport> {
    let started = Instant::now();
    loop {
        let refusal = match try_leased(shared, layout) {
            Ok(id) => return Ok(id),
            Err(refusal) => refusal,
        };
        let now_ms = SystemClock.now_ms();
        let retry_at_ms = match &refusal {
            LeaseError::Core(error) => Generator::blocking_retry_at(error, now_ms),
            error => error.retry_at_ms(),
        };
        match retry_at_ms {
            Some(at_ms) if started.elapsed() < WAIT_FOR_LEASE => {
                let pause = at_ms.saturating_sub(now_ms).clamp(1, 20);
                std::thread::sleep(Duration::from_millis(pause));
                pgrx::check_for_interrupts!();
            }
            _ => return Err(lease_refusal(&refusal, shared)),
        }
    }
}

fn try_leased(shared: &Shared, layout: &Layout) -> Result<u64, LeaseError> {
    let Some(generator) = shared.leased().filter(|_| shared.phase() == READY) else {
        let now_ms = SystemClock.now_ms();
        return Err(match shared.phase() {
            STOPPED => LeaseError::LeaseLost {
                reason: "the lease worker stopped; ids resume after a server restart".into(),
            },
            _ => LeaseError::RenewalLate {
                coordinator: "clockflake.lease".into(),
                reserved_until_ms: 0,
                last_error: Some("the lease worker holds no worker id yet".into()),
                retry_at_ms: now_ms + 10,
            },
        });
    };
    let late = |reserved_until_ms: u64, now_ms: u64| LeaseError::RenewalLate {
        coordinator: "clockflake.lease".into(),
        reserved_until_ms,
        last_error: None,
        retry_at_ms: now_ms + 10,
    };
    let id = generator.try_next_id_from(|| {
        let now_ms = SystemClock.now_ms();
        let (until_ms, _) = shared.reservation();
        if now_ms >= until_ms {
            return Err(late(until_ms, now_ms));
        }
        Ok(now_ms)
    })?;
    // Handed out only if the stored record covers it: its clock sequence reserved, its tick
    // below the reservation. Otherwise (the clock stepped back and the generator moved to
    // another clock sequence) it is dropped, and the lease worker's next renewal (within
    // 100 ms) reserves the new clock sequence.
    let parts = layout.decode(id)?;
    let (until_ms, clock_seq) = shared.reservation();
    if shared.phase() != READY || parts.clock_seq != clock_seq || parts.timestamp_ms >= until_ms {
        return Err(late(until_ms, SystemClock.now_ms()));
    }
    Ok(id)
}

/// A lease refusal as a PostgreSQL ERROR: 55000 with the stable code in the DETAIL, as core's.
/// While the lease worker has not started, its last refusal is the one reported (a record of
/// another layout: `INVALID_STATE`; every worker id held: `WORKER_POOL_EXHAUSTED`).
fn lease_refusal(error: &LeaseError, shared: &Shared) -> ErrorReport {
    if let (STARTING, Some(problem)) = (shared.phase(), shared.problem()) {
        let code = problem
            .split_once(':')
            .map_or("COORDINATOR_UNAVAILABLE", |(code, _)| code);
        return ErrorReport::new(
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            format!(
                "clockflake: no worker id leased (the lease worker retries every 5 s): {problem}"
            ),
            "clockflake",
        )
        .set_detail(format!("clockflake code: {code}"));
    }
    let report = match error {
        LeaseError::Core(core) => return crate::refusal(*core),
        _ => ErrorReport::new(
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            format!("clockflake: {error}"),
            "clockflake",
        )
        .set_detail(format!("clockflake code: {}", error.code())),
    };
    match shared.problem() {
        Some(problem) => report.set_hint(format!("the lease worker reported: {problem}")),
        None => report,
    }
}
