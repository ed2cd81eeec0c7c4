//! The lease holder's renewal decisions as one state machine without I/O, threads or clocks.
//!
//! A driver feeds it the time and what the id path shows ([`Now`]), the coordinator's answers
//! ([`Answer`]), and does what it returns: renew, publish limits to the id path, lose the lease,
//! or look again after [`Holder::look_interval_ms`]. The renewal thread
//! (`generator/renewer.rs`) drives it with the system's clocks and a real coordinator; the
//! simulator (`lease/tests/simulation/`) drives the same machine on simulated clocks.
//!
//! Beside it, the id path's own decisions on how far ids may run ahead of the lease's checks:
//! [`block_margin_ms`] and [`park`] (the ticks a binding serves on its own).
//!
//! Start-up, from asking for a worker id to the first reservation, is [`Start`] (start.rs),
//! which hands the renewal side its first [`Holder`].
//!
//! Public for the simulator only: not part of the crate's stable API.

use std::time::Duration;

use clockflake::{Layout, State};

use crate::protocol::{Book, Renewal, Renewed, Terms};

mod start;
pub use start::{Clocks, ServerClock, Start, Started, Step};

/// How often the holder looks at the wall clock (to follow it forward or back), even when no
/// renewal is due; more often when renewals are due more often.
pub const LOOK_INTERVAL_MS: u64 = 100;

/// How far the wall clock must be behind the generator's time before the generator's time
/// follows it back (a clock excursion to the future, corrected). Smaller steps back (NTP
/// slews) stay smoothed: the generator's time waits for the wall clock to catch up.
pub const FOLLOW_BACK_MS: u64 = 1000;

/// First pause after a failed attempt to lease again; it doubles up to [`MAX_BACKOFF`].
pub const FIRST_BACKOFF: Duration = Duration::from_millis(100);
/// Longest pause between attempts to lease again.
pub const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// The pauses between attempts to take a lease (the first one, or again after a loss):
/// [`FIRST_BACKOFF`] after the first failure, doubling up to [`MAX_BACKOFF`]. One schedule
/// for every driver (the healing generator, the id service's first lease, the PostgreSQL
/// extension's lease worker).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backoff {
    next: Duration,
}

impl Default for Backoff {
    fn default() -> Backoff {
        Backoff::new()
    }
}

impl Backoff {
    /// Before any failure.
    pub const fn new() -> Backoff {
        Backoff {
            next: FIRST_BACKOFF,
        }
    }

    /// An attempt failed: how long to pause before the next one.
    pub fn failed(&mut self) -> Duration {
        let pause = self.next;
        self.next = (self.next * 2).min(MAX_BACKOFF);
        pause
    }

    /// An attempt worked: the next failure pauses [`FIRST_BACKOFF`] again.
    pub fn succeeded(&mut self) {
        self.next = FIRST_BACKOFF;
    }
}

/// What a driver reads before each turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Now {
    /// The boot clock (lease deadlines are measured on it).
    pub boot_ms: u64,
    /// The generator's time (Unix ms).
    pub wall_ms: u64,
    /// Wall ms an id call asked a reservation to cover (0: none).
    pub wanted_wall_ms: u64,
    /// The deadline as the id path reads it (0 once ids were stopped).
    pub deadline_boot_ms: u64,
    /// The reservation's limit as the id path reads it (0 once ids were stopped).
    pub reserved_wall_ms: u64,
    /// The generator's current clock sequence.
    pub clock_seq: u64,
}

/// What to do after a turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Turn {
    /// The deadline has passed: stop ids, the lease is lost.
    Lose,
    /// Renew now: [`Holder::send`] the generator's state, reserving from `from_wall_ms` on.
    Renew {
        /// The clock, or further when an id call wants more.
        from_wall_ms: u64,
    },
    /// Nothing due: run the coordinator's cheap check (a lock file removed), then look again
    /// after [`Holder::look_interval_ms`].
    Check,
    /// A renewal is in flight: wait for its answer.
    Await,
}

/// A renewal to send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sent {
    /// Its number: an answer to any other request is ignored.
    pub request: u64,
    /// The record to store, and what it reserves.
    pub renewal: Renewal,
}

/// The coordinator's answer to a renewal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    /// Stored and the lease extended.
    Renewed,
    /// Not stored as far as the holder knows (unreachable, timed out, cancelled).
    Failed,
    /// The coordinator says the lease is someone else's (or gone).
    LeaseLost,
}

/// What to do after an answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reply {
    /// Let ids use the renewal: publish its limits.
    Publish {
        /// What ids may use now.
        renewed: Renewed,
        /// Whether the deadline moves (a lease without a TTL keeps its deadline).
        deadline_moves: bool,
    },
    /// Stop ids, the lease is lost.
    Lose,
    /// Nothing to publish (a failure, to be retried; or an answer that must not count).
    Nothing,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct InFlight {
    request: u64,
    renewal: Renewal,
    sent_boot_ms: u64,
}

/// The renewal side of one lease, from its first reservation until it is lost or released.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Holder {
    terms: Terms,
    book: Book,
    /// After a failure, no renewal before this boot ms.
    retry_boot_ms: u64,
    in_flight: Option<InFlight>,
    requests: u64,
    lost: bool,
}

impl Holder {
    /// A holder whose first reservation is persisted (`book`).
    pub fn started(terms: Terms, book: Book) -> Holder {
        Holder {
            terms,
            book,
            retry_boot_ms: 0,
            in_flight: None,
            requests: 0,
            lost: false,
        }
    }

    /// The lease's terms.
    pub fn terms(&self) -> &Terms {
        &self.terms
    }

    /// What the last persisted reservation covers.
    pub fn book(&self) -> &Book {
        &self.book
    }

    /// Whether the holder found the lease lost (at its deadline, or told by the coordinator).
    pub fn is_lost(&self) -> bool {
        self.lost
    }

    /// How long to wait between turns when nobody asks for one sooner.
    pub fn look_interval_ms(&self) -> u64 {
        LOOK_INTERVAL_MS.min(self.terms.renew_interval_ms())
    }

    /// One turn: lost at the deadline; otherwise a renewal when due (the renewal interval, the
    /// reservation within reach, an id call wanting more, a new clock sequence), never before
    /// the retry time after a failure.
    pub fn poll(&mut self, now: Now) -> Turn {
        if self.lost || now.boot_ms >= now.deadline_boot_ms {
            self.lost = true;
            return Turn::Lose;
        }
        if self.in_flight.is_some() {
            return Turn::Await;
        }
        let due = self.book.due(
            &self.terms,
            now.boot_ms,
            now.wall_ms,
            now.wanted_wall_ms,
            now.reserved_wall_ms,
            now.clock_seq,
            self.retry_boot_ms,
        );
        if due {
            Turn::Renew {
                from_wall_ms: now.wall_ms.max(now.wanted_wall_ms),
            }
        } else {
            Turn::Check
        }
    }

    /// The renewal to send now (at `sent_boot_ms`) for the generator's `state`, reserving from
    /// `from_wall_ms` on (see [`Book::renewal`]).
    pub fn send(&mut self, state: State, from_wall_ms: u64, sent_boot_ms: u64) -> Sent {
        self.requests += 1;
        let renewal = self.book.renewal(&self.terms, state, from_wall_ms);
        self.in_flight = Some(InFlight {
            request: self.requests,
            renewal,
            sent_boot_ms,
        });
        Sent {
            request: self.requests,
            renewal,
        }
    }

    /// The coordinator's `answer` to `request`, received at `answered_boot_ms`. `active`: the
    /// lease has not been found lost or closed elsewhere (the id path, close) meanwhile.
    ///
    /// A renewal's answer is booked whatever happened meanwhile (it was stored), but a late
    /// one never revives a lease found lost or closed. After a failure, the next renewal waits
    /// a quarter of the renewal interval (at least 5 ms); ids go on until the deadline.
    pub fn answered(
        &mut self,
        request: u64,
        answer: Answer,
        answered_boot_ms: u64,
        active: bool,
    ) -> Reply {
        let Some(in_flight) = self.in_flight.filter(|sent| sent.request == request) else {
            return Reply::Nothing;
        };
        self.in_flight = None;
        match answer {
            Answer::Renewed => {
                let renewed = self.book.renewed(
                    &self.terms,
                    &in_flight.renewal,
                    in_flight.sent_boot_ms,
                    answered_boot_ms,
                );
                self.retry_boot_ms = 0;
                if self.lost || !active {
                    return Reply::Nothing;
                }
                Reply::Publish {
                    renewed,
                    deadline_moves: self.terms.ttl_ms.is_some(),
                }
            }
            Answer::Failed => {
                self.retry_boot_ms = answered_boot_ms + (self.terms.renew_interval_ms() / 4).max(5);
                Reply::Nothing
            }
            Answer::LeaseLost => {
                self.lost = true;
                Reply::Lose
            }
        }
    }

    /// The record to store when the worker id is given back (see [`Book::released`]).
    pub fn released(&self, state: State, exact: bool) -> State {
        self.book.released(state, exact)
    }
}

/// Where the generator's time (the boot clock plus `anchor_ms`) should be anchored when the wall
/// clock reads `wall_ms` at boot ms `boot_ms`: `Some` (the new anchor) when the wall clock is
/// ahead, or behind by more than [`FOLLOW_BACK_MS`]; `None` keeps it (small steps back are
/// smoothed, an excursion to the future is not kept for the rest of the process).
pub fn follow_wall_clock(anchor_ms: u64, wall_ms: u64, boot_ms: u64) -> Option<u64> {
    let target = wall_ms.saturating_sub(boot_ms);
    (target > anchor_ms || anchor_ms - target > FOLLOW_BACK_MS).then_some(target)
}

/// How long before the lease deadline (boot ms) blocks of more than one id stop being
/// granted: two ticks of the layout plus 10 ms.
///
/// Why that much: a binding serves a block only within its window, which ends with the block's
/// tick, so the last id of a block goes out at most one tick after the block was granted. The
/// window is moved onto the system's wall clock, and what is left between that and the lease's
/// time is the truncation of two millisecond clocks read at slightly different moments (under
/// 2 ms). The second tick and the 10 ms cover that with room to spare. So no id of a block is
/// handed out after the deadline, as long as the system's wall clock does not step back while a
/// block is partly served (see the README); even then such ids lie inside the persisted
/// reservation, above which any later holder starts, so they cannot repeat.
pub fn block_margin_ms(layout: &Layout) -> u64 {
    2 * layout.unit_ms() + 10
}

/// What [`park`] decides from, read from the lease just before.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TickSpan {
    /// The lease's time (Unix ms).
    pub now_ms: u64,
    /// How far ahead of it the binding asks to issue on its own.
    pub span_ms: u64,
    /// The tick of the binding's current parked id (`None`: no grant).
    pub parked_ms: Option<u64>,
    /// The generator's last tick in its clock sequence (its high-water mark).
    pub last_ms: Option<u64>,
    /// The reservation's limit as the id path reads it (0 once stopped).
    pub reserved_wall_ms: u64,
    /// Ms left to the deadline (`None`: never expires).
    pub deadline_in_ms: Option<u64>,
}

/// Where a binding's grant of ticks stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Park {
    /// Nothing can be granted now: the generator issued natively since the park, or its last
    /// id is in the lease's current tick.
    Nothing,
    /// Park the generator at this tick (Unix ms): the ticks before it are the binding's.
    At(u64),
    /// The grant stays as it is (none, or the current park).
    Keep,
}

/// The park of a binding's grant: at most `span_ms` ahead of the lease's time, within the
/// reservation, [`block_margin_ms`] before the deadline, and at least two ticks past the
/// generator's last id and the clock (fewer would grant nothing worth a native call).
pub fn park(layout: &Layout, span: &TickSpan) -> Park {
    let unit_ms = layout.unit_ms();
    let tick_start = |ms: u64| ms - (ms.saturating_sub(layout.epoch_ms()) % unit_ms);
    match span.parked_ms {
        Some(_) if span.parked_ms != span.last_ms => return Park::Nothing,
        // The binding's time (never ahead of the lease's) must be past the last id's tick, or
        // its first id would wait for the next tick.
        None if span
            .last_ms
            .is_some_and(|last| tick_start(last) >= tick_start(span.now_ms)) =>
        {
            return Park::Nothing;
        }
        _ => {}
    }
    let mut until_ms = span
        .now_ms
        .saturating_add(span.span_ms)
        .min(span.reserved_wall_ms);
    if let Some(left) = span.deadline_in_ms {
        until_ms = until_ms.min((span.now_ms + left).saturating_sub(block_margin_ms(layout)));
    }
    let park_ms = tick_start(until_ms);
    let floor_ms = span
        .last_ms
        .map_or(span.now_ms, |last| last.max(span.now_ms));
    if park_ms >= tick_start(floor_ms) + 2 * unit_ms {
        Park::At(park_ms)
    } else {
        Park::Keep
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clockflake::{Policy, MAX_CLOCK_SEQS};
    use std::time::Duration;

    const T: u64 = 1_750_000_000_000;

    /// TTL 1 s (margin 100 ms, interval 250 ms), reservation 2 s.
    fn terms() -> Terms {
        Terms::new(
            Some(Duration::from_secs(1)),
            Duration::from_secs(2),
            Policy::ClockSequence,
            0,
        )
    }

    fn state(clock_seq: u64) -> State {
        State {
            layout_fingerprint: 7,
            worker_id: 3,
            clock_seq,
            high_water_ms: [None; MAX_CLOCK_SEQS],
        }
    }

    /// Started at boot 1,000 (the grant sent then) with a reservation until T + 2,000.
    fn holder() -> Holder {
        Holder::started(terms(), Book::started(T + 2_000, 0, 0, 1_000))
    }

    /// At boot `boot_ms` and wall T + (boot_ms - 1,000), the start's limits published.
    fn now(boot_ms: u64) -> Now {
        Now {
            boot_ms,
            wall_ms: T + boot_ms - 1_000,
            wanted_wall_ms: 0,
            deadline_boot_ms: 1_000 + 900,
            reserved_wall_ms: T + 2_000,
            clock_seq: 0,
        }
    }

    fn renew(holder: &mut Holder, now: Now) -> Sent {
        match holder.poll(now) {
            Turn::Renew { from_wall_ms } => {
                holder.send(state(now.clock_seq), from_wall_ms, now.boot_ms)
            }
            turn => panic!("expected a renewal, got {turn:?}"),
        }
    }

    #[test]
    fn the_backoff_doubles_to_its_ceiling_and_starts_again_after_a_success() {
        let mut backoff = Backoff::new();
        let pauses: Vec<u128> = (0..8).map(|_| backoff.failed().as_millis()).collect();
        assert_eq!(pauses, [100, 200, 400, 800, 1_600, 3_200, 5_000, 5_000]);
        backoff.succeeded();
        assert_eq!(backoff.failed(), FIRST_BACKOFF);
    }

    #[test]
    fn nothing_is_due_before_the_renewal_interval() {
        let mut holder = holder();
        assert_eq!(holder.poll(now(1_249)), Turn::Check);
        assert_eq!(holder.look_interval_ms(), 100);
    }

    #[test]
    fn a_renewal_is_due_at_the_interval_and_reserves_from_the_clock() {
        let mut holder = holder();
        assert_eq!(
            holder.poll(now(1_250)),
            Turn::Renew {
                from_wall_ms: T + 250
            }
        );
    }

    #[test]
    fn a_renewal_is_due_when_an_id_call_wants_more() {
        let mut holder = holder();
        let wanting = Now {
            wanted_wall_ms: T + 2_001,
            ..now(1_010)
        };
        assert_eq!(
            holder.poll(wanting),
            Turn::Renew {
                from_wall_ms: T + 2_001
            }
        );
    }

    #[test]
    fn a_renewal_is_due_in_a_new_clock_sequence() {
        let mut holder = holder();
        let moved = Now {
            clock_seq: 1,
            ..now(1_010)
        };
        assert!(matches!(holder.poll(moved), Turn::Renew { .. }));
    }

    /// Safety: past the deadline the holder loses the lease, and an answer that comes later is
    /// never published.
    #[test]
    fn past_the_deadline_the_lease_is_lost_and_a_late_answer_is_not_published() {
        let mut holder = holder();
        let sent = renew(&mut holder, now(1_250));
        // The driver's turn comes while the renewal is out (the simulator's coordinator is slow).
        assert_eq!(holder.poll(now(1_899)), Turn::Await);
        assert_eq!(holder.poll(now(1_900)), Turn::Lose);
        assert!(holder.is_lost());
        assert_eq!(
            holder.answered(sent.request, Answer::Renewed, 1_950, true),
            Reply::Nothing
        );
        assert_eq!(holder.poll(now(1_960)), Turn::Lose);
    }

    /// Safety: a deadline the id path stopped (0) is past, whatever the holder's book says.
    #[test]
    fn stopped_limits_are_past_the_deadline() {
        let stopped = Now {
            deadline_boot_ms: 0,
            reserved_wall_ms: 0,
            ..now(1_010)
        };
        assert_eq!(holder().poll(stopped), Turn::Lose);
    }

    /// Safety: a renewal answered after the lease was found lost or closed elsewhere is booked
    /// (it was stored) but never published.
    #[test]
    fn a_late_renewal_never_revives_a_lease_lost_elsewhere() {
        let mut holder = holder();
        let sent = renew(&mut holder, now(1_250));
        assert_eq!(
            holder.answered(sent.request, Answer::Renewed, 1_260, false),
            Reply::Nothing
        );
        assert_eq!(holder.book().renewed_boot_ms, 1_250);
    }

    #[test]
    fn a_renewal_publishes_a_deadline_counted_from_its_request() {
        let mut holder = holder();
        let sent = renew(&mut holder, now(1_250));
        let Reply::Publish {
            renewed,
            deadline_moves,
        } = holder.answered(sent.request, Answer::Renewed, 1_290, true)
        else {
            panic!("expected a publish");
        };
        assert!(deadline_moves);
        assert_eq!(renewed.deadline_boot_ms, 1_250 + 900);
        assert_eq!(renewed.reserved_wall_ms, T + 250 + 2_000);
        assert_eq!(holder.book().latency_ms, 40);
    }

    #[test]
    fn without_a_ttl_the_deadline_does_not_move() {
        let terms = Terms::new(None, Duration::from_secs(2), Policy::ClockSequence, 0);
        let mut holder = Holder::started(terms, Book::started(T + 2_000, 0, 0, 1_000));
        let forever = Now {
            deadline_boot_ms: u64::MAX,
            wanted_wall_ms: T + 3_000,
            ..now(1_010)
        };
        let sent = renew(&mut holder, forever);
        assert!(matches!(
            holder.answered(sent.request, Answer::Renewed, 1_020, true),
            Reply::Publish {
                deadline_moves: false,
                ..
            }
        ));
    }

    /// After a failure, no renewal for a quarter of the interval (62 ms), then again.
    #[test]
    fn after_a_failure_the_next_renewal_waits_its_backoff() {
        let mut holder = holder();
        let sent = renew(&mut holder, now(1_250));
        assert_eq!(
            holder.answered(sent.request, Answer::Failed, 1_300, true),
            Reply::Nothing
        );
        assert_eq!(holder.poll(now(1_361)), Turn::Check);
        assert!(matches!(holder.poll(now(1_362)), Turn::Renew { .. }));
    }

    #[test]
    fn the_coordinator_saying_lost_loses_the_lease() {
        let mut holder = holder();
        let sent = renew(&mut holder, now(1_250));
        assert_eq!(
            holder.answered(sent.request, Answer::LeaseLost, 1_260, true),
            Reply::Lose
        );
        assert_eq!(holder.poll(now(1_270)), Turn::Lose);
    }

    /// An answer to a request that is no longer the one in flight (cancelled, then another
    /// sent) is ignored.
    #[test]
    fn an_answer_to_another_request_is_ignored() {
        let mut holder = holder();
        let first = renew(&mut holder, now(1_250));
        holder.answered(first.request, Answer::Failed, 1_260, true);
        let second = renew(&mut holder, now(1_330));
        assert_eq!(
            holder.answered(first.request, Answer::Renewed, 1_340, true),
            Reply::Nothing
        );
        assert!(matches!(
            holder.answered(second.request, Answer::Renewed, 1_341, true),
            Reply::Publish { .. }
        ));
    }

    /// The released record carries the reservation unless exact.
    #[test]
    fn a_release_keeps_the_reservation_unless_exact() {
        let holder = holder();
        assert_eq!(
            holder.released(state(0), false).high_water_ms[0],
            Some(T + 2_000)
        );
        assert_eq!(holder.released(state(0), true).high_water_ms[0], None);
    }

    #[test]
    fn the_time_follows_the_wall_clock_forward_and_far_back_only() {
        let (anchor, boot) = (T, 1_000);
        let wall = anchor + boot;
        assert_eq!(follow_wall_clock(anchor, wall + 5, boot), Some(anchor + 5));
        assert_eq!(follow_wall_clock(anchor, wall, boot), None);
        assert_eq!(follow_wall_clock(anchor, wall - FOLLOW_BACK_MS, boot), None);
        let far_back = wall - FOLLOW_BACK_MS - 1;
        assert_eq!(
            follow_wall_clock(anchor, far_back, boot),
            Some(anchor - FOLLOW_BACK_MS - 1)
        );
    }

    fn span(now_ms: u64) -> TickSpan {
        TickSpan {
            now_ms,
            span_ms: 100,
            parked_ms: None,
            last_ms: Some(now_ms - 5),
            reserved_wall_ms: now_ms + 1_000,
            deadline_in_ms: Some(1_000),
        }
    }

    #[test]
    fn a_park_is_span_ahead_on_a_tick() {
        let layout = Layout::CLOCKSEQ;
        assert_eq!(park(&layout, &span(T)), Park::At(T + 100));
        let sonyflake = Layout::SONYFLAKE; // 10 ms ticks
        let start = sonyflake.epoch_ms() + 1_000;
        assert_eq!(park(&sonyflake, &span(start + 3)), Park::At(start + 100));
    }

    /// Safety: a park never passes the reservation.
    #[test]
    fn a_park_stays_within_the_reservation() {
        let short = TickSpan {
            reserved_wall_ms: T + 40,
            ..span(T)
        };
        assert_eq!(park(&Layout::CLOCKSEQ, &short), Park::At(T + 40));
        let stopped = TickSpan {
            reserved_wall_ms: 0,
            ..span(T)
        };
        assert_eq!(park(&Layout::CLOCKSEQ, &stopped), Park::Keep);
    }

    /// Safety: a park is the block margin (two ticks + 10 ms) before the deadline.
    #[test]
    fn a_park_stays_the_block_margin_before_the_deadline() {
        let close = TickSpan {
            deadline_in_ms: Some(50),
            ..span(T)
        };
        assert_eq!(block_margin_ms(&Layout::CLOCKSEQ), 12);
        assert_eq!(park(&Layout::CLOCKSEQ, &close), Park::At(T + 50 - 12));
        let closer = TickSpan {
            deadline_in_ms: Some(13),
            ..span(T)
        };
        assert_eq!(park(&Layout::CLOCKSEQ, &closer), Park::Keep);
        let never = TickSpan {
            deadline_in_ms: None,
            ..span(T)
        };
        assert_eq!(park(&Layout::CLOCKSEQ, &never), Park::At(T + 100));
    }

    /// Safety: once the generator issued natively past the park, the grant is void.
    #[test]
    fn a_grant_is_void_once_the_generator_issued_past_it() {
        let moved = TickSpan {
            parked_ms: Some(T + 50),
            last_ms: Some(T + 60),
            ..span(T)
        };
        assert_eq!(park(&Layout::CLOCKSEQ, &moved), Park::Nothing);
        let parked = TickSpan {
            parked_ms: Some(T + 50),
            last_ms: Some(T + 50),
            ..span(T)
        };
        assert_eq!(park(&Layout::CLOCKSEQ, &parked), Park::At(T + 100));
    }

    #[test]
    fn nothing_is_granted_in_the_last_ids_tick() {
        let same_tick = TickSpan {
            last_ms: Some(T),
            ..span(T)
        };
        assert_eq!(park(&Layout::CLOCKSEQ, &same_tick), Park::Nothing);
    }

    /// A park less than two ticks past the last id (or the clock) grants nothing.
    #[test]
    fn a_park_is_two_ticks_past_the_last_id() {
        let narrow = TickSpan {
            span_ms: 1,
            ..span(T)
        };
        assert_eq!(park(&Layout::CLOCKSEQ, &narrow), Park::Keep);
        let two = TickSpan {
            span_ms: 2,
            ..span(T)
        };
        assert_eq!(park(&Layout::CLOCKSEQ, &two), Park::At(T + 2));
    }
}
