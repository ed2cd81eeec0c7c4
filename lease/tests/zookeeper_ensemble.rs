//! A three-server ZooKeeper ensemble loses its leader and freezes a follower under live
//! holders (issue 22), on servers started by `scripts/zookeeper-ensemble.sh` in
//! `$CLOCKFLAKE_ZK_ENSEMBLE_DIR` (skipped without it, unless `CLOCKFLAKE_ZK_ENSEMBLE_REQUIRED`
//! is set). A quorum survives throughout, so no lease may be lost: no duplicate, no
//! `LEASE_LOST`, no id call of 100 ms.
//!
//! Each outage (3 s) must be shorter than what a holder can wait for its server: its deadline
//! is the TTL after its last renewal was sent, and renewals go out every quarter TTL, so a
//! holder whose server stops answering has at least three quarters of the TTL, less the margin.
//! With 4 s sessions that was 3 s less the margin, no longer than the freeze: one run in five
//! lost a lease, when the last renewal before the freeze had gone out almost a second before
//! it. The sessions are 6 s (4.5 s to wait).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::Mutex;
use std::time::Duration;

use common::failover::{check, servers, Holder};
use common::*;

fn ensemble(args: &[&str]) -> String {
    script("zookeeper-ensemble.sh", args)
}

/// One ensemble at a time.
static SERIAL: Mutex<()> = Mutex::new(());

#[test]
fn the_leader_killed_and_a_follower_frozen_lose_no_lease_and_repeat_no_id() {
    let Some(_turn) = servers(
        &SERIAL,
        "CLOCKFLAKE_ZK_ENSEMBLE_DIR",
        "CLOCKFLAKE_ZK_ENSEMBLE_REQUIRED",
    ) else {
        return;
    };
    let url = ensemble(&["start"]);
    let app = app("ensemble");
    let holders: Vec<Holder> = (1..=3)
        .map(|n| Holder::start(format!("{url}/snowflake/{app}?ttl=6s&server=10.9.1.{n}:80")))
        .collect();
    std::thread::sleep(Duration::from_millis(1500));
    let leader = ensemble(&["leader"]);
    ensemble(&["kill", &leader]);
    std::thread::sleep(Duration::from_millis(3000));
    ensemble(&["restart", &leader]);
    std::thread::sleep(Duration::from_millis(1000));
    let follower = ensemble(&["follower"]);
    ensemble(&["freeze", &follower]);
    std::thread::sleep(Duration::from_millis(3000));
    ensemble(&["thaw", &follower]);
    std::thread::sleep(Duration::from_millis(1500));
    let seen = check(holders, Vec::new());
    for holder in &seen {
        assert!(
            !holder.refusals.contains_key("LEASE_LOST"),
            "a lease was lost while a quorum served: {:?}",
            holder.refusals
        );
    }
    ensemble(&["stop"]);
}
