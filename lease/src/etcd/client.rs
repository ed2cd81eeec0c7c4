//! The runtime bridge: etcd's async gRPC client on a private one-thread tokio runtime, one
//! client per endpoint, every request bounded in time and moved to the next endpoint when
//! one fails or does not answer.

use std::future::Future;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use etcd_client::{Certificate, Client, ConnectOptions, TlsOptions};
use tonic::Code;

/// Why a request did not return a result.
pub(super) enum Fault {
    /// An error from the client or the server.
    Etcd(etcd_client::Error),
    /// No answer within the time allowed.
    Timeout,
    /// The runtime could not be built.
    Runtime(String),
}

impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fault::Etcd(error) => write!(f, "{error}"),
            Fault::Timeout => f.write_str("no answer in time"),
            Fault::Runtime(reason) => f.write_str(reason),
        }
    }
}

/// What etcd-client says when a keep-alive finds the lease gone (a TTL of 0 or less).
pub(super) const LEASE_NOT_FOUND: &str = "lease not found";

/// Whether `fault` says the lease is gone: a keep-alive answered with a TTL of 0, or the
/// server does not know the lease (`etcdserver: requested lease not found`).
pub(super) fn lease_gone(fault: &Fault) -> bool {
    match fault {
        Fault::Etcd(etcd_client::Error::LeaseKeepAliveError(reason)) => reason == LEASE_NOT_FOUND,
        Fault::Etcd(etcd_client::Error::GRpcStatus(status)) => {
            status.code() == Code::NotFound && status.message().contains("lease not found")
        }
        _ => false,
    }
}

/// Whether `error` is an answer every endpoint would give alike (a refused password, a lease
/// the cluster no longer knows, a request it refuses): not worth a failover.
fn is_final(error: &etcd_client::Error) -> bool {
    match error {
        etcd_client::Error::GRpcStatus(status) => matches!(
            status.code(),
            Code::InvalidArgument
                | Code::PermissionDenied
                | Code::Unauthenticated
                | Code::NotFound
                | Code::FailedPrecondition
                | Code::OutOfRange
        ),
        etcd_client::Error::LeaseKeepAliveError(reason) => reason == LEASE_NOT_FOUND,
        etcd_client::Error::InvalidArgs(_) | etcd_client::Error::InvalidUri(_) => true,
        _ => false,
    }
}

/// The cluster's endpoints, a lazily connected client for each, and the runtime that drives
/// them.
pub(super) struct Endpoints {
    urls: Vec<String>,
    /// User and password (never shown: `ConnectOptions`'s `Debug` would show the password,
    /// so nothing here derives it), TLS.
    options: ConnectOptions,
    clients: Vec<Option<Client>>,
    /// The endpoint asked first: the last one that answered.
    current: usize,
    /// The runtime and the process that built it: a forked child builds its own, since the
    /// parent's worker thread does not exist there.
    runtime: Option<(tokio::runtime::Runtime, u32)>,
}

impl Endpoints {
    pub(super) fn new(
        urls: Vec<String>,
        user: Option<(String, String)>,
        tls: bool,
        cacert: Option<&[u8]>,
    ) -> Endpoints {
        let mut options = ConnectOptions::new().with_keep_alive_while_idle(false);
        if let Some((name, password)) = user {
            options = options
                .with_user(name, password)
                .with_auto_token_refresh(true);
        }
        if tls {
            let mut config = TlsOptions::new().with_native_roots();
            if let Some(pem) = cacert {
                config = config.ca_certificate(Certificate::from_pem(pem));
            }
            options = options.with_tls(config);
        }
        let clients = urls.iter().map(|_| None).collect();
        Endpoints {
            urls,
            options,
            clients,
            current: 0,
            runtime: None,
        }
    }

    /// `host:port` of the endpoint asked first.
    pub(super) fn current_authority(&self) -> &str {
        let url = &self.urls[self.current.min(self.urls.len() - 1)];
        url.split_once("://").map_or(url.as_str(), |(_, rest)| rest)
    }

    fn runtime(&mut self) -> Result<&tokio::runtime::Runtime, Fault> {
        let pid = std::process::id();
        if self
            .runtime
            .as_ref()
            .is_some_and(|(_, built_by)| *built_by != pid)
        {
            // A forked child: the parent's runtime thread and connections are not here, and
            // dropping them would wait for a thread that does not exist.
            for client in self.clients.iter_mut() {
                std::mem::forget(client.take());
            }
            std::mem::forget(self.runtime.take());
        }
        if self.runtime.is_none() {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name("clockflake-etcd")
                .enable_all()
                .build()
                .map_err(|error| Fault::Runtime(format!("start the client's runtime: {error}")))?;
            self.runtime = Some((runtime, pid));
        }
        match &self.runtime {
            Some((runtime, _)) => Ok(runtime),
            None => Err(Fault::Runtime("no runtime".into())),
        }
    }

    /// Runs `request` with a client of the endpoint asked first, and on the next endpoint
    /// when that one fails or does not answer, for at most `budget` in all. Each endpoint is
    /// given an equal share of the budget (at least 100 ms), so that a frozen member costs
    /// only its share; an answer every endpoint would give alike is returned at once.
    pub(super) fn call<T, F, Fut>(&mut self, budget: Duration, request: F) -> Result<T, Fault>
    where
        T: Send + 'static,
        F: Fn(Client) -> Fut + Clone + Send + 'static,
        Fut: Future<Output = Result<T, etcd_client::Error>> + Send + 'static,
    {
        let started = Instant::now();
        let count = u32::try_from(self.urls.len()).unwrap_or(u32::MAX).max(1);
        let share = (budget / count).max(Duration::from_millis(100));
        let mut last = Fault::Timeout;
        loop {
            let remaining = budget.saturating_sub(started.elapsed());
            if remaining.is_zero() {
                return Err(last);
            }
            let at = self.current;
            let url = self.urls[at].clone();
            let cached = self.clients[at].clone();
            let options = self.options.clone();
            let request = request.clone();
            let attempt = async move {
                let client = match cached {
                    Some(client) => client,
                    None => match Client::connect([url], Some(options)).await {
                        Ok(client) => client,
                        Err(error) => return (None, Err(error)),
                    },
                };
                let result = request(client.clone()).await;
                (Some(client), result)
            };
            let runtime = self.runtime()?;
            match block(runtime, share.min(remaining), attempt) {
                Ok((client, Ok(value))) => {
                    self.clients[at] = client;
                    return Ok(value);
                }
                Ok((client, Err(error))) if is_final(&error) => {
                    self.clients[at] = client;
                    return Err(Fault::Etcd(error));
                }
                Ok((_, Err(error))) => last = Fault::Etcd(error),
                Err(fault) => last = fault,
            }
            // The connection may be to a member that stopped: a new one next time.
            self.clients[at] = None;
            self.current = (at + 1) % self.urls.len();
            // A refused connection fails at once: do not spin through the endpoints.
            std::thread::sleep(Duration::from_millis(20).min(remaining));
        }
    }
}

impl Drop for Endpoints {
    fn drop(&mut self) {
        let pid = std::process::id();
        match self.runtime.take() {
            Some((runtime, built_by)) if built_by == pid => {
                self.clients.clear();
                runtime.shutdown_background();
            }
            Some(other) => {
                for client in self.clients.iter_mut() {
                    std::mem::forget(client.take());
                }
                std::mem::forget(other);
            }
            None => {}
        }
    }
}

/// Runs `future` on `runtime` and waits for it on this thread, at most `limit`.
fn block<T: Send + 'static>(
    runtime: &tokio::runtime::Runtime,
    limit: Duration,
    future: impl Future<Output = T> + Send + 'static,
) -> Result<T, Fault> {
    let (sender, receiver) = mpsc::sync_channel(1);
    runtime.spawn(async move {
        if let Ok(result) = tokio::time::timeout(limit, future).await {
            let _ = sender.send(result);
        }
    });
    // The timeout above ends the task; the margin is for a runtime too busy to run it.
    receiver
        .recv_timeout(limit + Duration::from_secs(1))
        .map_err(|_| Fault::Timeout)
}
