//! The leased generator and the task that keeps one: it leases at start, notices a lost lease,
//! and leases again with backoff. Every coordinator call runs in `spawn_blocking`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use clockflake::Layout;
use clockflake_lease::{LeaseCounters, LeaseError, LeaseOptions, LeaseStats, LeasedGenerator};
use tokio::sync::Notify;

use axum::http::StatusCode;

use crate::error::ApiError;
use crate::telemetry::Telemetry;

/// How often the supervisor looks at the lease when nothing wakes it.
const LOOK_INTERVAL: Duration = Duration::from_millis(50);
/// First and longest pause between failed attempts to lease.
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(5);
/// How often the clock is looked at again while it is outside the layout's lifetime (before
/// its epoch, or past its last tick). No coordinator is asked meanwhile.
const CLOCK_RECHECK: Duration = Duration::from_secs(1);

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
    /// Whether the wall clock is within the layout's lifetime (after its epoch, before its
    /// last tick runs out).
    pub clock_in_range: bool,
    /// Worker ids in the layout's pool.
    pub worker_ids: u64,
    pub last_error: Option<(&'static str, String)>,
}

pub struct Supervisor {
    uri: String,
    layout: Layout,
    options: LeaseOptions,
    ready_margin_ms: u64,
    current: RwLock<Option<Arc<LeasedGenerator>>>,
    retired: Mutex<LeaseCounters>,
    /// Why no lease is held (the last failed attempt, the lost lease, or the clock).
    last_error: Mutex<Option<LeaseError>>,
    /// When the supervisor tries to lease next, Unix ms (0: not scheduled).
    next_attempt_ms: AtomicU64,
    leases: AtomicU64,
    leases_lost: AtomicU64,
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
            next_attempt_ms: AtomicU64::new(0),
            leases: AtomicU64::new(0),
            leases_lost: AtomicU64::new(0),
            stopping: AtomicBool::new(false),
            wake: Notify::new(),
        }
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The generator to take ids from, or why there is none, with its own code: the clock
    /// outside the layout's lifetime (`EPOCH_IN_FUTURE`, `TIMESTAMP_EXHAUSTED`), or the last
    /// attempt's refusal (`COORDINATOR_UNAVAILABLE`, `WORKER_POOL_EXHAUSTED`, `CLOCK_SKEW`,
    /// ...) with `retryAtMs` at the next attempt, or `LEASE_LOST` while leasing again.
    pub fn generator(&self) -> Result<Arc<LeasedGenerator>, ApiError> {
        if let Some(gen) = read(&self.current).as_ref() {
            return Ok(Arc::clone(gen));
        }
        if self.stopping.load(Ordering::Acquire) {
            return Err(LeaseError::Closed.into());
        }
        if let Err(error) = self.layout.check_time(clockflake_lease::wall_ms()) {
            return Err(LeaseError::Core(error).into());
        }
        let last = lock(&self.last_error).clone();
        let next_attempt = match self.next_attempt_ms.load(Ordering::Relaxed) {
            0 => None,
            at => Some(at),
        };
        let (error, prefix) = match last {
            // A clock refusal of an earlier attempt that the clock has left behind.
            Some(LeaseError::Core(
                clockflake::Error::EpochInFuture { .. }
                | clockflake::Error::TimestampExhausted { .. },
            ))
            | None => (
                LeaseError::LeaseLost {
                    reason: "no worker id is leased right now; the server is leasing one"
                        .to_owned(),
                },
                "",
            ),
            Some(
                error @ (LeaseError::LeaseLost { .. }
                | LeaseError::Core(clockflake::Error::LeaseLost)),
            ) => (error, ""),
            Some(error) => (error, "no worker id leased: "),
        };
        let mut refusal = ApiError::from(error);
        refusal.message = format!("{prefix}{}", refusal.message);
        if refusal.status == StatusCode::SERVICE_UNAVAILABLE && refusal.retry_at_ms.is_none() {
            refusal.retry_at_ms = next_attempt;
        }
        Err(refusal)
    }

    /// Whether the wall clock is within the layout's lifetime; if not, records why.
    fn clock_usable(&self) -> Result<(), LeaseError> {
        match self.layout.check_time(clockflake_lease::wall_ms()) {
            Ok(()) => Ok(()),
            Err(error) => {
                let error = LeaseError::Core(error);
                let mut last = lock(&self.last_error);
                if last.as_ref().map(LeaseError::code) != Some(error.code()) {
                    tracing::error!(
                        code = error.code(),
                        %error,
                        "the clock is outside the layout's lifetime: serving no ids, asking \
                         no coordinator, looking at the clock again every second"
                    );
                }
                *last = Some(error.clone());
                Err(error)
            }
        }
    }

    /// Asks the supervisor to look at the lease now (an id call saw `LEASE_LOST`).
    pub fn poke(&self) {
        self.wake.notify_one();
    }

    /// Leases once, in the caller's thread (start-up): a configuration error fails at once.
    /// A configuration error (a bad URI, a layout the coordinator cannot serve) comes first;
    /// then a clock outside the layout's lifetime is the reason given.
    pub fn lease_blocking(&self) -> Result<(), LeaseError> {
        match clockflake_lease::open(&self.uri, self.layout, self.options.clone()) {
            Ok(gen) => {
                self.install(gen);
                Ok(())
            }
            Err(error) if !error.is_input_error() && self.clock_usable().is_err() => {
                Err(lock(&self.last_error).clone().unwrap_or(error))
            }
            Err(error) => {
                Telemetry::open_failure(error.code());
                *lock(&self.last_error) = Some(error.clone());
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
        self.next_attempt_ms.store(0, Ordering::Relaxed);
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
                    *lock(&self.last_error) = Some(LeaseError::LeaseLost {
                        reason: format!("worker id {} lease {state}", gen.worker_id()),
                    });
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
            if self.clock_usable().is_err() {
                self.schedule(CLOCK_RECHECK);
                tokio::select! {
                    () = tokio::time::sleep(CLOCK_RECHECK) => {}
                    () = self.wake.notified() => {}
                }
                continue;
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
                    Telemetry::open_failure(error.code());
                    tracing::warn!(code = error.code(), %error, ?backoff, "leasing failed; retrying");
                    *lock(&self.last_error) = Some(error);
                    self.schedule(backoff);
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

    /// Records when the next attempt to lease is due.
    fn schedule(&self, after: Duration) {
        let after_ms = u64::try_from(after.as_millis()).unwrap_or(u64::MAX);
        self.next_attempt_ms.store(
            clockflake_lease::wall_ms().saturating_add(after_ms),
            Ordering::Relaxed,
        );
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
        let clock = self.layout.check_time(clockflake_lease::wall_ms());
        let clock_in_range = clock.is_ok();
        let ready = active
            && clock_in_range
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
            clock_in_range,
            worker_ids: self.layout.max_worker_id().saturating_add(1),
            // The clock out of range is the reason, also while a lease is still held.
            last_error: match clock {
                Err(error) => Some((error.code(), error.to_string())),
                Ok(()) => lock(&self.last_error)
                    .as_ref()
                    .map(|error| (error.code(), error.to_string())),
            },
        }
    }

    pub fn coordinator(&self) -> String {
        clockflake_lease::redact(&self.uri)
    }
}
