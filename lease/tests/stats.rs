//! `stats()`: the slow-path counters a leased generator keeps for metrics.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use clockflake::Layout;
use clockflake_lease::{open, wall_ms, LeaseOptions};
use common::*;

#[test]
fn stats_count_renewals_clock_sequence_switches_and_the_lifecycle() {
    let dir = temp_dir("stats");
    let uri = format!("file://{}?app=stats", dir.display());
    let gen = open(&uri, Layout::CLOCKSEQ, LeaseOptions::default()).unwrap();
    let before = gen.stats();
    assert_eq!(before.state, "active");
    assert_eq!(before.worker_id, gen.worker_id());
    assert!(
        before.counters.renewals >= 1,
        "the first reservation counts: {before:?}"
    );
    assert_eq!(before.deadline_in_ms, None, "file:// leases do not expire");
    assert!(before.reserved_until_ms > wall_ms());

    let now = wall_ms();
    gen.next_id_at(now).unwrap();
    // Back 5 s: a new clock sequence, persisted (a renewal) before the id is returned.
    patiently(|| gen.next_id_at(now - 5000));
    let after = gen.stats();
    assert_eq!(
        after.counters.clock_seq_switches,
        before.counters.clock_seq_switches + 1,
        "{after:?}"
    );
    assert!(after.counters.renewals > before.counters.renewals);
    assert!(
        after.counters.waits >= 1,
        "the id waited for the renewal thread: {after:?}"
    );

    gen.close().unwrap();
    let closed = gen.stats();
    assert_eq!(closed.state, "closed");
    assert_eq!(closed.reserved_until_ms, 0);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_removed_lock_file_stops_the_holder_between_renewals() {
    let dir = temp_dir("lock-check");
    // A long reservation: the next renewal is seconds away, so only the cheap check between
    // renewals can notice the removal within the 2 s this test allows.
    let uri = format!("file://{}?app=check&reserve=20s", dir.display());
    let gen = open(&uri, Layout::CLOCKSEQ, LeaseOptions::default()).unwrap();
    gen.next_id().unwrap();
    std::fs::remove_file(dir.join("check").join("worker-0.lock")).unwrap();
    let started = std::time::Instant::now();
    while gen.is_active() && started.elapsed() < std::time::Duration::from_secs(2) {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(
        !gen.is_active(),
        "still active {:?} after the removal",
        started.elapsed()
    );
    assert_eq!(gen.next_id().unwrap_err().code(), "LEASE_LOST");
    assert_eq!(gen.stats().state, "lost");
    let _ = std::fs::remove_dir_all(dir);
}
