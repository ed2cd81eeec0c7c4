//! `CREATE EXTENSION clockflake`: clockflake's ids made inside PostgreSQL (issue 35).
//!
//! One generator per server, core's own [`Generator`], placed in shared memory by the
//! postmaster at start and shared by every backend: the fast path is core's one
//! compare-and-swap on one atomic word, so no two connections can repeat an id. The library
//! must be loaded through `shared_preload_libraries`; loaded any other way it refuses with an
//! ERROR rather than make a generator per backend.
//!
//! Configuration, fixed at server start (`PGC_POSTMASTER`):
//! - `clockflake.layout`: a preset name as core names them (`clockseq`, the default, ...).
//! - `clockflake.lease`: where the worker id is leased from (any coordinator URI of
//!   clockflake-lease: `file://`, `postgres://`, `redis://`, `zookeeper://`, `k8s://`): a
//!   background worker holds the lease, keeps the state record's marks ahead of the ids, and
//!   leases again when the lease is lost (lease_worker.rs, shared.rs).
//! - `clockflake.worker_id_unleased`: a worker id typed by hand instead (-1, the default:
//!   none). The name states the risk: nothing checks that no other server or process uses the
//!   same worker id. With neither set, `next_id()` refuses.
//!
//! The SQL surface is `sql/clockflake--0.1.0.sql`, written by hand (see make.mk: this crate is
//! built with plain `cargo build`, without cargo-pgrx); each `AS 'MODULE_PATHNAME', 'X_wrapper'`
//! there names a `#[pg_extern]` function here, which make.mk checks against the library's
//! exported symbols.

use std::ffi::CString;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

mod lease_worker;
mod shared;

use clockflake::{Error, Generator, Layout, Options, SystemClock};
use pgrx::datetime::TimestampWithTimeZone;
use pgrx::heap_tuple::PgHeapTuple;
use pgrx::pg_sys::panic::ErrorReport;
use pgrx::prelude::*;
use pgrx::{
    pg_shmem_init, AllocatedByRust, GucContext, GucFlags, GucRegistry, GucSetting, PgAtomic,
};

use crate::shared::Shared;

pgrx::pg_module_magic!();

/// `clockflake.layout`: the preset ids are made and decoded with.
static LAYOUT: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(Some(c"clockseq"));

/// `clockflake.lease`: the coordinator URI the worker id is leased from.
static LEASE: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);

/// `clockflake.worker_id_unleased`: a worker id typed by hand, or -1 for none.
static WORKER_ID_UNLEASED: GucSetting<i32> = GucSetting::<i32>::new(-1);

/// The layout and worker id read once in the postmaster by `_PG_init`; every backend is a fork
/// of the postmaster and inherits them.
static CONFIG: OnceLock<Config> = OnceLock::new();

/// Set in the postmaster once the shared generator is in place (inherited by every backend).
static SHARED_READY: AtomicBool = AtomicBool::new(false);

/// The server's one generator, in shared memory.
pub(crate) static SHARED: PgAtomic<Shared> = unsafe { PgAtomic::new(c"clockflake generator") };

/// PostgreSQL's timestamps count microseconds from 2000-01-01T00:00:00Z: that instant in Unix ms.
const POSTGRES_EPOCH_UNIX_MS: i64 = 946_684_800_000;

#[derive(Clone, Debug)]
struct Config {
    layout: Layout,
    /// `clockflake.worker_id_unleased`, or `None`.
    worker_id: Option<u64>,
    /// `clockflake.lease`, or `None`.
    lease: Option<String>,
}

/// The layout and lease URI, for the lease worker.
fn lease_config() -> Option<(Layout, String)> {
    let config = CONFIG.get()?;
    Some((config.layout, config.lease.clone()?))
}

/// The ERRORs of the extension itself (core's refusals go through [`refusal`]).
fn not_preloaded() -> ErrorReport {
    ErrorReport::new(
        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        "clockflake must be loaded through shared_preload_libraries",
        "clockflake",
    )
    .set_detail(
        "clockflake keeps one generator per server in shared memory, shared by every \
         connection; a library loaded by a session cannot, and a generator per session \
         could repeat ids.",
    )
    .set_hint(
        "Add clockflake to shared_preload_libraries in postgresql.conf \
         (shared_preload_libraries = 'clockflake'), restart the server, then \
         CREATE EXTENSION clockflake.",
    )
}

/// Core's refusal as a PostgreSQL ERROR: a SQLSTATE a caller can test (class 22 for bad
/// input, 55000 for the state of the world: the clock, the worker id) and core's stable code
/// in the DETAIL.
pub(crate) fn refusal(error: Error) -> ErrorReport {
    let sqlstate = match error {
        Error::InvalidId(_) => PgSqlErrorCode::ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
        Error::TimestampOutOfRange { .. } => PgSqlErrorCode::ERRCODE_DATETIME_FIELD_OVERFLOW,
        _ if error.is_input_error() => PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
        _ => PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
    };
    let report = ErrorReport::new(sqlstate, format!("clockflake: {error}"), "clockflake")
        .set_detail(format!("clockflake code: {}", error.code()));
    match error.retry_at_ms() {
        Some(at_ms) => report.set_hint(format!("retry at Unix ms {at_ms}")),
        None => report,
    }
}

fn config() -> Result<&'static Config, ErrorReport> {
    CONFIG.get().ok_or_else(not_preloaded)
}

/// Where ids come from.
enum Source {
    /// A worker id typed by hand.
    Unleased(&'static Generator),
    /// The lease worker's generator.
    Leased(&'static Shared, Layout),
}

impl Source {
    fn next_id(&self) -> Result<u64, ErrorReport> {
        match self {
            Source::Unleased(generator) => generator.next_id_with(&SystemClock).map_err(refusal),
            Source::Leased(shared, layout) => shared::next_leased_id(shared, layout),
        }
    }
}

/// The shared generator, for a call that issues ids: refused on a standby, without a worker
/// id, or when the library was not preloaded.
fn generator() -> Result<Source, ErrorReport> {
    if !SHARED_READY.load(Ordering::Acquire) {
        return Err(not_preloaded());
    }
    // SAFETY: a plain call into PostgreSQL, allowed in any backend.
    if unsafe { pg_sys::RecoveryInProgress() } {
        return Err(ErrorReport::new(
            PgSqlErrorCode::ERRCODE_READ_ONLY_SQL_TRANSACTION,
            "clockflake: cannot issue ids during recovery",
            "clockflake",
        )
        .set_detail("This server is a standby (or is still replaying WAL after a crash).")
        .set_hint("Issue ids on the primary."));
    }
    let config = config()?;
    let shared = SHARED.get();
    if let Some(generator) = shared.unleased() {
        return Ok(Source::Unleased(generator));
    }
    if config.lease.is_some() {
        return Ok(Source::Leased(shared, config.layout));
    }
    Err(ErrorReport::new(
        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        "clockflake: no worker id is configured, so this server issues no ids",
        "clockflake",
    )
    .set_hint(
        "Set clockflake.lease = 'file:///DIR?app=NAME' (a leased worker id), or \
         clockflake.worker_id_unleased (a worker id typed by hand: no other server or process \
         making ids of this id space may use the same one, and nothing checks that), in \
         postgresql.conf and restart.",
    ))
}

fn to_bigint(id: u64) -> Result<i64, ErrorReport> {
    // Core's ids are positive 63-bit integers: this never refuses.
    i64::try_from(id).map_err(|_| refusal(Error::InvalidId(clockflake::InvalidId::SignBitSet(id))))
}

/// The next id of the server's generator. Waits out a full tick (at most about a tick) as
/// core's blocking `next_id` does; refuses with core's code otherwise.
#[pg_extern(volatile, parallel_restricted)]
fn next_id() -> Result<i64, ErrorReport> {
    to_bigint(generator()?.next_id()?)
}

/// `n` new ids, strictly increasing (consecutive within a tick, taken a tick's run at a time).
#[pg_extern(volatile, parallel_restricted)]
fn next_ids(n: i32) -> Result<SetOfIterator<'static, i64>, ErrorReport> {
    let count = usize::try_from(n).map_err(|_| {
        ErrorReport::new(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("clockflake: next_ids(n): n must be 0 or more, found {n}"),
            "clockflake",
        )
    })?;
    let mut ids = vec![0u64; count];
    match generator()? {
        // Core's bulk call: whole runs of a tick at once.
        Source::Unleased(generator) => generator
            .next_ids_with(&SystemClock, &mut ids)
            .map_err(refusal)?,
        // A tick's run at a time, each checked against the lease's limits.
        Source::Leased(shared, layout) => shared::next_leased_ids(shared, &layout, &mut ids)?,
    }
    // Distinct by the generator's promise; sorted, they strictly increase even if the clock
    // stepped back during the call and the generator moved to another clock sequence.
    ids.sort_unstable();
    let ids = ids
        .into_iter()
        .map(to_bigint)
        .collect::<Result<Vec<i64>, _>>()?;
    Ok(SetOfIterator::new(ids))
}

fn timestamptz_of_unix_ms(unix_ms: u64) -> Result<TimestampWithTimeZone, ErrorReport> {
    let out_of_range = || {
        ErrorReport::new(
            PgSqlErrorCode::ERRCODE_DATETIME_FIELD_OVERFLOW,
            format!("clockflake: Unix ms {unix_ms} is out of timestamptz's range"),
            "clockflake",
        )
    };
    let micros = i64::try_from(unix_ms)
        .ok()
        .and_then(|ms| ms.checked_sub(POSTGRES_EPOCH_UNIX_MS))
        .and_then(|ms| ms.checked_mul(1000))
        .ok_or_else(out_of_range)?;
    TimestampWithTimeZone::try_from(micros).map_err(|_| out_of_range())
}

/// The Unix ms a timestamptz falls in (rounded down), or core's `TIMESTAMP_OUT_OF_RANGE` for
/// one no layout can hold (infinities, before 1970).
fn unix_ms_of_timestamptz(ts: TimestampWithTimeZone, layout: &Layout) -> Result<u64, ErrorReport> {
    let micros = i64::from(ts);
    let out_of_range = |timestamp_ms: u64| {
        refusal(Error::TimestampOutOfRange {
            timestamp_ms,
            min_ms: layout.epoch_ms(),
            max_ms: layout.lifetime_end_ms().saturating_sub(1),
        })
    };
    if !ts.is_finite() {
        return Err(out_of_range(if micros < 0 { 0 } else { u64::MAX }));
    }
    let unix_ms = micros.div_euclid(1000).checked_add(POSTGRES_EPOCH_UNIX_MS);
    unix_ms
        .and_then(|ms| u64::try_from(ms).ok())
        .ok_or_else(|| out_of_range(0))
}

/// What an id says, under the server's layout: when (the start of its tick), which clock
/// sequence, which worker, which sequence number.
#[pg_extern(immutable, strict, parallel_safe)]
fn decode(id: i64) -> Result<pgrx::composite_type!('static, "id_parts"), ErrorReport> {
    let layout = config()?.layout;
    // A negative bigint is an id with the sign bit set: core's INVALID_ID, with the number as
    // SQL shows it (core's message would show its unsigned bit pattern).
    let unsigned = u64::try_from(id).map_err(|_| {
        ErrorReport::new(
            PgSqlErrorCode::ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
            format!("clockflake: invalid id: expected a bigint of 0 or more, found {id}"),
            "clockflake",
        )
        .set_detail(format!(
            "clockflake code: {}",
            Error::InvalidId(clockflake::InvalidId::SignBitSet(0)).code()
        ))
    })?;
    let parts = layout.decode(unsigned).map_err(refusal)?;
    let mut row: PgHeapTuple<'static, AllocatedByRust> =
        PgHeapTuple::new_composite_type("clockflake.id_parts").map_err(internal)?;
    row.set_by_name("ts", timestamptz_of_unix_ms(parts.timestamp_ms)?)
        .map_err(internal)?;
    row.set_by_name("clock_seq", small(parts.clock_seq)?)
        .map_err(internal)?;
    row.set_by_name("worker_id", to_bigint(parts.worker_id)?)
        .map_err(internal)?;
    row.set_by_name("sequence", to_bigint(parts.sequence)?)
        .map_err(internal)?;
    Ok(row)
}

/// The lowest and highest id a time window can hold (both ends inclusive, to the
/// millisecond), for `WHERE id BETWEEN lo AND hi` and range partitions by id.
#[pg_extern(immutable, strict, parallel_safe)]
fn id_range(
    from: TimestampWithTimeZone,
    to: TimestampWithTimeZone,
) -> Result<pgrx::composite_type!('static, "id_bounds"), ErrorReport> {
    let layout = config()?.layout;
    let from_ms = unix_ms_of_timestamptz(from, &layout)?;
    let to_ms = unix_ms_of_timestamptz(to, &layout)?;
    let (lo, hi) = layout.id_range(from_ms, to_ms).map_err(refusal)?;
    let mut row: PgHeapTuple<'static, AllocatedByRust> =
        PgHeapTuple::new_composite_type("clockflake.id_bounds").map_err(internal)?;
    row.set_by_name("lo", to_bigint(lo)?).map_err(internal)?;
    row.set_by_name("hi", to_bigint(hi)?).map_err(internal)?;
    Ok(row)
}

/// How this server gets its worker id, and what its lease has been through: `state` is
/// `unleased` (a worker id typed by hand), `none` (no worker id configured), or the lease
/// worker's `starting` (no lease held yet), `active`, `healing` (lost, leasing again) or
/// `stopped`; the worker id held now; the coordinator (without secrets); the lease's deadline
/// (none for a lease without a TTL, such as `file://`'s); leases lost, leases
/// taken again after a loss, failed attempts; why the last lease was lost and the last failed
/// attempt's error.
#[pg_extern(volatile, parallel_safe)]
fn lease_status() -> Result<pgrx::composite_type!('static, "lease_status"), ErrorReport> {
    use std::sync::atomic::Ordering::Relaxed;
    let config = config()?;
    if !SHARED_READY.load(Ordering::Acquire) {
        return Err(not_preloaded());
    }
    let shared = SHARED.get();
    let mut row: PgHeapTuple<'static, AllocatedByRust> =
        PgHeapTuple::new_composite_type("clockflake.lease_status").map_err(internal)?;
    let state = match (shared.unleased(), &config.lease, shared.state()) {
        (Some(_), _, _) => "unleased",
        (None, None, _) => "none",
        (None, Some(_), shared::ACTIVE) => "active",
        (None, Some(_), shared::HEALING) => "healing",
        (None, Some(_), shared::STOPPED) => "stopped",
        (None, Some(_), _) => "starting",
    };
    row.set_by_name("state", state).map_err(internal)?;
    let worker_id = match shared.unleased() {
        Some(generator) => Some(generator.worker_id()),
        None => shared.worker_id(),
    };
    if let Some(worker_id) = worker_id {
        row.set_by_name("worker_id", to_bigint(worker_id)?)
            .map_err(internal)?;
    }
    if config.lease.is_some() {
        if let Some(coordinator) = shared.coordinator.get() {
            row.set_by_name("coordinator", coordinator)
                .map_err(internal)?;
        }
        for (name, counter) in [
            ("losses", &shared.losses),
            ("heals", &shared.heals),
            ("failed_attempts", &shared.failed_attempts),
        ] {
            row.set_by_name(name, to_bigint(counter.load(Relaxed))?)
                .map_err(internal)?;
        }
        // The deadline on the wall clock: ids stop then unless a renewal moves it.
        if let Some((slot, _)) = shared.current_slot() {
            let deadline_boot_ms = slot.limits().deadline_boot_ms();
            if deadline_boot_ms != 0 && deadline_boot_ms != u64::MAX {
                let now_boot_ms = clockflake_lease::boot_ms();
                let wall_ms =
                    (clockflake_lease::wall_ms() + deadline_boot_ms).saturating_sub(now_boot_ms);
                row.set_by_name("deadline", timestamptz_of_unix_ms(wall_ms)?)
                    .map_err(internal)?;
            }
        }
        if let Some(loss) = shared.last_loss.get() {
            row.set_by_name("last_loss", loss).map_err(internal)?;
        }
        if let Some(problem) = shared.problem.get() {
            row.set_by_name("last_error", problem).map_err(internal)?;
        }
    }
    Ok(row)
}

fn small(value: u64) -> Result<i32, ErrorReport> {
    i32::try_from(value).map_err(|_| internal(format!("{value} does not fit an integer")))
}

/// A failure that is the extension's own bug or a broken installation (the SQL types missing).
fn internal(error: impl std::fmt::Display) -> ErrorReport {
    ErrorReport::new(
        PgSqlErrorCode::ERRCODE_INTERNAL_ERROR,
        format!("clockflake: {error}"),
        "clockflake",
    )
}

fn define_settings() {
    GucRegistry::define_string_guc(
        c"clockflake.layout",
        c"The id layout: a preset name (clockseq, twitter, discord, sonyflake, baidu, js53).",
        c"Fixed at server start. Every server and process of one id space uses the same layout.",
        &LAYOUT,
        GucContext::Postmaster,
        GucFlags::default(),
    );
    GucRegistry::define_string_guc(
        c"clockflake.lease",
        c"Where the worker id is leased from: a coordinator URI (file://, postgres://, \
          redis://, zookeeper://, k8s://).",
        c"A background worker holds the lease and keeps the worker's state record (its marks) \
          ahead of the ids, and leases again if the lease is lost. Fixed at server start. \
          Shown to superusers only: it may hold a password.",
        &LEASE,
        GucContext::Postmaster,
        GucFlags::SUPERUSER_ONLY,
    );
    GucRegistry::define_int_guc(
        c"clockflake.worker_id_unleased",
        c"A worker id typed by hand, not leased: -1 (the default) for none.",
        c"Nothing checks that no other server or process uses the same worker id: two that do \
          can issue the same ids. Fixed at server start.",
        &WORKER_ID_UNLEASED,
        -1,
        i32::MAX,
        GucContext::Postmaster,
        GucFlags::default(),
    );
    // SAFETY: a plain call into PostgreSQL from _PG_init. Warns about, and drops, misspelt
    // clockflake.* settings.
    unsafe { pg_sys::MarkGUCPrefixReserved(c"clockflake".as_ptr()) };
}

/// The configuration as the postmaster reads it at start; a bad one stops the server from
/// starting, with core's code in the log.
fn read_config() -> Result<Config, ErrorReport> {
    let name = LAYOUT
        .get()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    let layout = Layout::by_name(&name).map_err(|error| {
        refusal(error).set_hint(format!(
            "clockflake.layout = '{name}': use one of clockseq, twitter, discord, sonyflake, \
             baidu, js53"
        ))
    })?;
    let worker_id = u64::try_from(WORKER_ID_UNLEASED.get()).ok();
    if let Some(worker_id) = worker_id {
        // Core's range check, now rather than at the first id.
        Generator::new(layout, worker_id, Options::default()).map_err(refusal)?;
    }
    let lease = LEASE
        .get()
        .map(|uri| uri.to_string_lossy().into_owned())
        .filter(|uri| !uri.is_empty());
    if let Some(uri) = &lease {
        // The scheme only: the rest is read by the lease worker, since reading it may connect
        // (a bad URI is its first attempt's INVALID_URI, in the log and every id call's error).
        let scheme = uri
            .split_once("://")
            .map(|(scheme, _)| scheme.to_ascii_lowercase());
        if !scheme.is_some_and(|scheme| lease_worker::SCHEMES.contains(&scheme.as_str())) {
            let error = clockflake_lease::LeaseError::InvalidUri {
                uri: clockflake_lease::redact(uri),
                reason: format!(
                    "the scheme must be one of {}",
                    lease_worker::SCHEMES.join(", ")
                ),
            };
            return Err(ErrorReport::new(
                PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
                format!("clockflake: clockflake.lease: {error}"),
                "clockflake",
            )
            .set_detail(format!("clockflake code: {}", error.code())));
        }
        if worker_id.is_some() {
            return Err(ErrorReport::new(
                PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
                "clockflake: clockflake.lease and clockflake.worker_id_unleased are both set",
                "clockflake",
            )
            .set_hint("Set one: the lease (recommended) or a worker id typed by hand."));
        }
    }
    Ok(Config {
        layout,
        worker_id,
        lease,
    })
}

fn shared_generator() -> Shared {
    let unleased = CONFIG.get().and_then(|config| {
        let worker_id = config.worker_id?;
        Generator::new(config.layout, worker_id, Options::default()).ok()
    });
    SHARED_READY.store(true, Ordering::Release);
    Shared::new(unleased)
}

#[pg_guard]
pub extern "C-unwind" fn _PG_init() {
    // SAFETY: reading a flag PostgreSQL sets while it loads shared_preload_libraries.
    if !unsafe { pg_sys::process_shared_preload_libraries_in_progress } {
        not_preloaded().report(PgLogLevel::ERROR);
        return;
    }
    define_settings();
    match read_config() {
        Ok(config) => {
            if config.lease.is_some() {
                lease_worker::register();
            }
            let _ = CONFIG.set(config);
        }
        Err(report) => {
            report.report(PgLogLevel::ERROR);
            return;
        }
    }
    pg_shmem_init!(SHARED = shared_generator());
}
