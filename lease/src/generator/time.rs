//! The generator's time: the boot clock anchored to the wall clock (or an injected clock),
//! and the same time limited by the lease deadline and the persisted reservation, as the core
//! generator reads it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use clockflake::{Clock, Error, Generator, IdBlock};

use super::stats::WaitTimer;
use super::{LeaseOptions, Miss, Shared};
use crate::clock::{boot_ms, wall_ms};
use crate::LeaseError;

pub use crate::holder::FOLLOW_BACK_MS;

/// Where wall time comes from.
pub(super) enum Time {
    /// The boot clock plus an offset to Unix time: one clock read gives both the id's time
    /// and the deadline check. The renewal thread re-anchors it to the wall clock when the
    /// wall clock is ahead, or behind by more than [`FOLLOW_BACK_MS`]: small steps back are
    /// smoothed, an excursion to the future is not kept for the rest of the process.
    Boot { anchor: AtomicU64 },
    /// An injected clock; the boot clock is read besides it for the deadline.
    Injected(Arc<dyn Clock + Send + Sync>),
}

impl Time {
    pub(super) fn new(options: &LeaseOptions) -> Time {
        match &options.clock {
            Some(clock) => Time::Injected(Arc::clone(clock)),
            None => Time::Boot {
                anchor: AtomicU64::new(wall_ms().saturating_sub(boot_ms())),
            },
        }
    }

    #[inline(always)]
    pub(super) fn now_ms(&self) -> u64 {
        self.at_boot(boot_ms())
    }

    /// The time when the boot clock reads `boot` (an injected clock is read now).
    #[inline(always)]
    pub(super) fn at_boot(&self, boot: u64) -> u64 {
        match self {
            Time::Boot { anchor } => anchor.load(Ordering::Relaxed) + boot,
            Time::Injected(clock) => clock.now_ms(),
        }
    }

    /// Follows the wall clock (see [`Time::Boot`]); only the renewal thread calls it.
    /// Returns whether it stepped back.
    pub(super) fn follow_wall_clock(&self) -> bool {
        if let Time::Boot { anchor } = self {
            let (wall, boot) = (wall_ms(), boot_ms());
            let current = anchor.load(Ordering::Relaxed);
            if let Some(target) = crate::holder::follow_wall_clock(current, wall, boot) {
                anchor.store(target, Ordering::Relaxed);
                return target < current;
            }
        }
        false
    }
}

impl From<Error> for Miss {
    /// A refusal of the core's own (the clock went back, a full tick): never the lease's.
    #[inline(always)]
    fn from(error: Error) -> Miss {
        Miss::Core(error)
    }
}

impl Shared {
    #[inline(always)]
    pub(super) fn wall_now(&self) -> u64 {
        self.time.now_ms()
    }

    /// The lease deadline on the boot clock; `None` when the lease never expires (`file://`:
    /// the lock is the lease).
    pub(super) fn deadline(&self) -> Option<u64> {
        match self.limits.deadline_boot_ms() {
            u64::MAX => None,
            deadline => Some(deadline),
        }
    }

    /// One try on the fast path: the core generator, on a time that refuses every id with
    /// [`Miss::Limit`] once the deadline or the reservation has passed.
    #[inline(always)]
    pub(super) fn attempt(&self, explicit_ms: Option<u64>) -> Result<u64, Miss> {
        self.gen
            .try_next_id_from(|| self.limited_now(explicit_ms, 0))
    }

    /// One try at a block of up to `max_count` ids of one tick: as [`Shared::attempt`], but
    /// the deadline must be at least `margin_ms` away (see [`crate::holder::block_margin_ms`]).
    #[inline(always)]
    pub(super) fn attempt_block(
        &self,
        explicit_ms: Option<u64>,
        max_count: u64,
        margin_ms: u64,
    ) -> Result<IdBlock, Miss> {
        self.gen
            .try_next_block_from(|| self.limited_now(explicit_ms, margin_ms), max_count)
    }

    /// The generator's time (explicit, boot-anchored or injected) as the core reads it to
    /// issue an id, or [`Miss::Limit`] once the deadline (less `margin_ms`) or the reservation
    /// has passed at that time, so that the core refuses without issuing. One read of the
    /// boot clock gives both the time and the deadline check.
    #[inline(always)]
    pub(super) fn limited_now(
        &self,
        explicit_ms: Option<u64>,
        margin_ms: u64,
    ) -> Result<u64, Miss> {
        let boot = boot_ms();
        let wall = match explicit_ms {
            Some(ms) => ms,
            None => self.time.at_boot(boot),
        };
        if self.limits.may_issue(boot, wall, margin_ms) {
            Ok(wall)
        } else {
            Err(Miss::Limit)
        }
    }

    /// Waits until the wall clock reads `at_ms` on core's wait loop (patience for the wait
    /// plus a second), checking before each pause that the lease is still alive.
    pub(super) fn wait_until(&self, at_ms: u64) -> Result<(), LeaseError> {
        let _timer = WaitTimer::new(&self.counters, Instant::now());
        clockflake::wait_until(&|| self.wall_now(), at_ms, |pause| {
            self.check_alive()?;
            clockflake::sleep_or_spin(pause);
            Ok(())
        })
    }

    /// After a core refusal: when to try again, if waiting is what the caller wants.
    pub(super) fn retry_at(&self, error: &Error) -> Option<u64> {
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
}
