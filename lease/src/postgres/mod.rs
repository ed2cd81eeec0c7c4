//! The distributed coordinator: `postgres://USER@HOST:PORT/DB?app=NAME&ttl=10s`.
//!
//! One row per (application, worker id) in a table created if missing (see [`SCHEMA`]). A
//! lease is a row whose `owner` is set and whose `expires_at`, on the server's clock, is in
//! the future. Grant and renewal are single conditional `UPDATE`s: a renewal matches only
//! `owner = $me AND epoch = $mine AND expires_at > now()`, and zero rows means the lease is
//! gone. Row leases, not advisory locks: they survive connection poolers and reconnects.
//!
//! TLS ([`SslMode`](tls::SslMode), `sslrootcert=`) as libpq means it, with rustls (the `ring`
//! provider).
//!
//! Here the coordinator itself: its settings and its statements. Beside it: `sql.rs`, the SQL
//! the statements share (the table, the timeline, the failover fence); `columns.rs`, a row's
//! columns as a state record; `connection.rs`, how each statement reaches the server;
//! `tls.rs`, the TLS settings; `session.rs`, a connection whose every wait the client bounds;
//! `uri.rs`, the URI.

use std::ops::RangeInclusive;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use clockflake::{Layout, State};
use tokio_postgres::config::LoadBalanceHosts;
use tokio_postgres::{Config, Row};

use crate::coordinator::{
    check_ranges, declared_range, exhausted, owner_with_range, pool, preference_order, Coordinator,
    Grant, WorkerRange,
};
use crate::LeaseError;

mod columns;
mod connection;
mod session;
mod sql;
mod tls;
pub(crate) mod uri;

use columns::marks_of;
use session::{Failure, Statements};
pub use sql::SCHEMA;
use sql::{granted_marks, stale, RAISED_MARKS, TIMELINE};
use tls::PgTls;

/// Worker ids from row leases in PostgreSQL.
pub struct PostgresCoordinator {
    config: Config,
    /// A multi-host URI's hosts, one config each (empty: `config` alone), and the one to try
    /// first: the one that answered last.
    each_host: Vec<Config>,
    first_host: usize,
    redacted_uri: String,
    session: Option<session::Session>,
    table: String,
    app: String,
    owner: String,
    ttl: Duration,
    held: Option<(u64, i64)>,
    schema_ready: bool,
    /// `None`: `sslmode=prefer` without `sslrootcert`, built at the first connection.
    tls: Option<PgTls>,
    max_skew: Option<Duration>,
    /// The URI's `workers` range (`None`: every worker id of the layout).
    workers: Option<WorkerRange>,
    /// Set when the server warns that it cancelled a wait for synchronous replication.
    sync_rep_notice: Arc<AtomicBool>,
}

impl std::fmt::Debug for PostgresCoordinator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresCoordinator")
            .field("coordinator", &self.redacted_uri)
            .field("owner", &self.owner)
            .field("held", &self.held)
            .finish_non_exhaustive()
    }
}

impl PostgresCoordinator {
    /// A coordinator for `app` on the server `config` points to. Connects lazily.
    pub fn new(
        mut config: Config,
        redacted_uri: String,
        table: &str,
        app: &str,
        ttl: Duration,
        owner: String,
    ) -> PostgresCoordinator {
        tune(&mut config, ttl);
        PostgresCoordinator {
            config,
            each_host: Vec::new(),
            first_host: 0,
            redacted_uri,
            session: None,
            table: table.to_owned(),
            app: app.to_owned(),
            owner,
            ttl,
            held: None,
            schema_ready: false,
            tls: None,
            max_skew: Some(crate::coordinator::DEFAULT_MAX_SKEW),
            workers: None,
            sync_rep_notice: Arc::default(),
        }
    }

    /// Connects to one host at a time, in order (from a random one under
    /// `load_balance_hosts=random`), from the one that answered last, each given its share of
    /// the time left: `each_host` has one config per host of `config` (the URI's hosts).
    pub(crate) fn with_each_host(mut self, mut each_host: Vec<Config>) -> PostgresCoordinator {
        for config in &mut each_host {
            tune(config, self.ttl);
        }
        if self.config.get_load_balance_hosts() == LoadBalanceHosts::Random {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |since| since.subsec_nanos() as usize);
            self.first_host = nanos % each_host.len().max(1);
        }
        self.each_host = each_host;
        self
    }

    /// Connects with these TLS settings (`sslmode`, `sslrootcert`) instead of libpq's default
    /// (`prefer`).
    pub(crate) fn with_tls(mut self, tls: PgTls) -> PostgresCoordinator {
        self.tls = Some(tls);
        self
    }

    /// The start-up clock check's bound (`max_skew`; `None`: off); 5 s by default.
    pub fn with_max_skew(mut self, max_skew: Option<Duration>) -> PostgresCoordinator {
        self.max_skew = max_skew;
        self
    }

    /// Leases only worker ids in `workers` (the URI's `workers=LO-HI`). The range is written
    /// into the `owner` column with the lease (` workers=LO-HI` after the owner token), where
    /// other pools read it to refuse a range that overlaps theirs (`WORKER_RANGE_CONFLICT`).
    pub fn with_workers(mut self, workers: Option<WorkerRange>) -> PostgresCoordinator {
        let token = self
            .owner
            .rsplit_once(" workers=")
            .map_or(self.owner.as_str(), |(token, _)| token);
        self.owner = owner_with_range(token, workers.as_ref());
        self.workers = workers;
        self
    }

    /// `WORKER_RANGE_CONFLICT` if a live holder of the app declared a range (in its owner
    /// token) that overlaps this pool's (`pool` without a `workers` range) and differs.
    fn check_live_ranges(&mut self, pool: &RangeInclusive<u64>) -> Result<(), LeaseError> {
        let app = self.app.clone();
        let live = self.with_client(|db, table| {
            db.query(
                &format!(
                    "SELECT worker_id, owner FROM {table} \
                     WHERE app = $1 AND owner LIKE '% workers=%' AND expires_at > now() \
                     ORDER BY worker_id"
                ),
                &[&app],
            )
        })?;
        let live: Vec<(u64, String)> = live
            .iter()
            .map(|row| {
                let worker: i32 = row.get("worker_id");
                let owner: String = row.get("owner");
                (u64::try_from(worker).unwrap_or(0), owner)
            })
            .collect();
        check_ranges(
            &self.redacted_uri,
            self.workers.as_ref(),
            pool,
            live.iter()
                .map(|(worker, owner)| (*worker, declared_range(owner))),
        )
    }

    /// How far past the server's clock a grant raises the marks of a stale row (see
    /// [`granted_marks`]), ms: the TTL (the longest a lost renewal extended a lease) and
    /// twice `max_skew` (the old primary's clock against this one's, each within `max_skew`
    /// of the holders'; 5 s when the check is off).
    fn fence_ms(&self) -> u64 {
        let skew = self
            .max_skew
            .unwrap_or(crate::coordinator::DEFAULT_MAX_SKEW);
        crate::protocol::failover::fence_ms(self.ttl, skew)
    }

    /// The owner token this coordinator writes into the rows it holds.
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// Creates the table and this app's rows if missing, in one transaction that holds a lock
    /// of the table's name: clients starting together on a new database would otherwise race
    /// in the catalog (`CREATE TABLE IF NOT EXISTS` is not atomic). A table of that name
    /// without the lease columns is someone else's: refused, never altered.
    fn ensure_schema(&mut self, layout: &Layout) -> Result<(), LeaseError> {
        if self.schema_ready {
            return Ok(());
        }
        let app = self.app.clone();
        let max = i32::try_from(layout.max_worker_id()).unwrap_or(i32::MAX);
        let missing = self.with_client(|db, table| {
            let created = create_schema(db, table, &app, max);
            if created.is_err() {
                // Not left inside an aborted transaction (the connection is kept).
                let _ = db.batch_execute("ROLLBACK");
            }
            created
        })?;
        if let Some(missing) = missing {
            return Err(LeaseError::corrupt(
                format!("{} table {}", self.redacted_uri, self.table),
                format!(
                    "the table exists without the columns of a lease table ({missing}): it is \
                     not clockflake's (or was altered), and is left as it is; name another with \
                     table="
                ),
            ));
        }
        self.schema_ready = true;
        Ok(())
    }

    /// The record of a row (see [`columns::state_of`]), named by its table and key.
    fn state_of(
        &self,
        row: &Row,
        worker_id: u64,
        leased_before: bool,
    ) -> Result<Option<State>, LeaseError> {
        let location = format!(
            "{} table {} row (app={}, worker_id={worker_id})",
            self.redacted_uri, self.table, self.app
        );
        columns::state_of(row, &location, worker_id, leased_before)
    }
}

/// Every wait bounded by the TTL (a dead server must not hold a renewal past the lease), and
/// the application name servers show.
fn tune(config: &mut Config, ttl: Duration) {
    let patience = session::patience(ttl);
    config.connect_timeout(patience);
    config.tcp_user_timeout(patience);
    if config.get_application_name().is_none() {
        config.application_name("clockflake-lease");
    }
}

/// The transaction of [`PostgresCoordinator::ensure_schema`] on `table`: `None` when the table
/// and the app's rows are ready, or what a table of that name lacks: columns, or their types
/// (rolled back).
fn create_schema(
    db: &Statements<'_>,
    table: &str,
    app: &str,
    max: i32,
) -> Result<Option<String>, Failure> {
    db.batch_execute("BEGIN")?;
    db.execute(
        "SELECT pg_advisory_xact_lock(hashtext($1))",
        &[&format!("clockflake schema {table}")],
    )?;
    db.batch_execute(&SCHEMA.replace("{table}", table))?;
    // Both as text: the query's own columns are always read as they are declared here.
    let present: Vec<(String, String)> = db
        .query(
            "SELECT attname::text, format_type(atttypid, atttypmod) FROM pg_attribute \
                 WHERE attrelid = to_regclass($1) AND attnum > 0 AND NOT attisdropped",
            &[&table],
        )?
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect();
    let mut missing: Vec<&str> = Vec::new();
    let mut retyped: Vec<String> = Vec::new();
    for (column, kind) in sql::COLUMNS {
        match present.iter().find(|(name, _)| name == column) {
            None => missing.push(column),
            Some((_, found)) if found != kind => {
                retyped.push(format!("{column} {found}, expected {kind}"));
            }
            Some(_) => {}
        }
    }
    if !retyped.is_empty() {
        db.batch_execute("ROLLBACK")?;
        let missing = missing.iter().map(|column| format!("{column} missing"));
        return Ok(Some(
            retyped
                .into_iter()
                .chain(missing)
                .collect::<Vec<_>>()
                .join("; "),
        ));
    }
    match missing.as_slice() {
        [] => {}
        // A table made before the timeline column (its rows read as current).
        ["timeline"] => db.batch_execute(&format!(
            "ALTER TABLE {table} ADD COLUMN IF NOT EXISTS timeline bigint"
        ))?,
        _ => {
            db.batch_execute("ROLLBACK")?;
            return Ok(Some(missing.join(", ")));
        }
    }
    db.execute(
        &format!(
            "INSERT INTO {table} (app, worker_id, timeline) \
                 SELECT $1, g, {TIMELINE} FROM generate_series(0, $2::integer) AS g \
                 ON CONFLICT DO NOTHING"
        ),
        &[&app, &max],
    )?;
    db.batch_execute("COMMIT")?;
    Ok(None)
}

impl Coordinator for PostgresCoordinator {
    fn redacted_uri(&self) -> String {
        self.redacted_uri.clone()
    }

    fn acquire(&mut self, layout: &Layout, now_ms: u64) -> Result<Grant, LeaseError> {
        if self.held.is_some() {
            return Err(self.unavailable("this coordinator already holds a lease"));
        }
        let workers = pool(&self.redacted_uri, layout, self.workers.as_ref())?;
        self.ensure_schema(layout)?;
        self.check_live_ranges(&workers)?;
        let (app, owner) = (self.app.clone(), self.owner.clone());
        let ttl_s = self.ttl.as_secs_f64();
        let first = i32::try_from(*workers.start()).unwrap_or(i32::MAX);
        let last = i32::try_from(*workers.end()).unwrap_or(i32::MAX);
        const FREE: &str = "(owner IS NULL OR expires_at IS NULL OR expires_at <= now())";
        // How many free rows are read to find one whose record is usable at once.
        const CANDIDATES: usize = 256;
        // The lowest free worker ids and their records, tried in `preference_order`.
        let stale = stale();
        let listed = self.with_client(|db, table| {
            db.query(
                &format!(
                    "SELECT worker_id, epoch, layout_fingerprint, clock_seq, high_water_ms, \
                         {stale} AS stale \
                     FROM {table} \
                     WHERE app = $1 AND worker_id BETWEEN $2 AND $3 AND {FREE} \
                     ORDER BY worker_id LIMIT {CANDIDATES}"
                ),
                &[&app, &first, &last],
            )
        })?;
        // A stale row is usable only once its raised marks pass (see `granted_marks`).
        let fence_ms = self.fence_ms();
        let order: Vec<i32> = preference_order(
            layout,
            now_ms,
            listed.iter().map(|row| {
                let worker: i32 = row.get("worker_id");
                let leased_before = row.get::<_, i64>("epoch") > 0;
                let state = self.state_of(row, u64::try_from(worker).unwrap_or(0), leased_before);
                let state = match state {
                    Ok(state) if row.get::<_, bool>("stale") => {
                        Ok(Some(crate::protocol::failover::fenced(
                            layout,
                            state,
                            now_ms.saturating_add(fence_ms),
                        )))
                    }
                    other => other,
                };
                (worker, state)
            }),
        );
        // One statement: the first candidate nobody else is taking right now (SKIP LOCKED),
        // taken only if it is still free when locked. If every candidate went to others
        // meanwhile, the lowest free row, as one statement too.
        let fence_ms = i64::try_from(fence_ms).unwrap_or(i64::MAX);
        let fingerprint = layout.fingerprint() as i64;
        let clock_seqs = layout.clock_seqs() as i64;
        let rows = self.with_client(|db, table| {
            let marks = granted_marks();
            let grant = |filter: &str, order: &str| {
                format!(
                    "UPDATE {table} SET owner = $2, epoch = epoch + 1, \
                         expires_at = now() + $3::float8 * interval '1 second', updated_at = now(), \
                         {marks} \
                     WHERE app = $1 AND worker_id = ( \
                         SELECT worker_id FROM {table} WHERE app = $1 AND {filter} AND {FREE} \
                         ORDER BY {order} LIMIT 1 FOR UPDATE SKIP LOCKED) \
                       AND {FREE} \
                     RETURNING worker_id, epoch, layout_fingerprint, clock_seq, high_water_ms"
                )
            };
            let preferred = db.query(
                &grant("worker_id = ANY($4)", "array_position($4, worker_id)"),
                &[&app, &owner, &ttl_s, &order, &fence_ms, &fingerprint, &clock_seqs],
            )?;
            if !preferred.is_empty() {
                return Ok(preferred);
            }
            db.query(
                &grant("worker_id BETWEEN $4 AND $8", "worker_id"),
                &[
                    &app,
                    &owner,
                    &ttl_s,
                    &first,
                    &fence_ms,
                    &fingerprint,
                    &clock_seqs,
                    &last,
                ],
            )
        })?;
        let Some(row) = rows.first() else {
            return Err(exhausted(&self.redacted_uri, layout, self.workers.as_ref()));
        };
        let worker_id: i32 = row.get("worker_id");
        let worker_id = u64::try_from(worker_id).unwrap_or(0);
        let epoch: i64 = row.get("epoch");
        self.held = Some((worker_id, epoch));
        let state = self.state_of(row, worker_id, epoch > 1);
        let ttl = self.ttl;
        Grant::or_release(self, worker_id, state, ttl)
    }

    fn renew(&mut self, state: &State) -> Result<(), LeaseError> {
        let Some((worker_id, epoch)) = self.held else {
            return Err(LeaseError::lost("this coordinator holds no lease"));
        };
        let (app, owner) = (self.app.clone(), self.owner.clone());
        let ttl_s = self.ttl.as_secs_f64();
        let worker = worker_id as i32;
        let fingerprint = state.layout_fingerprint as i64;
        let clock_seq = state.clock_seq as i32;
        let marks = marks_of(state);
        // A lease granted before a promotion is not renewed: the old primary may have
        // acknowledged writes this server never saw (see `stale`).
        let stale = stale();
        // Marks are never lowered (see `RAISED_MARKS`).
        let updated = self.with_client(|db, table| {
            db.execute(
                &format!(
                    "UPDATE {table} SET expires_at = now() + $5::float8 * interval '1 second', \
                         layout_fingerprint = $6, clock_seq = $7, high_water_ms = {RAISED_MARKS}, \
                         updated_at = now(), timeline = {TIMELINE} \
                     WHERE app = $1 AND worker_id = $2 AND owner = $3 AND epoch = $4 \
                       AND expires_at > now() AND NOT {stale}"
                ),
                &[
                    &app,
                    &worker,
                    &owner,
                    &epoch,
                    &ttl_s,
                    &fingerprint,
                    &clock_seq,
                    &marks,
                ],
            )
        })?;
        LeaseError::unless_renewed(updated == 1, &mut self.held, worker_id, epoch)
    }

    fn release(&mut self, state: Option<&State>) -> Result<(), LeaseError> {
        let Some((worker_id, epoch)) = self.held.take() else {
            return Ok(());
        };
        let (app, owner) = (self.app.clone(), self.owner.clone());
        let worker = worker_id as i32;
        match state {
            Some(state) => {
                let fingerprint = state.layout_fingerprint as i64;
                let clock_seq = state.clock_seq as i32;
                let marks = marks_of(state);
                self.with_client(|db, table| {
                    db.execute(
                        &format!(
                            "UPDATE {table} SET owner = NULL, expires_at = NULL, \
                                 layout_fingerprint = $5, clock_seq = $6, high_water_ms = $7, \
                                 updated_at = now() \
                             WHERE app = $1 AND worker_id = $2 AND owner = $3 AND epoch = $4"
                        ),
                        &[
                            &app,
                            &worker,
                            &owner,
                            &epoch,
                            &fingerprint,
                            &clock_seq,
                            &marks,
                        ],
                    )
                })?;
            }
            None => {
                self.with_client(|db, table| {
                    db.execute(
                        &format!(
                            "UPDATE {table} SET owner = NULL, expires_at = NULL, updated_at = now() \
                             WHERE app = $1 AND worker_id = $2 AND owner = $3 AND epoch = $4"
                        ),
                        &[&app, &worker, &owner, &epoch],
                    )
                })?;
            }
        }
        Ok(())
    }

    /// PostgreSQL's `clock_timestamp()`: one statement on the grant's connection.
    fn server_time_ms(&mut self) -> Result<Option<u64>, LeaseError> {
        let row = self.with_client(|db, _| {
            db.query_one(
                "SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint",
                &[],
            )
        })?;
        let ms: i64 = row.get(0);
        Ok(u64::try_from(ms).ok())
    }

    fn max_skew(&self) -> Option<Duration> {
        self.max_skew
    }

    fn read_state(&mut self, worker_id: u64) -> Result<Option<State>, LeaseError> {
        let app = self.app.clone();
        let worker = i32::try_from(worker_id).unwrap_or(i32::MAX);
        let rows = self.with_client(|db, table| {
            db.query(
                &format!(
                    "SELECT epoch, layout_fingerprint, clock_seq, high_water_ms FROM {table} \
                     WHERE app = $1 AND worker_id = $2"
                ),
                &[&app, &worker],
            )
        })?;
        match rows.first() {
            Some(row) => self.state_of(row, worker_id, row.get::<_, i64>("epoch") > 0),
            None => Ok(None),
        }
    }
}
