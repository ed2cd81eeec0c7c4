//! What a leased generator has been through, for metrics: counters of the slow paths.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use super::{LeasedGenerator, ACTIVE, LOST};

/// Counters of the slow paths (never touched by an id that takes the fast path).
#[derive(Default)]
pub(super) struct Counters {
    pub(super) renewals: AtomicU64,
    pub(super) renewal_failures: AtomicU64,
    pub(super) clock_steps_back: AtomicU64,
    pub(super) clock_seq_switches: AtomicU64,
    pub(super) waits: AtomicU64,
    pub(super) wait_us: AtomicU64,
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
    /// the smoothing bound ([`FOLLOW_BACK_MS`](crate::FOLLOW_BACK_MS)), and followed it back.
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

/// Counts one wait and its time when dropped.
pub(super) struct WaitTimer<'a> {
    pub(super) counters: &'a Counters,
    pub(super) started: Instant,
}

impl<'a> WaitTimer<'a> {
    pub(super) fn new(counters: &'a Counters, started: Instant) -> WaitTimer<'a> {
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

impl LeasedGenerator {
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
            deadline_in_ms: self.deadline_in_ms(),
            reserved_until_ms: shared.limits.reserved_wall_ms(),
            measured_skew_ms: self.measured_skew_ms,
        }
    }
}
