//! What the id path reads of the lease, and the lease's driver publishes: the deadline, the
//! persisted reservation's time limit and its clock sequence. Three atomics, read and written
//! only here, in an order the loom models below check (`make test-loom`).
//!
//! One type for every id path: the leased generator's (in its `Arc`), the PostgreSQL
//! extension's (in shared memory, read by every backend: hence `#[repr(C)]`, plain atomics and
//! a `const` constructor) and the simulator's.
//!
//! Public for the extension and the simulator: not part of the crate's stable API.

use crate::protocol::{self, Renewed};
use crate::sync::{AtomicU64, Ordering};

/// The lease's limits as the id path reads them.
#[repr(C)]
#[derive(Debug)]
pub struct Limits {
    /// Boot ms before which ids may be issued: the lease deadline (`u64::MAX` when the lease
    /// never expires); 0 once lost, closed or copied.
    deadline_boot_ms: AtomicU64,
    /// Latest wall ms at which an id may be issued: the persisted reservation less what the
    /// policy may run ahead of the clock; 0 once lost, closed or copied.
    reserved_wall_ms: AtomicU64,
    /// Clock-sequence bits (in place) of the persisted reservation.
    reserved_cs_bits: AtomicU64,
}

/// A copy as the limits read now (a process copied by `fork` or a snapshot has the same).
impl Clone for Limits {
    fn clone(&self) -> Limits {
        Limits::new(
            self.deadline_boot_ms(),
            self.reserved_wall_ms(),
            self.reserved_cs_bits.load(Ordering::Acquire),
        )
    }
}

/// `const` where the atomics allow it (std's; loom's are not), so that shared memory can be
/// initialised with stopped limits at compile time.
macro_rules! limits_new {
    ($($const:ident)?) => {
        /// Limits a lease publishes first: the deadline (boot ms; `u64::MAX` never expires),
        /// the reservation's time limit (wall ms, less what the policy may run ahead) and its
        /// clock-sequence bits (in place).
        pub $($const)? fn new(
            deadline_boot_ms: u64,
            reserved_wall_ms: u64,
            reserved_cs_bits: u64,
        ) -> Limits {
            Limits {
                deadline_boot_ms: AtomicU64::new(deadline_boot_ms),
                reserved_wall_ms: AtomicU64::new(reserved_wall_ms),
                reserved_cs_bits: AtomicU64::new(reserved_cs_bits),
            }
        }
    };
}

impl Limits {
    #[cfg(not(loom))]
    limits_new!(const);
    #[cfg(loom)]
    limits_new!();

    /// The deadline (boot ms); 0 once stopped.
    #[inline(always)]
    pub fn deadline_boot_ms(&self) -> u64 {
        self.deadline_boot_ms.load(Ordering::Acquire)
    }

    /// The reservation's time limit (wall ms); 0 once stopped.
    #[inline(always)]
    pub fn reserved_wall_ms(&self) -> u64 {
        self.reserved_wall_ms.load(Ordering::Acquire)
    }

    /// [`protocol::may_issue`] on the published limits.
    #[inline(always)]
    pub fn may_issue(&self, boot_ms: u64, wall_ms: u64, margin_ms: u64) -> bool {
        protocol::may_issue(
            boot_ms,
            wall_ms,
            margin_ms,
            self.deadline_boot_ms(),
            self.reserved_wall_ms(),
        )
    }

    /// [`protocol::covers`] on the published reservation: its clock sequence read first, then
    /// its time limit, so that a new clock sequence's reservation is never paired with the
    /// previous one's limit (the renewal thread publishes the limit first, see
    /// [`Limits::publish`]). `ahead_ms`: what the policy may run ahead of the clock.
    #[inline(always)]
    pub fn covers(&self, cs_bits: u64, issued_ms: u64, ahead_ms: u64) -> bool {
        let reserved_cs_bits = self.reserved_cs_bits.load(Ordering::Acquire);
        let reserved_wall_ms = self.reserved_wall_ms();
        protocol::covers(
            cs_bits,
            issued_ms,
            reserved_cs_bits,
            reserved_wall_ms.saturating_add(ahead_ms),
        )
    }

    /// Lets ids use an acknowledged renewal: the deadline (when the lease has one), the time
    /// limit (within one clock sequence it only grows; for a new one it is lowered to this
    /// reservation before the clock sequence is published, so that no id of the new clock
    /// sequence passes the coverage check with the old limit), then the clock sequence.
    pub fn publish(&self, renewed: &Renewed, cs_bits: u64, expires: bool) {
        if expires {
            self.deadline_boot_ms
                .store(renewed.deadline_boot_ms, Ordering::Release);
        }
        if renewed.same_clock_seq {
            self.reserved_wall_ms
                .fetch_max(renewed.reserved_wall_ms, Ordering::AcqRel);
        } else {
            self.reserved_wall_ms
                .store(renewed.reserved_wall_ms, Ordering::Release);
        }
        self.reserved_cs_bits.store(cs_bits, Ordering::Release);
    }

    /// Places a new lease's limits on stopped ones (a slot used again): the reservation and
    /// its clock sequence first, the deadline last, so that nothing passes [`Limits::may_issue`]
    /// before all three are the new lease's.
    pub fn restart(&self, started: &Limits) {
        let load = |atomic: &AtomicU64| atomic.load(Ordering::Acquire);
        (self.reserved_wall_ms).store(load(&started.reserved_wall_ms), Ordering::SeqCst);
        (self.reserved_cs_bits).store(load(&started.reserved_cs_bits), Ordering::SeqCst);
        (self.deadline_boot_ms).store(load(&started.deadline_boot_ms), Ordering::SeqCst);
    }

    /// Stops ids at once: a deadline and a reservation that every id has passed. Sequentially
    /// consistent, so that a driver that stops a slot and then reads whether any id path is
    /// still inside it (the extension's readers) never misses one that read the old limits.
    pub fn stop(&self) {
        self.deadline_boot_ms.store(0, Ordering::SeqCst);
        self.reserved_wall_ms.store(0, Ordering::SeqCst);
    }
}

/// Loom models of the limits (`make test-loom`: `RUSTFLAGS="--cfg loom"`, every interleaving of
/// two threads). The id path is `may_issue` then (core's CAS, which touches none of these) then
/// `covers`, as `LeasedGenerator::next_id` runs them.
#[cfg(all(test, loom))]
mod loom_models {
    use super::*;
    use loom::sync::Arc;
    use loom::thread;

    const CS0: u64 = 0;
    const CS1: u64 = 1 << 16;

    fn renewed(reserved_wall_ms: u64, same_clock_seq: bool) -> Renewed {
        Renewed {
            deadline_boot_ms: 1_000,
            reserved_wall_ms,
            clock_seq: u64::from(!same_clock_seq),
            same_clock_seq,
        }
    }

    /// The clock went back: ids are issued in clock sequence 1 while clock sequence 0's
    /// reservation (until 10,000) is published; the renewal thread publishes clock sequence 1's,
    /// until 4,000. An id of clock sequence 1 at 5,000 must never be covered, whichever limit
    /// its call read. (Comparing clock sequences alone fails this model.)
    #[test]
    fn no_id_of_a_new_clock_sequence_passes_with_the_old_limit() {
        loom::model(|| {
            let limits = Arc::new(Limits::new(1_000, 10_000, CS0));
            let renewer = {
                let limits = Arc::clone(&limits);
                thread::spawn(move || limits.publish(&renewed(4_000, false), CS1, true))
            };
            let issued = limits.may_issue(100, 5_000, 0) && limits.covers(CS1, 5_000, 0);
            renewer.join().unwrap();
            assert!(
                !issued,
                "an id past its clock sequence's reservation was covered"
            );
            // The same call after the renewal: a time it covers is covered.
            assert!(limits.may_issue(100, 3_000, 0) && limits.covers(CS1, 3_000, 0));
        });
    }

    /// A lease found lost (or closed, or copied) stops ids: after `stop`, nothing a renewal
    /// published before it leaves an id issuable or covered.
    #[test]
    fn a_stop_ends_ids_whatever_a_renewal_publishes_before_it() {
        loom::model(|| {
            let limits = Arc::new(Limits::new(1_000, 10_000, CS0));
            let renewer = {
                let limits = Arc::clone(&limits);
                thread::spawn(move || {
                    limits.publish(&renewed(20_000, true), CS0, true);
                    limits.stop();
                })
            };
            let _ = limits.may_issue(100, 5_000, 0);
            renewer.join().unwrap();
            assert!(!limits.may_issue(100, 5_000, 0));
            assert!(!limits.covers(CS0, 5_000, 0));
        });
    }

    /// Two renewals of one clock sequence published out of order (a slow one after a fast one)
    /// never shrink the limit, and an id covered at some point stays within what was persisted.
    #[test]
    fn renewals_of_one_clock_sequence_only_grow_the_limit() {
        loom::model(|| {
            let limits = Arc::new(Limits::new(1_000, 10_000, CS0));
            let slow = {
                let limits = Arc::clone(&limits);
                thread::spawn(move || limits.publish(&renewed(12_000, true), CS0, true))
            };
            limits.publish(&renewed(15_000, true), CS0, true);
            let covered = limits.covers(CS0, 14_000, 0);
            slow.join().unwrap();
            assert!(covered);
            assert_eq!(limits.reserved_wall_ms(), 15_000);
        });
    }
}
