//! ZooKeeper stopped and restarted under a running holder: generation halts by the lease
//! deadline and resumes after a new lease. A separate test binary, since it stops the server
//! every other ZooKeeper test uses.
#![allow(clippy::unwrap_used, clippy::panic)] // test helpers outside #[test] functions

mod common;

use std::time::{Duration, Instant};

use clockflake::Layout;
use clockflake_lease::{open, wall_ms, LeaseOptions};
use common::*;

#[test]
fn zookeeper_stopped_and_restarted() {
    if !ZK.available() {
        return;
    }
    let app = app("outage");
    let ttl_ms = 1000;
    let holder_uri = format!("{}/snowflake/{app}?ttl=1s&server=10.9.0.1:80", ZK.url());
    let holder = Watched::spawn(probe(&["--uri", &holder_uri, "--every-ms", "2"]));
    holder.wait_for_ids(20);
    // An in-process generator beside the probe.
    let inside_uri = format!("{}/snowflake/{app}?ttl=1s&server=10.9.0.2:80", ZK.url());
    let inside = open(&inside_uri, Layout::CLOCKSEQ, LeaseOptions::default()).unwrap();
    let mut all: Vec<u64> = (0..1000).map(|_| inside.next_id().unwrap()).collect();

    zookeeper_script("halt");
    let halted_at = wall_ms();
    // Generation halts by the deadline: the probe reports LEASE_LOST and exits.
    let started = Instant::now();
    let inside_error = loop {
        match inside.next_id() {
            Ok(id) => {
                let issued_at = Layout::CLOCKSEQ.decode(id).unwrap().timestamp_ms;
                assert!(
                    issued_at <= halted_at + ttl_ms,
                    "id at {issued_at}, halted at {halted_at}"
                );
                all.push(id);
            }
            Err(error) => break error,
        }
        assert!(started.elapsed() < Duration::from_secs(5), "never stopped");
        std::thread::sleep(Duration::from_millis(1));
    };
    assert_eq!(inside_error.code(), "LEASE_LOST", "{inside_error}");
    while holder.count_ids() > 0
        && !holder
            .lines
            .lock()
            .unwrap()
            .iter()
            .any(|(_, l)| l.starts_with("error "))
    {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "probe never stopped"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // Down for three times the TTL in all.
    std::thread::sleep(Duration::from_millis(
        (3 * ttl_ms).saturating_sub(wall_ms() - halted_at),
    ));
    let lines = holder.finish();
    assert!(
        lines.iter().any(|(_, l)| l.starts_with("error LEASE_LOST")),
        "{:?}",
        &lines[lines.len().saturating_sub(3)..]
    );
    let holder_ids: Vec<u64> = lines
        .iter()
        .filter_map(|(_, l)| l.strip_prefix("id ")?.parse().ok())
        .collect();
    for &id in &holder_ids {
        let issued_at = Layout::CLOCKSEQ.decode(id).unwrap().timestamp_ms;
        assert!(
            issued_at <= halted_at + ttl_ms,
            "probe id at {issued_at}, halted at {halted_at}"
        );
    }
    all.extend(&holder_ids);
    assert!(inside.next_id().is_err());
    drop(inside);

    zookeeper_script("start");
    // Resumes after a new lease: same identities, same worker ids (the old sessions, restored
    // by the restarted server, expire first).
    let output = probe_stdout(&["--uri", &holder_uri, "--count", "1000"]);
    let text = String::from_utf8_lossy(&output);
    assert_eq!(text.lines().next(), lines.first().map(|(_, l)| l.as_str()));
    all.extend(text_ids(&text));
    let inside = open(&inside_uri, Layout::CLOCKSEQ, LeaseOptions::default()).unwrap();
    all.extend((0..1000).map(|_| inside.next_id().unwrap()));
    inside.close().unwrap();

    // A short outage, restarted before the session times out: the session survives (the
    // server restores it), renewals resume, ids never stop.
    let patient_uri = format!("{}/snowflake/{app}?ttl=8s&server=10.9.0.3:80", ZK.url());
    let patient = open(&patient_uri, Layout::CLOCKSEQ, LeaseOptions::default()).unwrap();
    all.extend((0..1000).map(|_| patient.next_id().unwrap()));
    zookeeper_script("halt");
    all.extend((0..1000).map(|_| patient.next_id().unwrap()));
    zookeeper_script("start");
    // Past the deadline of the last renewal before the outage: only renewals after the
    // restart keep it going.
    let until = Instant::now() + Duration::from_secs(8);
    while Instant::now() < until {
        all.push(patient.next_id().unwrap());
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(patient.is_active());
    patient.close().unwrap();
    assert_unique("outage", all);
}
