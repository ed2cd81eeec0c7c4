//! Redis fails over to a replica (issue 22), on a primary and a replica started by
//! `scripts/redis-ha.sh` in `$CLOCKFLAKE_REDIS_HA_DIR` (skipped without it, unless
//! `CLOCKFLAKE_REDIS_HA_REQUIRED` is set). Each test builds its own pair.
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

fn ha(action: &str) -> String {
    script("redis-ha.sh", &[action])
}

/// The turn and a new pair of servers, or `None` (skipped).
fn pair() -> Option<std::sync::MutexGuard<'static, ()>> {
    let serial = servers(
        &SERIAL,
        "CLOCKFLAKE_REDIS_HA_DIR",
        "CLOCKFLAKE_REDIS_HA_REQUIRED",
    )?;
    ha("start");
    Some(serial)
}

fn refusal(uri: &str) -> (String, String) {
    let error = open(uri, Layout::CLOCKSEQ, LeaseOptions::default())
        .map(|gen| gen.close())
        .expect_err("open() succeeded");
    (error.code().to_owned(), error.to_string())
}

/// The replica holds no leases, and a primary whose replica nothing guards is refused unless
/// the URI accepts the risk.
#[test]
fn a_replica_and_an_unguarded_primary_are_refused_at_open() {
    let Some(_turn) = pair() else { return };
    let (primary, replica) = (ha("primary-url"), ha("replica-url"));
    let (code, message) = refusal(&format!("{replica}?app={}&ttl=2s", app("replica")));
    assert_eq!(code, "COORDINATOR_UNAVAILABLE", "{message}");
    assert!(message.contains("ROLE"), "{message}");
    let (code, message) = refusal(&format!("{primary}?app={}&ttl=2s", app("unguarded")));
    assert_eq!(code, "INVALID_URI", "{message}");
    assert!(message.contains("min_replicas"), "{message}");
    assert!(
        !message.contains("clockflake-redis-test"),
        "the password: {message}"
    );
    for accepted in ["replication=async", "min_replicas=1"] {
        let uri = format!("{primary}?app={}&ttl=2s&{accepted}", app("accepted"));
        let gen = open(&uri, Layout::CLOCKSEQ, LeaseOptions::default()).unwrap();
        gen.next_id().unwrap();
        gen.close().unwrap();
    }
    ha("stop");
}

/// The scenario: the replica stops receiving writes for longer than the TTL, the
/// primary dies, the replica is promoted and newcomers start on it while the old holders
/// still run. With `min_replicas=1` no renewal the replica missed counts, so the old holders
/// stop by the deadline the replica knows of.
#[test]
fn a_replica_promoted_behind_the_primary_repeats_no_id_with_min_replicas() {
    let Some(_turn) = pair() else { return };
    let (primary, replica) = (ha("primary-url"), ha("replica-url"));
    let app = app("failover");
    let guard = std::env::var("CLOCKFLAKE_REDIS_HA_GUARD").unwrap_or("min_replicas=1".into());
    let old = start_holders(&format!("{primary}?app={app}&ttl=2s&{guard}"), 3);
    std::thread::sleep(Duration::from_millis(1000));
    ha("cut");
    std::thread::sleep(Duration::from_millis(3000));
    ha("kill-primary");
    ha("promote");
    // The promoted replica has no replica of its own: nothing to wait for.
    let newcomers = start_holders(&format!("{replica}?app={app}&ttl=2s"), 3);
    std::thread::sleep(Duration::from_millis(5000));
    check(old, newcomers);
    ha("stop");
}
