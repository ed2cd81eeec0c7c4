//! PostgreSQL fails over to a streaming replica (issue 22), on a primary and a replica started
//! by `scripts/postgres-ha.sh` in `$CLOCKFLAKE_PG_HA_DIR` (skipped without it, unless
//! `CLOCKFLAKE_PG_HA_REQUIRED` is set). Each test builds its own pair: a promotion is final.
//!
//! The scenario of the issue: holders issue ids on the primary; the replica stops receiving
//! WAL (its walsender frozen) for longer than the TTL; the primary dies, the replica is
//! promoted and new holders start on it while the old ones still run. Every id is kept: none
//! may repeat, and no id call may take 100 ms.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::Mutex;
use std::time::Duration;

use clockflake::Layout;
use clockflake_lease::{open, LeaseOptions};
use common::failover::{check, servers, start_holders};
use common::*;

/// One pair of servers at a time.
static SERIAL: Mutex<()> = Mutex::new(());

const TTL: &str = "4s";
/// The time the test lets pass between cutting the replica off and killing the primary:
/// longer than the TTL, so that the replica's rows show every lease as expired.
const LAG: Duration = Duration::from_millis(5000);

fn ha(args: &[&str]) -> String {
    script("postgres-ha.sh", args)
}

/// The turn and a new pair of servers (`mode`: async or sync), or `None` (skipped).
fn pair(mode: &str) -> Option<std::sync::MutexGuard<'static, ()>> {
    let serial = servers(&SERIAL, "CLOCKFLAKE_PG_HA_DIR", "CLOCKFLAKE_PG_HA_REQUIRED")?;
    ha(&["start", mode]);
    Some(serial)
}

fn port_of(url: &str) -> &str {
    url.rsplit(':').next().unwrap().split('/').next().unwrap()
}

/// A multi-host URI over both servers that connects to whichever accepts writes.
fn multi_host(app: &str) -> String {
    let (primary, replica) = (ha(&["primary-url"]), ha(&["replica-url"]));
    format!(
        "postgres://postgres@127.0.0.1:{},127.0.0.1:{}/postgres?target_session_attrs=read-write\
         &app={app}&ttl={TTL}&max_skew=1s",
        port_of(&primary),
        port_of(&replica)
    )
}

fn single(url: &str, app: &str) -> String {
    format!("{url}?app={app}&ttl={TTL}&max_skew=1s")
}

/// The scenario, with the holders' URIs from `old_uri` and `new_uri` (given the app).
fn lagging_replica_promoted(old_uri: impl Fn(&str) -> String, new_uri: impl Fn(&str) -> String) {
    let app = app("failover");
    let old = start_holders(&old_uri(&app), 3);
    std::thread::sleep(Duration::from_millis(1000));
    ha(&["cut"]);
    std::thread::sleep(LAG);
    ha(&["kill-primary"]);
    ha(&["promote"]);
    let newcomers = start_holders(&new_uri(&app), 3);
    // Past the fence a stale record gets (TTL + twice max_skew), with time to issue.
    std::thread::sleep(Duration::from_millis(9000));
    check(old, newcomers);
}

#[test]
fn an_async_replica_promoted_behind_the_primary_repeats_no_id() {
    let Some(_turn) = pair("async") else { return };
    let (primary, replica) = (ha(&["primary-url"]), ha(&["replica-url"]));
    lagging_replica_promoted(|app| single(&primary, app), |app| single(&replica, app));
    ha(&["stop"]);
}

#[test]
fn an_async_replica_promoted_behind_the_primary_repeats_no_id_through_a_multi_host_uri() {
    let Some(_turn) = pair("async") else { return };
    lagging_replica_promoted(multi_host, multi_host);
    ha(&["stop"]);
}

/// Split brain with synchronous replication: the old primary stays up for its holders but
/// its replica is cut off and promoted. The old primary cannot commit a renewal (it waits
/// for the standby): the renewals are cancelled, the old holders stop at their deadline, and
/// the newcomers on the promoted replica repeat none of their ids.
#[test]
fn a_sync_replica_promoted_while_the_old_primary_runs_repeats_no_id() {
    let Some(_turn) = pair("sync") else { return };
    let (primary, replica) = (ha(&["primary-url"]), ha(&["replica-url"]));
    let app = app("split-brain");
    let old = start_holders(&single(&primary, &app), 3);
    std::thread::sleep(Duration::from_millis(1000));
    ha(&["cut"]);
    ha(&["promote"]);
    // The promoted replica inherited synchronous_standby_names and has no standby: the
    // operator clears it (see the next test for what happens when nobody does).
    let mut client = PgClient::connect(&replica).unwrap();
    client
        .batch_execute("ALTER SYSTEM SET synchronous_standby_names = ''")
        .unwrap();
    client.batch_execute("SELECT pg_reload_conf()").unwrap();
    let newcomers = start_holders(&single(&replica, &app), 3);
    std::thread::sleep(Duration::from_millis(9000));
    check(old, newcomers);
    ha(&["stop"]);
}

/// A commit that waits for a synchronous standby that is not there (a promoted replica keeps
/// `synchronous_standby_names`): `open` gives up within the TTL with a coded error naming the
/// setting, where it used to wait for ever.
#[test]
fn open_is_bounded_when_commits_wait_for_an_absent_synchronous_standby() {
    let Some(_turn) = pair("sync") else { return };
    let primary = ha(&["primary-url"]);
    ha(&["cut"]);
    let uri = single(&primary, &app("absent-standby"));
    let (result, took) = within(Duration::from_secs(10), move || {
        open(&uri, Layout::CLOCKSEQ, LeaseOptions::default())
            .map(|gen| gen.close())
            .map(|_| ())
            .map_err(|e| (e.code(), e.to_string()))
    })
    .expect("open() still waiting after 10 s");
    let (code, message) = result.expect_err("open() succeeded without a standby");
    assert_eq!(code, "COORDINATOR_UNAVAILABLE", "{message}");
    assert!(message.contains("synchronous_standby_names"), "{message}");
    assert!(took < Duration::from_secs(4), "open() took {took:?}");
    ha(&["stop"]);
}

/// A multi-host URI whose first host is the old primary, frozen (a paused VM: its kernel still
/// accepts connections and nothing answers), the replica promoted: a newcomer opens on the
/// promoted replica. Each host is given its share of the connection's patience; the whole
/// connection had one bound, which the frozen first host spent, and every open failed with
/// `COORDINATOR_UNAVAILABLE` ("no answer within 2000 ms").
#[test]
fn newcomers_open_on_the_promoted_replica_while_the_old_primary_is_frozen() {
    let Some(_turn) = pair("async") else { return };
    let uri = multi_host(&app("frozen-primary"));
    ha(&["freeze-primary"]);
    ha(&["promote"]);
    let (issued, took) = within(Duration::from_secs(10), move || {
        let gen = open(&uri, Layout::CLOCKSEQ, LeaseOptions::default())?;
        let id = gen.next_id();
        gen.close()?;
        id
    })
    .expect("open() still waiting after 10 s");
    if let Err(error) = issued {
        panic!("no id from the promoted replica after {took:?}: {error}");
    }
    eprintln!("an id from the promoted replica after {took:?}");
    assert!(took < Duration::from_secs(4), "open() took {took:?}");
    ha(&["kill-primary"]);
    ha(&["stop"]);
}
