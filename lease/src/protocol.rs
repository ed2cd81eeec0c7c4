//! The lease's decisions, without I/O, threads or clocks: each function is handed the time and
//! the coordinator's answers and returns what to do.
//!
//! The leased generator ([`crate::LeasedGenerator`]) runs these with the system's clocks, its
//! renewal thread and a real coordinator; the simulator (`lease/tests/simulation/`) runs the
//! same functions with simulated clocks, a simulated coordinator and one seeded scheduler, and
//! checks after every step that no id was issued twice (`make simulate`). Nothing here may read
//! a clock, sleep, lock or talk to a coordinator.
//!
//! Public for the simulator only: not part of the crate's stable API.

use std::time::Duration;

use clockflake::{Layout, Policy, State, MAX_CLOCK_SEQS};

pub use crate::coordinator::ready_at_ms;
use crate::coordinator::Grant;
use crate::LeaseError;

/// The numbers a lease runs by, fixed at start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Terms {
    /// How long a grant or renewal lasts after its request was sent; `None`: until released
    /// (file locks).
    pub ttl_ms: Option<u64>,
    /// How long before the coordinator's expiry the holder stops: a tenth of the TTL, at least
    /// 20 ms (0 without a TTL).
    pub margin_ms: u64,
    /// How far ahead of the clock reservations are persisted.
    pub reserve_ms: u64,
    /// How far ids may run ahead of the clock (the `logical` policy's drift), which every
    /// reservation adds.
    pub ahead_ms: u64,
}

impl Terms {
    /// The terms of a grant with `ttl`, reserving `reserve` ahead, for a generator whose
    /// rollback policy is `policy` (drifting ahead at most `max_drift_ms` when `logical`).
    pub fn new(
        ttl: Option<Duration>,
        reserve: Duration,
        policy: Policy,
        max_drift_ms: u64,
    ) -> Terms {
        let ttl_ms = ttl.map(millis);
        Terms {
            ttl_ms,
            margin_ms: ttl_ms.map_or(0, |ttl| (ttl / 10).max(20)),
            reserve_ms: millis(reserve),
            ahead_ms: if policy == Policy::Logical {
                max_drift_ms
            } else {
                0
            },
        }
    }

    /// The deadline (boot ms) of a lease granted or renewed by a request *sent* at
    /// `sent_boot_ms`: the coordinator counts its TTL from when it received the request, which
    /// is later, so the holder stops first however long the answer took (a coordinator frozen
    /// while answering, a reply delayed). `u64::MAX` when the lease never expires.
    pub fn deadline_after(&self, sent_boot_ms: u64) -> u64 {
        match self.ttl_ms {
            Some(ttl) => sent_boot_ms.saturating_add(ttl.saturating_sub(self.margin_ms)),
            None => u64::MAX,
        }
    }

    /// How often the lease and the reservation are renewed: a quarter of the shorter of the
    /// TTL and the reservation, at least 5 ms.
    pub fn renew_interval_ms(&self) -> u64 {
        match self.ttl_ms {
            Some(ttl) => (ttl / 4).min(self.reserve_ms / 4),
            None => self.reserve_ms / 4,
        }
        .max(5)
    }

    /// How far a reservation made at `wall_ms` reaches, after a renewal that took
    /// `latency_ms`: the reservation, the policy's drift, and twice the latency (so that a
    /// renewal as slow as the last is persisted before the clock reaches it).
    pub fn horizon(&self, wall_ms: u64, latency_ms: u64) -> u64 {
        wall_ms.saturating_add(self.reserve_ms + self.ahead_ms + 2 * latency_ms)
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// Whether an id may be issued at `wall_ms` (the generator's time) when the boot clock reads
/// `boot_ms`: before the deadline less `margin_ms` (0 for single ids, more for blocks served
/// later) and within the persisted reservation (`reserved_wall_ms`, 0 once stopped).
#[inline(always)]
pub fn may_issue(
    boot_ms: u64,
    wall_ms: u64,
    margin_ms: u64,
    deadline_boot_ms: u64,
    reserved_wall_ms: u64,
) -> bool {
    boot_ms.saturating_add(margin_ms) < deadline_boot_ms && wall_ms <= reserved_wall_ms
}

/// Whether the persisted reservation covers an id of clock sequence `cs_bits` (in place)
/// issued at `issued_ms`: the reservation is for that clock sequence and reaches that time.
///
/// The time is checked again here, not only before the id was taken (`may_issue`): an id call
/// can read the time limit of the previous clock sequence's reservation, and then the
/// reservation of a new one, shorter, be published before it compares clock sequences. An id
/// of the new clock sequence past its reservation must then wait for a renewal reaching it.
#[inline(always)]
#[must_use]
pub fn covers(cs_bits: u64, issued_ms: u64, reserved_cs_bits: u64, reserved_until_ms: u64) -> bool {
    cs_bits == reserved_cs_bits && issued_ms <= reserved_until_ms
}

/// The start-up clock check's verdict: whether a measured skew (local minus the coordinator's
/// clock, ms, read at the midpoint of a request that took `round_trip_ms`) is above `max_skew_ms`
/// by more than half the round trip (the measurement's uncertainty): then the holder refuses to
/// start (`CLOCK_SKEW`).
pub fn skew_refused(skew_ms: i64, round_trip_ms: u64, max_skew_ms: u64) -> bool {
    skew_ms.unsigned_abs() > max_skew_ms.saturating_add(round_trip_ms.div_ceil(2))
}

/// Where a holder granted `grant` continues at `now_ms`: the worker's record with the clock
/// sequence to resume in, and the wall ms from which its first id can be issued (0: at once).
///
/// A record naming another worker id is corrupt (`INVALID_STATE`). A record of another layout,
/// or whose clock sequence the layout does not have, is returned as it is for core's
/// `Generator::resume` to name the problem.
pub fn resume(
    layout: &Layout,
    grant: &Grant,
    now_ms: u64,
    where_: impl FnOnce() -> String,
) -> Result<(State, u64), LeaseError> {
    let mut state = match grant.state {
        Some(state) if state.worker_id != grant.worker_id => {
            return Err(LeaseError::corrupt(
                where_(),
                format!("the record names worker id {}", state.worker_id),
            ));
        }
        Some(state) => state,
        None => State {
            layout_fingerprint: layout.fingerprint(),
            worker_id: grant.worker_id,
            clock_seq: 0,
            high_water_ms: [None; MAX_CLOCK_SEQS],
        },
    };
    if state.layout_fingerprint != layout.fingerprint() || state.clock_seq >= layout.clock_seqs() {
        return Ok((state, 0));
    }
    let (clock_seq, ready_at_ms) = state.resume_point(layout, now_ms);
    state.clock_seq = clock_seq;
    Ok((state, ready_at_ms))
}

/// What the last persisted reservation covers, and when the lease was last renewed: the
/// renewal thread's book (the real generator keeps it behind the coordinator's mutex).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Book {
    /// The reservation last persisted: no id of `reserved_cs` carries a later time.
    pub until_ms: u64,
    /// The clock sequence the last persisted reservation is for.
    pub reserved_cs: u64,
    /// How long the last renewal took: reservations are made that much longer.
    pub latency_ms: u64,
    /// Boot ms the last successful renewal (or the grant) was sent at.
    pub renewed_boot_ms: u64,
}

/// A renewal to send: the record to store and what it reserves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Renewal {
    /// The generator's state with the reservation in its clock sequence's mark.
    pub state: State,
    /// The reservation's end (wall ms).
    pub until_ms: u64,
    /// Whether it continues the last reservation's clock sequence (else the time went back and
    /// a new clock sequence is reserved from the clock).
    pub same_clock_seq: bool,
}

/// What ids may use once a renewal is acknowledged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Renewed {
    /// The new deadline (boot ms; `u64::MAX` without a TTL).
    pub deadline_boot_ms: u64,
    /// The latest wall ms an id may carry: the reservation less the policy's drift.
    pub reserved_wall_ms: u64,
    /// The clock sequence the reservation covers.
    pub clock_seq: u64,
    /// See [`Renewal::same_clock_seq`]: within one clock sequence the limit only grows; in a
    /// new one it is lowered to this reservation before its ids pass the coverage check.
    pub same_clock_seq: bool,
}

impl Book {
    /// The book after the first reservation (persisted at start, by a request sent at
    /// `sent_boot_ms` that took `latency_ms`).
    pub fn started(until_ms: u64, clock_seq: u64, latency_ms: u64, sent_boot_ms: u64) -> Book {
        Book {
            until_ms,
            reserved_cs: clock_seq,
            latency_ms,
            renewed_boot_ms: sent_boot_ms,
        }
    }

    /// Whether the renewal thread should renew now (boot and wall ms as read now): the TTL's
    /// interval has passed, the reservation is within reach of a renewal as slow as the last,
    /// an id call wants more (`wanted_wall_ms`), or the generator moved to another clock
    /// sequence than the reservation's. Never before `retry_boot_ms` (after a failure).
    #[allow(clippy::too_many_arguments)]
    pub fn due(
        &self,
        terms: &Terms,
        boot_ms: u64,
        wall_ms: u64,
        wanted_wall_ms: u64,
        reserved_wall_ms: u64,
        clock_seq: u64,
        retry_boot_ms: u64,
    ) -> bool {
        boot_ms >= retry_boot_ms
            && (terms.ttl_ms.is_some()
                && boot_ms >= self.renewed_boot_ms + terms.renew_interval_ms()
                || wall_ms + terms.reserve_ms / 2 + 2 * self.latency_ms >= reserved_wall_ms
                || wanted_wall_ms > reserved_wall_ms
                || clock_seq != self.reserved_cs)
    }

    /// The renewal to send from `wall_ms` on, for the generator's `state`. A reservation never
    /// shrinks within one clock sequence; in a new clock sequence (the time went back) it
    /// starts from `wall_ms`, so an excursion to the future does not mark it far ahead.
    pub fn renewal(&self, terms: &Terms, mut state: State, wall_ms: u64) -> Renewal {
        let horizon = terms.horizon(wall_ms, self.latency_ms);
        let same_clock_seq = state.clock_seq == self.reserved_cs;
        let until_ms = if same_clock_seq {
            self.until_ms.max(horizon)
        } else {
            horizon
        };
        state.reserve(until_ms);
        Renewal {
            state,
            until_ms,
            same_clock_seq,
        }
    }

    /// Records an acknowledged `renewal`, sent at `sent_boot_ms` and answered at
    /// `answered_boot_ms`, and returns what ids may use now.
    pub fn renewed(
        &mut self,
        terms: &Terms,
        renewal: &Renewal,
        sent_boot_ms: u64,
        answered_boot_ms: u64,
    ) -> Renewed {
        self.latency_ms = answered_boot_ms.saturating_sub(sent_boot_ms);
        self.until_ms = renewal.until_ms;
        self.reserved_cs = renewal.state.clock_seq;
        self.renewed_boot_ms = sent_boot_ms;
        Renewed {
            deadline_boot_ms: terms.deadline_after(sent_boot_ms),
            reserved_wall_ms: renewal.until_ms - terms.ahead_ms,
            clock_seq: renewal.state.clock_seq,
            same_clock_seq: renewal.same_clock_seq,
        }
    }

    /// The record to store when the worker id is given back: the generator's `state`, with the
    /// reservation unless `exact` (the reservation covers a thread between its check and its
    /// id; only a generator nobody else holds is exact).
    pub fn released(&self, mut state: State, exact: bool) -> State {
        if !exact && state.clock_seq == self.reserved_cs {
            state.reserve(self.until_ms);
        }
        state
    }
}

/// The first reservation's end: from `start_ms` (the clock, or the handover's ready time),
/// with room for a first write that took `latency_ms`, never below `previous_ms`.
pub fn first_reservation(terms: &Terms, start_ms: u64, latency_ms: u64, previous_ms: u64) -> u64 {
    previous_ms.max(terms.horizon(start_ms, latency_ms))
}

/// Whether a first reservation written in `latency_ms` was slow enough (a quarter of the
/// reservation or more) to be written once more with room for its latency.
pub fn first_write_was_slow(terms: &Terms, latency_ms: u64) -> bool {
    latency_ms >= terms.reserve_ms / 4
}

/// The coordinator's side of a failover (PostgreSQL's timelines): a row last written before
/// the coordinator's latest promotion may have lost a grant or renewal that the promoted
/// replica never received, so its next grant raises every mark to [`failover::fence_ms`] past the
/// server's clock.
pub mod failover {
    use super::{millis, Duration, Layout, State, MAX_CLOCK_SEQS};

    /// How far past the server's clock a stale row's marks are raised: the TTL (the longest a
    /// lost renewal extended a lease) and twice `max_skew` (the old primary's clock against
    /// the new one's, each within `max_skew` of the holders').
    pub fn fence_ms(ttl: Duration, max_skew: Duration) -> u64 {
        millis(ttl.saturating_add(max_skew.saturating_mul(2)))
    }

    /// `state` as a grant of its stale row leaves it: every mark at least `fence_at_ms`
    /// (the server's clock plus [`fence_ms`]); a row never used gets the layout's empty record
    /// with every mark at `fence_at_ms`.
    pub fn fenced(layout: &Layout, state: Option<State>, fence_at_ms: u64) -> State {
        let mut state = state.unwrap_or(State {
            layout_fingerprint: layout.fingerprint(),
            worker_id: 0,
            clock_seq: 0,
            high_water_ms: [None; MAX_CLOCK_SEQS],
        });
        let count = usize::try_from(layout.clock_seqs()).unwrap_or(MAX_CLOCK_SEQS);
        for mark in state.high_water_ms.iter_mut().take(count) {
            *mark = Some(mark.map_or(fence_at_ms, |ms| ms.max(fence_at_ms)));
        }
        state
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The interleaving `covers` closes: an id call reads the time limit while the reservation
    /// is clock sequence 0's (until 10,000), the clock has gone back and core issues the id in
    /// clock sequence 1 at 5,000; the renewal thread then publishes clock sequence 1's
    /// reservation, until 4,000, and the call compares clock sequences. Comparing them alone
    /// (the code before) let the id out, past its clock sequence's persisted mark.
    #[test]
    fn an_id_past_a_new_clock_sequences_reservation_is_not_covered() {
        let (cs0, cs1) = (0 << 16, 1 << 16);
        assert!(may_issue(100, 5_000, 0, 1_000, 10_000)); // checked against cs 0's limit
        assert!(!covers(cs1, 5_000, cs1, 4_000)); // cs 1 reserved until 4,000 only
        assert!(covers(cs1, 3_999, cs1, 4_000));
        assert!(!covers(cs1, 3_000, cs0, 10_000));
    }
}
