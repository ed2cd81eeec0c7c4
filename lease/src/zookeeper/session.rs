//! The runtime bridge: the async ZooKeeper client run on a private one-thread tokio runtime,
//! one session at a time, every call bounded in time.

use std::future::Future;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use zookeeper_client as zk;

use super::ZooKeeperCoordinator;
use crate::LeaseError;

/// The process that first used the ZooKeeper client (see [`ZooKeeperCoordinator::connect`]).
static REACTOR_PID: AtomicU32 = AtomicU32::new(0);

pub(super) struct Session {
    pub(super) client: zk::Client,
    pub(super) state: zk::StateWatcher,
    pub(super) id: i64,
    pub(super) timeout: Duration,
}

pub(super) struct Held {
    pub(super) worker_id: u64,
    pub(super) server_path: String,
    pub(super) instance_path: String,
    /// Version of `server_path` as we last wrote it.
    pub(super) version: i32,
}

/// Why a ZooKeeper call did not return a result.
pub(super) enum Fault {
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
pub(super) fn session_gone(error: &zk::Error) -> bool {
    matches!(
        error,
        zk::Error::SessionExpired | zk::Error::ClientClosed | zk::Error::AuthFailed
    )
}

/// Runs `future` on `runtime` and waits for it on this thread, at most `limit`.
pub(super) fn block<T: Send + 'static>(
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

pub(super) fn open_options() -> zk::CreateOptions<'static> {
    zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all())
}

impl ZooKeeperCoordinator {
    /// How long one call may take: bounded by the session timeout, so a hung call never
    /// outlives the lease it serves.
    pub(super) fn call_limit(&self) -> Duration {
        let timeout = self
            .session
            .as_ref()
            .map_or(self.session_timeout, |s| s.timeout);
        (timeout / 2).max(Duration::from_millis(100))
    }

    pub(super) fn call<T: Send + 'static, F>(
        &self,
        make: impl FnOnce(zk::Client) -> F,
    ) -> Result<T, Fault>
    where
        F: Future<Output = Result<T, zk::Error>> + Send + 'static,
    {
        let (Some(runtime), Some(session)) = (&self.runtime, &self.session) else {
            return Err(Fault::Zk(zk::Error::ClientClosed));
        };
        block(runtime, self.call_limit(), make(session.client.clone()))
    }

    pub(super) fn connect(&mut self) -> Result<(), LeaseError> {
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
    pub(super) fn close_session(&mut self) {
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

    pub(super) fn ensure_dirs(&self) -> Result<(), LeaseError> {
        for dir in [self.servers_dir(), self.instances_dir()] {
            self.call(|client| async move { client.mkdir(&dir, &open_options()).await })
                .map_err(|fault| self.unavailable(format!("create {}: {fault}", self.root)))?;
        }
        Ok(())
    }

    pub(super) fn children(&self, dir: String) -> Result<Vec<String>, LeaseError> {
        self.call(|client| async move { client.list_children(&dir).await })
            .map_err(|fault| self.unavailable(format!("list {}: {fault}", self.root)))
    }
}
