//! The `postgres://` coordinator against a real PostgreSQL (started by `make test-lease`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::HashSet;
use std::sync::Mutex;

use clockflake::Layout;
use clockflake_lease::{open, LeaseOptions};
use common::*;

/// The timing tests run one at a time, so that they do not slow each other down.
static SERIAL: Mutex<()> = Mutex::new(());

// PostgreSQL is always required (`make test-lease` starts it): `PG.namespace` never skips a
// test here, it fails it without the server, hence its `unwrap`.

common::expiring_lease_tests! {
    PG, SERIAL, paused_ttl: ("2s", 2000), settle_ms: 700,
    fresh: a_fresh_row_is_used_at_once_and_then_carries_a_record
}

#[test]
fn the_table_holds_one_row_per_worker_id_with_its_marks() {
    let (_serial, app, uri) = PG.namespace(&SERIAL, "rows", "2s").unwrap();
    let gen = open(&uri, Layout::CLOCKSEQ, LeaseOptions::default()).unwrap();
    let id = gen.next_id().unwrap();
    let mut client = PgClient::connect(&PG.url()).unwrap();
    let rows = client
        .query(
            "SELECT worker_id, owner, epoch, expires_at > now() AS live, high_water_ms \
             FROM clockflake_leases WHERE app = $1 ORDER BY worker_id",
            &[&app],
        )
        .unwrap();
    assert_eq!(rows.len(), 128);
    let live: Vec<i32> = rows
        .iter()
        .filter(|r| r.get::<_, Option<bool>>("live") == Some(true))
        .map(|r| r.get("worker_id"))
        .collect();
    assert_eq!(live, vec![gen.worker_id() as i32]);
    let marks: Vec<Option<i64>> = rows[gen.worker_id() as usize].get("high_water_ms");
    let mark = marks[0].unwrap() as u64;
    assert!(mark >= Layout::CLOCKSEQ.decode(id).unwrap().timestamp_ms);
    gen.close().unwrap();
    let row = client
        .query_one(
            "SELECT owner, high_water_ms FROM clockflake_leases WHERE app = $1 AND worker_id = $2",
            &[&app, &(gen.worker_id() as i32)],
        )
        .unwrap();
    assert_eq!(row.get::<_, Option<String>>("owner"), None, "released");
    let marks: Vec<Option<i64>> = row.get("high_water_ms");
    assert!(
        marks[0]
            .is_some_and(|mark| mark as u64 >= Layout::CLOCKSEQ.decode(id).unwrap().timestamp_ms),
        "the released row keeps a mark at or above the id issued: {marks:?}"
    );
}

#[test]
fn a_corrupt_row_is_refused_and_left_as_it_is() {
    let (_serial, app, uri) = PG.namespace(&SERIAL, "corrupt", "2s").unwrap();
    let layout = single_worker();
    one_id_and_close(&uri, layout, LeaseOptions::default());
    let mut client = PgClient::connect(&PG.url()).unwrap();
    client
        .execute(
            "UPDATE clockflake_leases SET high_water_ms = '{1,2,3}' WHERE app = $1",
            &[&app],
        )
        .unwrap();
    let error = open_refused(&uri, layout, "INVALID_STATE");
    assert!(
        error.to_string().contains("expected 16 entries, found 3"),
        "{error}"
    );
    assert_eq!(
        pg_given_back_marks(&mut client, &app),
        Some(vec![Some(1), Some(2), Some(3)]),
        "not reset"
    );
    // Another layout's record is refused too.
    client
        .execute(
            "UPDATE clockflake_leases SET high_water_ms = array_fill(NULL::bigint, ARRAY[16]), \
             layout_fingerprint = 42 WHERE app = $1",
            &[&app],
        )
        .unwrap();
    open_refused(&uri, layout, "INVALID_STATE");
}

#[test]
fn eight_processes_times_100_000_ids_are_all_unique() {
    let (_serial, _, uri) = PG.namespace(&SERIAL, "eight", "2s").unwrap();
    // Holding the lease a while after the last id makes the eight overlap (usually eight
    // worker ids), but a child that is done may hand its worker id on: the promise is
    // uniqueness, not eight distinct worker ids.
    let args = [
        "--uri",
        &uri,
        "--count",
        "100000",
        "--binary",
        "--hold-ms",
        "500",
    ];
    let mut all = Vec::new();
    let mut workers = HashSet::new();
    for (worker, ids) in binary_probes_at_once(8, &args) {
        assert_eq!(ids.len(), 100_000);
        workers.insert(worker);
        all.extend(ids);
    }
    assert!((1..=8).contains(&workers.len()), "{workers:?}");
    assert_eq!(assert_unique("8 x 100,000", all), 800_000);
}

#[test]
fn a_row_that_lost_its_marks_is_refused_never_read_as_unused() {
    let (_serial, app, uri) = PG.namespace(&SERIAL, "lost-marks", "2s").unwrap();
    let mut client = PgClient::connect(&PG.url()).unwrap();
    common::a_record_that_lost_its_marks_is_refused(&uri, || {
        // A careless migration (or a restored row) resets the record to NULL.
        client
            .execute(
                "UPDATE clockflake_leases SET layout_fingerprint = NULL, clock_seq = NULL, \
                 high_water_ms = NULL WHERE app = $1",
                &[&app],
            )
            .unwrap();
    });
    assert_eq!(
        pg_given_back_marks(&mut client, &app),
        None,
        "left as it is"
    );
}

/// The README's restore procedure: after restoring the table from a backup (marks older than
/// the ids issued since), marking every row stale makes its next grant raise every mark past
/// the server's clock, as after a failover, so a holder whose clock is behind repeats none of
/// the ids issued between the backup and the restore, even in a clock sequence the backup had
/// never seen used. (The first procedure raised only the clock sequences used in the backup:
/// the simulation found that hole, `lease/tests/simulation`, and this test repeated 300 ids
/// with it.)
#[test]
fn the_restore_procedure_keeps_ids_issued_after_the_backup_unique() {
    let (_serial, app, uri) = PG.namespace(&SERIAL, "restore", "2s").unwrap();
    // The clocks set 5 to 10 s back stand for time passing and for a host behind, not for a
    // skewed coordinator: no clock check (`max_skew=off`).
    let uri = format!("{uri}&max_skew=off");
    let layout = single_worker();
    let mut client = PgClient::connect(&PG.url()).unwrap();
    // The backup, with clock sequence 0 used up to T - 5 s...
    one_id_and_close(&uri, layout, offset_clock(-5_000));
    let backup = client
        .query_one(
            "SELECT layout_fingerprint, clock_seq, high_water_ms, epoch FROM clockflake_leases \
             WHERE app = $1",
            &[&app],
        )
        .unwrap();
    // ...ids issued after it by a holder whose clock reads T - 10 s: behind clock sequence 0's
    // mark, it issues them in clock sequence 1, which the backup never saw used...
    let gen = open(&uri, layout, offset_clock(-10_000)).unwrap();
    let after_backup = paced(300, || gen.next_id().unwrap());
    gen.close().unwrap();
    assert!(after_backup
        .iter()
        .all(|&id| layout.decode(id).unwrap().clock_seq == 1));
    // ...then the restore brings the old marks back.
    client
        .execute(
            "UPDATE clockflake_leases SET layout_fingerprint = $2, clock_seq = $3, \
             high_water_ms = $4, epoch = $5, owner = NULL, expires_at = NULL WHERE app = $1",
            &[
                &app,
                &backup.get::<_, Option<i64>>(0),
                &backup.get::<_, Option<i32>>(1),
                &backup.get::<_, Option<Vec<Option<i64>>>>(2),
                &backup.get::<_, i64>(3),
            ],
        )
        .unwrap();
    client
        .batch_execute(&RESTORE_PROCEDURE.replace("'orders'", &format!("'{app}'")))
        .unwrap();
    // A holder whose clock reads 150 ms before the ids issued after the backup: every clock
    // sequence is marked past the server's clock, so its first id is refused (it would wait
    // longer than `max_handover_wait`), and ids after the raised marks repeat nothing.
    let gen = open(&uri, layout, offset_clock(-10_150)).unwrap();
    let refused = gen.try_next_id().unwrap_err();
    assert_eq!(refused.code(), "CLOCK_SEQUENCE_EXHAUSTED", "{refused}");
    let raised: i64 = client
        .query_one(
            "SELECT min(mark) FROM clockflake_leases, unnest(high_water_ms) AS mark WHERE app = $1",
            &[&app],
        )
        .unwrap()
        .get(0);
    let last_after_backup = after_backup.iter().max().unwrap();
    let retry_at = u64::try_from(raised).unwrap() + 1;
    assert!(retry_at > layout.decode(*last_after_backup).unwrap().timestamp_ms);
    let later: Vec<u64> = (0..300)
        .map(|ms| gen.next_id_at(retry_at + ms).unwrap())
        .collect();
    gen.close().unwrap();
    assert_unique(
        "after the backup, after the restore",
        after_backup.iter().chain(&later).copied(),
    );
}

/// Kept word for word in README.md (a test below checks it is there).
const RESTORE_PROCEDURE: &str =
    "ALTER TABLE clockflake_leases ADD COLUMN IF NOT EXISTS timeline bigint;
UPDATE clockflake_leases SET timeline = 0, owner = NULL, expires_at = NULL
 WHERE app = 'orders';";

#[test]
fn the_readme_carries_the_restore_procedure_word_for_word() {
    // Word for word; the indentation of the README's list may differ.
    let words = |text: &str| text.split_whitespace().collect::<Vec<_>>().join(" ");
    let readme = words(include_str!("../../README.md"));
    assert!(
        readme.contains(&words(RESTORE_PROCEDURE)),
        "README.md lost the restore procedure"
    );
}

/// The first leases on a database without the table, opened at once by 32 clients (processes
/// starting together on a new database), 20 times over: each is granted. Without the schema
/// step's lock, concurrent `CREATE TABLE IF NOT EXISTS` lost the catalog race ("ERROR 42710:
/// type ... already exists") in 3 runs of 3, once in the first 15 rounds.
#[test]
fn the_first_leases_on_an_empty_database_open_at_once() {
    for round in 0..20 {
        let table = format!("clockflake_fresh_{}_{round}", std::process::id());
        let uris = (0..32)
            .map(|client| {
                format!(
                    "{}?app={}&ttl=5s&table={table}",
                    PG.url(),
                    app(&format!("fresh{client}"))
                )
            })
            .collect();
        for result in open_all_at_once(uris) {
            let gen = result.unwrap_or_else(|error| panic!("round {round}: {error}"));
            gen.close().unwrap();
        }
        let mut client = PgClient::connect(&PG.url()).unwrap();
        client
            .batch_execute(&format!("DROP TABLE {table}"))
            .unwrap();
    }
}

/// A `table=` that names someone else's table: refused with the columns it lacks, never
/// altered (the schema step once added its `timeline` column to any table of that name).
#[test]
fn a_table_of_another_shape_is_refused_and_left_as_it_is() {
    let table = format!("not_ours_{}", std::process::id());
    let mut client = PgClient::connect(&PG.url()).unwrap();
    client
        .batch_execute(&format!("CREATE TABLE {table} (id integer PRIMARY KEY)"))
        .unwrap();
    let uri = format!("{}?app={}&ttl=2s&table={table}", PG.url(), app("shape"));
    let error = open_refused(&uri, single_worker(), "INVALID_STATE");
    let message = error.to_string();
    assert!(
        message.contains(&format!("table {table}"))
            && message.contains("(app, worker_id, owner, epoch,")
            && message.contains("name another with table="),
        "{message}"
    );
    let columns: i64 = client
        .query_one(
            "SELECT count(*) FROM information_schema.columns WHERE table_name = $1",
            &[&table],
        )
        .unwrap()
        .get(0);
    assert_eq!(columns, 1, "left as it was");
}

/// A table with every column of a lease table, one of another type: refused with the column
/// and both types, never used. Before, `worker_id bigint` failed every statement as a
/// retryable COORDINATOR_UNAVAILABLE ("cannot convert between the Rust type `i32` and the
/// Postgres type `int8`"), and reading such a row with `Row::get` panics.
#[test]
fn a_lease_table_with_a_column_of_another_type_is_refused() {
    let table = format!("retyped_{}", std::process::id());
    let mut client = PgClient::connect(&PG.url()).unwrap();
    client
        .batch_execute(&format!(
            "CREATE TABLE {table} (app text NOT NULL, worker_id bigint NOT NULL, owner text, \
             epoch bigint NOT NULL DEFAULT 0, expires_at timestamptz, layout_fingerprint bigint, \
             clock_seq integer, high_water_ms bigint[], \
             updated_at timestamptz NOT NULL DEFAULT now(), timeline bigint, \
             PRIMARY KEY (app, worker_id))"
        ))
        .unwrap();
    let uri = format!("{}?app={}&ttl=2s&table={table}", PG.url(), app("retyped"));
    let error = open_refused(&uri, single_worker(), "INVALID_STATE");
    let message = error.to_string();
    assert!(
        message.contains("worker_id bigint, expected integer"),
        "{message}"
    );
    client
        .batch_execute(&format!("DROP TABLE {table}"))
        .unwrap();
}

/// A role that may not create the table: the server's own words and SQLSTATE in the error
/// (the `postgres` crate's text alone is "db error").
#[test]
fn a_server_error_carries_the_servers_message_and_sqlstate() {
    let role = format!("no_create_{}", std::process::id());
    let mut client = PgClient::connect(&PG.url()).unwrap();
    client
        .batch_execute(&format!("CREATE ROLE {role} LOGIN"))
        .unwrap();
    let url = PG.url().replacen("postgres@", &format!("{role}@"), 1);
    let uri = format!("{url}?app={}&ttl=2s&table={role}_leases", app("denied"));
    let error = open_refused(&uri, single_worker(), "COORDINATOR_UNAVAILABLE");
    assert!(
        error
            .to_string()
            .contains("ERROR 42501: permission denied for schema public"),
        "{error}"
    );
}
