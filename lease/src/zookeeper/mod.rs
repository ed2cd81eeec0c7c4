//! `zookeeper://HOST:PORT/snowflake/APP`: worker ids from ZooKeeper nodes ([`ZooKeeperCoordinator`]).

use std::path::PathBuf;
use std::time::Duration;

use clockflake::{Layout, State};
use zookeeper_client as zk;

use crate::coordinator::Grant;
use crate::{record, Coordinator, LeaseError};

mod address;
mod cache;
mod claim;
mod config;
mod offline;
mod renewal;
mod session;

use claim::parse_server;
use offline::merge_marks;
use session::{open_options, Fault, Held, Session};

/// The default session timeout (and so lease TTL) of `zookeeper://`.
pub const DEFAULT_SESSION_TIMEOUT: Duration = Duration::from_secs(10);
/// The default root of an application's nodes is `/snowflake/APP`.
pub const DEFAULT_ROOT: &str = "/snowflake";

/// `zookeeper://HOST:PORT/snowflake/APP`: worker ids from ZooKeeper nodes.
///
/// Under the root (`/snowflake/APP`):
///
/// | node | kind | data |
/// |---|---|---|
/// | `servers/<identity>_<worker>` | persistent: the worker id a server identity had, kept across restarts | the worker's state record (the text of the `file://` state files), empty until the first reservation |
/// | `instances/<worker>` | ephemeral: the worker id is in use by a live session | `<identity> <session timeout ms>` |
/// | `clock` | persistent: written at every start-up for the clock check (`max_skew`); its `mtime` is the server's clock | the identity that wrote it last |
///
/// Start-up ([`Coordinator::acquire`]), on a new session every time:
/// 1. the worker ids of this identity's own `servers` nodes whose `instances` node is absent
///    (an optional cache file names the last one, which saves the listings). Before start-up,
///    [`crate::open`] waits (up to that session's timeout) when they are all in use by an
///    instance of the same identity: a restarted process whose old session has not expired;
/// 2. else the smallest worker id no `servers` node names;
/// 3. else, when every worker id has a `servers` node, the id of a node whose `instances` node
///    is absent, least recently used (oldest `mtime`) first;
/// 4. the worker id is ours once `instances/<worker>` is created by our session. On a conflict
///    (someone else created it first) the next candidate is tried; after a bounded number of
///    listings the start-up fails with `COORDINATOR_UNAVAILABLE`; with every worker id in use,
///    `WORKER_POOL_EXHAUSTED`.
/// 5. Holding `instances/<worker>`, every `servers` node naming the worker is read (there is
///    one unless a start-up was interrupted), their high-water marks merged, written to this
///    identity's node, and the other nodes deleted. Their records were written by holders that
///    are gone (their ephemeral node is), so the merged record bounds every id ever issued
///    with the worker id. This identity's node is written even when nothing changed: its new
///    version fences off any earlier writer.
///
/// A lost session is never revived: its generator refuses with `LEASE_LOST` and a new
/// [`crate::open`] runs start-up again on a new session (the same identity gets the same
/// worker id back once the old session's ephemeral node is gone).
///
/// Renewal is one `multi`: check that `instances/<worker>` still exists (version 0) and write
/// the state record to `servers/<identity>_<worker>` at the version last written. Both fail once
/// the session has expired (the ephemeral node may then already be someone else's) or the node
/// was taken over, and renewal reports `LEASE_LOST`. The lease TTL is the negotiated session
/// timeout: ZooKeeper expires a session no sooner than its timeout after the last request it
/// received, and a request is received after it was sent, so the generator's deadline
/// (measured from when its last renewal was sent) passes before the server can expire the
/// session and delete `instances/<worker>`.
///
/// # Bound worker ids (`takeover=off`)
/// With `takeover=off` a server identity takes no other identity's worker id (step 3 is
/// skipped: with every worker id named, start-up refuses with `WORKER_POOL_EXHAUSTED`), and
/// marks its own as bound to it for good with a persistent `bound/<identity>` node: every
/// process of the application, whatever its own `takeover`, then leaves that identity's worker
/// ids out of step 3. The binding is released only by deleting the node by hand.
///
/// # Offline start (`offline=cache`)
/// The design documents' "start from a locally cached worker id when ZooKeeper is down",
/// opt-in, and allowed only with `takeover=off`, `cache=PATH` and a stable identity (`server=`
/// or `port=`); anything else is `INVALID_URI`. With it:
/// - `PATH.lock` is locked while a worker id is held, online or offline (a second process of
///   the identity with the same cache is refused, `COORDINATOR_UNAVAILABLE`);
/// - online, the cache holds the worker id and its state record, written (0600, atomic
///   rename, fsync) at start-up and before every reservation is written to ZooKeeper, so it
///   is never behind what ZooKeeper holds; start-up raises the adopted record to the cache's
///   marks;
/// - when ZooKeeper cannot be reached at start-up (the connection fails within the session
///   timeout), the generator starts from the cache: its worker id and record, no deadline (as
///   `file://`: the lock lasts as long as the process), every reservation written to the
///   cache only, no start-up clock check. It stays offline for its lifetime and never
///   contacts ZooKeeper; the next start with ZooKeeper up raises ZooKeeper's record to the
///   cache's marks, so it continues above every id issued offline.
///
/// Why no other process can hold the cached worker id meanwhile: no process takes over a bound
/// identity's worker id, a server identity's worker ids are named by its `servers` nodes, so
/// no other identity is given them as never-used, and a second process of the identity on
/// this host meets the lock. What remains is the operator's promise, as for `file://`: one
/// host per identity, and every process of an identity with the same cache path.
///
///
/// The client (`zookeeper-client`) is async; every coordinator runs it on a private tokio
/// runtime with one worker thread and waits on a channel, so callers need no runtime (and may
/// run inside one without a nested `block_on`).
pub struct ZooKeeperCoordinator {
    hosts: String,
    root: String,
    identity: String,
    session_timeout: Duration,
    cache: Option<PathBuf>,
    /// `takeover=on` (the default): start-up step 3 may take over another identity's worker
    /// id; `off`: worker ids stay bound to their identity (`bound/<identity>`).
    takeover: bool,
    /// `offline=cache`: start from the cache file when ZooKeeper cannot be reached.
    offline: bool,
    /// `offline=cache`: the lock on `PATH.lock`, held while a worker id is.
    cache_lock: Option<std::fs::File>,
    /// `offline=cache`: why ZooKeeper could not be reached before start-up (so start-up does
    /// not wait for it a second time).
    unreachable: Option<String>,
    /// The worker id held from the cache, without ZooKeeper (`offline=cache`).
    offline_worker: Option<u64>,
    max_skew: Option<Duration>,
    /// The URI's `workers` range (`None`: every worker id of the layout); recorded in the
    /// data of the `instances/<worker>` node a holder creates.
    workers: Option<crate::coordinator::WorkerRange>,
    redacted_uri: String,
    runtime: Option<tokio::runtime::Runtime>,
    session: Option<Session>,
    held: Option<Held>,
}

impl ZooKeeperCoordinator {
    /// This server's identity: the `<identity>` of its `servers/<identity>_<worker>` nodes.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// The root of the application's nodes, `/snowflake/APP` by default.
    pub fn root(&self) -> &str {
        &self.root
    }

    /// The session timeout asked for (the server may negotiate another one).
    pub fn session_timeout(&self) -> Duration {
        self.session_timeout
    }

    /// The current session's id, if connected (for tests and diagnostics).
    pub fn session_id(&self) -> Option<i64> {
        self.session.as_ref().map(|s| s.id)
    }

    /// The worker id held, through ZooKeeper or from the cache.
    fn held_worker(&self) -> Option<u64> {
        self.held
            .as_ref()
            .map(|held| held.worker_id)
            .or(self.offline_worker)
    }

    /// Whether this coordinator holds its worker id from the cache, without ZooKeeper
    /// (`offline=cache`).
    pub fn is_offline(&self) -> bool {
        self.offline_worker.is_some()
    }

    pub(super) fn unavailable(&self, reason: impl std::fmt::Display) -> LeaseError {
        LeaseError::unavailable(&self.redacted_uri, reason)
    }

    /// A `servers` node's record and stat: `None` when the node is gone, no record while it
    /// holds none yet; a record that cannot be read is `INVALID_STATE`, never skipped.
    pub(super) fn read_server_node(
        &self,
        path: &str,
    ) -> Result<Option<(Option<State>, zk::Stat)>, LeaseError> {
        let owned = path.to_owned();
        let (data, stat) = match self.call(|client| async move { client.get_data(&owned).await }) {
            Ok(found) => found,
            Err(Fault::Zk(zk::Error::NoNode)) => return Ok(None),
            Err(fault) => return Err(self.unavailable(fault)),
        };
        if data.is_empty() {
            return Ok(Some((None, stat)));
        }
        let state = record::decode(&data).map_err(|reason| {
            LeaseError::corrupt(format!("{} node {path}", self.redacted_uri), reason)
        })?;
        Ok(Some((Some(state), stat)))
    }

    pub(super) fn servers_dir(&self) -> String {
        format!("{}/servers", self.root)
    }

    pub(super) fn instances_dir(&self) -> String {
        format!("{}/instances", self.root)
    }
}

impl Coordinator for ZooKeeperCoordinator {
    fn redacted_uri(&self) -> String {
        self.redacted_uri.clone()
    }

    fn acquire(&mut self, layout: &Layout, now_ms: u64) -> Result<Grant, LeaseError> {
        // Start-up always runs on a new session: a lost one is never revived.
        self.close_session();
        self.offline_worker = None;
        if self.offline {
            self.lock_cache()?;
        }
        let connected = match self.unreachable.take() {
            Some(reason) if self.offline => Err(self.unavailable(reason)),
            _ => self.connect(),
        };
        if let Err(error) = connected {
            if self.offline && error.code() == "COORDINATOR_UNAVAILABLE" {
                return self.acquire_offline(layout, error);
            }
            self.unlock_cache();
            return Err(error);
        }
        let result = self.ensure_dirs().and_then(|()| {
            let worker = self.claim(layout, now_ms)?;
            let state = self.adopt(worker)?;
            if !self.takeover {
                self.mark_bound()?;
            }
            let state = self.with_cached_marks(worker, state)?;
            if self.offline {
                // Before any id: an offline start relies on the cache's record.
                self.write_cache(worker, state.as_ref())
                    .map_err(|error| self.unavailable(format!("write the cache file: {error}")))?;
            }
            Ok((worker, state))
        });
        match result {
            Ok((worker_id, state)) => {
                if !self.offline {
                    // A speed-up only: a failed write costs a listing at the next start.
                    let _ = self.write_cache(worker_id, None);
                }
                let ttl = self.session.as_ref().map(|s| s.timeout);
                Ok(Grant {
                    worker_id,
                    state,
                    ttl,
                })
            }
            Err(error) => {
                self.close_session();
                self.unlock_cache();
                Err(error)
            }
        }
    }

    fn renew(&mut self, state: &State) -> Result<(), LeaseError> {
        // offline=cache: the cache first, so it never lags behind what ZooKeeper holds.
        if let Some(worker) = self.held_worker().filter(|_| self.offline) {
            self.write_cache(worker, Some(state))
                .map_err(|error| self.unavailable(format!("write the cache file: {error}")))?;
        }
        if self.offline_worker.is_some() {
            return Ok(());
        }
        self.write_fenced(record::encode(state).into_bytes())
    }

    fn release(&mut self, state: Option<&State>) -> Result<(), LeaseError> {
        let mut result = Ok(());
        if let Some(state) = state.filter(|_| self.held_worker().is_some()) {
            result = self.renew(state);
        }
        if let Some(held) = &self.held {
            let path = held.instance_path.clone();
            let _ = self.call(|client| async move { client.delete(&path, Some(0)).await });
        }
        self.close_session();
        self.offline_worker = None;
        self.unlock_cache();
        result
    }

    /// The server's clock: the `mtime` ZooKeeper gives the `clock` node when this session
    /// writes it (created on first use), one round trip on the grant's session.
    fn server_time_ms(&mut self) -> Result<Option<u64>, LeaseError> {
        if self.offline_worker.is_some() {
            return Ok(None); // started from the cache: no server to ask
        }
        let path = format!("{}/clock", self.root);
        let data = self.identity.clone().into_bytes();
        let written = self.call(|client| async move {
            match client.set_data(&path, &data, None).await {
                Err(zk::Error::NoNode) => {}
                other => return other,
            }
            match client.create(&path, &data, &open_options()).await {
                Ok((stat, _)) => Ok(stat),
                // Another server created it meanwhile: write it.
                Err(zk::Error::NodeExists) => client.set_data(&path, &data, None).await,
                Err(error) => Err(error),
            }
        });
        let stat = written.map_err(|fault| self.unavailable(format!("clock check: {fault}")))?;
        Ok(u64::try_from(stat.mtime).ok())
    }

    fn max_skew(&self) -> Option<Duration> {
        self.max_skew
    }

    fn read_state(&mut self, worker_id: u64) -> Result<Option<State>, LeaseError> {
        let connected_here = self.session.is_none();
        if connected_here {
            self.connect()?;
        }
        let result = (|| {
            let mut found: Option<State> = None;
            for name in self.children(self.servers_dir())? {
                if parse_server(&name).is_none_or(|n| n.worker != worker_id) {
                    continue;
                }
                let path = format!("{}/{name}", self.servers_dir());
                let Some((Some(state), _)) = self.read_server_node(&path)? else {
                    continue;
                };
                found = Some(match found {
                    None => state,
                    Some(mut acc) => {
                        merge_marks(&mut acc, &state);
                        acc
                    }
                });
            }
            Ok(found)
        })();
        if connected_here {
            self.close_session();
        }
        result
    }
}

impl Drop for ZooKeeperCoordinator {
    fn drop(&mut self) {
        self.close_session();
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl std::fmt::Debug for ZooKeeperCoordinator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZooKeeperCoordinator")
            .field("redacted_uri", &self.redacted_uri)
            .field("session_timeout", &self.session_timeout)
            .field("worker_id", &self.held.as_ref().map(|h| h.worker_id))
            .finish_non_exhaustive()
    }
}

/// Parses a `zookeeper://` URI; the lease TTL (and reservation) is the session timeout.
pub(crate) fn target(uri: &str) -> Result<(Box<dyn Coordinator>, Duration), LeaseError> {
    let mut coordinator = ZooKeeperCoordinator::from_uri(uri)?;
    coordinator.wait_for_predecessor();
    let ttl = coordinator.session_timeout;
    Ok((Box::new(coordinator), ttl))
}
