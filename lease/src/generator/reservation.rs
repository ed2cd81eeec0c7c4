//! The id path's guard over the lease: the deadline, the persisted reservation and its clock
//! sequence, the lifecycle (active, lost, closed) and forks, read from atomics.

use std::sync::atomic::Ordering;

use clockflake::{Error, Layout};

use super::{lock, Shared, ACTIVE, LOST};
use crate::clock::boot_ms;
use crate::LeaseError;

impl Shared {
    /// An id issued in another clock sequence than the reservation's (the time went back:
    /// the wall clock returning from an excursion, injected clocks, explicit times) is
    /// returned only once a reservation covering its clock sequence is persisted; the renewal
    /// thread persists it, this call waits for it at most [`RENEWAL_WAIT`] when `wait`.
    #[inline(always)]
    pub(super) fn covered(&self, id: u64, wait: bool) -> Result<u64, LeaseError> {
        let cs_bits = id & self.cs_mask;
        if self.covers(id, cs_bits) {
            return Ok(id);
        }
        self.cover_clock_seq(id, cs_bits, wait)
    }

    /// Whether the persisted reservation covers `id` (see [`Limits::covers`]).
    #[inline(always)]
    fn covers(&self, id: u64, cs_bits: u64) -> bool {
        (self.limits).covers(cs_bits, self.issued_ms(id), self.terms.ahead_ms)
    }

    /// The time (Unix ms) of the tick `id` carries.
    #[inline(always)]
    fn issued_ms(&self, id: u64) -> u64 {
        let layout = self.layout();
        (id >> self.timestamp_shift) * layout.unit_ms() + layout.epoch_ms()
    }

    #[cold]
    pub(super) fn cover_clock_seq(
        &self,
        id: u64,
        cs_bits: u64,
        wait: bool,
    ) -> Result<u64, LeaseError> {
        self.check_alive()?;
        let wanted = self.wall_now().max(self.issued_ms(id));
        self.await_renewal(wanted, wait, || self.covers(id, cs_bits))?;
        Ok(id)
    }

    /// Whether this process is a fork of the one that made the generator: the fork
    /// generation (a `pthread_atfork` child handler, so a fork from C counts too), or the
    /// process id as a second opinion.
    pub(super) fn is_forked(&self) -> bool {
        crate::fork::generation() != self.fork_generation
            || self.forked.load(Ordering::Acquire)
            || std::process::id() != self.pid
    }

    /// The fast path's fork check: one relaxed load and a compare.
    #[inline(always)]
    pub(super) fn check_fork(&self) -> Result<(), LeaseError> {
        if crate::fork::generation() == self.fork_generation {
            Ok(())
        } else {
            Err(self.refuse_forked())
        }
    }

    #[cold]
    pub(super) fn refuse_forked(&self) -> LeaseError {
        self.invalidate_after_fork();
        LeaseError::Core(Error::WorkerIdInvalidated)
    }

    pub(super) fn invalidate_after_fork(&self) {
        self.forked.store(true, Ordering::Release);
        self.stop_ids();
    }

    /// Stops ids at once: a deadline and a reservation that every id has passed.
    pub(super) fn stop_ids(&self) {
        self.limits.stop();
    }

    /// Refuses once forked, lost or closed; reads atomics (and, once lost, the reason).
    pub(super) fn check_alive(&self) -> Result<(), LeaseError> {
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
    pub(super) fn refresh(&self, target_ms: Option<u64>, wait: bool) -> Result<(), LeaseError> {
        self.check_alive()?;
        if boot_ms() >= self.limits.deadline_boot_ms() {
            return Err(self.lose_at_deadline());
        }
        let wanted = self.wall_now().max(target_ms.unwrap_or(0));
        self.await_renewal(wanted, wait, || wanted <= self.limits.reserved_wall_ms())
    }

    pub(super) fn lose_at_deadline(&self) -> LeaseError {
        let reason = match &lock(&self.notes).last_error {
            Some(error) => format!("no renewal before the lease deadline (last error: {error})"),
            None => "no renewal before the lease deadline".to_owned(),
        };
        self.lose(reason)
    }

    /// Stops ids at once (atomics first) and records why; the first reason stays. Under the
    /// notes' lock (never held across I/O), so that whoever sees ids stopped and then reads the
    /// notes finds the reason ([`Shared::loss_reason`]).
    pub(super) fn lose(&self, reason: String) -> LeaseError {
        let mut notes = lock(&self.notes);
        self.stop_ids();
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

    /// Why a lease that no longer issues ids stopped: the recorded reason once lost, else (its
    /// deadline passed before anyone recorded the loss) the deadline.
    pub(super) fn loss_reason(&self) -> String {
        let notes = lock(&self.notes);
        match (self.lifecycle.load(Ordering::Acquire), &notes.lost_reason) {
            (LOST, Some(reason)) if !reason.is_empty() => reason.clone(),
            _ => "no renewal before the lease deadline".to_owned(),
        }
    }

    pub(super) fn layout(&self) -> &Layout {
        self.gen.layout()
    }
}
