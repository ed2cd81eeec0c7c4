//! A simulated holder: one process with a leased generator, its id path and its renewal thread
//! as `LeasedGenerator` runs them (lease/src/generator/), each decision made by the shipped
//! code: core's `Generator` for ids, `clockflake_lease::protocol` for the lease (resume, terms,
//! may-issue, the clock check), and the renewal thread's own state machine,
//! `clockflake_lease::holder::Holder` (due times, backoff, the deadline, what a renewal
//! publishes). What is simulated is only what the real one gets from the outside: its clocks,
//! the coordinator's answers and the time they take, and the client's cancellation of a slow
//! request.

use std::time::Duration;

use clockflake::{Error, Field, Generator, Layout, Options, State};
use clockflake_lease::holder::{self as machine, Answer, Now, Reply};
use clockflake_lease::protocol::{self, Book, Renewal, Terms};
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
    pub deadline_boot_ms: u64,
    pub reserved_wall_ms: u64,
    pub reserved_cs: u64,
    pub wanted_wall_ms: u64,
    pub in_flight: Option<InFlight>,
    /// Ids taken from core whose clock sequence waits for a reservation (real ms to give up).
    pub pending: Vec<(u64, u64)>,
}

impl Lease {
    /// The coverage check of `LeasedGenerator`'s id path (`protocol::covers`).
    fn covers(&self, layout: &Layout, id: u64, issued_ms: u64) -> bool {
        let cs_bits = id & (layout.field_max(Field::ClockSeq) << layout.shift(Field::ClockSeq));
        protocol::covers(
            cs_bits,
            issued_ms,
            layout.place(Field::ClockSeq, self.reserved_cs),
            self.reserved_wall_ms + self.renewals.terms().ahead_ms,
        )
    }
}

/// Where a holder's start-up is.
pub enum Phase {
    /// Not running a generator: waiting to start (after a crash, a loss or a close).
    Idle,
    /// `acquire` sent at that boot ms.
    Acquiring {
        sent_boot_ms: u64,
    },
    /// Granted; the first reservation sent.
    FirstReservation {
        grant: Grant,
        token: Option<u64>,
        gen: Generator,
        terms: Terms,
        renewal: Renewal,
        acquire_sent_boot_ms: u64,
        sent_boot_ms: u64,
    },
    Active(Lease),
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
            Phase::Idle => Phase::Idle,
            Phase::Acquiring { sent_boot_ms } => Phase::Acquiring {
                sent_boot_ms: *sent_boot_ms,
            },
            Phase::FirstReservation {
                grant,
                token,
                gen,
                terms,
                renewal,
                acquire_sent_boot_ms,
                sent_boot_ms,
            } => Phase::FirstReservation {
                grant: grant.clone(),
                token: *token,
                gen: copy_gen(gen),
                terms: *terms,
                renewal: *renewal,
                acquire_sent_boot_ms: *acquire_sent_boot_ms,
                sent_boot_ms: *sent_boot_ms,
            },
            Phase::Active(lease) => Phase::Active(Lease {
                worker_id: lease.worker_id,
                token: lease.token,
                gen: copy_gen(&lease.gen),
                renewals: lease.renewals.clone(),
                deadline_boot_ms: lease.deadline_boot_ms,
                reserved_wall_ms: lease.reserved_wall_ms,
                reserved_cs: lease.reserved_cs,
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

    /// The answer to `acquire`: resume the grant (`protocol::resume`, core's `Generator::resume`)
    /// and send the first reservation. `None`: refused (the caller releases the worker id).
    pub fn granted(
        &mut self,
        layout: &Layout,
        grant: Grant,
        token: Option<u64>,
        reserve: Duration,
        real_ms: u64,
    ) -> Option<Renewal> {
        let Phase::Acquiring { sent_boot_ms } = self.phase else {
            return None;
        };
        let now_ms = self.time_ms(real_ms);
        let (state, ready_at_ms) = protocol::resume(layout, &grant, now_ms, String::new).ok()?;
        let gen = Generator::resume(*layout, &state, Options::default()).ok()?;
        let terms = Terms::new(
            grant.ttl,
            reserve,
            gen.policy(),
            Options::default().max_drift_ms,
        );
        let until_ms = protocol::first_reservation(&terms, now_ms.max(ready_at_ms), 0, 0);
        let mut first = gen.state();
        first.reserve(until_ms);
        let renewal = Renewal {
            state: first,
            until_ms,
            same_clock_seq: true,
        };
        self.phase = Phase::FirstReservation {
            grant,
            token,
            gen,
            terms,
            renewal,
            acquire_sent_boot_ms: sent_boot_ms,
            sent_boot_ms: self.boot_ms(real_ms),
        };
        Some(renewal)
    }

    /// The first reservation is persisted: the generator starts, its deadline counted from the
    /// `acquire` request (as `LeasedGenerator::start` counts it).
    pub fn started(&mut self, real_ms: u64, deadline_from_answer: bool) {
        let phase = std::mem::replace(&mut self.phase, Phase::Idle);
        let Phase::FirstReservation {
            grant,
            token,
            gen,
            terms,
            renewal,
            acquire_sent_boot_ms,
            sent_boot_ms,
        } = phase
        else {
            self.phase = phase;
            return;
        };
        let answered = self.boot_ms(real_ms);
        let latency_ms = answered - sent_boot_ms;
        let clock_seq = renewal.state.clock_seq;
        let deadline_from = if deadline_from_answer {
            answered
        } else {
            acquire_sent_boot_ms
        };
        self.phase = Phase::Active(Lease {
            worker_id: grant.worker_id,
            token,
            deadline_boot_ms: terms.deadline_after(deadline_from),
            reserved_wall_ms: renewal.until_ms - terms.ahead_ms,
            reserved_cs: clock_seq,
            renewals: machine::Holder::started(
                terms,
                Book::started(
                    renewal.until_ms,
                    clock_seq,
                    latency_ms,
                    acquire_sent_boot_ms,
                ),
            ),
            gen,
            wanted_wall_ms: 0,
            in_flight: None,
            pending: Vec::new(),
        });
    }

    /// One id call (`LeasedGenerator::try_next_id`): core on the limited clock, then the
    /// coverage check of the id's clock sequence.
    pub fn next_id(&mut self, layout: &Layout, real_ms: u64) -> Result<u64, Refusal> {
        let wall_ms = self.time_ms(real_ms);
        let boot_ms = self.boot_ms(real_ms);
        let Some(lease) = self.lease() else {
            return Err(Refusal::NotRunning);
        };
        let (deadline_boot_ms, reserved_wall_ms) = (lease.deadline_boot_ms, lease.reserved_wall_ms);
        let limited_now = || {
            if protocol::may_issue(boot_ms, wall_ms, 0, deadline_boot_ms, reserved_wall_ms) {
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
                if boot_ms >= lease.deadline_boot_ms {
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
        // `Limits::publish`.
        if deadline_moves {
            lease.deadline_boot_ms = renewed.deadline_boot_ms;
        }
        lease.reserved_wall_ms = if renewed.same_clock_seq {
            lease.reserved_wall_ms.max(renewed.reserved_wall_ms)
        } else {
            renewed.reserved_wall_ms
        };
        lease.reserved_cs = renewed.clock_seq;
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
            deadline_boot_ms: lease.deadline_boot_ms,
            reserved_wall_ms: lease.reserved_wall_ms,
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
