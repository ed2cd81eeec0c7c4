//! A simulated holder: one process with a leased generator, its id path and its renewal thread
//! as `LeasedGenerator` runs them (lease/src/generator/), each decision made by the shipped
//! code: core's `Generator` for ids; the start-up machine, `clockflake_lease::holder::Start`
//! (the clock check, resume, the first reservation and its second write, the grant's own
//! deadline, when a worker id goes back); the limits the id path reads,
//! `clockflake_lease::limits::Limits` (may-issue, coverage, publishing a renewal); and the
//! renewal side's machine, `clockflake_lease::holder::Holder` (due times, backoff, the
//! deadline, what a renewal publishes). What is simulated is only what the real one gets from
//! the outside: its clocks, the coordinator's answers and the time they take, and the client's
//! cancellation of a slow request.

use std::time::Duration;

use clockflake::{Error, Field, Generator, Layout, Options, State};
use clockflake_lease::holder::{self as machine, Answer, Clocks, Now, Reply, ServerClock, Step};
use clockflake_lease::limits::Limits;
use clockflake_lease::Grant;

use crate::coordinator::Key;

/// Real ms from which the boot clocks count (the schedule's start, less each holder's offset).
const BOOTED_AT_MS: i64 = 1_760_000_000_000;

/// Why core refused one attempt: the lease's limit (past the deadline or the reservation, as
/// the real generator's `Shared::limited_now` refuses) or core's own rules.
enum Miss {
    Limit,
    Core,
}

impl From<Error> for Miss {
    fn from(_: Error) -> Miss {
        Miss::Core
    }
}

/// A renewal sent and not answered yet (the renewal thread is blocked in it).
pub struct InFlight {
    /// The request's number in the world: a cancelled request's late answer matches no renewal.
    pub request: u64,
    /// The same request's number in the holder's state machine.
    pub sent: u64,
    pub sent_boot_ms: u64,
}

/// A leased generator that has started.
pub struct Lease {
    pub worker_id: u64,
    pub token: Option<u64>,
    pub gen: Generator,
    /// The renewal thread's decisions (the production state machine).
    pub renewals: machine::Holder,
    /// The limits as published to the id path.
    pub limits: Limits,
    pub wanted_wall_ms: u64,
    pub in_flight: Option<InFlight>,
    /// Ids taken from core whose clock sequence waits for a reservation (real ms to give up).
    pub pending: Vec<(u64, u64)>,
}

impl Lease {
    /// The coverage check of `LeasedGenerator`'s id path (`Limits::covers`).
    fn covers(&self, layout: &Layout, id: u64, issued_ms: u64) -> bool {
        let cs_bits = id & (layout.field_max(Field::ClockSeq) << layout.shift(Field::ClockSeq));
        (self.limits).covers(cs_bits, issued_ms, self.renewals.terms().ahead_ms)
    }
}

/// Where a holder's start-up is.
pub enum Phase {
    /// Not running a generator: waiting to start (after a crash, a loss or a close).
    Idle,
    /// `open` under way: the production start-up machine, and the grant once answered.
    Starting {
        start: Box<machine::Start>,
        granted: Option<(u64, Option<u64>)>,
    },
    Active(Lease),
}

/// What the world does after a start-up step.
pub enum Started {
    /// Send this record as the first reservation (worker id, token).
    Persist(u64, Option<u64>, State),
    /// Refused: give this worker id back untouched, if one was granted.
    Refused(Option<(u64, Option<u64>)>),
    /// The generator runs.
    Running,
}

pub struct Holder {
    /// This life's key (a restart is a new key: a new process).
    pub key: Key,
    /// Wall clock minus real time.
    pub wall_offset_ms: i64,
    /// How long the machine had been up when the schedule started (the boot clock counts on
    /// through pauses; a process restored from a snapshot keeps the boot clock it had, as
    /// CRIU's time namespaces do).
    pub boot_offset_ms: i64,
    /// Real ms until which the process is paused (GC, SIGSTOP, a VM migration).
    pub paused_until_ms: u64,
    /// Real ms until which its messages are lost (a partition).
    pub partitioned_until_ms: u64,
    /// Real ms of the renewal thread's next wake.
    pub next_wake_ms: u64,
    pub phase: Phase,
    /// Whether the generator's time is the boot clock anchored to the wall clock (the real
    /// generator's default, re-anchored by the renewal thread with `holder::follow_wall_clock`),
    /// rather than the wall clock read directly (an injected clock).
    pub boot_anchored: bool,
    /// The anchor: the generator's time is `anchor_ms + boot` (when `boot_anchored`).
    pub anchor_ms: u64,
    /// Whether this process has a renewal thread: a copy made by `fork` has only the thread
    /// that forked.
    pub renewal_thread: bool,
    /// The identity a ZooKeeper holder names its `servers` nodes by.
    pub identity: u64,
}

/// Why an id attempt produced no id.
pub enum Refusal {
    NotRunning,
    /// The deadline passed: the lease is lost (the holder stops and will start anew).
    Lost,
    /// Wants a renewal first (reservation spent or a new clock sequence).
    Renewal,
    Core,
}

impl Holder {
    pub fn wall_ms(&self, real_ms: u64) -> u64 {
        (real_ms as i64 + self.wall_offset_ms) as u64
    }

    /// The generator's time: the wall clock, or the boot clock plus the anchor.
    pub fn time_ms(&self, real_ms: u64) -> u64 {
        if self.boot_anchored {
            self.anchor_ms + self.boot_ms(real_ms)
        } else {
            self.wall_ms(real_ms)
        }
    }

    /// A new life's time source (`Time::new`): anchored to the wall clock now.
    pub fn anchor(&mut self, real_ms: u64) {
        self.anchor_ms = self.wall_ms(real_ms).saturating_sub(self.boot_ms(real_ms));
    }

    /// A copy of this process as it is (a fork, a snapshot): the same memory, so the same
    /// lease, limits and generator (core's `Generator` is not `Clone`: the copy's is resumed
    /// from its state, at the next tick after its last id, as an exact copy would issue too,
    /// less the rest of its last tick's sequence).
    pub fn copy(&self, layout: &Layout) -> Holder {
        let copy_gen = |gen: &Generator| {
            Generator::resume(*layout, &gen.state(), Options::default())
                .expect("a generator's own state resumes")
        };
        let phase = match &self.phase {
            // A copy taken while `open` waits for the coordinator gets none of its answers
            // (they go to the original's sockets; a fork copies only the forking thread): no
            // generator comes of it.
            Phase::Idle | Phase::Starting { .. } => Phase::Idle,
            Phase::Active(lease) => Phase::Active(Lease {
                worker_id: lease.worker_id,
                token: lease.token,
                gen: copy_gen(&lease.gen),
                renewals: lease.renewals.clone(),
                limits: lease.limits.clone(),
                wanted_wall_ms: lease.wanted_wall_ms,
                in_flight: lease.in_flight.as_ref().map(|sent| InFlight { ..*sent }),
                pending: Vec::new(),
            }),
        };
        Holder {
            key: self.key,
            wall_offset_ms: self.wall_offset_ms,
            boot_offset_ms: self.boot_offset_ms,
            paused_until_ms: 0,
            partitioned_until_ms: 0,
            next_wake_ms: self.next_wake_ms,
            phase,
            boot_anchored: self.boot_anchored,
            anchor_ms: self.anchor_ms,
            renewal_thread: self.renewal_thread,
            identity: self.identity,
        }
    }

    /// The boot clock: time since the machine booted (the schedule's start plus the offset).
    pub fn boot_ms(&self, real_ms: u64) -> u64 {
        (real_ms as i64 - BOOTED_AT_MS + self.boot_offset_ms) as u64
    }

    /// Sets the boot clock to read `boot_ms` at `real_ms` (a process restored from a snapshot).
    pub fn set_boot_ms(&mut self, real_ms: u64, boot_ms: u64) {
        self.boot_offset_ms = boot_ms as i64 - (real_ms as i64 - BOOTED_AT_MS);
    }

    pub fn lease(&mut self) -> Option<&mut Lease> {
        match &mut self.phase {
            Phase::Active(lease) => Some(lease),
            _ => None,
        }
    }

    /// `open` begins (`start_lease`): the start-up machine asks for a worker id.
    pub fn begin_start(
        &mut self,
        layout: &Layout,
        reserve: Duration,
        max_skew_ms: Option<u64>,
        real_ms: u64,
    ) {
        let mut start = machine::Start::new(
            *layout,
            Options::default(),
            reserve,
            String::new(),
            max_skew_ms.map(Duration::from_millis),
        );
        let step = start.begin(self.clocks(real_ms));
        debug_assert!(matches!(step, Step::Acquire { .. }));
        self.phase = Phase::Starting {
            start: Box::new(start),
            granted: None,
        };
    }

    fn clocks(&self, real_ms: u64) -> Clocks {
        Clocks {
            boot_ms: self.boot_ms(real_ms),
            wall_ms: self.time_ms(real_ms),
        }
    }

    /// The answer to `acquire`, with the skew between this holder's clock and the
    /// coordinator's as the clock check's request would read it (its round trip taken as 0).
    pub fn granted(
        &mut self,
        grant: Grant,
        token: Option<u64>,
        skew_ms: i64,
        real_ms: u64,
    ) -> Started {
        let now = self.clocks(real_ms);
        let Phase::Starting { start, granted } = &mut self.phase else {
            return Started::Refused(Some((grant.worker_id, token)));
        };
        *granted = Some((grant.worker_id, token));
        let mut step = start.granted(grant, now);
        if let Step::ReadClock = step {
            let server = ServerClock {
                sent_ms: now.wall_ms,
                round_trip_ms: 0,
                server_ms: (now.wall_ms as i64 - skew_ms) as u64,
            };
            step = start.clock_read(Some(server), now);
        }
        self.starting(step, real_ms, false)
    }

    /// The first reservation is persisted: written again when that was slow, or started,
    /// its deadline counted from the `acquire` request (from this answer when
    /// `deadline_from_answer`: a switched-off mechanism).
    pub fn persisted(&mut self, real_ms: u64, deadline_from_answer: bool) -> Started {
        let now = self.clocks(real_ms);
        let Phase::Starting { start, .. } = &mut self.phase else {
            return Started::Refused(None);
        };
        let step = start.persisted(now);
        self.starting(step, real_ms, deadline_from_answer)
    }

    /// A start-up request failed: refused, the worker id given back if granted.
    pub fn start_failed(&mut self) -> Started {
        let Phase::Starting { start, .. } = &mut self.phase else {
            return Started::Refused(None);
        };
        let step = start.failed(clockflake_lease::LeaseError::CoordinatorUnavailable {
            coordinator: String::new(),
            reason: "no answer".into(),
        });
        self.starting(step, 0, false)
    }

    fn starting(&mut self, step: Step, real_ms: u64, deadline_from_answer: bool) -> Started {
        let granted = match &self.phase {
            Phase::Starting { granted, .. } => *granted,
            _ => None,
        };
        match step {
            Step::Persist(record) => {
                let (worker, token) = granted.expect("a record is persisted after a grant");
                Started::Persist(worker, token, record)
            }
            Step::Started(started) => {
                let started = *started;
                let token = granted.and_then(|(_, token)| token);
                let mut limits = started.limits();
                if deadline_from_answer {
                    let deadline = started.holder.terms().deadline_after(self.boot_ms(real_ms));
                    limits = Limits::new(
                        deadline,
                        started.reserved_wall_ms,
                        started
                            .generator
                            .layout()
                            .place(Field::ClockSeq, started.clock_seq),
                    );
                }
                self.phase = Phase::Active(Lease {
                    worker_id: started.worker_id,
                    token,
                    limits,
                    renewals: started.holder,
                    gen: started.generator,
                    wanted_wall_ms: 0,
                    in_flight: None,
                    pending: Vec::new(),
                });
                Started::Running
            }
            Step::Refuse { release, .. } => {
                self.phase = Phase::Idle;
                Started::Refused(granted.filter(|_| release))
            }
            Step::Acquire { .. } | Step::ReadClock => {
                self.phase = Phase::Idle;
                Started::Refused(granted)
            }
        }
    }

    /// One id call (`LeasedGenerator::try_next_id`): core on the limited clock, then the
    /// coverage check of the id's clock sequence.
    pub fn next_id(&mut self, layout: &Layout, real_ms: u64) -> Result<u64, Refusal> {
        let wall_ms = self.time_ms(real_ms);
        let boot_ms = self.boot_ms(real_ms);
        let Some(lease) = self.lease() else {
            return Err(Refusal::NotRunning);
        };
        let limits = &lease.limits;
        let limited_now = || {
            if limits.may_issue(boot_ms, wall_ms, 0) {
                Ok(wall_ms)
            } else {
                Err(Miss::Limit)
            }
        };
        match lease.gen.try_next_id_from(limited_now) {
            Ok(id) => {
                let issued_ms = layout.decode(id).map_or(0, |parts| parts.timestamp_ms);
                if lease.covers(layout, id, issued_ms) {
                    return Ok(id);
                }
                // Not covered yet: ask for a reservation in this clock sequence and wait for
                // it at most RENEWAL_WAIT.
                lease.wanted_wall_ms = lease.wanted_wall_ms.max(wall_ms.max(issued_ms));
                let give_up = real_ms + clockflake_lease::RENEWAL_WAIT.as_millis() as u64;
                lease.pending.push((id, give_up));
                Err(Refusal::Renewal)
            }
            Err(Miss::Limit) => {
                if boot_ms >= lease.limits.deadline_boot_ms() {
                    return Err(Refusal::Lost);
                }
                lease.wanted_wall_ms = lease.wanted_wall_ms.max(wall_ms);
                Err(Refusal::Renewal)
            }
            Err(Miss::Core) => Err(Refusal::Core),
        }
    }

    /// A renewal was acknowledged: the holder books it and ids may use what it publishes (as
    /// `Shared::renew_locked` does). Returns the pending ids it now covers.
    pub fn renewed(
        &mut self,
        layout: &Layout,
        request: u64,
        real_ms: u64,
        deadline_from_answer: bool,
    ) -> Vec<u64> {
        let boot_ms = self.boot_ms(real_ms);
        let Some(lease) = self.lease() else {
            return Vec::new();
        };
        let Some(in_flight) = lease.in_flight.take_if(|sent| sent.request == request) else {
            return Vec::new();
        };
        let reply = (lease.renewals).answered(in_flight.sent, Answer::Renewed, boot_ms, true);
        let Reply::Publish {
            mut renewed,
            deadline_moves,
        } = reply
        else {
            return Vec::new();
        };
        if deadline_from_answer {
            renewed.deadline_boot_ms = lease.renewals.terms().deadline_after(boot_ms);
        }
        let cs_bits = layout.place(Field::ClockSeq, renewed.clock_seq);
        lease.limits.publish(&renewed, cs_bits, deadline_moves);
        let pending = std::mem::take(&mut lease.pending);
        let (covered, waiting): (Vec<_>, Vec<_>) = pending
            .into_iter()
            .filter(|&(_, give_up)| real_ms <= give_up)
            .partition(|&(id, _)| {
                let issued_ms = layout.decode(id).map_or(0, |parts| parts.timestamp_ms);
                lease.covers(layout, id, issued_ms)
            });
        lease.pending = waiting;
        covered.into_iter().map(|(id, _)| id).collect()
    }

    /// A renewal failed (the coordinator unreachable, the request cancelled): the holder
    /// schedules the next one.
    pub fn renewal_failed(&mut self, real_ms: u64) {
        let boot_ms = self.boot_ms(real_ms);
        if let Some(lease) = self.lease() {
            if let Some(in_flight) = lease.in_flight.take() {
                (lease.renewals).answered(in_flight.sent, Answer::Failed, boot_ms, true);
            }
        }
    }

    /// The renewal thread's turn (`renew_loop`, the holder's `poll`): lost at the deadline; a
    /// renewal if due (the renewal to send); otherwise the coordinator's cheap check, which
    /// the caller runs.
    pub fn renewal_turn(&mut self, real_ms: u64, request: u64) -> Turn {
        let boot_ms = self.boot_ms(real_ms);
        if self.boot_anchored {
            // The renewal thread follows the wall clock (`Time::follow_wall_clock`).
            let wall = self.wall_ms(real_ms);
            if let Some(anchor) = machine::follow_wall_clock(self.anchor_ms, wall, boot_ms) {
                self.anchor_ms = anchor;
            }
        }
        let wall_ms = self.time_ms(real_ms);
        let Some(lease) = self.lease() else {
            return Turn::Nothing;
        };
        let now = Now {
            boot_ms,
            wall_ms,
            wanted_wall_ms: lease.wanted_wall_ms,
            deadline_boot_ms: lease.limits.deadline_boot_ms(),
            reserved_wall_ms: lease.limits.reserved_wall_ms(),
            clock_seq: lease.gen.state().clock_seq,
        };
        match lease.renewals.poll(now) {
            machine::Turn::Lose => Turn::Lost,
            machine::Turn::Await => {
                // The client cancels a request after half the TTL (PostgreSQL's session.rs):
                // it never counts, whatever the server did with it.
                let patience = lease
                    .renewals
                    .terms()
                    .ttl_ms
                    .map_or(u64::MAX, |ttl| ttl / 2);
                match &lease.in_flight {
                    Some(sent) if boot_ms >= sent.sent_boot_ms.saturating_add(patience) => {
                        Turn::Cancel
                    }
                    _ => Turn::Nothing,
                }
            }
            machine::Turn::Check => Turn::Check,
            machine::Turn::Renew { from_wall_ms } => {
                let sent = (lease.renewals).send(lease.gen.state(), from_wall_ms, boot_ms);
                lease.in_flight = Some(InFlight {
                    request,
                    sent: sent.request,
                    sent_boot_ms: boot_ms,
                });
                Turn::Renew(sent.renewal.state)
            }
        }
    }

    /// The record `close` stores (`Book::released`).
    pub fn released_state(&mut self, exact: bool) -> Option<(u64, Option<u64>, State)> {
        let lease = self.lease()?;
        Some((
            lease.worker_id,
            lease.token,
            lease.renewals.released(lease.gen.state(), exact),
        ))
    }
}

pub enum Turn {
    Nothing,
    Lost,
    Cancel,
    Check,
    Renew(State),
}
