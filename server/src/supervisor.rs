//! The leased generator and the task that takes the first one: it leases at start (again with
//! backoff while the coordinator refuses or the clock is outside the layout's lifetime). The
//! lease is the lease crate's [`HealingGenerator`], which leases again by itself after a loss
//! (with the same backoff), refusing ids meanwhile with a retryable `COORDINATOR_UNAVAILABLE`:
//! the one mechanism every embedding application uses. Every coordinator call runs in
//! `spawn_blocking` (or on the lease crate's own threads).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use clockflake::Layout;
// The pauses between failed attempts to lease: the lease crate's, which it also uses to lease
// again after a loss.
use clockflake_lease::holder::Backoff;
use clockflake_lease::{
    HealEvent, HealingGenerator, LeaseCounters, LeaseError, LeaseOptions, LeaseStats, FIRST_BACKOFF,
};
use tokio::sync::Notify;

use axum::http::StatusCode;

use crate::error::{codes, ApiError};
use crate::telemetry::Telemetry;

/// How often the clock is looked at again while it is outside the layout's lifetime (before
/// its epoch, or past its last tick). No coordinator is asked meanwhile.
const CLOCK_RECHECK: Duration = Duration::from_secs(1);

/// What the lease looks like now, for `/readyz` and `/metrics`.
#[derive(Clone, Debug)]
pub struct Snapshot {
    /// `active`, `lost`, `closed`, `forked` (the lease's), or `leasing` (none held: not yet,
    /// or leasing again after a loss).
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
    /// The generator, once the first lease is taken; it heals by itself from then on.
    current: RwLock<Option<Arc<HealingGenerator>>>,
    /// Why no lease is held (the last failed attempt, the lost lease, or the clock); shared
    /// with the healing generator's event callback.
    last_error: Arc<Mutex<Option<LeaseError>>>,
    /// When the supervisor tries to lease next, Unix ms (0: not scheduled).
    next_attempt_ms: AtomicU64,
    /// First leases taken (0 or 1; the healing generator counts the leases taken again).
    leases: AtomicU64,
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
            last_error: Arc::new(Mutex::new(None)),
            next_attempt_ms: AtomicU64::new(0),
            leases: AtomicU64::new(0),
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
    /// ...) with `retryAtMs` at the next attempt, or `NOT_LEASED_YET` while no attempt has
    /// anything to say (the first has not ended, or the clock came back within the layout's
    /// lifetime and the next has not ended). Once a lease was taken, the healing generator
    /// itself (it refuses with `COORDINATOR_UNAVAILABLE` while leasing again).
    pub fn generator(&self) -> Result<Arc<HealingGenerator>, ApiError> {
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
        let mut refusal = match last {
            // A clock refusal of an earlier attempt that the clock has left behind.
            Some(LeaseError::Core(
                clockflake::Error::EpochInFuture { .. }
                | clockflake::Error::TimestampExhausted { .. },
            ))
            | None => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                codes::NOT_LEASED_YET,
                "not leased yet: no worker id is leased yet; the server is leasing one",
            ),
            Some(error @ LeaseError::LeaseLost { .. }) => ApiError::from(error),
            Some(error) => {
                let mut refusal = ApiError::from(error);
                refusal.message = format!("no worker id leased: {}", refusal.message);
                refusal
            }
        };
        if refusal.status == StatusCode::SERVICE_UNAVAILABLE && refusal.retry_at_ms.is_none() {
            // An attempt under way (its time passed): retry after the shortest back-off.
            let soonest = clockflake_lease::wall_ms()
                .saturating_add(u64::try_from(FIRST_BACKOFF.as_millis()).unwrap_or(u64::MAX));
            refusal.retry_at_ms = Some(next_attempt.map_or(soonest, |at| at.max(soonest)));
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

    /// Leases once, in the caller's thread (start-up): a configuration error fails at once.
    /// A configuration error (a bad URI, a layout the coordinator cannot serve) comes first;
    /// then a clock outside the layout's lifetime is the reason given.
    pub fn lease_blocking(&self) -> Result<(), LeaseError> {
        match self.open() {
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

    /// A healing generator on the lease, whose events are logged, counted and kept as the
    /// reason no lease is held.
    fn open(&self) -> Result<HealingGenerator, LeaseError> {
        let last_error = Arc::clone(&self.last_error);
        HealingGenerator::open_with_events(
            &self.uri,
            self.layout,
            self.options.clone(),
            move |event| match event {
                HealEvent::Lost { worker_id, reason } => {
                    tracing::warn!(
                        ?worker_id,
                        reason,
                        "lease lost: refusing ids and leasing again"
                    );
                    *lock(&last_error) = Some(LeaseError::LeaseLost {
                        reason: reason.clone(),
                    });
                }
                HealEvent::AttemptFailed { error, retry_in } => {
                    Telemetry::open_failure(error.code());
                    tracing::warn!(code = error.code(), %error, backoff = ?retry_in, "leasing failed; retrying");
                    *lock(&last_error) = Some(error.clone());
                }
                HealEvent::Healed { worker_id } => {
                    tracing::info!(worker_id, "leased a worker id");
                    *lock(&last_error) = None;
                }
                _ => {}
            },
        )
    }

    fn install(&self, gen: HealingGenerator) {
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

    /// Closes the generator (stores the state, releases the worker id, stops healing); it
    /// stays in place, refusing with `GENERATOR_CLOSED`, for its counters.
    async fn retire(self: &Arc<Self>) {
        let Some(gen) = read(&self.current).clone() else {
            return;
        };
        let _ = tokio::task::spawn_blocking(move || {
            // Requests still holding the Arc finish first; close refuses them from then on.
            let worker_id = gen.worker_id();
            match gen.close() {
                Ok(()) => tracing::info!(?worker_id, "lease closed"),
                Err(error) => tracing::warn!(?worker_id, %error, "lease close"),
            }
        })
        .await;
    }

    /// Takes the first lease (unless [`Supervisor::lease_blocking`] did), retrying with
    /// backoff, until one is held or `stop` is called; the healing generator keeps it from
    /// then on.
    pub async fn run(self: Arc<Self>) {
        let mut backoff = Backoff::new();
        while !self.stopping.load(Ordering::Acquire) && read(&self.current).is_none() {
            if self.clock_usable().is_err() {
                self.schedule(CLOCK_RECHECK);
                tokio::select! {
                    () = tokio::time::sleep(CLOCK_RECHECK) => {}
                    () = self.wake.notified() => {}
                }
                continue;
            }
            let this = Arc::clone(&self);
            let opened = tokio::task::spawn_blocking(move || this.open()).await;
            match opened {
                Ok(Ok(gen)) => {
                    if self.stopping.load(Ordering::Acquire) {
                        let _ = tokio::task::spawn_blocking(move || gen.close()).await;
                        break;
                    }
                    self.install(gen);
                }
                Ok(Err(error)) => {
                    Telemetry::open_failure(error.code());
                    let pause = backoff.failed();
                    tracing::warn!(code = error.code(), %error, backoff = ?pause, "leasing failed; retrying");
                    // The next attempt first: a request that sees this error then sees when
                    // to retry (an error without `retryAtMs` failed a test, 1 run in a few).
                    self.schedule(pause);
                    *lock(&self.last_error) = Some(error);
                    tokio::select! {
                        () = tokio::time::sleep(pause) => {}
                        () = self.wake.notified() => {}
                    }
                }
                Err(join_error) => {
                    tracing::error!(%join_error, "leasing task failed");
                    tokio::time::sleep(backoff.failed()).await;
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
        let heal = gen.as_ref().map(|gen| gen.stats());
        let stats = gen.as_ref().and_then(|gen| gen.lease_stats());
        let totals = gen
            .as_ref()
            .map_or_else(LeaseCounters::default, |gen| gen.counters());
        let active = gen.as_ref().is_some_and(|gen| gen.is_active());
        let deadline_in_ms = stats.as_ref().and_then(|s| s.deadline_in_ms);
        let clock = self.layout.check_time(clockflake_lease::wall_ms());
        let clock_in_range = clock.is_ok();
        let ready = active
            && clock_in_range
            && !self.stopping.load(Ordering::Acquire)
            && deadline_in_ms.is_none_or(|ms| ms > self.ready_margin_ms);
        let state = match (&heal, &stats) {
            (Some(heal), _) if heal.state == "closed" => "closed",
            (_, Some(stats)) => stats.state,
            _ => "leasing",
        };
        Snapshot {
            state,
            ready,
            worker_id: gen.as_ref().and_then(|gen| gen.worker_id()),
            deadline_in_ms,
            stats,
            totals,
            leases: self.leases.load(Ordering::Relaxed) + heal.as_ref().map_or(0, |h| h.heals),
            leases_lost: heal.as_ref().map_or(0, |h| h.losses),
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

    fn supervisor() -> Supervisor {
        Supervisor::new(
            "file:///nonexistent/clockflake-server-test?app=t".to_owned(),
            Layout::CLOCKSEQ,
            LeaseOptions::default(),
            Duration::from_millis(250),
        )
    }

    /// Before any attempt to lease has ended, an id request gets a code of its own, not
    /// `LEASE_LOST` (nothing was lost): a 503 retried at the next attempt.
    #[test]
    fn not_leased_yet_has_its_own_code() {
        let supervisor = supervisor();
        let refusal = supervisor.generator().err().unwrap();
        assert_eq!(refusal.code, codes::NOT_LEASED_YET);
        assert_eq!(refusal.status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(
            refusal.message.starts_with("not leased yet: "),
            "{}",
            refusal.message
        );
        // The same once a clock refusal of an earlier attempt is behind the clock.
        *lock(&supervisor.last_error) = Some(LeaseError::Core(clockflake::Error::EpochInFuture {
            now_ms: 0,
            epoch_ms: 1,
        }));
        supervisor.schedule(Duration::from_secs(1));
        let refusal = supervisor.generator().err().unwrap();
        assert_eq!(refusal.code, codes::NOT_LEASED_YET);
        assert!(refusal.retry_at_ms.is_some());
        // A failed attempt answers its own code.
        *lock(&supervisor.last_error) = Some(LeaseError::WorkerPoolExhausted { workers: 128 });
        let refusal = supervisor.generator().err().unwrap();
        assert_eq!(refusal.code, "WORKER_POOL_EXHAUSTED");
        assert_eq!(refusal.status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(
            refusal
                .message
                .starts_with("no worker id leased: worker pool exhausted: all 128"),
            "{}",
            refusal.message
        );
    }
}
