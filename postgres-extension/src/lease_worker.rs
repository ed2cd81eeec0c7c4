//! The lease worker: a background worker that takes the server's worker id from a coordinator
//! through `clockflake-lease` (`clockflake.lease = 'file:///DIR?app=NAME'`), resumes core's
//! generator from the lease's state record into shared memory, and keeps the record's marks
//! ahead of every id the backends hand out (a reservation, renewed every 100 ms; see
//! shared.rs for the id path's side).
//!
//! It starts once the server is out of recovery (a standby leases nothing until promoted).
//! Any exit but a crash stops ids first; a crash of any process restarts the whole server,
//! shared memory included. A lease that cannot be taken is retried every 5 s (the worker
//! exits with 1 and the postmaster starts it again). A lease lost, or released at shutdown,
//! stops ids until the server restarts: the generator in shared memory is written once.
//!
//! This version speaks `file://` only (one host), through the public `Coordinator` trait:
//! the URI is read here with the parameters `app` and `reserve`. clockflake-lease's own URI
//! parser (`uri::connect`) is private; once it is public every scheme can come through it.

use std::time::Duration;

use clockflake::{Clock, Generator, Layout, Options, State, SystemClock};
use clockflake_lease::{parse_duration, Coordinator, FileCoordinator, LeaseError};
use pgrx::bgworkers::{
    BackgroundWorker, BackgroundWorkerBuilder, BgWorkerStartTime, SignalWakeFlags,
};
use pgrx::prelude::*;

use crate::shared::{pack, Shared};

/// How often the worker checks the lease and renews the reservation when due.
const TURN: Duration = Duration::from_millis(100);

/// How soon a lease that could not be taken is tried again.
const RETRY_START: Duration = Duration::from_secs(5);

/// A `file://` lease URI, read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileLease {
    pub dir: String,
    pub app: String,
    pub reserve_ms: u64,
}

/// Reads `file:///DIR?app=NAME&reserve=DURATION` (the parameters clockflake-lease gives
/// `file://`; `app` defaults to `default`, `reserve` to 1 s).
pub fn parse_lease_uri(uri: &str) -> Result<FileLease, LeaseError> {
    let invalid = |reason: &str| LeaseError::InvalidUri {
        uri: clockflake_lease::redact(uri),
        reason: reason.into(),
    };
    let Some(rest) = uri.strip_prefix("file://") else {
        return Err(invalid(
            "this version of the extension leases from file:// only (file:///DIR?app=NAME)",
        ));
    };
    let (dir, query) = rest.split_once('?').unwrap_or((rest, ""));
    if !dir.starts_with('/') || dir.len() < 2 {
        return Err(invalid(
            "expected an absolute directory: file:///DIR?app=NAME",
        ));
    }
    let mut lease = FileLease {
        dir: dir.to_owned(),
        app: clockflake_lease::DEFAULT_APP.to_owned(),
        reserve_ms: duration_ms(clockflake_lease::DEFAULT_RESERVE),
    };
    for pair in query.split('&').filter(|pair| !pair.is_empty()) {
        match pair.split_once('=') {
            Some(("app", app)) if !app.is_empty() => lease.app = app.to_owned(),
            Some(("reserve", text)) => {
                let reserve = parse_duration(text)
                    .filter(|reserve| !reserve.is_zero())
                    .ok_or_else(|| invalid("reserve must be a duration such as 1s or 500ms"))?;
                lease.reserve_ms = duration_ms(reserve);
            }
            _ => {
                return Err(invalid(&format!(
                    "unknown parameter {pair:?} (app, reserve)"
                )))
            }
        }
    }
    Ok(lease)
}

fn duration_ms(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// Registers the worker (from `_PG_init`, in the postmaster).
pub fn register() {
    BackgroundWorkerBuilder::new("clockflake lease")
        .set_type("clockflake lease")
        .set_library("clockflake")
        .set_function("clockflake_lease_worker_main")
        .enable_shmem_access(None)
        .set_start_time(BgWorkerStartTime::RecoveryFinished)
        .set_restart_time(Some(RETRY_START))
        .load();
}

/// Record marks never go down: each slot the greater of what was stored and what the
/// generator says now, the clock sequence the generator's.
fn merged(stored: &State, now: &State) -> State {
    let mut record = *now;
    for (mark, before) in record.high_water_ms.iter_mut().zip(stored.high_water_ms) {
        *mark = (*mark).max(before);
    }
    record
}

struct Lease {
    coordinator: FileCoordinator,
    reserve_ms: u64,
    /// The record the coordinator holds: it covers every id handed out.
    stored: State,
}

impl Lease {
    /// Takes a worker id, resumes the generator from its record, persists the first
    /// reservation and publishes both.
    fn start(shared: &Shared, layout: Layout, uri: &str) -> Result<Lease, LeaseError> {
        let target = parse_lease_uri(uri)?;
        let mut coordinator = FileCoordinator::new(&target.dir, &target.app)?;
        let grant = coordinator.acquire(&layout, SystemClock.now_ms())?;
        let started = (|| {
            let generator = match &grant.state {
                Some(state) => Generator::resume(layout, state, Options::default())?,
                None => Generator::new(layout, grant.worker_id, Options::default())?,
            };
            let now_ms = SystemClock.now_ms();
            let until_ms = now_ms.saturating_add(target.reserve_ms);
            let current = generator.state();
            let mut record = grant
                .state
                .map_or(current, |stored| merged(&stored, &current));
            record.reserve(until_ms);
            coordinator.renew(&record)?;
            Ok::<_, LeaseError>((generator, record, pack(until_ms, record.clock_seq)))
        })();
        let (generator, stored, reservation) = match started {
            Ok(started) => started,
            Err(error) => {
                // Nothing was issued: the worker id goes back as it was.
                let _ = coordinator.release(None);
                return Err(error);
            }
        };
        log!(
            "clockflake: leased worker id {} from {} (reservations of {} ms)",
            grant.worker_id,
            coordinator.redacted_uri(),
            target.reserve_ms
        );
        // SAFETY: the one call of this shared-memory lifetime: a worker that published does not
        // start again without a server restart (it stops ids and exits 0).
        unsafe { shared.publish_leased(generator, reservation) };
        Ok(Lease {
            coordinator,
            reserve_ms: target.reserve_ms,
            stored,
        })
    }

    /// One turn: the coordinator's cheap check, and a renewal when half the reservation is
    /// used or the generator moved to another clock sequence.
    fn turn(&mut self, shared: &Shared, generator: &Generator) -> Result<(), LeaseError> {
        self.coordinator.check()?;
        let now_ms = SystemClock.now_ms();
        let current = generator.state();
        let (until_ms, clock_seq) = shared.reservation();
        if current.clock_seq == clock_seq && until_ms > now_ms.saturating_add(self.reserve_ms / 2) {
            return Ok(());
        }
        let until_ms = now_ms.saturating_add(self.reserve_ms);
        let mut record = merged(&self.stored, &current);
        record.reserve(until_ms);
        self.coordinator.renew(&record)?;
        self.stored = record;
        shared.renewed(pack(until_ms, record.clock_seq));
        Ok(())
    }
}

/// Stops ids when the worker exits any way but a crash (an ERROR, a SIGTERM), if it had
/// published a generator; a worker that never did leaves the id path waiting for its retry.
#[pg_guard]
unsafe extern "C-unwind" fn stop_ids(_code: std::ffi::c_int, _arg: pg_sys::Datum) {
    let shared = crate::SHARED.get();
    if shared.is_published() {
        shared.stop();
    }
}

#[pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn clockflake_lease_worker_main(_arg: pg_sys::Datum) {
    BackgroundWorker::attach_signal_handlers(SignalWakeFlags::SIGHUP | SignalWakeFlags::SIGTERM);
    let shared = crate::SHARED.get();
    // SAFETY: registering a callback PostgreSQL runs at this process's exit.
    unsafe { pg_sys::before_shmem_exit(Some(stop_ids), pg_sys::Datum::from(0usize)) };
    let Some((layout, uri)) = crate::lease_config() else {
        return;
    };
    if shared.is_published() {
        // A worker that published exited (an ERROR): the generator in shared memory is written
        // once, and backends may be using it. Ids stay stopped until the server restarts.
        shared.stop();
        warning!("clockflake: the lease worker restarted after it had leased; ids stay stopped");
        return;
    }
    let mut lease = match Lease::start(shared, layout, &uri) {
        Ok(lease) => lease,
        Err(error) => {
            let problem = format!("{}: {error}", error.code());
            shared.set_problem(&problem);
            warning!("clockflake: no worker id leased, retrying in 5 s: {problem}");
            // SAFETY: exits this worker; the postmaster starts it again after RETRY_START.
            unsafe { pg_sys::proc_exit(1) }
        }
    };
    let Some(generator) = shared.leased() else {
        return;
    };
    while BackgroundWorker::wait_latch(Some(TURN)) {
        if let Err(error) = lease.turn(shared, generator) {
            let problem = format!("{}: {error}", error.code());
            shared.set_problem(&problem);
            if error.code() == "LEASE_LOST" {
                shared.stop();
                warning!("clockflake: the worker id lease is lost, ids stopped: {problem}");
                return;
            }
            warning!("clockflake: renewal failed, retrying: {problem}");
        }
    }
    // Shutdown: stop ids, then give the worker id back with the stored record, which covers
    // every id handed out (each was below a reservation stored before it was published).
    shared.stop();
    if let Err(error) = lease.coordinator.release(Some(&lease.stored)) {
        warning!("clockflake: releasing the worker id failed: {error}");
    }
}
