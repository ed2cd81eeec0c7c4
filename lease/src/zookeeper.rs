//! `zookeeper://HOST:PORT/snowflake/APP`: worker ids from ZooKeeper nodes ([`ZooKeeperCoordinator`]).

use std::collections::{BTreeMap, HashSet};
use std::future::Future;
use std::net::{ToSocketAddrs, UdpSocket};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use clockflake::{Error, Layout, State};
use zookeeper_client as zk;

use crate::coordinator::{ready_at_ms, Grant};
use crate::uri::invalid;
use crate::{record, Coordinator, LeaseError};

/// The default session timeout (and so lease TTL) of `zookeeper://`.
pub const DEFAULT_SESSION_TIMEOUT: Duration = Duration::from_secs(10);
/// The default root of an application's nodes is `/snowflake/APP`.
pub const DEFAULT_ROOT: &str = "/snowflake";
/// How many times start-up lists the nodes again after losing every candidate to others.
const CLAIM_ROUNDS: u32 = 8;
/// At most this many never-used worker ids are tried per listing.
const FRESH_PER_ROUND: usize = 256;

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
/// The process that first used the ZooKeeper client (see [`ZooKeeperCoordinator::connect`]).
static REACTOR_PID: AtomicU32 = AtomicU32::new(0);

/// The client (`zookeeper-client`) is async; every coordinator runs it on a private tokio
/// runtime with one worker thread and waits on a channel, so callers need no runtime (and may
/// run inside one without a nested `block_on`).
pub struct ZooKeeperCoordinator {
    hosts: String,
    root: String,
    identity: String,
    session_timeout: Duration,
    cache: Option<PathBuf>,
    max_skew: Option<Duration>,
    describe: String,
    runtime: Option<tokio::runtime::Runtime>,
    session: Option<Session>,
    held: Option<Held>,
}

struct Session {
    client: zk::Client,
    state: zk::StateWatcher,
    id: i64,
    timeout: Duration,
}

struct Held {
    worker_id: u64,
    server_path: String,
    instance_path: String,
    /// Version of `server_path` as we last wrote it.
    version: i32,
}

/// Why a ZooKeeper call did not return a result.
enum Fault {
    Zk(zk::Error),
    /// No answer within the time allowed.
    Timeout,
}

impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fault::Zk(error) => write!(f, "{error}"),
            Fault::Timeout => f.write_str("no answer in time"),
        }
    }
}

/// Whether the error means our session (and with it our ephemeral node) is gone for good.
fn session_gone(error: &zk::Error) -> bool {
    matches!(
        error,
        zk::Error::SessionExpired | zk::Error::ClientClosed | zk::Error::AuthFailed
    )
}

fn check_segment(uri: &str, segment: &str) -> Result<(), LeaseError> {
    if crate::uri::is_name(segment) {
        Ok(())
    } else {
        Err(invalid(
            uri,
            format!(
                "each path segment (and the app) must be 1 to 64 of A-Z a-z 0-9 _ - . \
                 (not starting with '.'), found {segment:?}"
            ),
        ))
    }
}

fn check_identity(uri: &str, identity: &str) -> Result<(), LeaseError> {
    let ok = !identity.is_empty()
        && identity.len() <= 200
        && identity
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-.:[]@".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(invalid(
            uri,
            format!("server must be 1 to 200 of A-Z a-z 0-9 _ - . : [ ] @, found {identity:?}"),
        ))
    }
}

/// The address of this host as ZooKeeper sees it: the local address of a (never sent) UDP
/// socket connected to the first server.
fn local_ip(hosts: &str) -> String {
    let first = hosts.split(',').next().unwrap_or("127.0.0.1:2181");
    let guess = || -> Option<String> {
        let server = first.to_socket_addrs().ok()?.next()?;
        let bind = if server.is_ipv4() {
            "0.0.0.0:0"
        } else {
            "[::]:0"
        };
        let socket = UdpSocket::bind(bind).ok()?;
        socket.connect(server).ok()?;
        let ip = socket.local_addr().ok()?.ip();
        Some(if ip.is_ipv6() {
            format!("[{ip}]")
        } else {
            ip.to_string()
        })
    };
    guess().unwrap_or_else(|| "127.0.0.1".to_owned())
}

/// Runs `future` on `runtime` and waits for it on this thread, at most `limit`.
fn block<T: Send + 'static>(
    runtime: &tokio::runtime::Runtime,
    limit: Duration,
    future: impl Future<Output = Result<T, zk::Error>> + Send + 'static,
) -> Result<T, Fault> {
    let (sender, receiver) = mpsc::sync_channel(1);
    runtime.spawn(async move {
        if let Ok(result) = tokio::time::timeout(limit, future).await {
            let _ = sender.send(result);
        }
    });
    match receiver.recv() {
        Ok(result) => result.map_err(Fault::Zk),
        // The sender was dropped: the time ran out (or the runtime is shutting down).
        Err(_) => Err(Fault::Timeout),
    }
}

fn open_options() -> zk::CreateOptions<'static> {
    zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all())
}

/// A `servers` child: `<identity>_<worker>`.
struct ServerNode {
    name: String,
    identity: String,
    worker: u64,
}

fn parse_server(name: &str) -> Option<ServerNode> {
    let (identity, worker) = name.rsplit_once('_')?;
    if identity.is_empty() || worker.is_empty() || !worker.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(ServerNode {
        name: name.to_owned(),
        identity: identity.to_owned(),
        worker: worker.parse().ok()?,
    })
}

/// A small jitter from the clock and the process id, so racing start-ups spread out.
fn jitter_ms(max: u64) -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos() as u64);
    (nanos ^ (u64::from(std::process::id()) << 7)) % max.max(1)
}

impl ZooKeeperCoordinator {
    /// A coordinator for `zookeeper://HOST:PORT[,HOST:PORT...]/snowflake/APP?...`.
    ///
    /// Parameters: `ttl` (session timeout, 200 ms to 60 s, default 10 s; the server may
    /// negotiate it into its own `minSessionTimeout`..`maxSessionTimeout`), `server` (this
    /// server's identity, default `<ip>:<port>` with the `port` parameter, or `<ip>:<pid>`),
    /// `port`, `cache` (an absolute path of a file remembering the last worker id), `max_skew`
    /// (the start-up clock check's bound, default 5 s, `off` to skip it), and `app` when the
    /// path names no application.
    pub fn from_uri(uri: &str) -> Result<ZooKeeperCoordinator, LeaseError> {
        if !uri
            .get(..12)
            .is_some_and(|s| s.eq_ignore_ascii_case("zookeeper://"))
        {
            return Err(invalid(uri, "expected zookeeper://"));
        }
        // User info is refused by the parser (ZooKeeper digest auth is not supported).
        let parts = crate::uri::parse(uri)?;
        if parts.hosts.is_empty() {
            return Err(invalid(uri, "expected HOST:PORT[,HOST:PORT...]"));
        }
        let mut hosts = Vec::new();
        for (host, port) in &parts.hosts {
            let port = port.unwrap_or(2181);
            if port == 0 {
                return Err(invalid(uri, format!("expected HOST:PORT, found {host}:0")));
            }
            hosts.push(format!("{host}:{port}"));
        }
        // `url` resolves `.` and `..` in paths: refuse them as written instead.
        let raw_path = uri[12..].split(['?', '#']).next().unwrap_or("");
        let raw_path = raw_path.find('/').map_or("", |at| &raw_path[at..]);
        for segment in raw_path.split('/').filter(|s| !s.is_empty()) {
            check_segment(uri, segment)?;
        }
        let path = parts.url.path();
        let mut app = None;
        let mut ttl = DEFAULT_SESSION_TIMEOUT;
        let mut identity = None;
        let mut port = None;
        let mut cache = None;
        let mut max_skew = Some(crate::coordinator::DEFAULT_MAX_SKEW);
        for (key, value) in parts.query {
            match key.as_str() {
                "app" => app = Some(value),
                "ttl" => {
                    ttl = crate::parse_duration(&value)
                        .filter(|d| {
                            *d >= Duration::from_millis(200) && *d <= Duration::from_secs(60)
                        })
                        .ok_or_else(|| {
                            invalid(
                                uri,
                                "ttl (the session timeout) must be 200ms to 60s, like 10s",
                            )
                        })?;
                }
                "server" => identity = Some(value),
                "port" => {
                    port = Some(
                        value
                            .parse::<u16>()
                            .map_err(|_| invalid(uri, "port must be a number 0 to 65535"))?,
                    );
                }
                "cache" => {
                    if !value.starts_with('/') {
                        return Err(invalid(uri, "cache must be an absolute file path"));
                    }
                    cache = Some(PathBuf::from(value));
                }
                "max_skew" => max_skew = crate::coordinator::parse_max_skew(uri, &value)?,
                other => {
                    return Err(invalid(
                        uri,
                        format!(
                            "unknown parameter {other:?} for zookeeper:// \
                             (expected app, ttl, server, port, cache, max_skew)"
                        ),
                    ))
                }
            }
        }
        let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        for segment in &segments {
            check_segment(uri, segment)?;
        }
        let root = match (segments.as_slice(), app) {
            ([], app) | (["snowflake"], app) => {
                let app = app.unwrap_or_else(|| crate::DEFAULT_APP.to_owned());
                check_segment(uri, &app)?;
                format!("{DEFAULT_ROOT}/{app}")
            }
            ([.., last], Some(app)) if *last != app => {
                return Err(invalid(
                    uri,
                    format!("the path names app {last:?} but the app parameter says {app:?}"),
                ))
            }
            (segments, _) => format!("/{}", segments.join("/")),
        };
        let hosts = hosts.join(",");
        let identity = match identity {
            Some(identity) => identity,
            None => format!(
                "{}:{}",
                local_ip(&hosts),
                port.map_or_else(|| std::process::id().to_string(), |p| p.to_string())
            ),
        };
        check_identity(uri, &identity)?;
        let describe = format!("zookeeper://{hosts}{root}?server={identity}");
        Ok(ZooKeeperCoordinator {
            hosts,
            root,
            identity,
            session_timeout: ttl,
            cache,
            max_skew,
            describe,
            runtime: None,
            session: None,
            held: None,
        })
    }

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

    fn unavailable(&self, reason: impl std::fmt::Display) -> LeaseError {
        LeaseError::unavailable(&self.describe, reason)
    }

    /// How long one call may take: bounded by the session timeout, so a hung call never
    /// outlives the lease it serves.
    fn call_limit(&self) -> Duration {
        let timeout = self
            .session
            .as_ref()
            .map_or(self.session_timeout, |s| s.timeout);
        (timeout / 2).max(Duration::from_millis(100))
    }

    fn call<T: Send + 'static, F>(&self, make: impl FnOnce(zk::Client) -> F) -> Result<T, Fault>
    where
        F: Future<Output = Result<T, zk::Error>> + Send + 'static,
    {
        let (Some(runtime), Some(session)) = (&self.runtime, &self.session) else {
            return Err(Fault::Zk(zk::Error::ClientClosed));
        };
        block(runtime, self.call_limit(), make(session.client.clone()))
    }

    fn connect(&mut self) -> Result<(), LeaseError> {
        // zookeeper-client does its socket I/O through async-io, whose reactor (a driver
        // thread and an epoll instance) is global to the process. A forked child inherits the
        // epoll instance shared with its parent and no driver thread, so a connection from it
        // would only time out (or steal the parent's events): refuse at once, clearly.
        let first_user = REACTOR_PID.load(Ordering::Acquire);
        if first_user == 0 {
            let _ = REACTOR_PID.compare_exchange(
                0,
                std::process::id(),
                Ordering::AcqRel,
                Ordering::Acquire,
            );
        } else if first_user != std::process::id() {
            return Err(self.unavailable(
                "this process was forked from one that had already used zookeeper://, and the \
                 ZooKeeper client's I/O reactor does not survive fork(); open zookeeper:// \
                 leases from processes started with spawn/exec (e.g. multiprocessing's \"spawn\"), \
                 or open the first one after forking",
            ));
        }
        if self.runtime.is_none() {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name("clockflake-zookeeper")
                .enable_all()
                .build()
                .map_err(|error| self.unavailable(error))?;
            self.runtime = Some(runtime);
        }
        let Some(runtime) = &self.runtime else {
            return Err(self.unavailable("no runtime"));
        };
        let hosts = self.hosts.clone();
        let timeout = self.session_timeout;
        let limit = timeout + Duration::from_secs(2);
        let connected = block(runtime, limit, async move {
            // Fail fast on a refused connection, but keep trying for a while: a server that
            // is starting refuses sessions for a moment.
            let started = tokio::time::Instant::now();
            loop {
                let attempt = zk::Client::connector()
                    .with_session_timeout(timeout)
                    .with_fail_eagerly()
                    .connect(&hosts)
                    .await;
                match attempt {
                    Err(zk::Error::NoHosts | zk::Error::ConnectionLoss)
                        if started.elapsed() + Duration::from_millis(100) < timeout =>
                    {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                    other => return other,
                }
            }
        });
        let client = connected.map_err(|fault| self.unavailable(format!("connect: {fault}")))?;
        let session = Session {
            id: client.session_id().0,
            timeout: client.session_timeout(),
            state: client.state_watcher(),
            client,
        };
        self.session = Some(session);
        Ok(())
    }

    /// Closes the session (deleting its ephemeral node), waiting briefly until the close is sent.
    fn close_session(&mut self) {
        self.held = None;
        let Some(Session {
            client, mut state, ..
        }) = self.session.take()
        else {
            return;
        };
        drop(client);
        if let Some(runtime) = &self.runtime {
            let _ = block(runtime, Duration::from_secs(2), async move {
                loop {
                    if matches!(
                        state.peek_state(),
                        zk::SessionState::Closed
                            | zk::SessionState::Expired
                            | zk::SessionState::AuthFailed
                    ) {
                        return Ok(());
                    }
                    state.changed().await;
                }
            });
        }
    }

    fn servers_dir(&self) -> String {
        format!("{}/servers", self.root)
    }

    fn instances_dir(&self) -> String {
        format!("{}/instances", self.root)
    }

    fn ensure_dirs(&self) -> Result<(), LeaseError> {
        for dir in [self.servers_dir(), self.instances_dir()] {
            self.call(|client| async move { client.mkdir(&dir, &open_options()).await })
                .map_err(|fault| self.unavailable(format!("create {}: {fault}", self.root)))?;
        }
        Ok(())
    }

    fn children(&self, dir: String) -> Result<Vec<String>, LeaseError> {
        self.call(|client| async move { client.list_children(&dir).await })
            .map_err(|fault| self.unavailable(format!("list {}: {fault}", self.root)))
    }

    /// Every `servers` node naming a worker id of the layout, and the worker ids in use.
    fn list(&self, workers: u64) -> Result<(Vec<ServerNode>, HashSet<u64>), LeaseError> {
        let servers: Vec<ServerNode> = self
            .children(self.servers_dir())?
            .iter()
            .filter_map(|name| parse_server(name))
            .filter(|node| node.worker < workers)
            .collect();
        let instances = self
            .children(self.instances_dir())?
            .iter()
            .filter_map(|name| name.parse::<u64>().ok())
            .collect();
        Ok((servers, instances))
    }

    /// Tries to make `worker` ours by creating its ephemeral node: `Ok(true)` if created,
    /// `Ok(false)` if it exists (someone else's).
    fn try_claim(&self, worker: u64) -> Result<bool, LeaseError> {
        let path = format!("{}/{worker}", self.instances_dir());
        let timeout_ms = self.session.as_ref().map_or(0, |s| s.timeout.as_millis());
        let data = format!("{} {timeout_ms}", self.identity).into_bytes();
        let created = self.call(|client| async move {
            let options = zk::CreateMode::Ephemeral.with_acls(zk::Acls::anyone_all());
            client.create(&path, &data, &options).await
        });
        match created {
            Ok(_) => Ok(true),
            Err(Fault::Zk(zk::Error::NodeExists)) => Ok(false),
            Err(fault) => Err(self.unavailable(format!("claim worker id {worker}: {fault}"))),
        }
    }

    /// The data of `instances/<worker>`, `None` if absent.
    fn instance_data(&self, worker: u64) -> Result<Option<Vec<u8>>, LeaseError> {
        let path = format!("{}/{worker}", self.instances_dir());
        match self.call(|client| async move { client.get_data(&path).await }) {
            Ok((data, _)) => Ok(Some(data)),
            Err(Fault::Zk(zk::Error::NoNode)) => Ok(None),
            Err(fault) => Err(self.unavailable(fault)),
        }
    }

    /// Waits for `instances/<worker>` to vanish (our own identity's previous process, whose
    /// session has not expired yet), at most the timeout it recorded plus a second.
    fn await_predecessor(&self, worker: u64) -> Result<bool, LeaseError> {
        let Some(data) = self.instance_data(worker)? else {
            return Ok(true);
        };
        let text = String::from_utf8_lossy(&data);
        let mut words = text.split(' ');
        if words.next() != Some(self.identity.as_str()) {
            return Ok(false);
        }
        let their_ms: u64 = words.next().and_then(|w| w.parse().ok()).unwrap_or(0);
        let patience = Duration::from_millis(their_ms.min(60_000) + 1000);
        let started = Instant::now();
        while started.elapsed() < patience {
            std::thread::sleep(Duration::from_millis(50));
            if self.instance_data(worker)?.is_none() {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// `servers` nodes of other holders whose worker id is not in use, least recently used
    /// (oldest data write) first.
    fn takeover_order(
        &self,
        servers: &[ServerNode],
        in_use: &HashSet<u64>,
    ) -> Result<Vec<u64>, LeaseError> {
        let mut by_worker: BTreeMap<u64, i64> = BTreeMap::new();
        for node in servers.iter().filter(|n| !in_use.contains(&n.worker)) {
            let path = format!("{}/{}", self.servers_dir(), node.name);
            let mtime = match self.call(|client| async move { client.check_stat(&path).await }) {
                Ok(Some(stat)) => stat.mtime,
                Ok(None) => continue,
                Err(fault) => return Err(self.unavailable(fault)),
            };
            let entry = by_worker.entry(node.worker).or_insert(mtime);
            *entry = (*entry).max(mtime);
        }
        let mut order: Vec<(i64, u64)> = by_worker.into_iter().map(|(w, m)| (m, w)).collect();
        order.sort_unstable();
        Ok(order.into_iter().map(|(_, w)| w).collect())
    }

    /// Before start-up: if every worker id this identity has is held by an instance of the same
    /// identity (a previous process killed without closing, whose session has not expired
    /// yet), waits for one to be released, at most the session timeout that instance recorded
    /// plus a second. Start-up itself never waits (a lease's deadline counts from the start
    /// of [`Coordinator::acquire`]) and takes another worker id instead, so call this first to
    /// keep the id across a crash; [`crate::open`] does. Errors are left to start-up to report.
    pub fn wait_for_predecessor(&mut self) {
        if self.session.is_some() || self.connect().is_err() {
            return;
        }
        let _ = (|| -> Result<(), LeaseError> {
            let (servers, in_use) = self.list(u64::MAX)?;
            let own: Vec<u64> = servers
                .iter()
                .filter(|n| n.identity == self.identity)
                .map(|n| n.worker)
                .collect();
            if own.is_empty() || own.iter().any(|w| !in_use.contains(w)) {
                return Ok(());
            }
            for worker in own {
                if self.await_predecessor(worker)? {
                    return Ok(());
                }
            }
            Ok(())
        })();
        self.close_session();
    }

    fn read_cache(&self, workers: u64) -> Option<u64> {
        let text = std::fs::read_to_string(self.cache.as_ref()?).ok()?;
        let mut lines = text.lines();
        let expected = format!("{} {}", self.root, self.identity);
        if lines.next()? != expected {
            return None;
        }
        let worker: u64 = lines.next()?.strip_prefix("worker ")?.parse().ok()?;
        (worker < workers).then_some(worker)
    }

    fn write_cache(&self, worker: u64) {
        let Some(path) = &self.cache else { return };
        let text = format!("{} {}\nworker {worker}\n", self.root, self.identity);
        let temp = path.with_extension("tmp");
        // A speed-up only: a failed write costs a listing at the next start.
        if std::fs::write(&temp, text).is_ok() {
            let _ = std::fs::rename(&temp, path);
        }
    }

    /// From when (wall ms) a holder starting at `now_ms` could issue ids under the records the
    /// `servers` nodes at `paths` hold (0: at once), for preferring usable worker ids. Read
    /// without holding the worker id, so only a hint: [`ZooKeeperCoordinator::adopt`] reads
    /// them again once it is ours. A record that cannot be read counts as usable, so that
    /// start-up takes it in its turn and refuses it there, as it always did.
    fn ready_at(
        &self,
        paths: Vec<String>,
        layout: &Layout,
        now_ms: u64,
    ) -> Result<u64, LeaseError> {
        let mut merged: Option<State> = None;
        for path in paths {
            let data = match self.call(|client| async move { client.get_data(&path).await }) {
                Ok((data, _)) => data,
                Err(Fault::Zk(zk::Error::NoNode)) => continue,
                Err(fault) => return Err(self.unavailable(fault)),
            };
            if data.is_empty() {
                continue;
            }
            let Ok(state) = record::decode(&data) else {
                return Ok(0);
            };
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
        Ok(ready_at_ms(layout, merged.as_ref(), now_ms))
    }

    /// Claims a worker id (its ephemeral node created by our session): the first candidate
    /// (in the order of the type's docs) whose record can be used at `now_ms`; if none can,
    /// the one usable first.
    fn claim(&self, layout: &Layout, now_ms: u64) -> Result<u64, LeaseError> {
        let workers = layout.max_worker_id().saturating_add(1);
        if let Some(worker) = self.read_cache(workers) {
            let own = format!("{}/{}_{worker}", self.servers_dir(), self.identity);
            let exists = {
                let own = own.clone();
                self.call(|client| async move { client.check_stat(&own).await })
            };
            if matches!(exists, Ok(Some(_)))
                && self.ready_at(vec![own], layout, now_ms)? == 0
                && self.try_claim(worker)?
            {
                return Ok(worker);
            }
        }
        for round in 0..CLAIM_ROUNDS {
            if round > 0 {
                std::thread::sleep(Duration::from_millis(5 + jitter_ms(40)));
            }
            let (servers, in_use) = self.list(workers)?;
            // 1. This identity's own worker ids.
            let mut own: Vec<u64> = servers
                .iter()
                .filter(|n| n.identity == self.identity)
                .map(|n| n.worker)
                .filter(|w| !in_use.contains(w))
                .collect();
            own.sort_unstable();
            own.dedup();
            // 2. The smallest worker ids no `servers` node names (never used: usable at once).
            let named: HashSet<u64> = servers.iter().map(|n| n.worker).collect();
            let fresh: Vec<u64> = (0..workers)
                .filter(|w| !named.contains(w) && !in_use.contains(w))
                .take(FRESH_PER_ROUND)
                .collect();
            // 3. Every id has a node: take over one not in use, least recently used first.
            let takeover = if fresh.is_empty() {
                self.takeover_order(&servers, &in_use)?
            } else {
                Vec::new()
            };
            let candidates = own.iter().chain(&fresh).chain(&takeover).copied();
            let mut later: Vec<(u64, u64)> = Vec::new();
            let mut tried = false;
            for worker in candidates {
                tried = true;
                let ready_at = if fresh.contains(&worker) {
                    0
                } else {
                    let paths = servers
                        .iter()
                        .filter(|n| n.worker == worker)
                        .map(|n| format!("{}/{}", self.servers_dir(), n.name))
                        .collect();
                    self.ready_at(paths, layout, now_ms)?
                };
                if ready_at > 0 {
                    later.push((ready_at, worker));
                } else if self.try_claim(worker)? {
                    return Ok(worker);
                }
            }
            // None usable at once: the one usable first.
            later.sort_unstable();
            for (_, worker) in later {
                if self.try_claim(worker)? {
                    return Ok(worker);
                }
            }
            if !tried && (0..workers).all(|w| in_use.contains(&w)) {
                return Err(LeaseError::Core(Error::WorkerPoolExhausted { workers }));
            }
        }
        Err(self.unavailable(format!(
            "gave up after {CLAIM_ROUNDS} listings: every free worker id was claimed by another \
             server starting at the same time"
        )))
    }

    /// Holding `instances/<worker>`: merges the records of every `servers` node naming the
    /// worker into this identity's node and deletes the others.
    fn adopt(&mut self, worker: u64) -> Result<Option<State>, LeaseError> {
        let servers_dir = self.servers_dir();
        let mine_name = format!("{}_{worker}", self.identity);
        let names: Vec<String> = self
            .children(servers_dir.clone())?
            .into_iter()
            .filter(|name| parse_server(name).is_some_and(|n| n.worker == worker))
            .collect();
        let mut merged: Option<(State, i64)> = None;
        let mut mine_version = None;
        for name in &names {
            let path = format!("{servers_dir}/{name}");
            let read = {
                let path = path.clone();
                self.call(|client| async move { client.get_data(&path).await })
            };
            let (data, stat) = match read {
                Ok(found) => found,
                Err(Fault::Zk(zk::Error::NoNode)) => continue,
                Err(fault) => return Err(self.unavailable(fault)),
            };
            if *name == mine_name {
                mine_version = Some(stat.version);
            }
            if data.is_empty() {
                continue;
            }
            let state = record::decode(&data).map_err(|reason| {
                LeaseError::corrupt(format!("{} node {path}", self.describe), reason)
            })?;
            merged = Some(match merged {
                None => (state, stat.mtime),
                Some((mut acc, mtime)) => {
                    if acc.layout_fingerprint != state.layout_fingerprint {
                        return Err(LeaseError::corrupt(
                            format!("{} node {path}", self.describe),
                            format!(
                                "worker id {worker} has records from two layouts \
                                 (fingerprints {} and {})",
                                acc.layout_fingerprint, state.layout_fingerprint
                            ),
                        ));
                    }
                    for (slot, mark) in acc.high_water_ms.iter_mut().zip(state.high_water_ms) {
                        *slot = (*slot).max(mark);
                    }
                    if stat.mtime > mtime {
                        acc.clock_seq = state.clock_seq;
                        (acc, stat.mtime)
                    } else {
                        (acc, mtime)
                    }
                }
            });
        }
        let state = merged.map(|(state, _)| state);
        let data = state
            .as_ref()
            .map(record::encode)
            .unwrap_or_default()
            .into_bytes();
        let mine_path = format!("{servers_dir}/{mine_name}");
        let version = match mine_version {
            None => {
                let path = mine_path.clone();
                let created = self.call(|client| async move {
                    client.create(&path, &data, &open_options()).await
                });
                created.map_err(|fault| self.unavailable(fault))?.0.version
            }
            // Written even when unchanged: the new version fences off any earlier holder
            // still writing this node (its next renewal fails with `BadVersion`).
            Some(version) => {
                let path = mine_path.clone();
                let written = self.call(|client| async move {
                    client.set_data(&path, &data, Some(version)).await
                });
                written.map_err(|fault| self.unavailable(fault))?.version
            }
        };
        // Only now, with the merged record safe in our node, drop the others.
        for name in names.iter().filter(|name| **name != mine_name) {
            let path = format!("{servers_dir}/{name}");
            match self.call(|client| async move { client.delete(&path, None).await }) {
                Ok(()) | Err(Fault::Zk(zk::Error::NoNode)) => {}
                Err(fault) => return Err(self.unavailable(fault)),
            }
        }
        self.held = Some(Held {
            worker_id: worker,
            server_path: mine_path,
            instance_path: format!("{}/{worker}", self.instances_dir()),
            version,
        });
        Ok(state)
    }

    /// Writes `data` to our `servers` node, fenced by our ephemeral node and the version.
    fn write_fenced(&mut self, data: Vec<u8>) -> Result<(), LeaseError> {
        let Some(held) = &self.held else {
            return Err(LeaseError::lost("no worker id is held"));
        };
        let (instance, server, version) = (
            held.instance_path.clone(),
            held.server_path.clone(),
            held.version,
        );
        let written = self.call(|client| async move {
            let mut writer = client.new_multi_writer();
            writer.add_check_version(&instance, 0)?;
            writer.add_set_data(&server, &data, Some(version))?;
            writer.commit().await.map_err(zk::Error::from)
        });
        match written {
            Ok(results) => {
                let stat = results.into_iter().find_map(|result| match result {
                    zk::MultiWriteResult::SetData { stat } => Some(stat),
                    _ => None,
                });
                if let (Some(stat), Some(held)) = (stat, self.held.as_mut()) {
                    held.version = stat.version;
                }
                Ok(())
            }
            Err(Fault::Zk(error)) if session_gone(&error) => Err(LeaseError::lost(format!(
                "the ZooKeeper session expired ({error}); worker id {} may belong to someone else",
                held.worker_id
            ))),
            Err(Fault::Zk(zk::Error::NoNode)) => Err(LeaseError::lost(format!(
                "the nodes of worker id {} are gone (taken over or deleted)",
                held.worker_id
            ))),
            Err(Fault::Zk(zk::Error::BadVersion)) => self.recover_version(),
            Err(fault) => Err(self.unavailable(format!("renew: {fault}"))),
        }
    }

    /// After `BadVersion`: a write of ours that timed out may have landed after all. If our
    /// session still owns the ephemeral node, nobody else wrote our node: adopt its version.
    fn recover_version(&mut self) -> Result<(), LeaseError> {
        let Some(held) = &self.held else {
            return Err(LeaseError::lost("no worker id is held"));
        };
        let (instance, server) = (held.instance_path.clone(), held.server_path.clone());
        let session_id = self.session_id().unwrap_or(0);
        let owner = self.call(|client| async move { client.check_stat(&instance).await });
        let ours = matches!(owner, Ok(Some(ref stat)) if stat.ephemeral_owner == session_id);
        if !ours {
            return Err(LeaseError::lost(
                "the ephemeral node is no longer this session's",
            ));
        }
        match self.call(|client| async move { client.check_stat(&server).await }) {
            Ok(Some(stat)) => {
                if let Some(held) = self.held.as_mut() {
                    held.version = stat.version;
                }
                Err(self.unavailable("renew: our last write landed late; retrying"))
            }
            Ok(None) => Err(LeaseError::lost("the servers node is gone")),
            Err(fault) => Err(self.unavailable(fault)),
        }
    }
}

impl Coordinator for ZooKeeperCoordinator {
    fn describe(&self) -> String {
        self.describe.clone()
    }

    fn acquire(&mut self, layout: &Layout, now_ms: u64) -> Result<Grant, LeaseError> {
        // Start-up always runs on a new session: a lost one is never revived.
        self.close_session();
        self.connect()?;
        let result = self.ensure_dirs().and_then(|()| {
            let worker = self.claim(layout, now_ms)?;
            let state = self.adopt(worker)?;
            Ok((worker, state))
        });
        match result {
            Ok((worker_id, state)) => {
                self.write_cache(worker_id);
                let ttl = self.session.as_ref().map(|s| s.timeout);
                Ok(Grant {
                    worker_id,
                    state,
                    ttl,
                })
            }
            Err(error) => {
                self.close_session();
                Err(error)
            }
        }
    }

    fn renew(&mut self, state: &State) -> Result<(), LeaseError> {
        self.write_fenced(record::encode(state).into_bytes())
    }

    fn release(&mut self, state: Option<&State>) -> Result<(), LeaseError> {
        let mut result = Ok(());
        if let Some(state) = state {
            if self.held.is_some() {
                result = self.write_fenced(record::encode(state).into_bytes());
            }
        }
        if let Some(held) = &self.held {
            let path = held.instance_path.clone();
            let _ = self.call(|client| async move { client.delete(&path, Some(0)).await });
        }
        self.close_session();
        result
    }

    /// The server's clock: the `mtime` ZooKeeper gives the `clock` node when this session
    /// writes it (created on first use), one round trip on the grant's session.
    fn server_time_ms(&mut self) -> Result<Option<u64>, LeaseError> {
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
                let read = {
                    let path = path.clone();
                    self.call(|client| async move { client.get_data(&path).await })
                };
                let data = match read {
                    Ok((data, _)) => data,
                    Err(Fault::Zk(zk::Error::NoNode)) => continue,
                    Err(fault) => return Err(self.unavailable(fault)),
                };
                if data.is_empty() {
                    continue;
                }
                let state = record::decode(&data).map_err(|reason| {
                    LeaseError::corrupt(format!("{} node {path}", self.describe), reason)
                })?;
                found = Some(match found {
                    None => state,
                    Some(mut acc) => {
                        for (slot, mark) in acc.high_water_ms.iter_mut().zip(state.high_water_ms) {
                            *slot = (*slot).max(mark);
                        }
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
            .field("describe", &self.describe)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn code(uri: &str) -> &'static str {
        match ZooKeeperCoordinator::from_uri(uri) {
            Ok(_) => "OK",
            Err(error) => error.code(),
        }
    }

    #[test]
    fn uris() {
        let c = ZooKeeperCoordinator::from_uri(
            "zookeeper://127.0.0.1:2181/snowflake/orders?server=a:1",
        )
        .unwrap();
        assert_eq!(c.root(), "/snowflake/orders");
        assert_eq!(c.identity(), "a:1");
        assert_eq!(c.session_timeout(), DEFAULT_SESSION_TIMEOUT);
        let c =
            ZooKeeperCoordinator::from_uri("zookeeper://zk1,zk2:2182?app=billing&ttl=2s&port=8080")
                .unwrap();
        assert_eq!(c.root(), "/snowflake/billing");
        assert_eq!(c.hosts, "zk1:2181,zk2:2182");
        assert!(c.identity().ends_with(":8080"), "{}", c.identity());
        assert_eq!(c.session_timeout(), Duration::from_secs(2));
        let c = ZooKeeperCoordinator::from_uri("zookeeper://h:1/ids/prod/orders").unwrap();
        assert_eq!(c.root(), "/ids/prod/orders");
        assert_eq!(code("zookeeper://h:1"), "OK");
        for bad in [
            "zookeeper://",
            "zookeeper://:2181/snowflake/a",
            "zookeeper://h:0/snowflake/a",
            "zookeeper://h:99999/snowflake/a",
            "zookeeper://u@h:1/snowflake/a",
            "zookeeper://h:1/snowflake/a?ttl=100ms",
            "zookeeper://h:1/snowflake/a?ttl=2m",
            "zookeeper://h:1/snowflake/a?max_skew=soon",
            "zookeeper://h:1/snowflake/a?bogus=1",
            "zookeeper://h:1/snowflake/a?app=b",
            "zookeeper://h:1/snowflake/../x",
            "zookeeper://h:1/snowflake/a?server=x/y",
            "zookeeper://h:1/snowflake/a?server=",
            "zookeeper://h:1/snowflake/a?cache=relative",
        ] {
            assert_eq!(code(bad), "INVALID_URI", "{bad}");
        }
    }

    #[test]
    fn server_node_names() {
        let node = parse_server("10.0.0.1:8080_17").unwrap();
        assert_eq!((node.identity.as_str(), node.worker), ("10.0.0.1:8080", 17));
        let node = parse_server("a_b_3").unwrap();
        assert_eq!((node.identity.as_str(), node.worker), ("a_b", 3));
        assert!(parse_server("nounderscore").is_none());
        assert!(parse_server("_3").is_none());
        assert!(parse_server("x_").is_none());
        assert!(parse_server("x_-1").is_none());
    }
}
