//! A three-member etcd cluster loses its leader and has a member frozen under live holders,
//! and a holder cut off from the cluster stops at its deadline while a newcomer takes its
//! worker id; on members started by `scripts/etcd-cluster.sh` in `$CLOCKFLAKE_ETCD_DIR`
//! (skipped without it, unless `CLOCKFLAKE_ETCD_REQUIRED` is set).
//!
//! While a majority serves no lease may be lost: no duplicate, no `LEASE_LOST`, no id call of
//! 100 ms. Each outage (3 s) is shorter than what a holder can wait: renewals go out every
//! quarter TTL and each may take half of it, moving to the next member when one does not
//! answer; with a 6 s TTL a holder whose member stops answering has at least 4.5 s.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::Mutex;
use std::time::Duration;

use clockflake_lease::wall_ms;
use common::failover::{check, servers, Holder};
use common::*;

fn cluster(args: &[&str]) -> String {
    script("etcd-cluster.sh", args)
}

/// One cluster at a time.
static SERIAL: Mutex<()> = Mutex::new(());

#[test]
fn the_leader_killed_and_a_member_frozen_lose_no_lease_and_repeat_no_id() {
    let Some(_turn) = servers(&SERIAL, "CLOCKFLAKE_ETCD_DIR", "CLOCKFLAKE_ETCD_REQUIRED") else {
        return;
    };
    let url = cluster(&["url"]);
    let app = app("cluster");
    let holders: Vec<Holder> = (0..3)
        .map(|_| Holder::start(format!("{url}/?app={app}&ttl=6s")))
        .collect();
    std::thread::sleep(Duration::from_millis(1500));
    let leader = cluster(&["leader"]);
    cluster(&["kill", &leader]);
    std::thread::sleep(Duration::from_millis(3000));
    cluster(&["restart", &leader]);
    std::thread::sleep(Duration::from_millis(1000));
    // The member that leads now, frozen: the others elect a new leader, and requests sent to
    // it wait until their share of the budget runs out, then go to the next member.
    let frozen = cluster(&["leader"]);
    cluster(&["freeze", &frozen]);
    std::thread::sleep(Duration::from_millis(3000));
    cluster(&["thaw", &frozen]);
    std::thread::sleep(Duration::from_millis(1500));
    let seen = check(holders, Vec::new());
    for holder in &seen {
        assert!(
            !holder.refusals.contains_key("LEASE_LOST"),
            "a lease was lost while a majority served: {:?}",
            holder.refusals
        );
    }
}

/// A holder whose only endpoint is a member that stops answering (frozen: the connection
/// stays open, nothing comes back) cannot renew: it stops issuing ids at its deadline, the
/// TTL after its last renewal was sent, and only then does the cluster, which serves on,
/// expire its lease and give the worker id to a newcomer on the other members.
#[test]
fn a_holder_cut_off_past_its_ttl_stops_at_its_deadline_and_a_newcomer_takes_its_worker_id() {
    let Some(_turn) = servers(&SERIAL, "CLOCKFLAKE_ETCD_DIR", "CLOCKFLAKE_ETCD_REQUIRED") else {
        return;
    };
    let layout = single_worker();
    let app = app("cut-off");
    let follower = cluster(&["follower"]);
    let others: Vec<String> = ["1", "2", "3"]
        .into_iter()
        .filter(|n| *n != follower)
        .map(|n| {
            cluster(&["endpoint", n])
                .trim_start_matches("etcd://")
                .to_owned()
        })
        .collect();
    let holder_uri = format!("{}/?app={app}&ttl=2s", cluster(&["endpoint", &follower]));
    let rival_uri = format!("etcd://{}/?app={app}&ttl=2s", others.join(","));
    let holder = Watched::spawn(probe(&[
        "--uri",
        &holder_uri,
        "--single-worker",
        "--every-ms",
        "2",
    ]));
    holder.wait_for_ids(50);
    cluster(&["freeze", &follower]);
    let frozen_at = wall_ms();
    let (rival, granted_at) = open_when_free(&rival_uri, layout, Duration::from_secs(10));
    let rival_ids = paced(300, || rival.next_id().unwrap());
    cluster(&["thaw", &follower]);
    std::thread::sleep(Duration::from_millis(300));
    let lines = holder.finish();
    let text: String = lines.iter().map(|(_, l)| format!("{l}\n")).collect();
    let holder_ids = text_ids(&text);
    assert!(text.contains("error LEASE_LOST"), "{text}");
    let timestamp = |id: u64| layout.decode(id).unwrap().timestamp_ms;
    let last_held = holder_ids.iter().map(|&id| timestamp(id)).max().unwrap();
    let first_rival = rival_ids.iter().map(|&id| timestamp(id)).min().unwrap();
    eprintln!(
        "frozen at {frozen_at}: the holder's last id at +{} ms, the newcomer granted at +{} ms, \
         its first id at +{} ms",
        last_held as i64 - frozen_at as i64,
        granted_at as i64 - frozen_at as i64,
        first_rival as i64 - frozen_at as i64
    );
    assert!(
        last_held <= frozen_at + 2000,
        "the holder issued ids after its deadline (the TTL after its last renewal)"
    );
    assert!(
        last_held < first_rival,
        "the holder and the newcomer overlapped"
    );
    assert!(granted_at > frozen_at);
    assert_unique(
        "holder + newcomer",
        holder_ids.iter().chain(&rival_ids).copied(),
    );
    rival.close().unwrap();
}
