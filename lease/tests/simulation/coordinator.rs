//! The simulated coordinators, keeping the `Coordinator` contract (lease/src/coordinator.rs):
//! one holder per worker id at a time; a leased worker id is not granted again until `ttl`
//! after its last renewal reached the server; whoever is granted it receives the record stored
//! last. Five kinds, each named as docs/DESIGN.md names its coordinator:
//! - `Rows` (`postgres://`): row leases on a primary whose every write reaches an asynchronous
//!   replica `lag` ms later; a failover promotes the replica (what it had not received is lost)
//!   on a new timeline, and a grant of a row written on an older timeline raises its marks with
//!   the shipped rule (`protocol::failover`), unless that mechanism is switched off.
//! - `Files` (`file://`): lock files with state files beside them; the lock file can be removed
//!   while held, and the holder's check (the lock file at the path is the one it locked) is the
//!   shipped mechanism's rule, unless switched off.
//! - `Redis` (`redis://`, lease/src/redis/mod.rs): a lease key `EPOCH OWNER` that expires on
//!   the server's clock and a hash (epoch, record) that does not; a primary and one or two
//!   replicas, each receiving the primary's writes after its own lag (or cut off); with
//!   `min_replicas=N` every grant and renewal is followed by `WAIT N` with a quarter of the TTL
//!   as its timeout, and one fewer replicas acknowledged does not count (a grant is released);
//!   `ROLE` before each request (a replica refuses); a failover promotes a replica (the most
//!   up-to-date one, as Sentinel does; with `replication=async` only a switchover that waited
//!   for it) and the old primary comes back as its replica, writable or not.
//! - `ZooKeeper` (`zookeeper://`, lease/src/zookeeper/): sessions that expire on the leader's
//!   clock `session timeout` after the last request received (the server may negotiate a
//!   shorter timeout than asked), an ephemeral `instances/<worker>` node per held worker id,
//!   persistent `servers/<identity>_<worker>` nodes holding the records (a newcomer merges every
//!   node naming its worker id and deletes the others), quorum writes (a leader change loses
//!   nothing acknowledged, and gives every session a fresh timeout).
//! - `Etcd` (`etcd://`, modelled on etcd's documented semantics): a lease per holder with a TTL
//!   on the leader's clock (a keep-alive resets it; a new leader gives every lease its full TTL
//!   again), the worker key attached to it and created by a transaction only if absent
//!   (`create_revision == 0`), the record in a key of its own written only while the worker key
//!   is still on the writer's lease; quorum writes.

use std::time::Duration;

use clockflake::{Layout, State};
use clockflake_lease::protocol::{self, failover};
use clockflake_lease::Grant;

use crate::Mechanisms;

/// Which holder (and which of its lives) did something: a restarted holder is a new key.
pub type Key = u64;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    Rows,
    Files,
    Redis,
    ZooKeeper,
    Etcd,
}

impl Kind {
    /// Whether leases expire on the coordinator (a TTL), rather than with their process.
    pub fn expires(self) -> bool {
        self != Kind::Files
    }

    /// Whether every acknowledged write survives a failover (a quorum), within the assumptions.
    pub fn quorum(self) -> bool {
        matches!(self, Kind::ZooKeeper | Kind::Etcd)
    }
}

#[derive(Clone, Debug)]
struct Row {
    /// Who holds the lease (`Rows`), the lease key (`Redis`), the ephemeral node (`ZooKeeper`:
    /// the session), the worker key (`Etcd`: the lease); `Files`: who holds the lock.
    owner: Option<Key>,
    /// Server ms the lease (session, etcd lease, Redis key) expires at.
    expires_ms: u64,
    /// The stored record (the row's marks; `file://`'s state file; Redis's hash; etcd's state
    /// key). `ZooKeeper` keeps its records in `Store::nodes`.
    state: Option<State>,
    /// `Rows`: the timeline the row was last written on.
    timeline: u64,
    /// `Files`: the identity (device and inode) of the lock file at the path; `None` once
    /// removed.
    lock_file: Option<u64>,
    /// `Redis`: the hash's epoch (0: no hash); `Etcd`: the worker key's create revision (0:
    /// absent).
    epoch: u64,
    /// Real ms of the last write to this row (a writable Redis replica's own writes are shadowed
    /// by later ones replicated from its primary).
    written_ms: u64,
    /// `Redis`, `Etcd`: the number of the renewal stored last under the current grant (Redis's
    /// `renewal` field; etcd's record revision its holder expects).
    last_request: u64,
}

impl Row {
    const EMPTY: Row = Row {
        owner: None,
        expires_ms: 0,
        state: None,
        timeline: 1,
        lock_file: None,
        epoch: 0,
        written_ms: 0,
        last_request: 0,
    };
}

/// A persistent `servers/<identity>_<worker>` node of ZooKeeper.
#[derive(Clone, Debug)]
struct Node {
    identity: u64,
    worker: u64,
    state: Option<State>,
    /// The number of the renewal written last (its version, as far as ordering goes).
    last_request: u64,
}

#[derive(Clone, Debug)]
struct Store {
    rows: Vec<Row>,
    timeline: u64,
    nodes: Vec<Node>,
    /// `Etcd`: the store's revision.
    revision: u64,
    /// `Etcd`: each holder's lease and the server ms it expires at.
    leases: Vec<(Key, u64)>,
}

impl Store {
    fn lease_expiry(&self, key: Key) -> u64 {
        self.leases
            .iter()
            .find(|(holder, _)| *holder == key)
            .map_or(0, |(_, expires)| *expires)
    }
}

/// Who says it holds a worker id, in a renewal, a check or a release: the holder's life (its
/// owner token, session or etcd lease), its identity (`ZooKeeper`), the worker id, and the
/// token the grant returned: the lock file's identity (`Files`), the hash's epoch (`Redis`),
/// the worker key's create revision (`Etcd`).
#[derive(Clone, Copy, Debug)]
pub struct Claim {
    pub key: Key,
    pub identity: u64,
    pub worker: u64,
    pub token: Option<u64>,
    /// The renewal's number (0: the first reservation, a release): ZooKeeper writes the record
    /// at the version its holder last wrote, so a renewal that reaches the server after a newer
    /// one fails (`BadVersion`).
    pub request: u64,
}

/// What a request came back with.
#[derive(Clone, Debug, PartialEq)]
pub enum Answer {
    Granted {
        grant: Grant,
        token: Option<u64>,
    },
    Renewed,
    Released,
    /// `LEASE_LOST`: the worker id is someone else's (or the row was written before a failover).
    Lost,
    /// `WORKER_POOL_EXHAUSTED`.
    Exhausted,
}

/// A Redis replica: the last primary write it has applied (real ms), how far behind it runs,
/// whether its link to the primary is cut.
#[derive(Clone, Debug)]
pub struct Replica {
    pub server: usize,
    pub applied_ms: u64,
    pub lag_ms: u64,
    pub cut_off: bool,
}

/// A Redis deployment: which server is the primary, its replicas, `min_replicas`, whether
/// replicas accept writes (`replica-read-only no`), and the writes made on each replica itself
/// (kept by it, not propagated).
pub struct Redis {
    pub min_replicas: u64,
    pub primary: usize,
    pub replicas: Vec<Replica>,
    pub writable_replicas: bool,
    overlays: Vec<Vec<Option<Row>>>,
}

/// How a request reaches the coordinator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// To whichever server is the primary (or leader) now.
    Primary,
    /// To one server by its address (a one-host `redis://` URI naming a server that a failover
    /// may have turned into a replica).
    Server(usize),
}

/// What a request's answer waits for besides the network.
pub struct Applied {
    pub answer: Option<Answer>,
    /// How long the server took to answer (a `WAIT` for replicas).
    pub wait_ms: u64,
    /// `Some`: the answer counts only if the primary was not lost before then (real ms): the
    /// replicas it waited for acknowledged at that time.
    pub acknowledged_at_ms: Option<u64>,
}

impl Applied {
    fn now(answer: Answer) -> Applied {
        Applied {
            answer: Some(answer),
            wait_ms: 0,
            acknowledged_at_ms: None,
        }
    }

    fn failed(wait_ms: u64) -> Applied {
        Applied {
            answer: None,
            wait_ms,
            acknowledged_at_ms: None,
        }
    }
}

pub struct Coordinator {
    pub kind: Kind,
    layout: Layout,
    ttl: Duration,
    /// The TTL the server applies: ZooKeeper's negotiated session timeout (at most its
    /// `maxSessionTimeout`); the TTL otherwise.
    server_ttl_ms: u64,
    max_skew: Duration,
    store: Store,
    /// The stores after each write (real ms): the replica that lags, the backups.
    history: Vec<(u64, Store)>,
    /// Lock-file identities handed out so far (`Files`).
    inodes: u64,
    /// Bumped at every failover: requests in flight to the old primary fail.
    pub generation: u64,
    /// Real ms at which each generation ended (its primary lost).
    pub generation_ended_ms: Vec<u64>,
    pub redis: Option<Redis>,
}

impl Coordinator {
    pub fn new(
        kind: Kind,
        layout: Layout,
        ttl: Duration,
        server_ttl_ms: u64,
        max_skew: Duration,
        redis: Option<Redis>,
    ) -> Coordinator {
        let workers = (layout.max_worker_id() + 1) as usize;
        Coordinator {
            kind,
            layout,
            ttl,
            server_ttl_ms,
            max_skew,
            store: Store {
                rows: vec![Row::EMPTY; workers],
                timeline: 1,
                nodes: Vec::new(),
                revision: 1,
                leases: Vec::new(),
            },
            history: Vec::new(),
            inodes: 0,
            generation: 0,
            generation_ended_ms: Vec::new(),
            redis,
        }
    }

    pub fn redis(
        layout: &Layout,
        min_replicas: u64,
        replicas: usize,
        writable_replicas: bool,
    ) -> Redis {
        let workers = (layout.max_worker_id() + 1) as usize;
        Redis {
            min_replicas,
            primary: 0,
            replicas: (1..=replicas)
                .map(|server| Replica {
                    server,
                    applied_ms: 0,
                    lag_ms: 1,
                    cut_off: false,
                })
                .collect(),
            writable_replicas,
            overlays: vec![vec![None; workers]; replicas + 1],
        }
    }

    /// The TTL the server applies (real ms).
    pub fn server_ttl_ms(&self) -> u64 {
        self.server_ttl_ms
    }

    fn ttl_ms(&self) -> u64 {
        self.ttl.as_millis() as u64
    }

    fn wrote(&mut self, real_ms: u64) {
        self.history.push((real_ms, self.store.clone()));
    }

    fn stale(&self, row: &Row) -> bool {
        row.timeline < self.store.timeline
    }

    /// The store as it was at real ms `at_ms` (what a replica that far behind holds).
    fn store_at(&self, at_ms: u64) -> Option<Store> {
        self.history
            .iter()
            .rev()
            .find(|(at, _)| *at <= at_ms)
            .map(|(_, store)| store.clone())
    }

    /// Leases past their expiry are gone: ZooKeeper's expired sessions' ephemeral nodes, etcd's
    /// expired leases' keys, Redis's expired lease keys.
    fn expire(&mut self, server_ms: u64) {
        if self.kind == Kind::Etcd {
            self.store
                .leases
                .retain(|(_, expires)| *expires > server_ms);
            let store = &mut self.store;
            for row in &mut store.rows {
                let alive = row
                    .owner
                    .is_some_and(|key| store.leases.iter().any(|(holder, _)| *holder == key));
                if row.owner.is_some() && !alive {
                    row.owner = None;
                    row.epoch = 0; // the key goes with its lease
                }
            }
            return;
        }
        if matches!(self.kind, Kind::ZooKeeper | Kind::Redis) {
            for row in &mut self.store.rows {
                if row.owner.is_some() && row.expires_ms <= server_ms {
                    row.owner = None;
                }
            }
        }
    }

    fn taken(&self, row: &Row, server_ms: u64) -> bool {
        match self.kind {
            Kind::Files => row.owner.is_some() && row.lock_file.is_some(),
            _ => row.owner.is_some() && row.expires_ms > server_ms,
        }
    }

    /// `Coordinator::acquire` at server time `server_ms` (the starting holder's clock reads
    /// `local_ms`): the first free worker id whose record the holder can use at once, else the
    /// one usable first. `view_lag_ms`: how far behind the store the etcd member that lists the
    /// candidates is (a serializable read).
    #[allow(clippy::too_many_arguments)]
    pub fn acquire(
        &mut self,
        key: Key,
        identity: u64,
        local_ms: u64,
        server_ms: u64,
        real_ms: u64,
        view_lag_ms: u64,
        mechanisms: &Mechanisms,
    ) -> Applied {
        self.expire(server_ms);
        match self.kind {
            Kind::ZooKeeper => {
                return self.acquire_zookeeper(key, identity, server_ms, real_ms, mechanisms)
            }
            Kind::Etcd => {
                return self.acquire_etcd(
                    key,
                    local_ms,
                    server_ms,
                    real_ms,
                    view_lag_ms,
                    mechanisms,
                )
            }
            _ => {}
        }
        let fence_at = server_ms + failover::fence_ms(self.ttl, self.max_skew);
        let mut free: Vec<(u64, usize)> = Vec::new();
        for (worker, row) in self.store.rows.iter().enumerate() {
            if !self.taken(row, server_ms) {
                let state = self.granted_state(worker, fence_at, mechanisms);
                let ready = protocol::ready_at_ms(&self.layout, state.as_ref(), local_ms);
                free.push((ready, worker));
            }
        }
        free.sort();
        let Some(&(_, worker)) = free.first() else {
            return Applied::now(Answer::Exhausted);
        };
        let state = self.granted_state(worker, fence_at, mechanisms);
        let timeline = self.store.timeline;
        let token = match self.kind {
            Kind::Files => {
                let row = &self.store.rows[worker];
                Some(row.lock_file.unwrap_or_else(|| {
                    self.inodes += 1;
                    self.inodes
                }))
            }
            Kind::Redis => Some(self.store.rows[worker].epoch + 1),
            _ => None,
        };
        let ttl_ms = self.server_ttl_ms;
        let row = &mut self.store.rows[worker];
        row.owner = Some(key);
        row.expires_ms = server_ms + ttl_ms;
        row.state = state;
        row.timeline = timeline;
        row.written_ms = real_ms;
        row.last_request = 0;
        match self.kind {
            Kind::Files => row.lock_file = token,
            Kind::Redis => row.epoch += 1,
            _ => {}
        }
        self.wrote(real_ms);
        let granted = Answer::Granted {
            grant: Grant {
                worker_id: worker as u64,
                state,
                ttl: self.kind.expires().then_some(self.ttl),
            },
            token,
        };
        if self.kind == Kind::Redis {
            let claim = Claim {
                key,
                identity,
                worker: worker as u64,
                token,
                request: 0,
            };
            let waited = self.await_replicas(real_ms, mechanisms);
            if waited.answer.is_none() {
                // Fewer replicas acknowledged the grant: the coordinator releases it.
                self.release(claim, None, server_ms, real_ms, mechanisms);
                return waited;
            }
            return Applied {
                answer: Some(granted),
                ..waited
            };
        }
        Applied::now(granted)
    }

    /// ZooKeeper's start-up (lease/src/zookeeper/claim.rs): this identity's free worker ids
    /// first, then ids no `servers` node names, then the others; the ephemeral node created by
    /// the holder's session; every `servers` node naming the worker id merged into this
    /// identity's, the others deleted.
    fn acquire_zookeeper(
        &mut self,
        key: Key,
        identity: u64,
        server_ms: u64,
        real_ms: u64,
        mechanisms: &Mechanisms,
    ) -> Applied {
        let named = |worker: u64, identity: Option<u64>| {
            self.store
                .nodes
                .iter()
                .any(|node| node.worker == worker && identity.is_none_or(|i| node.identity == i))
        };
        let mut free: Vec<(u8, usize)> = Vec::new();
        for (worker, row) in self.store.rows.iter().enumerate() {
            if !self.taken(row, server_ms) {
                let rank = if named(worker as u64, Some(identity)) {
                    0
                } else if !named(worker as u64, None) {
                    1
                } else {
                    2
                };
                free.push((rank, worker));
            }
        }
        free.sort();
        let Some(&(_, worker)) = free.first() else {
            return Applied::now(Answer::Exhausted);
        };
        let w = worker as u64;
        let mut merged: Option<State> = None;
        for node in &self.store.nodes {
            let include = node.worker == w && (mechanisms.merge_marks || node.identity == identity);
            if let (true, Some(state)) = (include, node.state) {
                merged = Some(match merged {
                    None => state,
                    Some(mut acc) => {
                        for (slot, mark) in acc.high_water_ms.iter_mut().zip(state.high_water_ms) {
                            *slot = (*slot).max(mark);
                        }
                        acc
                    }
                });
            }
        }
        if mechanisms.merge_marks {
            self.store
                .nodes
                .retain(|node| node.worker != w || node.identity == identity);
        }
        match self
            .store
            .nodes
            .iter_mut()
            .find(|node| node.worker == w && node.identity == identity)
        {
            Some(node) => {
                node.state = merged;
                node.last_request = 0;
            }
            None => self.store.nodes.push(Node {
                identity,
                worker: w,
                state: merged,
                last_request: 0,
            }),
        }
        let ttl_ms = self.server_ttl_ms;
        let row = &mut self.store.rows[worker];
        row.owner = Some(key);
        row.expires_ms = server_ms + ttl_ms;
        row.written_ms = real_ms;
        self.wrote(real_ms);
        // The holder's terms: the session timeout the server negotiated (or, with that
        // mechanism off, the one it asked for).
        let ttl = if mechanisms.negotiated_timeout {
            Duration::from_millis(self.server_ttl_ms)
        } else {
            self.ttl
        };
        Applied::now(Answer::Granted {
            grant: Grant {
                worker_id: w,
                state: merged,
                ttl: Some(ttl),
            },
            token: None,
        })
    }

    /// etcd's start-up: a lease granted, the candidates listed from the member's view (up to
    /// `view_lag_ms` behind), then for each a transaction that creates the worker key on the
    /// lease only if it is absent (without that compare, the first candidate is put over
    /// whatever is there), reading the record in the same transaction.
    fn acquire_etcd(
        &mut self,
        key: Key,
        local_ms: u64,
        server_ms: u64,
        real_ms: u64,
        view_lag_ms: u64,
        mechanisms: &Mechanisms,
    ) -> Applied {
        let view = match view_lag_ms {
            0 => self.store.clone(),
            lag => self
                .store_at(real_ms.saturating_sub(lag))
                .unwrap_or_else(|| self.store.clone()),
        };
        let mut free: Vec<(u64, usize)> = Vec::new();
        for (worker, row) in view.rows.iter().enumerate() {
            let live = row
                .owner
                .is_some_and(|owner| view.lease_expiry(owner) > server_ms);
            if !(row.epoch != 0 && live) {
                let ready = protocol::ready_at_ms(&self.layout, row.state.as_ref(), local_ms);
                free.push((ready, worker));
            }
        }
        free.sort();
        let ttl_ms = self.server_ttl_ms;
        self.store.leases.retain(|(holder, _)| *holder != key);
        self.store.leases.push((key, server_ms + ttl_ms));
        for (_, worker) in free {
            let absent = self.store.rows[worker].epoch == 0;
            if absent || !mechanisms.create_if_absent {
                self.store.revision += 1;
                let revision = self.store.revision;
                let row = &mut self.store.rows[worker];
                row.owner = Some(key);
                row.epoch = revision;
                row.expires_ms = server_ms + ttl_ms;
                row.written_ms = real_ms;
                row.last_request = 0;
                let state = row.state;
                self.wrote(real_ms);
                return Applied::now(Answer::Granted {
                    grant: Grant {
                        worker_id: worker as u64,
                        state,
                        ttl: Some(self.ttl),
                    },
                    token: Some(revision),
                });
            }
        }
        Applied::now(Answer::Exhausted)
    }

    /// The record a grant of `row` hands over: a stale row's marks raised past the fence.
    fn granted_state(
        &self,
        worker: usize,
        fence_at: u64,
        mechanisms: &Mechanisms,
    ) -> Option<State> {
        let row = &self.store.rows[worker];
        if self.kind == Kind::Rows && self.stale(row) && mechanisms.failover_fence {
            let mut state = failover::fenced(&self.layout, row.state, fence_at);
            state.worker_id = worker as u64;
            Some(state)
        } else {
            row.state
        }
    }

    /// Whether the claim still holds as far as its holder can tell: its row (owner, current
    /// timeline), or its lock file still at the path.
    fn holds(&self, claim: Claim, server_ms: u64, mechanisms: &Mechanisms) -> bool {
        let row = &self.store.rows[claim.worker as usize];
        let owner = row.owner == Some(claim.key);
        match self.kind {
            Kind::Rows => owner && !(mechanisms.failover_fence && self.stale(row)),
            // The lock file at the path is the one the holder locked (it still holds that
            // lock: nobody else can have taken it).
            Kind::Files => !mechanisms.lock_file_check || row.lock_file == claim.token && owner,
            // RENEW's script: the lease key still reads `EPOCH OWNER`, the hash's epoch is ours.
            Kind::Redis => owner && row.expires_ms > server_ms && Some(row.epoch) == claim.token,
            // The session is alive and owns the ephemeral node, and this identity's node exists.
            Kind::ZooKeeper => {
                owner
                    && row.expires_ms > server_ms
                    && self
                        .store
                        .nodes
                        .iter()
                        .any(|node| node.worker == claim.worker && node.identity == claim.identity)
            }
            // The worker key is still on the holder's lease.
            Kind::Etcd => owner && row.epoch == claim.token.unwrap_or(0),
        }
    }

    /// `Coordinator::renew`: extends the lease and stores the record.
    pub fn renew(
        &mut self,
        claim: Claim,
        state: State,
        server_ms: u64,
        real_ms: u64,
        mechanisms: &Mechanisms,
    ) -> Applied {
        let ttl_ms = self.server_ttl_ms;
        if self.kind == Kind::ZooKeeper {
            // Any request received refreshes the session, unless it has expired.
            let row = &mut self.store.rows[claim.worker as usize];
            if row.owner == Some(claim.key) && row.expires_ms > server_ms {
                row.expires_ms = server_ms + ttl_ms;
            }
        }
        if self.kind == Kind::Etcd {
            return self.etcd_write(claim, state, server_ms, real_ms, mechanisms);
        }
        self.expire(server_ms);
        if !self.holds(claim, server_ms, mechanisms) {
            return Applied::now(Answer::Lost);
        }
        let timeline = self.store.timeline;
        if self.kind == Kind::ZooKeeper {
            if let Some(node) = self
                .store
                .nodes
                .iter_mut()
                .find(|node| node.worker == claim.worker && node.identity == claim.identity)
            {
                if mechanisms.marks_never_lowered && claim.request < node.last_request {
                    return Applied::failed(0); // BadVersion: a newer renewal was written
                }
                node.last_request = claim.request;
                node.state = Some(state);
            }
        }
        let kind = self.kind;
        let row = &mut self.store.rows[claim.worker as usize];
        if kind == Kind::Redis && mechanisms.marks_never_lowered {
            // RENEW stores nothing for a renewal older than the one stored.
            if claim.request < row.last_request {
                return Applied::now(Answer::Lost);
            }
            row.last_request = claim.request;
        }
        row.expires_ms = server_ms + ttl_ms;
        row.state = Some(if kind == Kind::Rows {
            raised(row.state, state, mechanisms)
        } else {
            state
        });
        row.timeline = timeline;
        row.written_ms = real_ms;
        self.wrote(real_ms);
        if self.kind == Kind::Redis {
            let waited = self.await_replicas(real_ms, mechanisms);
            if waited.answer.is_some() {
                return Applied {
                    answer: Some(Answer::Renewed),
                    ..waited
                };
            }
            return waited;
        }
        Applied::now(Answer::Renewed)
    }

    /// etcd's renewal, first round: `LeaseKeepAlive` of the holder's lease (a TTL of 0 back
    /// once it has expired: `LEASE_LOST`). Returns whether the lease was alive (and is now
    /// extended).
    pub fn etcd_keep_alive(&mut self, key: Key, server_ms: u64) -> bool {
        self.expire(server_ms);
        let ttl_ms = self.server_ttl_ms;
        match self
            .store
            .leases
            .iter_mut()
            .find(|(holder, _)| *holder == key)
        {
            Some((_, expires)) => {
                *expires = server_ms + ttl_ms;
                true
            }
            None => false,
        }
    }

    /// etcd's renewal, second round: the record written in a transaction that compares the
    /// worker key's create revision (and lease) with the holder's (without that compare,
    /// written whatever holds the key); `LEASE_LOST` when the compare fails.
    pub fn etcd_write(
        &mut self,
        claim: Claim,
        state: State,
        server_ms: u64,
        real_ms: u64,
        mechanisms: &Mechanisms,
    ) -> Applied {
        self.expire(server_ms);
        let fenced = self.holds(claim, server_ms, mechanisms);
        if !fenced && mechanisms.fenced_state_write {
            return Applied::now(Answer::Lost);
        }
        let row = &mut self.store.rows[claim.worker as usize];
        if mechanisms.marks_never_lowered {
            // The write expects the record's revision its holder last wrote.
            if claim.request < row.last_request {
                return Applied::now(Answer::Lost);
            }
            row.last_request = claim.request;
        }
        row.state = Some(state);
        row.written_ms = real_ms;
        self.wrote(real_ms);
        Applied::now(Answer::Renewed)
    }

    /// `WAIT min_replicas` after a write at `real_ms`, with half the patience (a quarter of the
    /// TTL) as its timeout: the write counts once that many replicas acknowledged it.
    fn await_replicas(&mut self, real_ms: u64, mechanisms: &Mechanisms) -> Applied {
        let timeout_ms = (self.ttl_ms() / 2).max(100) / 2;
        let Some(redis) = &self.redis else {
            return Applied::failed(0);
        };
        let wanted = if mechanisms.min_replicas {
            redis.min_replicas as usize
        } else {
            0
        };
        if wanted == 0 {
            return Applied {
                answer: Some(Answer::Renewed),
                wait_ms: 0,
                acknowledged_at_ms: None,
            };
        }
        let mut lags: Vec<u64> = redis
            .replicas
            .iter()
            .filter(|replica| !replica.cut_off && replica.lag_ms <= timeout_ms)
            .map(|replica| replica.lag_ms)
            .collect();
        lags.sort();
        match lags.get(wanted - 1) {
            Some(&lag) => Applied {
                answer: Some(Answer::Renewed),
                wait_ms: lag,
                acknowledged_at_ms: Some(real_ms + lag),
            },
            None => Applied::failed(timeout_ms),
        }
    }

    /// A request routed to a Redis replica: refused by the `ROLE` check; without it, refused
    /// by a read-only replica (`READONLY`); on a writable one, the script runs on the replica's
    /// own copy (its writes kept there, not propagated), and `WAIT` fails there.
    pub fn on_replica(
        &mut self,
        server: usize,
        claim: Claim,
        state: Option<State>,
        renew: bool,
        replica_ms: u64,
        real_ms: u64,
        mechanisms: &Mechanisms,
    ) -> Applied {
        let ttl_ms = self.server_ttl_ms;
        let Some(redis) = &mut self.redis else {
            return Applied::failed(0);
        };
        if mechanisms.role_check || !redis.writable_replicas || !renew {
            return Applied::failed(0);
        }
        let worker = claim.worker as usize;
        let replicated = &self.store.rows[worker];
        let row = match &redis.overlays[server][worker] {
            Some(own) if own.written_ms > replicated.written_ms => own.clone(),
            _ => replicated.clone(),
        };
        let holds = row.owner == Some(claim.key)
            && row.expires_ms > replica_ms
            && Some(row.epoch) == claim.token;
        if !holds {
            return Applied::now(Answer::Lost);
        }
        redis.overlays[server][worker] = Some(Row {
            expires_ms: replica_ms + ttl_ms,
            state,
            written_ms: real_ms,
            ..row
        });
        if mechanisms.min_replicas && redis.min_replicas > 0 {
            return Applied::failed(0); // WAIT cannot be used with replica instances
        }
        Applied::now(Answer::Renewed)
    }

    /// `Coordinator::check`: the cheap local check between renewals (`file://` only).
    pub fn check(&self, claim: Claim, mechanisms: &Mechanisms) -> bool {
        self.kind != Kind::Files || self.holds(claim, 0, mechanisms)
    }

    /// `Coordinator::release`: stores the record (if given) and gives the worker id back.
    pub fn release(
        &mut self,
        claim: Claim,
        state: Option<State>,
        server_ms: u64,
        real_ms: u64,
        mechanisms: &Mechanisms,
    ) -> Applied {
        self.expire(server_ms);
        if !self.holds(claim, server_ms, mechanisms) {
            return Applied::now(Answer::Lost);
        }
        if self.kind == Kind::ZooKeeper {
            if let (Some(state), Some(node)) = (
                state,
                self.store
                    .nodes
                    .iter_mut()
                    .find(|node| node.worker == claim.worker && node.identity == claim.identity),
            ) {
                node.state = Some(state);
            }
        }
        let row = &mut self.store.rows[claim.worker as usize];
        if let Some(state) = state {
            row.state = Some(state);
        }
        if row.owner == Some(claim.key) {
            row.owner = None;
            row.expires_ms = 0;
            if self.kind == Kind::Etcd {
                row.epoch = 0;
            }
        }
        row.written_ms = real_ms;
        if self.kind == Kind::Etcd {
            self.store.leases.retain(|(holder, _)| *holder != claim.key);
        }
        self.wrote(real_ms);
        Applied::now(Answer::Released)
    }

    /// A holder's process died: its lock (not its lease) goes with it.
    pub fn crashed(&mut self, key: Key) {
        if self.kind == Kind::Files {
            for row in &mut self.store.rows {
                if row.owner == Some(key) {
                    row.owner = None;
                }
            }
        }
    }

    /// Someone removes the lock file of `worker` (its holder keeps a lock on the removed file).
    pub fn remove_lock_file(&mut self, worker: u64) {
        let row = &mut self.store.rows[worker as usize];
        row.lock_file = None;
        row.owner = None;
    }

    /// Redis evicts a key of `worker` (`maxmemory-policy` other than `noeviction`): its lease
    /// key, or its hash (epoch and record).
    pub fn evict(&mut self, worker: u64, hash: bool, real_ms: u64) {
        let row = &mut self.store.rows[worker as usize];
        if hash {
            row.epoch = 0;
            row.state = None;
        } else {
            row.owner = None;
        }
        row.written_ms = real_ms;
        self.wrote(real_ms);
    }

    /// The primary dies and its replica, `lag_ms` behind, is promoted on a new timeline.
    pub fn fail_over(&mut self, real_ms: u64, lag_ms: u64) {
        let timeline = self.store.timeline + 1;
        self.promote(real_ms, real_ms.saturating_sub(lag_ms));
        self.store.timeline = timeline;
    }

    /// The primary (leader) is lost and a server that had applied the writes up to real ms
    /// `applied_ms` takes over.
    fn promote(&mut self, real_ms: u64, applied_ms: u64) {
        if applied_ms < real_ms {
            if let Some(store) = self.store_at(applied_ms) {
                self.store = store;
            } else {
                let fresh = Coordinator::new(
                    self.kind,
                    self.layout,
                    self.ttl,
                    self.server_ttl_ms,
                    self.max_skew,
                    None,
                );
                self.store = fresh.store;
            }
        }
        self.generation += 1;
        self.generation_ended_ms.push(real_ms);
        self.history.clear();
        self.wrote(real_ms);
    }

    /// A ZooKeeper or etcd leader is lost: a new leader that had applied the writes up to
    /// `lag_ms` ago (0: a quorum kept every acknowledged write) takes over and gives every
    /// session or lease its full TTL again on its own clock (`server_ms`, `offset_change_ms`
    /// its clock minus the old leader's).
    pub fn new_leader(&mut self, real_ms: u64, lag_ms: u64, server_ms: u64, offset_change_ms: i64) {
        self.promote(real_ms, real_ms.saturating_sub(lag_ms));
        let ttl_ms = self.server_ttl_ms;
        let refreshed = |expires: &mut u64| {
            let rebased = (*expires as i64 + offset_change_ms).max(0) as u64;
            *expires = if rebased > server_ms {
                rebased.max(server_ms + ttl_ms)
            } else {
                rebased
            };
        };
        for row in &mut self.store.rows {
            if row.owner.is_some() {
                refreshed(&mut row.expires_ms);
            }
        }
        for (_, expires) in &mut self.store.leases {
            refreshed(expires);
        }
        self.history.clear();
        self.wrote(real_ms);
    }

    /// Brings each Redis replica up to what its lag lets it have applied by `real_ms`.
    pub fn replicate(&mut self, real_ms: u64) {
        if let Some(redis) = &mut self.redis {
            for replica in &mut redis.replicas {
                if !replica.cut_off {
                    replica.applied_ms = replica
                        .applied_ms
                        .max(real_ms.saturating_sub(replica.lag_ms));
                }
            }
        }
    }

    /// A Redis failover: Sentinel promotes the most up-to-date replica (within the assumptions;
    /// with `replication=async`, only a switchover that waited for it to catch up; `worst`:
    /// the least up-to-date one, as it is), and the old primary becomes a replica of it.
    /// Returns the promoted server and how far behind it was, or `None` when no switchover
    /// could wait for a replica (every one cut off).
    pub fn redis_fail_over(&mut self, real_ms: u64, worst: bool) -> Option<(usize, u64)> {
        self.replicate(real_ms);
        let redis = self.redis.as_mut()?;
        let index = if worst {
            (0..redis.replicas.len()).min_by_key(|&i| redis.replicas[i].applied_ms)?
        } else {
            (0..redis.replicas.len()).max_by_key(|&i| redis.replicas[i].applied_ms)?
        };
        let switchover = redis.min_replicas == 0 && !worst;
        if switchover {
            if redis.replicas[index].cut_off {
                return None;
            }
            redis.replicas[index].applied_ms = real_ms;
        }
        let promoted = redis.replicas[index].clone();
        let old = redis.primary;
        redis.primary = promoted.server;
        // A writable replica keeps what was written on it: promoted, that is its data.
        let workers = redis.overlays[old].len();
        let own_writes =
            std::mem::replace(&mut redis.overlays[promoted.server], vec![None; workers]);
        redis.overlays[old].iter_mut().for_each(|row| *row = None);
        redis.replicas[index] = Replica {
            server: old,
            applied_ms: real_ms,
            lag_ms: promoted.lag_ms,
            cut_off: false,
        };
        for replica in &mut redis.replicas {
            replica.applied_ms = real_ms; // resynchronised with the new primary
        }
        let behind = real_ms - promoted.applied_ms.min(real_ms);
        self.promote(real_ms, promoted.applied_ms);
        for (row, own) in self.store.rows.iter_mut().zip(own_writes) {
            if let Some(own) = own.filter(|own| own.written_ms > row.written_ms) {
                *row = own;
            }
        }
        self.wrote(real_ms);
        Some((promoted.server, behind))
    }

    /// The coordinator restored from a copy `age_ms` old (same timeline). With the documented
    /// procedure (README, `docs/concepts/leases.md`), run before any holder starts again, every
    /// row is marked as written before the current timeline and its lease cleared: each row's
    /// next grant then raises its marks as after a failover (`protocol::failover`).
    pub fn restore(&mut self, real_ms: u64, age_ms: u64, procedure: bool) {
        let cutoff = real_ms.saturating_sub(age_ms);
        if let Some(store) = self.store_at(cutoff) {
            let timeline = self.store.timeline;
            self.store = store;
            self.store.timeline = timeline;
        }
        if procedure {
            for row in &mut self.store.rows {
                row.timeline = 0;
                row.owner = None;
                row.expires_ms = 0;
            }
        }
        self.generation += 1;
        self.generation_ended_ms.push(real_ms);
        self.wrote(real_ms);
    }

    /// Keeps the history to what a failover `max_lag_ms` behind (or a replica) can reach.
    pub fn trim(&mut self, real_ms: u64, max_lag_ms: u64) {
        let mut cutoff = real_ms.saturating_sub(max_lag_ms + 1);
        if let Some(redis) = &self.redis {
            for replica in &redis.replicas {
                cutoff = cutoff.min(replica.applied_ms);
            }
        }
        let keep_from = self
            .history
            .iter()
            .rposition(|(at, _)| *at <= cutoff)
            .unwrap_or(0);
        if keep_from > 0 {
            self.history.drain(..keep_from);
        }
    }
}

/// The record a PostgreSQL renewal stores: `state` with every mark at least the stored one's
/// (`marks_never_lowered`, `RAISED_MARKS`), so that a renewal applied after a newer one cannot
/// lower the marks; as sent without that mechanism.
fn raised(stored: Option<State>, mut state: State, mechanisms: &Mechanisms) -> State {
    if let (true, Some(stored)) = (mechanisms.marks_never_lowered, stored) {
        if stored.layout_fingerprint == state.layout_fingerprint {
            for (mark, old) in state.high_water_ms.iter_mut().zip(stored.high_water_ms) {
                *mark = (*mark).max(old);
            }
        }
    }
    state
}
