//! The simulated coordinators, keeping the `Coordinator` contract (lease/src/coordinator.rs):
//! one holder per worker id at a time; a leased worker id is not granted again until `ttl`
//! after its last renewal reached the server; whoever is granted it receives the record stored
//! last. Two kinds:
//! - `Rows`: PostgreSQL's row leases, on a primary whose every write reaches an asynchronous
//!   replica `lag` ms later; a failover promotes the replica (what it had not received is lost)
//!   on a new timeline, and a grant of a row written on an older timeline raises its marks with
//!   the shipped rule (`protocol::failover`), unless that mechanism is switched off.
//! - `Files`: `file://`'s lock files with state files beside them; the lock file can be removed
//!   while held, and the holder's check (the lock file at the path is the one it locked) is the
//!   shipped mechanism's rule, unless switched off.

use std::time::Duration;

use clockflake::{Layout, State};
use clockflake_lease::protocol::{self, failover};
use clockflake_lease::Grant;

use crate::Mechanisms;

/// Which holder (and which of its lives) did something: a restarted holder is a new key.
pub type Key = u64;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Rows,
    Files,
}

#[derive(Clone, Debug)]
struct Row {
    /// `Rows`: who holds the lease; `Files`: who holds the lock of the file at the path.
    owner: Option<Key>,
    /// `Rows`: server ms the lease expires at.
    expires_ms: u64,
    /// The stored record (the row's marks; `file://`'s state file).
    state: Option<State>,
    /// `Rows`: the timeline the row was last written on.
    timeline: u64,
    /// `Files`: the identity (device and inode) of the lock file at the path; `None` once
    /// removed.
    lock_file: Option<u64>,
}

#[derive(Clone, Debug)]
struct Store {
    rows: Vec<Row>,
    timeline: u64,
}

/// Who says it holds a worker id, in a renewal, a check or a release: the holder's life, the
/// worker id, and (`Files`) the identity of the lock file it locked.
#[derive(Clone, Copy, Debug)]
pub struct Claim {
    pub key: Key,
    pub worker: u64,
    pub lock_file: Option<u64>,
}

/// What a request came back with.
#[derive(Clone, Debug, PartialEq)]
pub enum Answer {
    Granted {
        grant: Grant,
        lock_file: Option<u64>,
    },
    Renewed,
    Released,
    /// `LEASE_LOST`: the worker id is someone else's (or the row was written before a failover).
    Lost,
    /// `WORKER_POOL_EXHAUSTED`.
    Exhausted,
}

pub struct Coordinator {
    pub kind: Kind,
    layout: Layout,
    ttl: Duration,
    max_skew: Duration,
    store: Store,
    /// The stores after each write (real ms): the replica that lags, the backups.
    history: Vec<(u64, Store)>,
    /// Lock-file identities handed out so far (`Files`).
    inodes: u64,
    /// Bumped at every failover: requests in flight to the old primary fail.
    pub generation: u64,
}

impl Coordinator {
    pub fn new(kind: Kind, layout: Layout, ttl: Duration, max_skew: Duration) -> Coordinator {
        let workers = (layout.max_worker_id() + 1) as usize;
        let row = Row {
            owner: None,
            expires_ms: 0,
            state: None,
            timeline: 1,
            lock_file: None,
        };
        Coordinator {
            kind,
            layout,
            ttl,
            max_skew,
            store: Store {
                rows: vec![row; workers],
                timeline: 1,
            },
            history: Vec::new(),
            inodes: 0,
            generation: 0,
        }
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

    /// `Coordinator::acquire` at server time `server_ms` (the starting holder's clock reads
    /// `local_ms`): the first free worker id whose record the holder can use at once, else the
    /// one usable first.
    pub fn acquire(
        &mut self,
        key: Key,
        local_ms: u64,
        server_ms: u64,
        real_ms: u64,
        mechanisms: &Mechanisms,
    ) -> Answer {
        let ttl_ms = self.ttl_ms();
        let fence_at = server_ms + failover::fence_ms(self.ttl, self.max_skew);
        let mut free: Vec<(u64, usize)> = Vec::new();
        for (worker, row) in self.store.rows.iter().enumerate() {
            let taken = match self.kind {
                Kind::Rows => row.owner.is_some() && row.expires_ms > server_ms,
                Kind::Files => row.owner.is_some() && row.lock_file.is_some(),
            };
            if !taken {
                let state = self.granted_state(worker, fence_at, mechanisms);
                let ready = protocol::ready_at_ms(&self.layout, state.as_ref(), local_ms);
                free.push((ready, worker));
            }
        }
        free.sort();
        let Some(&(_, worker)) = free.first() else {
            return Answer::Exhausted;
        };
        let state = self.granted_state(worker, fence_at, mechanisms);
        let timeline = self.store.timeline;
        let lock_file = match self.kind {
            Kind::Files => {
                let row = &self.store.rows[worker];
                Some(row.lock_file.unwrap_or_else(|| {
                    self.inodes += 1;
                    self.inodes
                }))
            }
            Kind::Rows => None,
        };
        let row = &mut self.store.rows[worker];
        row.owner = Some(key);
        row.expires_ms = server_ms + ttl_ms;
        row.state = state;
        row.timeline = timeline;
        row.lock_file = lock_file;
        self.wrote(real_ms);
        Answer::Granted {
            grant: Grant {
                worker_id: worker as u64,
                state,
                ttl: (self.kind == Kind::Rows).then_some(self.ttl),
            },
            lock_file,
        }
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
    fn holds(&self, claim: Claim, mechanisms: &Mechanisms) -> bool {
        let row = &self.store.rows[claim.worker as usize];
        let owner = row.owner == Some(claim.key);
        match self.kind {
            Kind::Rows => owner && !(mechanisms.failover_fence && self.stale(row)),
            // The lock file at the path is the one the holder locked (it still holds that
            // lock: nobody else can have taken it).
            Kind::Files => !mechanisms.lock_file_check || row.lock_file == claim.lock_file && owner,
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
    ) -> Answer {
        if !self.holds(claim, mechanisms) {
            return Answer::Lost;
        }
        let ttl_ms = self.ttl_ms();
        let timeline = self.store.timeline;
        let row = &mut self.store.rows[claim.worker as usize];
        row.expires_ms = server_ms + ttl_ms;
        row.state = Some(state);
        row.timeline = timeline;
        self.wrote(real_ms);
        Answer::Renewed
    }

    /// `Coordinator::check`: the cheap local check between renewals (`file://` only).
    pub fn check(&self, claim: Claim, mechanisms: &Mechanisms) -> bool {
        self.kind == Kind::Rows || self.holds(claim, mechanisms)
    }

    /// `Coordinator::release`: stores the record (if given) and gives the worker id back.
    pub fn release(
        &mut self,
        claim: Claim,
        state: Option<State>,
        real_ms: u64,
        mechanisms: &Mechanisms,
    ) -> Answer {
        if !self.holds(claim, mechanisms) {
            return Answer::Lost;
        }
        let row = &mut self.store.rows[claim.worker as usize];
        if let Some(state) = state {
            row.state = Some(state);
        }
        if row.owner == Some(claim.key) {
            row.owner = None;
            row.expires_ms = 0;
        }
        self.wrote(real_ms);
        Answer::Released
    }

    /// A holder's process died: its lock (not its row lease) goes with it.
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

    /// The primary dies and its replica, `lag_ms` behind, is promoted on a new timeline.
    pub fn fail_over(&mut self, real_ms: u64, lag_ms: u64) {
        let timeline = self.store.timeline + 1;
        let cutoff = real_ms.saturating_sub(lag_ms);
        let replica = self
            .history
            .iter()
            .rev()
            .find(|(at, _)| *at <= cutoff)
            .map(|(_, store)| store.clone());
        if let Some(store) = replica {
            self.store = store;
        } else {
            let fresh = Coordinator::new(self.kind, self.layout, self.ttl, self.max_skew);
            self.store = fresh.store;
        }
        self.store.timeline = timeline;
        self.generation += 1;
        self.history.clear();
        self.wrote(real_ms);
    }

    /// The coordinator restored from a copy `age_ms` old (same timeline). With the documented
    /// procedure (README, `docs/concepts/leases.md`), run before any holder starts again, every
    /// row is marked as written before the current timeline and its lease cleared: each row's
    /// next grant then raises its marks as after a failover (`protocol::failover`).
    pub fn restore(&mut self, real_ms: u64, age_ms: u64, procedure: bool) {
        let cutoff = real_ms.saturating_sub(age_ms);
        if let Some(store) = self
            .history
            .iter()
            .rev()
            .find(|(at, _)| *at <= cutoff)
            .map(|(_, store)| store.clone())
        {
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
        self.wrote(real_ms);
    }

    /// Keeps the replica's history to what a failover `max_lag_ms` behind can reach.
    pub fn trim(&mut self, real_ms: u64, max_lag_ms: u64) {
        let cutoff = real_ms.saturating_sub(max_lag_ms + 1);
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
