//! The leased generator and the task that keeps one: it leases at start, notices a lost lease,
//! and leases again with backoff. Every coordinator call runs in `spawn_blocking`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use clockflake::Layout;
use clockflake_lease::{LeaseCounters, LeaseError, LeaseOptions, LeaseStats, LeasedGenerator};
use tokio::sync::Notify;

/// How often the supervisor looks at the lease when nothing wakes it.
const LOOK_INTERVAL: Duration = Duration::from_millis(50);
/// First and longest pause between failed attempts to lease.
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// What the lease looks like now, for `/readyz` and `/metrics`.
#[derive(Clone, Debug)]
pub struct Snapshot {
    /// `active`, `lost`, `closed`, `forked` (the generator's), or `leasing` (none held).
    pub state: &'static str,
    pub ready: bool,
    pub worker_id: Option<u64>,
    pub deadline_in_ms: Option<u64>,
    pub stats: Option<LeaseStats>,
    /// Closed generators' counters plus the current one's.
    /// Counters of every generator this process has held (the current one and those closed
    /// before it), so that totals survive re-leasing.
    pub totals: LeaseCounters,
    pub leases: u64,
    pub leases_lost: u64,
    pub lease_failures: u64,
    pub last_error: Option<(&'static str, String)>,
}

pub struct Supervisor {
    uri: String,
    layout: Layout,
    options: LeaseOptions,
    ready_margin_ms: u64,
    current: RwLock<Option<Arc<LeasedGenerator>>>,
    retired: Mutex<LeaseCounters>,
    last_error: Mutex<Option<(&'static str, String)>>,
    leases: AtomicU64,
    leases_lost: AtomicU64,
    lease_failures: AtomicU64,
    stopping: AtomicBool,
    wake: Notify,
}

fn read<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(PoisonError::into_inner)
}

fn write<T>(lock: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(PoisonError::into_inner)
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Supervisor {
    pub fn new(
        uri: String,
        layout: Layout,
        options: LeaseOptions,
        ready_margin: Duration,
    ) -> Supervisor {
        Supervisor {
            uri,
            layout,
            options,
            ready_margin_ms: u64::try_from(ready_margin.as_millis()).unwrap_or(u64::MAX),
            current: RwLock::new(None),
            retired: Mutex::new(LeaseCounters::default()),
            last_error: Mutex::new(None),
            leases: AtomicU64::new(0),
            leases_lost: AtomicU64::new(0),
            lease_failures: AtomicU64::new(0),
            stopping: AtomicBool::new(false),
            wake: Notify::new(),
        }
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The generator to take ids from, or why there is none (503).
    pub fn generator(&self) -> Result<Arc<LeasedGenerator>, LeaseError> {
        if let Some(gen) = read(&self.current).as_ref() {
            return Ok(Arc::clone(gen));
        }
        if self.stopping.load(Ordering::Acquire) {
            return Err(LeaseError::Closed);
        }
        Err(match lock(&self.last_error).as_ref() {
            Some((code, message)) if *code != "LEASE_LOST" => LeaseError::CoordinatorUnavailable {
                coordinator: clockflake_lease::redact(&self.uri),
                reason: format!("no worker id leased yet ({code}: {message}); retrying"),
            },
            _ => LeaseError::LeaseLost {
                reason: "no worker id is leased right now; the server is leasing one".to_owned(),
            },
        })
    }

    /// Asks the supervisor to look at the lease now (an id call saw `LEASE_LOST`).
    pub fn poke(&self) {
        self.wake.notify_one();
    }

    /// Leases once, in the caller's thread (start-up): a configuration error fails at once.
    pub fn lease_blocking(&self) -> Result<(), LeaseError> {
        match clockflake_lease::open(&self.uri, self.layout, self.options.clone()) {
            Ok(gen) => {
                self.install(gen);
                Ok(())
            }
            Err(error) => {
                self.lease_failures.fetch_add(1, Ordering::Relaxed);
                *lock(&self.last_error) = Some((error.code(), error.to_string()));
                Err(error)
            }
        }
    }

    fn install(&self, gen: LeasedGenerator) {
        tracing::info!(
            worker_id = gen.worker_id(),
            coordinator = gen.coordinator(),
            "leased a worker id"
        );
        self.leases.fetch_add(1, Ordering::Relaxed);
        *lock(&self.last_error) = None;
        *write(&self.current) = Some(Arc::new(gen));
    }

    /// Takes the generator out and closes it (stores the state, releases the worker id),
    /// adding its counters to the totals.
    async fn retire(self: &Arc<Self>) {
        let Some(gen) = write(&self.current).take() else {
            return;
        };
        let this = Arc::clone(self);
        let _ = tokio::task::spawn_blocking(move || {
            // Requests still holding the Arc finish first; close refuses them from then on.
            let result = gen.close();
            *lock(&this.retired) += gen.stats().counters;
            match result {
                Ok(()) => tracing::info!(worker_id = gen.worker_id(), "lease closed"),
                Err(error) => tracing::warn!(worker_id = gen.worker_id(), %error, "lease close"),
            }
        })
        .await;
    }

    /// Keeps a lease until `stop` resolves (or `close` is called).
    pub async fn run(self: Arc<Self>) {
        let mut backoff = FIRST_BACKOFF;
        while !self.stopping.load(Ordering::Acquire) {
            let held = read(&self.current).clone();
            match held {
                Some(gen) if gen.is_active() => {
                    backoff = FIRST_BACKOFF;
                    tokio::select! {
                        () = tokio::time::sleep(LOOK_INTERVAL) => {}
                        () = self.wake.notified() => {}
                    }
                    continue;
                }
                Some(gen) => {
                    let state = gen.stats().state;
                    self.leases_lost.fetch_add(1, Ordering::Relaxed);
                    *lock(&self.last_error) = Some((
                        "LEASE_LOST",
                        format!("worker id {} lease {state}", gen.worker_id()),
                    ));
                    tracing::warn!(
                        worker_id = gen.worker_id(),
                        state,
                        "lease lost: refusing ids and leasing again"
                    );
                    drop(gen);
                    self.retire().await;
                }
                None => {}
            }
            if self.stopping.load(Ordering::Acquire) {
                break;
            }
            let this = Arc::clone(&self);
            let opened = tokio::task::spawn_blocking(move || {
                clockflake_lease::open(&this.uri, this.layout, this.options.clone())
            })
            .await;
            match opened {
                Ok(Ok(gen)) => {
                    if self.stopping.load(Ordering::Acquire) {
                        let _ = tokio::task::spawn_blocking(move || gen.close()).await;
                        break;
                    }
                    self.install(gen);
                    backoff = FIRST_BACKOFF;
                }
                Ok(Err(error)) => {
                    self.lease_failures.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(code = error.code(), %error, ?backoff, "leasing failed; retrying");
                    *lock(&self.last_error) = Some((error.code(), error.to_string()));
                    tokio::select! {
                        () = tokio::time::sleep(backoff) => {}
                        () = self.wake.notified() => {}
                    }
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
                Err(join_error) => {
                    tracing::error!(%join_error, "leasing task failed");
                    tokio::time::sleep(backoff).await;
                }
            }
        }
    }

    /// Marks the server as stopping (unready, no more leases).
    pub fn stop(&self) {
        self.stopping.store(true, Ordering::Release);
        self.wake.notify_one();
    }

    /// Closes the lease: the state is stored and the worker id released.
    pub async fn close(self: &Arc<Self>) {
        self.stop();
        self.retire().await;
    }

    pub fn snapshot(&self) -> Snapshot {
        let gen = read(&self.current).clone();
        let stats = gen.as_ref().map(|gen| gen.stats());
        let mut totals = *lock(&self.retired);
        if let Some(stats) = &stats {
            totals += stats.counters;
        }
        let active = gen.as_ref().is_some_and(|gen| gen.is_active());
        let deadline_in_ms = stats.as_ref().and_then(|s| s.deadline_in_ms);
        let ready = active
            && !self.stopping.load(Ordering::Acquire)
            && deadline_in_ms.is_none_or(|ms| ms > self.ready_margin_ms);
        Snapshot {
            state: stats.as_ref().map_or("leasing", |s| s.state),
            ready,
            worker_id: gen.as_ref().map(|gen| gen.worker_id()),
            deadline_in_ms,
            stats,
            totals,
            leases: self.leases.load(Ordering::Relaxed),
            leases_lost: self.leases_lost.load(Ordering::Relaxed),
            lease_failures: self.lease_failures.load(Ordering::Relaxed),
            last_error: lock(&self.last_error).clone(),
        }
    }

    pub fn coordinator(&self) -> String {
        clockflake_lease::redact(&self.uri)
    }
}
