//! The distributed coordinator: `postgres://USER@HOST:PORT/DB?app=NAME&ttl=10s`.
//!
//! One row per (application, worker id) in a table created if missing (see [`SCHEMA`]). A
//! lease is a row whose `owner` is set and whose `expires_at`, on the server's clock, is in
//! the future. Grant and renewal are single conditional `UPDATE`s: a renewal matches only
//! `owner = $me AND epoch = $mine AND expires_at > now()`, and zero rows means the lease is
//! gone. Row leases, not advisory locks: they survive connection poolers and reconnects.

use std::time::Duration;

use clockflake::{Error, Layout, State, MAX_CLOCK_SEQS};
use postgres::error::SqlState;
use postgres::{Client, Config, NoTls, Row};

use crate::coordinator::{ready_at_ms, Coordinator, Grant};
use crate::LeaseError;

/// The table, created if missing (`{table}` is replaced by the `table=` parameter,
/// `clockflake_leases` by default).
pub const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS {table} (
    app                text        NOT NULL,
    worker_id          integer     NOT NULL,
    owner              text,
    epoch              bigint      NOT NULL DEFAULT 0,
    expires_at         timestamptz,
    layout_fingerprint bigint,
    clock_seq          integer,
    high_water_ms      bigint[],
    updated_at         timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (app, worker_id)
)";

/// Set by the first grant of a row (`epoch` 0, before the grant): an empty state record, so
/// that from then on NULL columns can only mean marks that were lost (a row reset by hand, a
/// careless migration), which is refused (`INVALID_STATE`) instead of read as "never used".
/// (In a `SET` list every column reads its value before the update.)
fn first_grant_marks() -> String {
    format!(
        "layout_fingerprint = CASE WHEN epoch = 0 THEN 0 ELSE layout_fingerprint END, \
         clock_seq = CASE WHEN epoch = 0 THEN 0 ELSE clock_seq END, \
         high_water_ms = CASE WHEN epoch = 0 \
             THEN array_fill(NULL::bigint, ARRAY[{MAX_CLOCK_SEQS}]) ELSE high_water_ms END"
    )
}

/// Worker ids from row leases in PostgreSQL.
pub struct PostgresCoordinator {
    config: Config,
    describe: String,
    client: Option<Client>,
    table: String,
    app: String,
    owner: String,
    ttl: Duration,
    held: Option<(u64, i64)>,
    schema_ready: bool,
}

impl std::fmt::Debug for PostgresCoordinator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresCoordinator")
            .field("coordinator", &self.describe)
            .field("owner", &self.owner)
            .field("held", &self.held)
            .finish_non_exhaustive()
    }
}

impl PostgresCoordinator {
    /// A coordinator for `app` on the server `config` points to. Connects lazily.
    pub fn new(
        mut config: Config,
        describe: String,
        table: &str,
        app: &str,
        ttl: Duration,
        owner: String,
    ) -> PostgresCoordinator {
        // A dead server must not hold a renewal past the lease: bound every wait by the TTL.
        let patience = (ttl / 2).max(Duration::from_millis(200));
        config.connect_timeout(patience);
        config.tcp_user_timeout(patience);
        if config.get_application_name().is_none() {
            config.application_name("clockflake-lease");
        }
        PostgresCoordinator {
            config,
            describe,
            client: None,
            table: table.to_owned(),
            app: app.to_owned(),
            owner,
            ttl,
            held: None,
            schema_ready: false,
        }
    }

    /// The owner token this coordinator writes into the rows it holds.
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// `COORDINATOR_UNAVAILABLE` with `error`'s text scrubbed of the password: the `postgres`
    /// crate's errors (and the server's) may echo connection settings.
    fn unavailable(&self, error: impl std::fmt::Display) -> LeaseError {
        let secrets = self
            .config
            .get_password()
            .map(crate::uri::password_forms)
            .unwrap_or_default();
        LeaseError::unavailable(
            &self.describe,
            crate::uri::scrub(&error.to_string(), &secrets),
        )
    }

    /// Runs `work` on a connection, reconnecting once if the connection was broken.
    fn with_client<T>(
        &mut self,
        mut work: impl FnMut(&mut Client, &str) -> Result<T, postgres::Error>,
    ) -> Result<T, LeaseError> {
        if self.client.as_ref().is_none_or(|client| client.is_closed()) {
            self.client = None;
            let mut client = self
                .config
                .connect(NoTls)
                .map_err(|error| self.unavailable(error))?;
            let timeout_ms = (self.ttl / 2).max(Duration::from_millis(200)).as_millis();
            client
                .batch_execute(&format!("SET statement_timeout = {timeout_ms}"))
                .map_err(|error| self.unavailable(error))?;
            self.client = Some(client);
        }
        let table = self.table.clone();
        let Some(client) = self.client.as_mut() else {
            return Err(self.unavailable("no connection"));
        };
        match work(client, &table) {
            Ok(value) => Ok(value),
            Err(error) => {
                if client.is_closed() {
                    self.client = None;
                }
                Err(self.unavailable(error))
            }
        }
    }

    fn ensure_schema(&mut self, layout: &Layout) -> Result<(), LeaseError> {
        if self.schema_ready {
            return Ok(());
        }
        let app = self.app.clone();
        let max = i32::try_from(layout.max_worker_id()).unwrap_or(i32::MAX);
        self.with_client(|client, table| {
            let create = SCHEMA.replace("{table}", table);
            match client.batch_execute(&create) {
                Ok(()) => {}
                // Two clients creating the table at once: the loser sees the winner's type.
                Err(error)
                    if error.code() == Some(&SqlState::UNIQUE_VIOLATION)
                        || error.code() == Some(&SqlState::DUPLICATE_TABLE) => {}
                Err(error) => return Err(error),
            }
            client.execute(
                &format!(
                    "INSERT INTO {table} (app, worker_id) \
                     SELECT $1, g FROM generate_series(0, $2::integer) AS g \
                     ON CONFLICT DO NOTHING"
                ),
                &[&app, &max],
            )?;
            Ok(())
        })?;
        self.schema_ready = true;
        Ok(())
    }

    /// The record of a row; `leased_before`: the row was granted before the grant at hand
    /// (its first grant wrote an empty record, so all-NULL columns mean lost marks).
    fn state_of(
        &self,
        row: &Row,
        worker_id: u64,
        leased_before: bool,
    ) -> Result<Option<State>, LeaseError> {
        let location = format!(
            "{} table {} row (app={}, worker_id={worker_id})",
            self.describe, self.table, self.app
        );
        let fingerprint: Option<i64> = row.get("layout_fingerprint");
        let clock_seq: Option<i32> = row.get("clock_seq");
        let marks: Option<Vec<Option<i64>>> = row.get("high_water_ms");
        let (fingerprint, clock_seq, marks) =
            match (fingerprint, clock_seq, marks) {
                (None, None, None) if leased_before => {
                    return Err(LeaseError::corrupt(
                        location,
                        "the row was leased before (epoch > 0) but its state record is NULL: its \
                     high-water marks were lost (a reset or restored row?); see the README's \
                     restore procedure",
                    ))
                }
                (None, None, None) => return Ok(None),
                (Some(f), Some(c), Some(m)) => (f, c, m),
                _ => return Err(LeaseError::corrupt(
                    location,
                    "layout_fingerprint, clock_seq and high_water_ms must be all set or all NULL",
                )),
            };
        let clock_seq = u64::try_from(clock_seq).map_err(|_| {
            LeaseError::corrupt(location.clone(), format!("negative clock_seq {clock_seq}"))
        })?;
        if marks.len() != MAX_CLOCK_SEQS {
            return Err(LeaseError::corrupt(
                location,
                format!(
                    "high_water_ms: expected {MAX_CLOCK_SEQS} entries, found {}",
                    marks.len()
                ),
            ));
        }
        if fingerprint == 0 && marks.iter().all(Option::is_none) {
            // The empty record of a first grant (fingerprint 0): never used, any layout may
            // start here.
            return Ok(None);
        }
        let mut high_water_ms = [None; MAX_CLOCK_SEQS];
        for (slot, mark) in high_water_ms.iter_mut().zip(marks) {
            if let Some(ms) = mark {
                *slot = Some(u64::try_from(ms).map_err(|_| {
                    LeaseError::corrupt(location.clone(), format!("negative high-water mark {ms}"))
                })?);
            }
        }
        Ok(Some(State {
            // Stored as its two's-complement bit pattern (bigint is signed).
            layout_fingerprint: fingerprint as u64,
            worker_id,
            clock_seq,
            high_water_ms,
        }))
    }
}

fn marks_of(state: &State) -> Vec<Option<i64>> {
    state
        .high_water_ms
        .iter()
        .map(|mark| mark.map(|ms| i64::try_from(ms).unwrap_or(i64::MAX)))
        .collect()
}

impl Coordinator for PostgresCoordinator {
    fn describe(&self) -> String {
        self.describe.clone()
    }

    fn acquire(&mut self, layout: &Layout, now_ms: u64) -> Result<Grant, LeaseError> {
        if self.held.is_some() {
            return Err(self.unavailable("this coordinator already holds a lease"));
        }
        self.ensure_schema(layout)?;
        let (app, owner) = (self.app.clone(), self.owner.clone());
        let ttl_s = self.ttl.as_secs_f64();
        let max = i32::try_from(layout.max_worker_id()).unwrap_or(i32::MAX);
        const FREE: &str = "(owner IS NULL OR expires_at IS NULL OR expires_at <= now())";
        // How many free rows are read to find one whose record is usable at once.
        const CANDIDATES: usize = 256;
        // The lowest free rows and their records: those usable at `now_ms` first (lowest
        // worker id first), then the others by when they become usable. A record that cannot
        // be read keeps its place among the usable ones, to be refused as before.
        let listed = self.with_client(|client, table| {
            client.query(
                &format!(
                    "SELECT worker_id, epoch, layout_fingerprint, clock_seq, high_water_ms FROM {table} \
                     WHERE app = $1 AND worker_id <= $2 AND {FREE} \
                     ORDER BY worker_id LIMIT {CANDIDATES}"
                ),
                &[&app, &max],
            )
        })?;
        let mut candidates: Vec<(u64, i32)> = listed
            .iter()
            .map(|row| {
                let worker: i32 = row.get("worker_id");
                let leased_before = row.get::<_, i64>("epoch") > 0;
                let state = self.state_of(row, u64::try_from(worker).unwrap_or(0), leased_before);
                let ready_at = state.map_or(0, |state| ready_at_ms(layout, state.as_ref(), now_ms));
                (ready_at, worker)
            })
            .collect();
        candidates.sort_by_key(|&(ready_at, _)| ready_at); // stable: worker order within
        let order: Vec<i32> = candidates.into_iter().map(|(_, worker)| worker).collect();
        // One statement: the first candidate nobody else is taking right now (SKIP LOCKED),
        // taken only if it is still free when locked. If every candidate went to others
        // meanwhile, the lowest free row, as one statement too.
        let rows = self.with_client(|client, table| {
            let first_grant = first_grant_marks();
            let grant = |filter: &str, order: &str| {
                format!(
                    "UPDATE {table} SET owner = $2, epoch = epoch + 1, \
                         expires_at = now() + $3::float8 * interval '1 second', updated_at = now(), \
                         {first_grant} \
                     WHERE app = $1 AND worker_id = ( \
                         SELECT worker_id FROM {table} WHERE app = $1 AND {filter} AND {FREE} \
                         ORDER BY {order} LIMIT 1 FOR UPDATE SKIP LOCKED) \
                       AND {FREE} \
                     RETURNING worker_id, epoch, layout_fingerprint, clock_seq, high_water_ms"
                )
            };
            let preferred = client.query(
                &grant("worker_id = ANY($4)", "array_position($4, worker_id)"),
                &[&app, &owner, &ttl_s, &order],
            )?;
            if !preferred.is_empty() {
                return Ok(preferred);
            }
            client.query(
                &grant("worker_id <= $4", "worker_id"),
                &[&app, &owner, &ttl_s, &max],
            )
        })?;
        let Some(row) = rows.first() else {
            return Err(LeaseError::Core(Error::WorkerPoolExhausted {
                workers: layout.max_worker_id() + 1,
            }));
        };
        let worker_id: i32 = row.get("worker_id");
        let worker_id = u64::try_from(worker_id).unwrap_or(0);
        let epoch: i64 = row.get("epoch");
        self.held = Some((worker_id, epoch));
        match self.state_of(row, worker_id, epoch > 1) {
            Ok(state) => Ok(Grant {
                worker_id,
                state,
                ttl: Some(self.ttl),
            }),
            Err(error) => {
                let _ = self.release(None);
                Err(error)
            }
        }
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
        let updated = self.with_client(|client, table| {
            client.execute(
                &format!(
                    "UPDATE {table} SET expires_at = now() + $5::float8 * interval '1 second', \
                         layout_fingerprint = $6, clock_seq = $7, high_water_ms = $8, \
                         updated_at = now() \
                     WHERE app = $1 AND worker_id = $2 AND owner = $3 AND epoch = $4 \
                       AND expires_at > now()"
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
        if updated == 1 {
            Ok(())
        } else {
            self.held = None;
            Err(LeaseError::lost(format!(
                "the lease on worker id {worker_id} expired or was taken over (epoch {epoch})"
            )))
        }
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
                self.with_client(|client, table| {
                    client.execute(
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
                self.with_client(|client, table| {
                    client.execute(
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

    fn read_state(&mut self, worker_id: u64) -> Result<Option<State>, LeaseError> {
        let app = self.app.clone();
        let worker = i32::try_from(worker_id).unwrap_or(i32::MAX);
        let rows = self.with_client(|client, table| {
            client.query(
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
