//! The simulated world of one schedule: real time, the holders, the messages between them and
//! the coordinator, the faults, and the checks made after every step.

use std::collections::HashMap;
use std::fmt;
use std::time::Duration;

use clockflake::{Field, Layout, State};

use crate::coordinator::{Answer, Applied, Claim, Coordinator, Key, Kind, Route};
use crate::holder::{Holder, Phase, Refusal, Started, Turn};
use crate::rng::Rng;
use crate::{Assumption, Mechanisms};
use clockflake_lease::holder::LOOK_INTERVAL_MS;

/// Real time at the start of every schedule (Unix ms, 2025-10-09).
const START_MS: u64 = 1_760_000_000_000;
const STEPS: usize = 400;
/// At most this many processes in a schedule (copies of a process add some).
const MAX_HOLDERS: usize = 8;
/// ZooKeeper's and etcd's members (a holder talks to one of them).
const MEMBERS: usize = 3;

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
        token: Option<u64>,
        state: State,
    },
    Renew {
        request: u64,
        worker: u64,
        token: Option<u64>,
        state: State,
    },
    Release {
        worker: u64,
        token: Option<u64>,
        state: Option<State>,
    },
    /// etcd: a renewal's second round, after its keep-alive: the fenced record write.
    EtcdRecord {
        reply: ReplyTo,
        /// Real ms of the keep-alive: the lease's TTL counts from then.
        kept_alive_ms: u64,
        /// The renewal's number (0: the first reservation): the write expects the record's
        /// revision its holder last wrote, so an older renewal's write landing after a newer
        /// one's is refused (marks never lowered).
        request: u64,
        worker: u64,
        token: Option<u64>,
        state: State,
    },
}

enum Message {
    /// A request reaching the coordinator (sent to the primary of `generation`, by `route`,
    /// through ZooKeeper's or etcd's member `member`).
    ToCoordinator {
        holder: usize,
        key: Key,
        generation: u64,
        route: Route,
        member: usize,
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
    /// The primary of this generation must not be lost before this real ms (the replicas its
    /// `WAIT` counted acknowledged then), or the answer never comes.
    acknowledged_at: Option<(u64, u64)>,
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
    /// Schedules with a duplicate or a late id within the assumptions (`KEEP_GOING=1`).
    failed: u64,
    outside: u64,
    outside_with_duplicates: u64,
    kinds: HashMap<Kind, u64>,
    faults: HashMap<&'static str, u64>,
}

impl Totals {
    pub fn add(&mut self, run: &Run) {
        self.schedules += 1;
        self.ids += run.ids;
        self.failed += u64::from(run.failed());
        *self.kinds.entry(run.kind).or_default() += 1;
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
        let mut kinds: Vec<_> = self.kinds.iter().collect();
        kinds.sort();
        let mut faults: Vec<_> = self.faults.iter().collect();
        faults.sort();
        write!(
            f,
            "{} ids, {} schedules with duplicates or late ids within the assumptions; {} schedules \
             outside them, {} of which repeated ids (as DESIGN says they may); schedules per \
             coordinator:",
            self.ids, self.failed, self.outside, self.outside_with_duplicates
        )?;
        for (kind, count) in kinds {
            write!(f, " {kind:?} {count}")?;
        }
        write!(f, "; faults:")?;
        for (fault, count) in faults {
            write!(f, " {fault} {count}")?;
        }
        Ok(())
    }
}

/// Which faults a schedule injects: each kind in about half the schedules, so that some
/// schedules stress one kind alone; the ones that leave DESIGN's assumptions rarely, or only
/// when `BREAK=` breaks that assumption.
struct Faults {
    pause: bool,
    clock_step: bool,
    crash: bool,
    close: bool,
    partition: bool,
    /// A failover (row leases, Redis, a ZooKeeper or etcd leader) or a lock file removed
    /// (`file://`).
    coordinator: bool,
    restore: bool,
    /// Copies of a process: a fork (with or without at-fork handlers) at any step.
    fork: bool,
    /// A snapshot of a process, and copies restored from it.
    snapshot: bool,
    /// Redis replicas that lag or are cut off; ZooKeeper or etcd members frozen or lost.
    servers: bool,
    /// Clock steps may leave a clock further than `max_skew` from true time.
    clock_beyond_skew: bool,
    /// A restore may skip the documented procedure.
    restore_without_procedure: bool,
    /// `BREAK=promoted-replica-acknowledged`: Redis promotes its least up-to-date replica.
    worst_replica: bool,
    /// `BREAK=noeviction`: Redis evicts keys.
    eviction: bool,
    /// `BREAK=quorum-survives`: a new leader lacks acknowledged writes.
    quorum_lost: bool,
    /// `BREAK=restored-called`: a process restored from a snapshot does not call `restored()`.
    restored_not_called: bool,
    /// `BREAK=raw-clone-with-page`: copies by raw clone where the kernel has no wipe-on-fork
    /// page.
    raw_clone_without_page: bool,
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
            fork: rng.chance(300),
            snapshot: rng.chance(200),
            servers: rng.chance(500),
            clock_beyond_skew: rng.chance(50),
            restore_without_procedure: rng.chance(100),
            worst_replica: false,
            eviction: false,
            quorum_lost: false,
            restored_not_called: false,
            raw_clone_without_page: rng.chance(20),
        };
        if broken != Assumption::Kept {
            // Only the assumption under test is broken.
            faults.clock_beyond_skew = false;
            faults.restore_without_procedure = false;
            faults.raw_clone_without_page = false;
        }
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
            Assumption::PromotedReplicaAcknowledged => {
                faults.coordinator = true;
                faults.worst_replica = true;
            }
            Assumption::Noeviction => faults.eviction = true,
            Assumption::QuorumSurvives => {
                faults.coordinator = true;
                faults.quorum_lost = true;
            }
            Assumption::RestoredCalled => {
                faults.snapshot = true;
                faults.restored_not_called = true;
            }
            Assumption::RawCloneWithPage => {
                faults.fork = true;
                faults.raw_clone_without_page = true;
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
    /// The current primary's (or leader's) clock minus real time.
    server_offset_ms: i64,
    /// Redis: each server's clock minus real time.
    server_offsets: Vec<i64>,
    real_ms: u64,
    events: Vec<Event>,
    order: u64,
    next_key: Key,
    next_request: u64,
    /// Every id issued: who issued it, when (real ms).
    issued: HashMap<u64, (Key, u64)>,
    /// Per holder life: real ms its acknowledged lease expires at on the coordinator.
    acknowledged_until: HashMap<Key, u64>,
    /// Per holder: how it reaches the coordinator, and through which ZooKeeper or etcd member.
    routes: Vec<Route>,
    members: Vec<usize>,
    /// Per member: real ms until which it is frozen, and until which it is down.
    frozen_until: [u64; MEMBERS],
    down_until: [u64; MEMBERS],
    /// Copies of a process made with `fork` are seen at once by the child handler (`fork`) or
    /// the wipe-on-fork page (any copy of the address space), if the kernel has it.
    wipe_on_fork_page: bool,
    /// A process snapshot: the process as it was, and its boot clock then.
    snapshot: Option<(Holder, u64)>,
    failed_over: bool,
    restored: bool,
    clock_beyond_skew: bool,
    run: Run,
    tracing: bool,
}

fn offset_within(rng: &mut Rng, max_skew_ms: u64) -> i64 {
    rng.between(0, 2 * max_skew_ms) as i64 - max_skew_ms as i64
}

pub fn run(
    seed: u64,
    mechanisms: Mechanisms,
    broken: Assumption,
    focus: Option<Kind>,
    tracing: bool,
) -> Run {
    let mut rng = Rng::new(seed);
    let drawn = match rng.below(100) {
        0..=29 => Kind::Rows,
        30..=49 => Kind::Files,
        50..=69 => Kind::Redis,
        70..=84 => Kind::ZooKeeper,
        _ => Kind::Etcd,
    };
    let kind = focus.unwrap_or(drawn);
    let ttl_ms = rng.pick(&[200, 500, 1000, 2000]);
    let max_skew_ms = rng.pick(&[20, 100, 500]);
    let reserve = Duration::from_millis(rng.pick(&[100, 300, 1000]));
    let holders = rng.between(2, 5) as usize;
    let layout = layout();
    // ZooKeeper may negotiate a shorter session timeout than the one asked for (its
    // `maxSessionTimeout`).
    let server_ttl_ms = if kind == Kind::ZooKeeper && rng.chance(300) {
        ttl_ms / 2
    } else {
        ttl_ms
    };
    // Redis: one or two replicas, `min_replicas` from 0 (`replication=async`) to all of them.
    let redis = (kind == Kind::Redis).then(|| {
        let replicas = rng.between(1, 2) as usize;
        let min_replicas = rng.between(0, replicas as u64);
        Coordinator::redis(&layout, min_replicas, replicas, rng.chance(500))
    });
    let redis_config = redis
        .as_ref()
        .map(|r| (r.min_replicas, r.replicas.len(), r.writable_replicas));
    let coordinator = Coordinator::new(
        kind,
        layout,
        Duration::from_millis(ttl_ms),
        server_ttl_ms,
        Duration::from_millis(max_skew_ms),
        redis,
    );
    let faults = Faults::draw(&mut rng, broken);
    let server_offsets: Vec<i64> = (0..3)
        .map(|_| offset_within(&mut rng, max_skew_ms))
        .collect();
    let wipe_on_fork_page = rng.chance(800) && broken != Assumption::RawCloneWithPage;
    let mut world = World {
        faults,
        server_offset_ms: server_offsets[0],
        server_offsets,
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
        routes: Vec::new(),
        members: Vec::new(),
        frozen_until: [0; MEMBERS],
        down_until: [0; MEMBERS],
        wipe_on_fork_page,
        snapshot: None,
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
            "{kind:?} coordinator, {holders} holders, ttl {ttl_ms} ms (server: {server_ttl_ms} ms), \
             reserve {} ms, max_skew {max_skew_ms} ms, redis (min_replicas, replicas, writable) \
             {redis_config:?}, wipe-on-fork page {wipe_on_fork_page}",
            reserve.as_millis()
        )
    });
    for _ in 0..holders {
        let offset = offset_within(&mut world.rng, max_skew_ms);
        let boot_offset_ms = world.rng.between(1_000, 1_000_000) as i64;
        let boot_anchored = world.rng.chance(500);
        world.add_holder(Holder {
            key: 0,
            wall_offset_ms: offset,
            boot_offset_ms,
            paused_until_ms: 0,
            partitioned_until_ms: 0,
            next_wake_ms: 0,
            phase: Phase::Idle,
            boot_anchored,
            anchor_ms: 0,
            renewal_thread: true,
            identity: 0,
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
                acknowledged_at: None,
            };
            self.reply(failed, true);
            return;
        }
        let mut member = self.members[holder];
        if self.coordinator.kind.quorum() && now < self.down_until[member] {
            // Its member is down: the client reconnects to another one.
            member = (member + 1 + self.rng.below(MEMBERS as u64 - 1) as usize) % MEMBERS;
            self.members[holder] = member;
        }
        // A frozen member reads the request once it thaws.
        let at = (now + self.delay()).max(self.thaw(member));
        let generation = self.coordinator.generation;
        let route = self.routes[holder];
        self.send(
            at,
            Message::ToCoordinator {
                holder,
                key,
                generation,
                route,
                member,
                request,
            },
        );
    }

    /// When ZooKeeper's or etcd's `member` answers again (0: not frozen).
    fn thaw(&self, member: usize) -> u64 {
        if self.coordinator.kind.quorum() {
            self.frozen_until[member]
        } else {
            0
        }
    }

    /// Whether a message to or from `holder` is lost now (a partition, or bad luck).
    fn lost(&mut self, holder: usize) -> bool {
        self.real_ms < self.holders[holder].partitioned_until_ms || self.rng.chance(10)
    }

    /// Sends an answer to its holder, `wait_ms` after the request was applied (a `WAIT`),
    /// through `member` (ZooKeeper, etcd). A `lost` one never arrives: the holder's client
    /// gives up half the TTL later, with no answer.
    fn reply_after(&mut self, reply: Reply, lost: bool, wait_ms: u64, member: usize) {
        let (at, answer) = if lost {
            (self.real_ms + self.ttl_ms / 2, None)
        } else {
            let at = (self.real_ms + wait_ms + self.delay()).max(self.thaw(member));
            (at, reply.answer)
        };
        self.send(at, Message::ToHolder(Reply { answer, ..reply }));
    }

    fn reply(&mut self, reply: Reply, lost: bool) {
        self.reply_after(reply, lost, 0, 0);
    }

    fn add_holder(&mut self, mut holder: Holder) -> usize {
        let index = self.holders.len();
        holder.identity = index as u64;
        self.holders.push(holder);
        // Redis: now and then a process whose URI names one server (the first primary), which
        // a failover may turn into a replica; the others follow the primary (Sentinel).
        let fixed = self.coordinator.kind == Kind::Redis && self.rng.chance(300);
        self.routes.push(if fixed {
            Route::Server(0)
        } else {
            Route::Primary
        });
        let member = self.rng.below(MEMBERS as u64) as usize;
        self.members.push(member);
        index
    }

    fn start(&mut self, holder: usize) {
        let key = self.next_key;
        self.next_key += 1;
        let now = self.real_ms;
        let h = &mut self.holders[holder];
        h.key = key;
        h.renewal_thread = true;
        h.anchor(now);
        // The start-up clock check (`max_skew`), on coordinators with a clock.
        let max_skew_ms = (self.coordinator.kind != Kind::Files).then_some(self.max_skew_ms as u64);
        h.begin_start(&self.layout, self.reserve, max_skew_ms, now);
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
                .filter(|&h| self.holders[h].lease_is_active() && self.holders[h].renewal_thread)
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
        self.coordinator.replicate(self.real_ms);
        let keep = self.ttl_ms * 3 + 5000;
        self.coordinator.trim(self.real_ms, keep);
    }

    fn deliver(&mut self, message: Message) {
        match message {
            Message::ToCoordinator {
                holder,
                key,
                generation,
                route,
                member,
                request,
            } => {
                let kind = reply_kind(&request);
                let applied_ms = match request {
                    Request::EtcdRecord { kept_alive_ms, .. } => kept_alive_ms,
                    _ => self.real_ms,
                };
                let down = self.coordinator.kind.quorum() && self.real_ms < self.down_until[member];
                let current = generation == self.coordinator.generation && !down;
                if let (true, Kind::Etcd) = (current, self.coordinator.kind) {
                    let renewal = match request {
                        Request::FirstReservation {
                            worker,
                            token,
                            state,
                        } => Some((0, worker, token, state)),
                        Request::Renew {
                            request,
                            worker,
                            token,
                            state,
                        } => Some((request, worker, token, state)),
                        _ => None,
                    };
                    if let Some((renewal, worker, token, state)) = renewal {
                        // etcd's renewal is two rounds: the keep-alive, then (once it said the
                        // lease is alive) the fenced record write.
                        let server = self.server_ms();
                        if self.coordinator.etcd_keep_alive(key, server) {
                            let at =
                                (self.real_ms + self.delay() + self.delay()).max(self.thaw(member));
                            self.send(
                                at,
                                Message::ToCoordinator {
                                    holder,
                                    key,
                                    generation,
                                    route,
                                    member,
                                    request: Request::EtcdRecord {
                                        reply: kind,
                                        kept_alive_ms: applied_ms,
                                        request: renewal,
                                        worker,
                                        token,
                                        state,
                                    },
                                },
                            );
                            return;
                        }
                        let lost = self.lost(holder);
                        let skew_ms = self.holders[holder].wall_offset_ms - self.server_offset_ms;
                        let reply = Reply {
                            holder,
                            key,
                            kind,
                            answer: Some(Answer::Lost),
                            applied_ms,
                            skew_ms,
                            acknowledged_at: None,
                        };
                        self.reply_after(reply, lost, 0, member);
                        return;
                    }
                }
                let applied = if !current {
                    // Sent to a primary (leader) that has since died, or through a member that
                    // is down.
                    Applied {
                        answer: None,
                        wait_ms: 0,
                        acknowledged_at_ms: None,
                    }
                } else {
                    self.apply(holder, key, route, request)
                };
                let skew_ms = self.holders[holder].wall_offset_ms - self.server_offset_ms;
                let lost = self.lost(holder);
                let reply = Reply {
                    holder,
                    key,
                    kind,
                    answer: applied.answer,
                    applied_ms,
                    skew_ms,
                    acknowledged_at: applied
                        .acknowledged_at_ms
                        .map(|at| (self.coordinator.generation, at)),
                };
                self.reply_after(reply, lost, applied.wait_ms, member);
            }
            Message::ToHolder(mut reply) => {
                let paused_until = self.holders[reply.holder].paused_until_ms;
                if self.real_ms < paused_until {
                    // Read once the holder runs again.
                    self.send(paused_until, Message::ToHolder(reply));
                    return;
                }
                if self.holders[reply.holder].key != reply.key {
                    return; // an earlier life's answer
                }
                if let Some((generation, at)) = reply.acknowledged_at {
                    // The primary was lost before its replicas acknowledged: no answer came.
                    let ended = self
                        .coordinator
                        .generation_ended_ms
                        .get(generation as usize);
                    if ended.is_some_and(|&ended| ended < at) {
                        reply.answer = None;
                    }
                }
                self.answered(reply);
            }
        }
    }

    fn apply(&mut self, holder: usize, key: Key, route: Route, request: Request) -> Applied {
        let real = self.real_ms;
        let server = self.server_ms();
        let local = self.holders[holder].time_ms(real);
        let identity = self.holders[holder].identity;
        let mechanisms = self.mechanisms;
        let renewal = match request {
            Request::Renew { request, .. } | Request::EtcdRecord { request, .. } => request,
            _ => 0,
        };
        let claim = |worker, token| Claim {
            key,
            identity,
            worker,
            token,
            request: renewal,
        };
        if let (Route::Server(at), Some(redis)) = (route, &self.coordinator.redis) {
            if at != redis.primary {
                // A Redis replica (a former primary) at the address the holder's URI names.
                let replica_ms = (real as i64 + self.server_offsets[at]) as u64;
                let (worker, token, state, renew) = match request {
                    Request::Acquire => (0, None, None, false),
                    Request::FirstReservation {
                        worker,
                        token,
                        state,
                    }
                    | Request::Renew {
                        worker,
                        token,
                        state,
                        ..
                    } => (worker, token, Some(state), true),
                    Request::Release { worker, token, .. } => (worker, token, None, false),
                    Request::EtcdRecord { worker, token, .. } => (worker, token, None, false),
                };
                return self.coordinator.on_replica(
                    at,
                    claim(worker, token),
                    state,
                    renew,
                    replica_ms,
                    real,
                    &mechanisms,
                );
            }
        }
        match request {
            Request::Acquire => {
                let view_lag_ms = match self.rng.below(100) {
                    0..=59 => 0,
                    60..=94 => self.rng.between(1, 20),
                    _ => self.rng.between(20, self.ttl_ms),
                };
                self.coordinator.acquire(
                    key,
                    identity,
                    local,
                    server,
                    real,
                    view_lag_ms,
                    &mechanisms,
                )
            }
            Request::FirstReservation {
                worker,
                token,
                state,
            }
            | Request::Renew {
                worker,
                token,
                state,
                ..
            } => self
                .coordinator
                .renew(claim(worker, token), state, server, real, &mechanisms),
            Request::Release {
                worker,
                token,
                state,
            } => self
                .coordinator
                .release(claim(worker, token), state, server, real, &mechanisms),
            Request::EtcdRecord {
                worker,
                token,
                state,
                ..
            } => {
                self.coordinator
                    .etcd_write(claim(worker, token), state, server, real, &mechanisms)
            }
        }
    }

    fn acknowledge(&mut self, key: Key, applied_ms: u64) {
        if self.coordinator.kind.expires() {
            let until = applied_ms + self.coordinator.server_ttl_ms();
            let entry = self.acknowledged_until.entry(key).or_default();
            *entry = (*entry).max(until);
        }
    }

    /// Does what a start-up step says: the first reservation (again), a worker id given back,
    /// or the generator running.
    fn start_step(&mut self, holder: usize, started: Started) {
        match started {
            Started::Persist(worker, token, state) => {
                self.log(|| {
                    format!(
                        "holder {holder}: first reservation for worker {worker} in clock \
                         sequence {}",
                        state.clock_seq
                    )
                });
                self.request(
                    holder,
                    Request::FirstReservation {
                        worker,
                        token,
                        state,
                    },
                );
            }
            Started::Refused(granted) => {
                self.log(|| format!("holder {holder}: start-up refused"));
                if let Some((worker, token)) = granted {
                    self.request(
                        holder,
                        Request::Release {
                            worker,
                            token,
                            state: None,
                        },
                    );
                }
            }
            Started::Running => {
                self.holders[holder].next_wake_ms = self.real_ms;
                self.log(|| format!("holder {holder} started"));
            }
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
            (ReplyTo::Acquire, Some(Answer::Granted { grant, token })) => {
                let worker = grant.worker_id;
                self.acknowledge(key, applied_ms);
                let started = self.holders[holder].granted(grant, token, skew_ms, self.real_ms);
                self.log(|| format!("holder {holder} granted worker {worker}"));
                self.start_step(holder, started);
            }
            (ReplyTo::FirstReservation, Some(Answer::Renewed)) => {
                self.acknowledge(key, applied_ms);
                let deadline_from_answer = !self.mechanisms.deadline_from_request;
                let started = self.holders[holder].persisted(self.real_ms, deadline_from_answer);
                self.start_step(holder, started);
            }
            (ReplyTo::Renew(request), Some(Answer::Renewed)) => {
                let matches = self.holders[holder]
                    .lease()
                    .and_then(|lease| lease.in_flight.as_ref())
                    .is_some_and(|in_flight| in_flight.request == request);
                if matches {
                    self.acknowledge(key, applied_ms);
                }
                self.log(|| {
                    format!(
                        "holder {holder}: renewal {request} acknowledged (applied at {} ms)",
                        applied_ms - START_MS
                    )
                });
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
                // Start-up failed: the real `open` gives a granted worker id back untouched
                // and returns the error (a grant applied but not answered expires on the
                // coordinator).
                self.log(|| format!("holder {holder}: start-up failed"));
                let started = self.holders[holder].start_failed();
                self.start_step(holder, started);
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
                let (key, identity) = (h.key, h.identity);
                let Some(lease) = h.lease() else { return };
                let claim = Claim {
                    key,
                    identity,
                    worker: lease.worker_id,
                    token: lease.token,
                    request: 0,
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
                let (worker, token) = (lease.worker_id, lease.token);
                self.request(
                    holder,
                    Request::Renew {
                        request,
                        worker,
                        token,
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
        if self.tracing && std::env::var_os("TRACE_IDS").is_some() {
            let parts = self.layout.decode(id).ok();
            let (t, w) = (
                self.holders[holder].time_ms(now) - START_MS,
                self.holders[holder].wall_ms(now) - START_MS,
            );
            self.log(|| format!("holder {holder} (life {key}) issues {parts:?} time {t} wall {w}"));
        }
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
        if self.coordinator.kind.expires() {
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
            914..=929 => f.fork,
            930..=935 => f.snapshot,
            936..=951 => f.servers,
            952..=955 => f.eviction,
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
                // A lock shared with a copy of the process stays with the copy.
                let shared = (0..self.holders.len())
                    .any(|other| other != holder && self.holders[other].key == key);
                if !shared {
                    self.coordinator.crashed(key);
                }
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
                if let Some((worker, token, state)) = self.holders[holder].released_state(exact) {
                    self.fault("close");
                    self.log(|| format!("holder {holder} closes"));
                    self.holders[holder].phase = Phase::Idle;
                    self.request(
                        holder,
                        Request::Release {
                            worker,
                            token,
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
                Kind::Redis => self.redis_fail_over(),
                Kind::ZooKeeper | Kind::Etcd => self.new_leader(),
            },
            910..=913 => self.restore(),
            914..=929 => {
                if !paused {
                    self.fork(holder);
                }
            }
            930..=935 => self.snapshot(holder),
            936..=951 => match self.coordinator.kind {
                Kind::Redis => self.replica_fault(),
                Kind::ZooKeeper | Kind::Etcd => self.member_fault(),
                Kind::Rows | Kind::Files => {}
            },
            952..=955 => {
                if self.coordinator.kind == Kind::Redis {
                    let worker = self.rng.below(self.layout.max_worker_id() + 1);
                    let hash = self.rng.chance(700);
                    self.fault("eviction");
                    self.outside("Redis evicted a key (maxmemory-policy other than noeviction)");
                    self.log(|| {
                        format!(
                            "Redis evicts worker {worker}'s {}",
                            if hash { "hash" } else { "lease key" }
                        )
                    });
                    self.coordinator.evict(worker, hash, now);
                }
            }
            _ => {
                // An id call's kick, or the renewal thread's wake, out of turn.
                if !paused {
                    self.renewal_turn(holder);
                }
            }
        }
    }

    fn outside(&mut self, reason: &'static str) {
        if !self.run.outside.contains(&reason) {
            self.run.outside.push(reason);
        }
    }

    /// A copy of `holder`'s process by `fork()` (at-fork handlers run) or a raw `clone`
    /// (none run). The child notices it is a copy at its first call when the child handler ran
    /// or the wipe-on-fork page was wiped (`clockflake_lease::fork`); then, as lease's
    /// `PerProcess`, it forgets the inherited lease and leases a worker id of its own.
    /// Unnoticed, it goes on with the parent's lease, limits and generator, with no renewal
    /// thread (a fork copies only the thread that forked).
    fn fork(&mut self, holder: usize) {
        if self.holders.len() >= MAX_HOLDERS || self.holders[holder].key == 0 {
            return;
        }
        // A raw `clone` or `_Fork` where the kernel has no wipe-on-fork page (before Linux
        // 4.14, other Unixes) is outside the assumptions: nothing can see it.
        let raw_clone = if self.wipe_on_fork_page {
            self.rng.chance(500)
        } else {
            self.faults.raw_clone_without_page && self.rng.chance(500)
        };
        if raw_clone && !self.wipe_on_fork_page {
            self.outside("a copy by raw clone where the kernel has no wipe-on-fork page");
        }
        let handler = !raw_clone && self.mechanisms.at_fork_handler;
        let page = self.wipe_on_fork_page && self.mechanisms.wipe_on_fork;
        let noticed = handler || page;
        self.fault(if raw_clone {
            "copy by raw clone"
        } else {
            "copy by fork"
        });
        let mut child = self.holders[holder].copy(&self.layout);
        child.renewal_thread = false;
        if noticed {
            child.key = 0;
            child.phase = Phase::Idle;
        }
        let route = self.routes[holder];
        let member = self.members[holder];
        let index = self.add_holder(child);
        self.routes[index] = route;
        self.members[index] = member;
        self.log(|| {
            format!(
                "holder {holder} copied by {} into holder {index} (noticed: {noticed})",
                if raw_clone { "a raw clone" } else { "fork" }
            )
        });
    }

    /// A snapshot of `holder`'s process (CRIU, a VM snapshot), or a copy restored from the one
    /// taken before, its boot clock where it was (CRIU's time namespaces). Within the
    /// assumptions the restored copy calls `restored()` first: a new fork generation, so its
    /// lease is forgotten and it leases anew; otherwise it runs on with the lease it had, its
    /// renewal thread too.
    fn snapshot(&mut self, holder: usize) {
        match self.snapshot.take() {
            None => {
                if self.holders[holder].lease_is_active() {
                    let boot = self.holders[holder].boot_ms(self.real_ms);
                    self.snapshot = Some((self.holders[holder].copy(&self.layout), boot));
                    self.fault("snapshot");
                    self.log(|| format!("holder {holder}'s process is snapshotted"));
                }
            }
            Some((image, boot)) => {
                if self.holders.len() >= MAX_HOLDERS {
                    return;
                }
                let mut copy = image.copy(&self.layout);
                copy.set_boot_ms(self.real_ms, boot);
                let calls_restored = !self.faults.restored_not_called || self.rng.chance(300);
                if calls_restored {
                    copy.key = 0;
                    copy.phase = Phase::Idle;
                } else {
                    self.outside("a process restored from a snapshot without restored()");
                }
                self.fault("restore of a snapshot");
                let index = self.add_holder(copy);
                self.log(|| {
                    format!("a copy restored from the snapshot runs as holder {index} (restored(): {calls_restored})")
                });
            }
        }
    }

    /// A Redis replica's link: cut off, healed, or a new lag (sometimes beyond `WAIT`'s
    /// timeout).
    fn replica_fault(&mut self) {
        let now = self.real_ms;
        self.coordinator.replicate(now);
        let ttl_ms = self.ttl_ms;
        let choice = self.rng.below(100);
        let lag = match self.rng.below(10) {
            0..=6 => self.rng.between(1, 10),
            _ => self.rng.between(10, ttl_ms),
        };
        let Some(redis) = &mut self.coordinator.redis else {
            return;
        };
        let index = (choice as usize) % redis.replicas.len();
        let replica = &mut redis.replicas[index];
        let what = if replica.cut_off {
            replica.cut_off = false;
            "healed"
        } else if choice < 50 {
            replica.cut_off = true;
            "cut off"
        } else {
            replica.lag_ms = lag;
            "lagging"
        };
        let server = replica.server;
        self.fault("replica link");
        self.log(|| format!("Redis replica {server}: {what} (lag {lag} ms)"));
    }

    /// A ZooKeeper or etcd member frozen (its clients' requests and answers wait for the
    /// thaw) or lost for a while (its clients reconnect to another; what was in flight there
    /// is lost).
    fn member_fault(&mut self) {
        let member = self.rng.below(MEMBERS as u64) as usize;
        let span = self.rng.between(10, self.ttl_ms * 2);
        let until = self.real_ms + span;
        if self.rng.chance(500) {
            self.fault("member frozen");
            self.frozen_until[member] = self.frozen_until[member].max(until);
            self.log(|| format!("member {member} frozen {span} ms"));
        } else {
            self.fault("member lost");
            self.down_until[member] = self.down_until[member].max(until);
            self.log(|| format!("member {member} lost for {span} ms"));
        }
    }

    /// A Redis failover: Sentinel promotes the most up-to-date replica (within the
    /// assumptions), or the least (`BREAK=promoted-replica-acknowledged`).
    fn redis_fail_over(&mut self) {
        let worst = self.faults.worst_replica && self.rng.chance(700);
        let now = self.real_ms;
        let Some((server, behind)) = self.coordinator.redis_fail_over(now, worst) else {
            return;
        };
        if worst && behind > 0 {
            self.outside("a Redis failover to a replica that had not acknowledged");
        }
        self.fault("failover");
        self.failed_over = true;
        self.server_offset_ms = self.server_offsets[server];
        self.log(|| format!("REDIS FAILOVER to server {server}, {behind} ms behind"));
    }

    /// A ZooKeeper or etcd leader lost: a new leader with every acknowledged write (within the
    /// assumptions), or one lacking the last ones (`BREAK=quorum-survives`).
    fn new_leader(&mut self) {
        let lag = if self.faults.quorum_lost && self.rng.chance(700) {
            self.rng.between(1, self.ttl_ms * 3)
        } else {
            0
        };
        if lag > 0 {
            self.outside("a new leader without every acknowledged write (no quorum survived)");
        }
        self.fault("leader lost");
        self.failed_over = true;
        let offset = offset_within(&mut self.rng, self.max_skew_ms as u64);
        let change = offset - self.server_offset_ms;
        self.server_offset_ms = offset;
        let (now, server) = (self.real_ms, self.server_ms());
        self.coordinator.new_leader(now, lag, server, change);
        self.log(|| format!("NEW LEADER, {lag} ms behind"));
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
        Request::EtcdRecord { reply, .. } => *reply,
    }
}

impl Holder {
    fn lease_is_active(&self) -> bool {
        matches!(self.phase, Phase::Active(_))
    }
}
