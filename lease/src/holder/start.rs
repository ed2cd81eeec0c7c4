//! A lease's start-up as a state machine without I/O: from asking for a worker id to the
//! first reservation persisted, with every decision on the way (the pool's size, the skew
//! verdict, resuming the worker's record, the first reservation and its second write when the
//! first was slow, a grant that came back after its own deadline, when the worker id goes back
//! untouched).
//!
//! A driver feeds it the time ([`Clocks`]) and the coordinator's answers, and does what each
//! [`Step`] says: `crate::start_lease` with a real coordinator (the leased generator, the
//! healing generator and the PostgreSQL extension's lease worker), the simulator on simulated
//! clocks.

use std::time::Duration;

use clockflake::{Field, Generator, Layout, Options, State};

use super::Holder;
use crate::coordinator::Grant;
use crate::limits::Limits;
use crate::protocol::{self, Book, Terms};
use crate::LeaseError;

/// The two clocks, read together by the driver.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Clocks {
    /// The boot clock (lease deadlines are measured on it).
    pub boot_ms: u64,
    /// The generator's time (Unix ms).
    pub wall_ms: u64,
}

/// The coordinator's clock as the driver read it for the skew check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServerClock {
    /// The generator's time when the request was sent (Unix ms).
    pub sent_ms: u64,
    /// The request's round trip on a monotonic clock (ms).
    pub round_trip_ms: u64,
    /// The coordinator's clock (Unix ms).
    pub server_ms: u64,
}

/// What the driver does next.
#[derive(Debug)]
pub enum Step {
    /// Ask the coordinator for a worker id (`Coordinator::acquire` with the generator's time
    /// `wall_ms`), then [`Start::granted`] or [`Start::failed`].
    Acquire {
        /// The generator's time, for the coordinator's preference among worker ids.
        wall_ms: u64,
    },
    /// Read the coordinator's clock (`Coordinator::server_time_ms`), then
    /// [`Start::clock_read`] (`None`: it has no clock of its own) or [`Start::failed`].
    ReadClock,
    /// Store this record (`Coordinator::renew`), then [`Start::persisted`] or
    /// [`Start::failed`].
    Persist(State),
    /// Started: ids may be issued under [`Started::limits`].
    Started(Box<Started>),
    /// Refused. When `release`, give the worker id back untouched first
    /// (`Coordinator::release(None)`: a broken record stays as it is, and nothing was issued).
    Refuse {
        /// Why.
        error: LeaseError,
        /// Whether a worker id was granted and must go back.
        release: bool,
    },
}

/// A lease that has started: its generator, the renewal side's state machine and the limits
/// to publish before the first id.
#[derive(Debug)]
pub struct Started {
    /// Core's generator, resumed from the worker's record.
    pub generator: Generator,
    /// The renewal side, from the first reservation on.
    pub holder: Holder,
    /// The worker id granted.
    pub worker_id: u64,
    /// The lease deadline (boot ms; `u64::MAX` without a TTL).
    pub deadline_boot_ms: u64,
    /// The first reservation's time limit as the id path reads it (less what the policy may
    /// run ahead of the clock).
    pub reserved_wall_ms: u64,
    /// The clock sequence the first reservation is for.
    pub clock_seq: u64,
    /// From when (wall ms) the first id can be issued under the stored marks (0: at once).
    pub ready_at_ms: u64,
    /// The skew the clock check measured (local minus the coordinator's, ms), if it ran.
    pub measured_skew_ms: Option<i64>,
}

impl Started {
    /// The limits to publish to the id path before any id.
    pub fn limits(&self) -> Limits {
        let layout = self.generator.layout();
        Limits::new(
            self.deadline_boot_ms,
            self.reserved_wall_ms,
            layout.place(Field::ClockSeq, self.clock_seq),
        )
    }
}

/// The first reservation, being persisted.
#[derive(Debug)]
struct Persisting {
    generator: Generator,
    terms: Terms,
    clock_seq: u64,
    ready_at_ms: u64,
    /// The generator's time when the record was resumed.
    resumed_ms: u64,
    until_ms: u64,
    writes: u32,
    sent_boot_ms: u64,
}

#[derive(Debug)]
enum Phase {
    /// Nothing asked yet.
    New,
    /// `acquire` sent.
    Acquiring,
    /// Granted; the coordinator's clock asked for.
    Clock(Box<Grant>),
    Persisting(Box<Persisting>),
    /// Started or refused: nothing more to do.
    Done,
}

/// One lease's start-up.
#[derive(Debug)]
pub struct Start {
    layout: Layout,
    options: Options,
    reserve: Duration,
    /// The coordinator's name for messages (its URI without secrets).
    coordinator: String,
    max_skew: Option<Duration>,
    acquire_sent_boot_ms: u64,
    /// A worker id was granted: a refusal gives it back.
    granted: bool,
    measured_skew_ms: Option<i64>,
    phase: Phase,
}

/// How many times the first reservation is written at most: once more when the first write
/// was slow, with room for its latency.
const FIRST_WRITES: u32 = 2;

impl Start {
    /// A start-up under `layout` with core's `options`, reserving `reserve` ahead, on the
    /// coordinator named `coordinator` whose clock check allows `max_skew` (`None`: off).
    pub fn new(
        layout: Layout,
        options: Options,
        reserve: Duration,
        coordinator: String,
        max_skew: Option<Duration>,
    ) -> Start {
        Start {
            layout,
            options,
            reserve,
            coordinator,
            max_skew,
            acquire_sent_boot_ms: 0,
            granted: false,
            measured_skew_ms: None,
            phase: Phase::New,
        }
    }

    /// The first step: refused when the layout has more worker ids than a coordinator hands
    /// out; otherwise ask for a worker id.
    pub fn begin(&mut self, now: Clocks) -> Step {
        let workers = self.layout.max_worker_id() + 1;
        if workers > crate::MAX_LEASED_WORKERS {
            return self.refuse(LeaseError::TooManyWorkers { workers });
        }
        self.acquire_sent_boot_ms = now.boot_ms;
        self.phase = Phase::Acquiring;
        Step::Acquire {
            wall_ms: now.wall_ms,
        }
    }

    /// The coordinator granted `grant`: the clock check when it is on, else resume.
    pub fn granted(&mut self, grant: Grant, now: Clocks) -> Step {
        if !matches!(self.phase, Phase::Acquiring) {
            return self.out_of_order("granted");
        }
        self.granted = true;
        if self.max_skew.is_some() {
            self.phase = Phase::Clock(Box::new(grant));
            Step::ReadClock
        } else {
            self.resume(grant, now)
        }
    }

    /// The coordinator's clock, read for the skew check (`None`: it has none): refused
    /// (`CLOCK_SKEW`) when it differs from ours at the request's midpoint by more than
    /// `max_skew` plus half the round trip; else resume.
    pub fn clock_read(&mut self, read: Option<ServerClock>, now: Clocks) -> Step {
        let Phase::Clock(grant) = std::mem::replace(&mut self.phase, Phase::Done) else {
            return self.out_of_order("clock_read");
        };
        if let (Some(read), Some(max_skew)) = (read, self.max_skew) {
            let local_ms = read.sent_ms.saturating_add(read.round_trip_ms / 2);
            let skew_ms = i64::try_from(i128::from(local_ms) - i128::from(read.server_ms))
                .unwrap_or(i64::MAX);
            let max_skew_ms = u64::try_from(max_skew.as_millis()).unwrap_or(u64::MAX);
            if protocol::skew_refused(skew_ms, read.round_trip_ms, max_skew_ms) {
                return self.refuse(LeaseError::ClockSkew {
                    coordinator: self.coordinator.clone(),
                    local_ms,
                    server_ms: read.server_ms,
                    skew_ms,
                    round_trip_ms: read.round_trip_ms,
                    max_skew_ms,
                });
            }
            self.measured_skew_ms = Some(skew_ms);
        }
        self.resume(*grant, now)
    }

    /// Resumes the worker's record under the grant and asks for the first reservation.
    fn resume(&mut self, grant: Grant, now: Clocks) -> Step {
        let resumed_ms = now.wall_ms;
        let resumed = self
            .layout
            .check_time(resumed_ms)
            .map_err(LeaseError::from)
            .and_then(|()| {
                protocol::resume(&self.layout, &grant, resumed_ms, || {
                    format!("{} worker id {}", self.coordinator, grant.worker_id)
                })
            })
            // Core names a record of another layout or clock sequence (`INVALID_STATE`).
            .and_then(|(state, ready_at_ms)| {
                let generator = Generator::resume(self.layout, &state, self.options)?;
                Ok((state.clock_seq, ready_at_ms, generator))
            });
        let (clock_seq, ready_at_ms, generator) = match resumed {
            Ok(resumed) => resumed,
            Err(error) => return self.refuse(error),
        };
        let terms = Terms::new(
            grant.ttl,
            self.reserve,
            generator.policy(),
            self.options.max_drift_ms,
        );
        let mut persisting = Box::new(Persisting {
            generator,
            terms,
            clock_seq,
            ready_at_ms,
            resumed_ms,
            until_ms: 0,
            writes: 0,
            sent_boot_ms: 0,
        });
        let record = Self::first_record(&mut persisting, 0, now);
        self.phase = Phase::Persisting(persisting);
        Step::Persist(record)
    }

    /// The first reservation's record: from the clock (or the handover's ready time), with
    /// room for `latency_ms`, never below an earlier write's.
    fn first_record(persisting: &mut Persisting, latency_ms: u64, now: Clocks) -> State {
        let start_ms = now
            .wall_ms
            .max(persisting.resumed_ms)
            .max(persisting.ready_at_ms);
        persisting.until_ms = protocol::first_reservation(
            &persisting.terms,
            start_ms,
            latency_ms,
            persisting.until_ms,
        );
        persisting.writes += 1;
        persisting.sent_boot_ms = now.boot_ms;
        let mut record = persisting.generator.state();
        record.reserve(persisting.until_ms);
        record
    }

    /// The first reservation is stored: once more when that write was slow; refused
    /// (retryable) when the grant and the reservation took past the lease's own deadline (the
    /// generator would refuse every id); else started, the deadline counted from the
    /// `acquire` request.
    pub fn persisted(&mut self, now: Clocks) -> Step {
        let Phase::Persisting(mut persisting) = std::mem::replace(&mut self.phase, Phase::Done)
        else {
            return self.out_of_order("persisted");
        };
        let latency_ms = now.boot_ms.saturating_sub(persisting.sent_boot_ms);
        if persisting.writes < FIRST_WRITES
            && protocol::first_write_was_slow(&persisting.terms, latency_ms)
        {
            let record = Self::first_record(&mut persisting, latency_ms, now);
            self.phase = Phase::Persisting(persisting);
            return Step::Persist(record);
        }
        let terms = persisting.terms;
        let deadline_boot_ms = terms.deadline_after(self.acquire_sent_boot_ms);
        if now.boot_ms >= deadline_boot_ms {
            let took_ms = now.boot_ms.saturating_sub(self.acquire_sent_boot_ms);
            return self.refuse(LeaseError::unavailable(
                &self.coordinator,
                format!(
                    "the grant and the first reservation took {took_ms} ms, past the lease \
                     deadline (the TTL less its margin: {} ms); try again",
                    deadline_boot_ms.saturating_sub(self.acquire_sent_boot_ms),
                ),
            ));
        }
        let Persisting {
            generator,
            clock_seq,
            ready_at_ms,
            until_ms,
            ..
        } = *persisting;
        Step::Started(Box::new(Started {
            worker_id: generator.worker_id(),
            holder: Holder::started(
                terms,
                Book::started(until_ms, clock_seq, latency_ms, self.acquire_sent_boot_ms),
            ),
            generator,
            deadline_boot_ms,
            reserved_wall_ms: until_ms - terms.ahead_ms,
            clock_seq,
            ready_at_ms,
            measured_skew_ms: self.measured_skew_ms,
        }))
    }

    /// A request failed (`error`): refused, the worker id given back untouched if one was
    /// granted.
    pub fn failed(&mut self, error: LeaseError) -> Step {
        self.refuse(error)
    }

    fn refuse(&mut self, error: LeaseError) -> Step {
        self.phase = Phase::Done;
        Step::Refuse {
            error,
            release: std::mem::take(&mut self.granted),
        }
    }

    /// A driver's bug, never a user's: refused with a message that says so.
    fn out_of_order(&mut self, call: &str) -> Step {
        let error = LeaseError::unavailable(
            &self.coordinator,
            format!("start-up driven out of order ({call}); try again"),
        );
        self.refuse(error)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic)]

    use super::*;
    use clockflake::MAX_CLOCK_SEQS;

    const T: u64 = 1_750_000_000_000;

    fn at(boot_ms: u64) -> Clocks {
        Clocks {
            boot_ms,
            wall_ms: T + boot_ms,
        }
    }

    fn start(max_skew: Option<Duration>) -> Start {
        Start::new(
            Layout::CLOCKSEQ,
            Options::default(),
            Duration::from_secs(2),
            "test://".into(),
            max_skew,
        )
    }

    fn grant(state: Option<State>) -> Grant {
        Grant {
            worker_id: 5,
            state,
            ttl: Some(Duration::from_secs(1)),
        }
    }

    /// Begun at boot 1,000 and granted worker id 5 (no record) at once.
    fn granted(max_skew: Option<Duration>) -> (Start, Step) {
        let mut start = start(max_skew);
        assert!(matches!(start.begin(at(1_000)), Step::Acquire { .. }));
        let step = start.granted(grant(None), at(1_010));
        (start, step)
    }

    fn refused(step: Step) -> (&'static str, bool) {
        match step {
            Step::Refuse { error, release } => (error.code(), release),
            step => panic!("expected a refusal, got {step:?}"),
        }
    }

    #[test]
    fn a_start_persists_the_first_reservation_then_starts() {
        let (mut start, step) = granted(None);
        let Step::Persist(record) = step else {
            panic!("expected the first reservation, got {step:?}");
        };
        assert_eq!(record.high_water_ms[0], Some(T + 1_010 + 2_000));
        let Step::Started(started) = start.persisted(at(1_020)) else {
            panic!("expected a start");
        };
        assert_eq!(started.worker_id, 5);
        // Safety: the deadline counts from the acquire request (TTL 1 s less its margin).
        assert_eq!(started.deadline_boot_ms, 1_000 + 900);
        assert_eq!(started.reserved_wall_ms, T + 3_010);
        assert_eq!(started.holder.book().latency_ms, 10);
    }

    /// A layout with more worker ids than a coordinator hands out is refused before any
    /// request (nothing to give back).
    #[test]
    fn too_many_workers_are_refused_before_asking() {
        let fields = [
            (Field::Timestamp, 41),
            (Field::Worker, 17),
            (Field::Sequence, 5),
        ];
        let wide = Layout::new(&fields, 1, 0).unwrap();
        let reserve = Duration::from_secs(2);
        let mut start = Start::new(wide, Options::default(), reserve, "t".into(), None);
        assert_eq!(refused(start.begin(at(0))), ("INVALID_LAYOUT", false));
    }

    #[test]
    fn a_failed_acquire_gives_nothing_back() {
        let mut start = start(None);
        start.begin(at(1_000));
        let error = LeaseError::unavailable("t", "down");
        assert_eq!(
            refused(start.failed(error)),
            ("COORDINATOR_UNAVAILABLE", false)
        );
    }

    /// Safety: a skew above `max_skew` plus half the round trip is refused and the worker id
    /// goes back untouched; within it, the skew is measured and the start goes on.
    #[test]
    fn the_clock_check_refuses_a_skew_and_gives_the_worker_id_back() {
        let (mut start, step) = granted(Some(Duration::from_secs(5)));
        assert!(matches!(step, Step::ReadClock));
        let read = ServerClock {
            sent_ms: T + 1_010,
            round_trip_ms: 20,
            server_ms: T + 1_020 - 5_011,
        };
        assert_eq!(
            refused(start.clock_read(Some(read), at(1_030))),
            ("CLOCK_SKEW", true)
        );

        let (mut start, _) = granted(Some(Duration::from_secs(5)));
        let close = ServerClock {
            server_ms: T + 1_020 - 5_010,
            ..read
        };
        assert!(matches!(
            start.clock_read(Some(close), at(1_030)),
            Step::Persist(_)
        ));
        let Step::Started(started) = start.persisted(at(1_040)) else {
            panic!("expected a start");
        };
        assert_eq!(started.measured_skew_ms, Some(5_010));
    }

    /// Safety: a record naming another worker id is corrupt, refused, and the worker id goes
    /// back untouched (the record stays for an operator).
    #[test]
    fn a_record_of_another_worker_is_refused_and_given_back() {
        let mut start = start(None);
        start.begin(at(1_000));
        let other = State {
            layout_fingerprint: Layout::CLOCKSEQ.fingerprint(),
            worker_id: 6,
            clock_seq: 0,
            high_water_ms: [None; MAX_CLOCK_SEQS],
        };
        assert_eq!(
            refused(start.granted(grant(Some(other)), at(1_010))),
            ("INVALID_STATE", true)
        );
    }

    /// A first write that took a quarter of the reservation or more is written once more, with
    /// room for its latency, never below the first.
    #[test]
    fn a_slow_first_write_is_written_once_more() {
        let (mut start, step) = granted(None);
        let Step::Persist(first) = step else {
            panic!("expected the first reservation");
        };
        let Step::Persist(second) = start.persisted(at(1_510)) else {
            panic!("expected a second write");
        };
        assert!(second.high_water_ms[0] > first.high_water_ms[0]);
        assert!(matches!(start.persisted(at(1_520)), Step::Started(_)));
    }

    /// A grant and first reservation that took past the lease's own deadline would start a
    /// generator that refuses every id: refused instead (retryable), the worker id given back.
    #[test]
    fn a_start_past_its_own_deadline_is_refused() {
        let (mut start, _) = granted(None);
        start.persisted(at(1_510));
        assert_eq!(
            refused(start.persisted(at(1_900))),
            ("COORDINATOR_UNAVAILABLE", true)
        );
    }

    #[test]
    fn a_step_out_of_order_is_refused_not_panicked() {
        let mut start = start(None);
        assert_eq!(refused(start.persisted(at(0))).0, "COORDINATOR_UNAVAILABLE");
    }
}
