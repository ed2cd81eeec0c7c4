//! The simulated world of one schedule: real time, the holders, the messages between them and
//! the coordinator, the faults, and the checks made after every step.

use std::collections::HashMap;
use std::fmt;
use std::time::Duration;

use clockflake::{Field, Layout, State};
use clockflake_lease::protocol;

use crate::coordinator::{Answer, Claim, Coordinator, Key, Kind};
use crate::holder::{Holder, Phase, Refusal, Turn};
use crate::rng::Rng;
use crate::{Assumption, Mechanisms};
use clockflake_lease::holder::LOOK_INTERVAL_MS;

/// Real time at the start of every schedule (Unix ms, 2025-10-09).
const START_MS: u64 = 1_760_000_000_000;
const STEPS: usize = 400;

/// A small layout, so that holders meet on few worker ids, few clock sequences and short
/// sequences: 4 worker ids, 4 clock sequences, 16 ids a millisecond.
fn layout() -> Layout {
    Layout::new(
        &[
            (Field::Timestamp, 41),
            (Field::ClockSeq, 2),
            (Field::Worker, 2),
            (Field::Sequence, 4),
        ],
        1,
        1_704_067_200_000,
    )
    .expect("the simulation's layout is valid")
}

enum Request {
    Acquire,
    FirstReservation {
        worker: u64,
        lock_file: Option<u64>,
        state: State,
    },
    Renew {
        request: u64,
        worker: u64,
        lock_file: Option<u64>,
        state: State,
    },
    Release {
        worker: u64,
        lock_file: Option<u64>,
        state: Option<State>,
    },
}

enum Message {
    /// A request reaching the coordinator (sent to the primary of `generation`).
    ToCoordinator {
        holder: usize,
        key: Key,
        generation: u64,
        request: Request,
    },
    /// An answer reaching a holder.
    ToHolder(Reply),
}

/// An answer on its way to a holder; `answer` `None`: the request failed (the server died, a
/// timeout).
struct Reply {
    holder: usize,
    key: Key,
    kind: ReplyTo,
    answer: Option<Answer>,
    applied_ms: u64,
    skew_ms: i64,
}

#[derive(Clone, Copy)]
enum ReplyTo {
    Acquire,
    FirstReservation,
    Renew(u64),
    Release,
}

struct Event {
    at_ms: u64,
    order: u64,
    message: Message,
}

/// One schedule's outcome.
pub struct Run {
    pub ids: u64,
    pub duplicates: u64,
    /// Ids issued after the expiry of the last grant or renewal the coordinator acknowledged.
    pub late_ids: u64,
    /// Why the schedule left DESIGN's assumptions (empty when it did not).
    pub outside: Vec<&'static str>,
    pub kind: Kind,
    pub faults: HashMap<&'static str, u64>,
    pub trace: Vec<String>,
    pub first_problem: Option<String>,
}

impl Run {
    pub fn failed(&self) -> bool {
        (self.duplicates > 0 || self.late_ids > 0) && self.outside.is_empty()
    }

    pub fn summary(&self, seed: u64) -> String {
        format!(
            "seed {seed}: {:?} coordinator, {} ids, {} duplicates, {} ids after the lease's expiry{}{}",
            self.kind,
            self.ids,
            self.duplicates,
            self.late_ids,
            if self.outside.is_empty() {
                String::new()
            } else {
                format!(", outside assumptions ({})", self.outside.join(", "))
            },
            self.first_problem
                .as_ref()
                .map_or(String::new(), |problem| format!("; first: {problem}"))
        )
    }
}

/// Sums over many schedules.
#[derive(Default)]
pub struct Totals {
    schedules: u64,
    ids: u64,
    outside: u64,
    outside_with_duplicates: u64,
    faults: HashMap<&'static str, u64>,
}

impl Totals {
    pub fn add(&mut self, run: &Run) {
        self.schedules += 1;
        self.ids += run.ids;
        if !run.outside.is_empty() {
            self.outside += 1;
            if run.duplicates > 0 || run.late_ids > 0 {
                self.outside_with_duplicates += 1;
            }
        }
        for (fault, count) in &run.faults {
            *self.faults.entry(fault).or_default() += count;
        }
    }
}

impl fmt::Display for Totals {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut faults: Vec<_> = self.faults.iter().collect();
        faults.sort();
        write!(
            f,
            "{} ids, 0 duplicates within the assumptions; {} schedules outside them, {} of which \
             repeated ids (as DESIGN says they may); faults:",
            self.ids, self.outside, self.outside_with_duplicates
        )?;
        for (fault, count) in faults {
            write!(f, " {fault} {count}")?;
        }
        Ok(())
    }
}

/// Which faults a schedule injects: each kind in about half the schedules, so that some
/// schedules stress one kind alone; the two that leave DESIGN's assumptions rarely.
struct Faults {
    pause: bool,
    clock_step: bool,
    crash: bool,
    close: bool,
    partition: bool,
    /// A failover (row leases) or a lock file removed (`file://`).
    coordinator: bool,
    restore: bool,
    /// Clock steps may leave a clock further than `max_skew` from true time.
    clock_beyond_skew: bool,
    /// A restore may skip the documented procedure.
    restore_without_procedure: bool,
}

impl Faults {
    fn draw(rng: &mut Rng, broken: Assumption) -> Faults {
        let mut faults = Faults {
            pause: rng.chance(500),
            clock_step: rng.chance(500),
            crash: rng.chance(500),
            close: rng.chance(500),
            partition: rng.chance(500),
            coordinator: rng.chance(600),
            restore: rng.chance(150),
            clock_beyond_skew: rng.chance(50),
            restore_without_procedure: rng.chance(100),
        };
        match broken {
            Assumption::Kept => {}
            Assumption::ClocksWithinMaxSkew => {
                faults.clock_step = true;
                faults.clock_beyond_skew = true;
                faults.coordinator = true;
            }
            Assumption::RestoreProcedure => {
                faults.restore = true;
                faults.restore_without_procedure = true;
            }
        }
        faults
    }
}

struct World {
    rng: Rng,
    faults: Faults,
    mechanisms: Mechanisms,
    layout: Layout,
    coordinator: Coordinator,
    holders: Vec<Holder>,
    reserve: Duration,
    ttl_ms: u64,
    max_skew_ms: i64,
    /// The current primary's clock minus real time.
    server_offset_ms: i64,
    real_ms: u64,
    events: Vec<Event>,
    order: u64,
    next_key: Key,
    next_request: u64,
    /// Every id issued: who issued it, when (real ms).
    issued: HashMap<u64, (Key, u64)>,
    /// Per holder life: real ms its acknowledged lease expires at on the coordinator.
    acknowledged_until: HashMap<Key, u64>,
    failed_over: bool,
    restored: bool,
    clock_beyond_skew: bool,
    run: Run,
    tracing: bool,
}

pub fn run(seed: u64, mechanisms: Mechanisms, broken: Assumption, tracing: bool) -> Run {
    let mut rng = Rng::new(seed);
    let mut kind = if rng.chance(600) {
        Kind::Rows
    } else {
        Kind::Files
    };
    if broken != Assumption::Kept {
        kind = Kind::Rows;
    }
    let ttl_ms = rng.pick(&[200, 500, 1000, 2000]);
    let max_skew_ms = rng.pick(&[20, 100, 500]);
    let reserve = Duration::from_millis(rng.pick(&[100, 300, 1000]));
    let holders = rng.between(2, 5) as usize;
    let layout = layout();
    let coordinator = Coordinator::new(
        kind,
        layout,
        Duration::from_millis(ttl_ms),
        Duration::from_millis(max_skew_ms),
    );
    let faults = Faults::draw(&mut rng, broken);
    let mut world = World {
        faults,
        server_offset_ms: rng.between(0, 2 * max_skew_ms) as i64 - max_skew_ms as i64,
        rng,
        mechanisms,
        layout,
        coordinator,
        holders: Vec::new(),
        reserve,
        ttl_ms,
        max_skew_ms: max_skew_ms as i64,
        real_ms: START_MS,
        events: Vec::new(),
        order: 0,
        next_key: 1,
        next_request: 1,
        issued: HashMap::new(),
        acknowledged_until: HashMap::new(),
        failed_over: false,
        restored: false,
        clock_beyond_skew: false,
        run: Run {
            ids: 0,
            duplicates: 0,
            late_ids: 0,
            outside: Vec::new(),
            kind,
            faults: HashMap::new(),
            trace: Vec::new(),
            first_problem: None,
        },
        tracing,
    };
    world.log(|| {
        format!(
            "{kind:?} coordinator, {holders} holders, ttl {ttl_ms} ms, reserve {} ms, max_skew {max_skew_ms} ms",
            reserve.as_millis()
        )
    });
    for _ in 0..holders {
        let offset = world.rng.between(0, 2 * max_skew_ms) as i64 - max_skew_ms as i64;
        let boot_offset_ms = world.rng.below(1_000_000);
        world.holders.push(Holder {
            key: 0,
            wall_offset_ms: offset,
            boot_offset_ms,
            paused_until_ms: 0,
            partitioned_until_ms: 0,
            next_wake_ms: 0,
            phase: Phase::Idle,
        });
    }
    for holder in 0..holders {
        world.start(holder);
    }
    for _ in 0..STEPS {
        world.step();
    }
    if world.clock_beyond_skew && (world.failed_over || world.restored) {
        world
            .run
            .outside
            .push("a clock further than max_skew from true time, with a failover or restore");
    }
    world.run
}

impl World {
    fn log(&mut self, line: impl FnOnce() -> String) {
        if self.tracing {
            let at = self.real_ms - START_MS;
            self.run.trace.push(format!("{at:>7} ms  {}", line()));
        }
    }

    fn fault(&mut self, name: &'static str) {
        *self.run.faults.entry(name).or_default() += 1;
    }

    fn server_ms(&self) -> u64 {
        (self.real_ms as i64 + self.server_offset_ms) as u64
    }

    /// How long a message takes: mostly a few ms, sometimes a slow disk or a frozen server.
    fn delay(&mut self) -> u64 {
        match self.rng.below(100) {
            0..=89 => self.rng.below(4),
            90..=97 => self.rng.between(4, 50),
            _ => self.rng.between(50, self.ttl_ms),
        }
    }

    fn send(&mut self, at_ms: u64, message: Message) {
        self.order += 1;
        self.events.push(Event {
            at_ms,
            order: self.order,
            message,
        });
    }

    fn request(&mut self, holder: usize, request: Request) {
        let now = self.real_ms;
        let key = self.holders[holder].key;
        if self.lost(holder) {
            // Lost on the way: the holder's client times out.
            let failed = Reply {
                holder,
                key,
                kind: reply_kind(&request),
                answer: None,
                applied_ms: 0,
                skew_ms: 0,
            };
            self.reply(failed, true);
            return;
        }
        let at = now + self.delay();
        let generation = self.coordinator.generation;
        self.send(
            at,
            Message::ToCoordinator {
                holder,
                key,
                generation,
                request,
            },
        );
    }

    /// Whether a message to or from `holder` is lost now (a partition, or bad luck).
    fn lost(&mut self, holder: usize) -> bool {
        self.real_ms < self.holders[holder].partitioned_until_ms || self.rng.chance(10)
    }

    /// Sends an answer to its holder. A `lost` one never arrives: the holder's client gives up
    /// half the TTL later, with no answer.
    fn reply(&mut self, reply: Reply, lost: bool) {
        let (at, answer) = if lost {
            (self.real_ms + self.ttl_ms / 2, None)
        } else {
            (self.real_ms + self.delay(), reply.answer)
        };
        self.send(at, Message::ToHolder(Reply { answer, ..reply }));
    }

    fn start(&mut self, holder: usize) {
        let key = self.next_key;
        self.next_key += 1;
        let boot = self.holders[holder].boot_ms(self.real_ms);
        let h = &mut self.holders[holder];
        h.key = key;
        h.phase = Phase::Acquiring { sent_boot_ms: boot };
        self.log(|| format!("holder {holder} (life {key}) starts"));
        self.request(holder, Request::Acquire);
    }

    fn step(&mut self) {
        let advance = match self.rng.below(100) {
            0..=39 => self.rng.below(3),
            40..=79 => self.rng.between(1, 30),
            80..=94 => self.rng.between(30, self.ttl_ms / 3),
            _ => self.rng.between(self.ttl_ms / 3, self.ttl_ms),
        };
        let until = self.real_ms + advance;
        self.run_until(until);
        self.act();
    }

    /// Delivers every message due by `until` and wakes renewal threads on time, in order.
    fn run_until(&mut self, until: u64) {
        loop {
            let next_event = self
                .events
                .iter()
                .enumerate()
                .min_by_key(|(_, event)| (event.at_ms, event.order))
                .map(|(index, event)| (event.at_ms, index));
            let next_wake = (0..self.holders.len())
                .filter(|&h| self.holders[h].lease_is_active())
                .map(|h| {
                    (
                        self.holders[h]
                            .next_wake_ms
                            .max(self.holders[h].paused_until_ms),
                        h,
                    )
                })
                .min();
            match (next_event, next_wake) {
                (Some((at, index)), wake) if at <= until && wake.is_none_or(|(w, _)| at <= w) => {
                    self.real_ms = self.real_ms.max(at);
                    let event = self.events.swap_remove(index);
                    self.deliver(event.message);
                }
                (_, Some((at, holder))) if at <= until => {
                    self.real_ms = self.real_ms.max(at);
                    self.renewal_turn(holder);
                }
                _ => break,
            }
        }
        self.real_ms = until;
        let keep = self.ttl_ms * 3 + 5000;
        self.coordinator.trim(self.real_ms, keep);
    }

    fn deliver(&mut self, message: Message) {
        match message {
            Message::ToCoordinator {
                holder,
                key,
                generation,
                request,
            } => {
                let kind = reply_kind(&request);
                let applied_ms = self.real_ms;
                let answer = if generation != self.coordinator.generation {
                    None // sent to a primary that has since died
                } else {
                    Some(self.apply(holder, key, request))
                };
                let skew_ms = self.holders[holder].wall_offset_ms - self.server_offset_ms;
                let lost = self.lost(holder);
                let reply = Reply {
                    holder,
                    key,
                    kind,
                    answer,
                    applied_ms,
                    skew_ms,
                };
                self.reply(reply, lost);
            }
            Message::ToHolder(reply) => {
                let paused_until = self.holders[reply.holder].paused_until_ms;
                if self.real_ms < paused_until {
                    // Read once the holder runs again.
                    self.send(paused_until, Message::ToHolder(reply));
                    return;
                }
                if self.holders[reply.holder].key != reply.key {
                    return; // an earlier life's answer
                }
                self.answered(reply);
            }
        }
    }

    fn apply(&mut self, holder: usize, key: Key, request: Request) -> Answer {
        let real = self.real_ms;
        let server = self.server_ms();
        let local = self.holders[holder].wall_ms(real);
        let mechanisms = self.mechanisms;
        let claim = |worker, lock_file| Claim {
            key,
            worker,
            lock_file,
        };
        match request {
            Request::Acquire => self
                .coordinator
                .acquire(key, local, server, real, &mechanisms),
            Request::FirstReservation {
                worker,
                lock_file,
                state,
            }
            | Request::Renew {
                worker,
                lock_file,
                state,
                ..
            } => self
                .coordinator
                .renew(claim(worker, lock_file), state, server, real, &mechanisms),
            Request::Release {
                worker,
                lock_file,
                state,
            } => self
                .coordinator
                .release(claim(worker, lock_file), state, real, &mechanisms),
        }
    }

    fn acknowledge(&mut self, key: Key, applied_ms: u64) {
        if self.coordinator.kind == Kind::Rows {
            let until = applied_ms + self.ttl_ms;
            let entry = self.acknowledged_until.entry(key).or_default();
            *entry = (*entry).max(until);
        }
    }

    fn answered(&mut self, reply: Reply) {
        let Reply {
            holder,
            kind,
            answer,
            applied_ms,
            skew_ms,
            ..
        } = reply;
        let key = self.holders[holder].key;
        let layout = self.layout;
        match (kind, answer) {
            (ReplyTo::Acquire, Some(Answer::Granted { grant, lock_file })) => {
                let worker = grant.worker_id;
                // The start-up clock check (`max_skew`), on coordinators with a clock.
                let refused_skew = self.coordinator.kind == Kind::Rows
                    && protocol::skew_refused(skew_ms, 0, self.max_skew_ms as u64);
                self.acknowledge(key, applied_ms);
                let renewal = if refused_skew {
                    None
                } else {
                    self.holders[holder].granted(
                        &layout,
                        grant,
                        lock_file,
                        self.reserve,
                        self.real_ms,
                    )
                };
                match renewal {
                    Some(renewal) => {
                        self.log(|| format!("holder {holder} granted worker {worker}, resumes in clock sequence {}", renewal.state.clock_seq));
                        self.request(
                            holder,
                            Request::FirstReservation {
                                worker,
                                lock_file,
                                state: renewal.state,
                            },
                        );
                    }
                    None => {
                        self.log(|| {
                            format!(
                                "holder {holder} refuses worker {worker} (clock skew or record)"
                            )
                        });
                        self.request(
                            holder,
                            Request::Release {
                                worker,
                                lock_file,
                                state: None,
                            },
                        );
                        self.holders[holder].phase = Phase::Idle;
                    }
                }
            }
            (ReplyTo::FirstReservation, Some(Answer::Renewed)) => {
                self.acknowledge(key, applied_ms);
                let deadline_from_answer = !self.mechanisms.deadline_from_request;
                self.holders[holder].started(self.real_ms, deadline_from_answer);
                let wake = self.real_ms;
                self.holders[holder].next_wake_ms = wake;
                self.log(|| format!("holder {holder} started"));
            }
            (ReplyTo::Renew(request), Some(Answer::Renewed)) => {
                let matches = self.holders[holder]
                    .lease()
                    .and_then(|lease| lease.in_flight.as_ref())
                    .is_some_and(|in_flight| in_flight.request == request);
                if matches {
                    self.acknowledge(key, applied_ms);
                }
                let deadline_from_answer = !self.mechanisms.deadline_from_request;
                let covered = self.holders[holder].renewed(
                    &layout,
                    request,
                    self.real_ms,
                    deadline_from_answer,
                );
                for id in covered {
                    self.issue(holder, id);
                }
            }
            (ReplyTo::Release, _) => {}
            (ReplyTo::Renew(request), None) => {
                let matches = self.holders[holder]
                    .lease()
                    .and_then(|lease| lease.in_flight.as_ref())
                    .is_some_and(|in_flight| in_flight.request == request);
                if matches {
                    self.holders[holder].renewal_failed(self.real_ms);
                }
            }
            (ReplyTo::Acquire | ReplyTo::FirstReservation, None) => {
                // Start-up failed (the real `open` returns the error; the worker id, if the
                // grant was applied, expires on the coordinator).
                self.log(|| format!("holder {holder}: start-up failed"));
                self.holders[holder].phase = Phase::Idle;
            }
            (_, Some(_)) => {
                // LEASE_LOST or WORKER_POOL_EXHAUSTED: stop.
                self.log(|| format!("holder {holder}: lost or refused"));
                self.holders[holder].phase = Phase::Idle;
            }
        }
    }

    fn renewal_turn(&mut self, holder: usize) {
        let request = self.next_request;
        self.next_request += 1;
        let now = self.real_ms;
        let h = &mut self.holders[holder];
        let look_ms = h
            .lease()
            .map_or(LOOK_INTERVAL_MS, |lease| lease.renewals.look_interval_ms());
        h.next_wake_ms = now + look_ms;
        match h.renewal_turn(now, request) {
            Turn::Nothing => {}
            Turn::Lost => {
                self.log(|| format!("holder {holder}: lease lost at its deadline"));
                self.holders[holder].phase = Phase::Idle;
            }
            Turn::Cancel => {
                self.log(|| format!("holder {holder}: renewal cancelled"));
                self.holders[holder].renewal_failed(now);
            }
            Turn::Check => {
                let h = &mut self.holders[holder];
                let key = h.key;
                let Some(lease) = h.lease() else { return };
                let claim = Claim {
                    key,
                    worker: lease.worker_id,
                    lock_file: lease.lock_file,
                };
                if !self.coordinator.check(claim, &self.mechanisms) {
                    self.log(|| format!("holder {holder}: its lock file is gone: lease lost"));
                    self.holders[holder].phase = Phase::Idle;
                }
            }
            Turn::Renew(state) => {
                let Some(lease) = self.holders[holder].lease() else {
                    return;
                };
                let (worker, lock_file) = (lease.worker_id, lease.lock_file);
                self.request(
                    holder,
                    Request::Renew {
                        request,
                        worker,
                        lock_file,
                        state,
                    },
                );
            }
        }
    }

    fn issue(&mut self, holder: usize, id: u64) {
        let key = self.holders[holder].key;
        self.run.ids += 1;
        let now = self.real_ms;
        if let Some(&(other, at)) = self.issued.get(&id) {
            self.run.duplicates += 1;
            let parts = self.layout.decode(id).ok();
            if self.run.first_problem.is_none() {
                self.run.first_problem = Some(format!(
                    "id {id} ({parts:?}) issued by life {other} at {} ms and by holder {holder} (life {key}) at {} ms",
                    at - START_MS,
                    now - START_MS
                ));
            }
            self.log(|| format!("DUPLICATE id {id} by holder {holder}"));
        } else {
            self.issued.insert(id, (key, now));
        }
        if self.coordinator.kind == Kind::Rows {
            let until = self.acknowledged_until.get(&key).copied().unwrap_or(0);
            if now >= until {
                self.run.late_ids += 1;
                if self.run.first_problem.is_none() {
                    self.run.first_problem = Some(format!(
                        "holder {holder} issued id {id} at {} ms, after its lease expired on the coordinator at {} ms",
                        now - START_MS,
                        until.saturating_sub(START_MS)
                    ));
                }
            }
        }
    }

    fn act(&mut self) {
        let holder = self.rng.below(self.holders.len() as u64) as usize;
        let now = self.real_ms;
        let paused = now < self.holders[holder].paused_until_ms;
        let mut action = self.rng.below(1000);
        let f = &self.faults;
        let enabled = match action {
            650..=699 => f.pause,
            700..=779 => f.clock_step,
            780..=809 => f.crash,
            810..=839 => f.close,
            840..=869 => f.partition,
            870..=909 => f.coordinator,
            910..=913 => f.restore,
            _ => true,
        };
        if !enabled {
            action = 0; // an id call instead
        }
        match action {
            0..=519 => {
                if paused {
                    return;
                }
                for _ in 0..self.rng.between(1, 3) {
                    match self.holders[holder].next_id(&self.layout, now) {
                        Ok(id) => self.issue(holder, id),
                        Err(Refusal::Lost) => {
                            self.log(|| {
                                format!(
                                    "holder {holder}: id refused, past the deadline: lease lost"
                                )
                            });
                            self.holders[holder].phase = Phase::Idle;
                            break;
                        }
                        Err(Refusal::Renewal) => {
                            // The id call kicks the renewal thread.
                            self.holders[holder].next_wake_ms = now;
                            break;
                        }
                        Err(Refusal::NotRunning | Refusal::Core) => break,
                    }
                }
            }
            520..=649 => {
                if !paused && matches!(self.holders[holder].phase, Phase::Idle) {
                    self.start(holder);
                }
            }
            650..=699 => {
                let long = self.rng.chance(500);
                let pause = if long {
                    self.rng.between(self.ttl_ms / 2, self.ttl_ms * 2)
                } else {
                    self.rng.between(1, self.ttl_ms / 4)
                };
                self.fault("pause");
                self.log(|| format!("holder {holder} paused {pause} ms"));
                let h = &mut self.holders[holder];
                h.paused_until_ms = h.paused_until_ms.max(now + pause);
            }
            700..=779 => self.step_clock(holder),
            780..=809 => {
                self.fault("crash");
                self.log(|| format!("holder {holder} crashes"));
                let key = self.holders[holder].key;
                self.coordinator.crashed(key);
                let h = &mut self.holders[holder];
                h.phase = Phase::Idle;
                h.paused_until_ms = 0;
                h.key = 0; // a dead process answers nothing and sends nothing more
            }
            810..=839 => {
                if paused {
                    return;
                }
                let exact = self.rng.chance(500);
                if let Some((worker, lock_file, state)) = self.holders[holder].released_state(exact)
                {
                    self.fault("close");
                    self.log(|| format!("holder {holder} closes"));
                    self.holders[holder].phase = Phase::Idle;
                    self.request(
                        holder,
                        Request::Release {
                            worker,
                            lock_file,
                            state: Some(state),
                        },
                    );
                }
            }
            840..=869 => {
                let span = self.rng.between(10, self.ttl_ms * 2);
                self.fault("partition");
                self.log(|| format!("holder {holder} partitioned {span} ms"));
                self.holders[holder].partitioned_until_ms = now + span;
            }
            870..=909 => match self.coordinator.kind {
                Kind::Rows => self.fail_over(),
                Kind::Files => {
                    let worker = self.rng.below(self.layout.max_worker_id() + 1);
                    self.fault("lock file removed");
                    self.log(|| format!("the lock file of worker {worker} is removed"));
                    self.coordinator.remove_lock_file(worker);
                }
            },
            910..=913 => self.restore(),
            _ => {
                // An id call's kick, or the renewal thread's wake, out of turn.
                if !paused {
                    self.renewal_turn(holder);
                }
            }
        }
    }

    fn step_clock(&mut self, holder: usize) {
        let skew = self.max_skew_ms;
        let step = match self.rng.below(10) {
            0..=5 => self.rng.between(1, 50) as i64,
            6..=8 => self.rng.between(50, 2000) as i64,
            _ => self.rng.between(2000, 3_600_000) as i64,
        };
        let back = self.rng.chance(500);
        let h = &mut self.holders[holder];
        let offset = if back {
            h.wall_offset_ms - step
        } else {
            h.wall_offset_ms + step
        };
        // Beyond `max_skew` from true time only now and then; back within it otherwise.
        let offset =
            if offset.abs() > skew && (!self.faults.clock_beyond_skew || self.rng.chance(800)) {
                offset.clamp(-skew, skew)
            } else {
                offset
            };
        h.wall_offset_ms = offset;
        if offset.abs() > skew {
            self.clock_beyond_skew = true;
        }
        self.fault("clock step");
        self.log(|| format!("holder {holder}'s clock steps to {offset:+} ms from true time"));
    }

    fn fail_over(&mut self) {
        let lag = if self.rng.chance(250) {
            0 // synchronous replication
        } else {
            self.rng.between(1, self.ttl_ms * 3)
        };
        self.fault("failover");
        self.failed_over = true;
        self.coordinator.fail_over(self.real_ms, lag);
        self.server_offset_ms =
            self.rng.between(0, 2 * self.max_skew_ms as u64) as i64 - self.max_skew_ms;
        self.log(|| format!("FAILOVER to a replica {lag} ms behind"));
    }

    /// The coordinator restored from an older copy. Within the assumptions it is PostgreSQL's
    /// table, restored with the documented procedure: every holder stopped, every row marked
    /// stale, then holders start again. Now and then (outside the assumptions) holders keep
    /// running and nothing is marked, or it is a `file://` pool (no procedure makes that safe).
    fn restore(&mut self) {
        let age = self.rng.between(1, self.ttl_ms * 3);
        let procedure = self.coordinator.kind == Kind::Rows
            && !(self.faults.restore_without_procedure && self.rng.chance(500));
        if !procedure && !self.faults.restore_without_procedure {
            return;
        }
        self.fault("restore");
        self.restored = true;
        if procedure {
            for holder in 0..self.holders.len() {
                let key = self.holders[holder].key;
                self.coordinator.crashed(key);
                self.holders[holder].phase = Phase::Idle;
            }
            self.events.clear();
        } else {
            let reason = "a restore from backup without the documented procedure";
            if !self.run.outside.contains(&reason) {
                self.run.outside.push(reason);
            }
        }
        let marked = procedure && self.mechanisms.restore_procedure;
        self.coordinator.restore(self.real_ms, age, marked);
        self.log(|| format!("RESTORE from a copy {age} ms old (procedure: {procedure}, rows marked stale: {marked})"));
    }
}

fn reply_kind(request: &Request) -> ReplyTo {
    match request {
        Request::Acquire => ReplyTo::Acquire,
        Request::FirstReservation { .. } => ReplyTo::FirstReservation,
        Request::Renew { request, .. } => ReplyTo::Renew(*request),
        Request::Release { .. } => ReplyTo::Release,
    }
}

impl Holder {
    fn lease_is_active(&self) -> bool {
        matches!(self.phase, Phase::Active(_))
    }
}
