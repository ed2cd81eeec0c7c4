//! The `etcd://` coordinator against a real three-member etcd cluster (Debian's `etcd-server`,
//! started on loopback by `make test-lease-etcd` through scripts/etcd-cluster.sh), with real
//! processes. Skipped without `CLOCKFLAKE_ETCD_URL` unless `CLOCKFLAKE_ETCD_REQUIRED` is set.
//! Every test takes the one turn: the authentication test turns etcd's authentication on for
//! the whole cluster while it runs.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use clockflake::Layout;
use clockflake_lease::{open, LeaseOptions};
use common::*;

/// The timing tests run one at a time, so that they do not slow each other down.
static SERIAL: Mutex<()> = Mutex::new(());

/// The cluster `make test-lease-etcd` starts, named by `CLOCKFLAKE_ETCD_URL`.
struct EtcdCluster;

const ETCD: EtcdCluster = EtcdCluster;

impl EtcdCluster {
    fn available(&self) -> bool {
        if std::env::var_os("CLOCKFLAKE_ETCD_URL").is_some() {
            return true;
        }
        assert!(
            std::env::var_os("CLOCKFLAKE_ETCD_REQUIRED").is_none(),
            "CLOCKFLAKE_ETCD_URL is not set: run `make test-lease-etcd`"
        );
        eprintln!("skipped: CLOCKFLAKE_ETCD_URL is not set (run `make test-lease-etcd`)");
        false
    }

    fn url(&self) -> String {
        std::env::var("CLOCKFLAKE_ETCD_URL").unwrap()
    }

    /// The turn, a fresh namespace `name` and its URI with a TTL of `ttl`.
    fn namespace(
        &self,
        serial: &'static Mutex<()>,
        name: &str,
        ttl: &str,
    ) -> Option<(MutexGuard<'static, ()>, String, String)> {
        if !self.available() {
            return None;
        }
        let turn = turn(serial);
        let app = app(name);
        let uri = format!("{}/?app={app}&ttl={ttl}", self.url());
        Some((turn, app, uri))
    }
}

fn etcdctl(args: &[&str]) -> String {
    let mut all = vec!["etcdctl"];
    all.extend_from_slice(args);
    script("etcd-cluster.sh", &all)
}

common::expiring_lease_tests! {
    ETCD, SERIAL, paused_ttl: ("1s", 1000), settle_ms: 500,
    fresh: a_fresh_worker_id_is_used_at_once_and_then_carries_a_record
}

#[test]
fn the_129th_holder_of_the_default_layout_is_refused() {
    let Some((_serial, _, uri)) = ETCD.namespace(&SERIAL, "full", "30s") else {
        return;
    };
    let holders: Vec<_> = (0..128)
        .map(|_| open(&uri, Layout::CLOCKSEQ, LeaseOptions::default()).unwrap())
        .collect();
    let mut workers: Vec<u64> = holders.iter().map(|gen| gen.worker_id()).collect();
    workers.sort_unstable();
    assert_eq!(workers, (0..128).collect::<Vec<_>>(), "each worker id once");
    let error = open_refused(&uri, Layout::CLOCKSEQ, "WORKER_POOL_EXHAUSTED");
    assert!(error.to_string().contains("128"), "{error}");
    let ids = holders.iter().flat_map(|gen| next_ids(gen, 10));
    assert_eq!(assert_unique("128 holders", ids), 1280);
    // One given back: the next holder gets exactly that one.
    let freed = holders[77].worker_id();
    for gen in &holders[77..78] {
        gen.close().unwrap();
    }
    let next = open(&uri, Layout::CLOCKSEQ, LeaseOptions::default()).unwrap();
    assert_eq!(next.worker_id(), freed);
    next.close().unwrap();
    for gen in &holders {
        let _ = gen.close();
    }
}

#[test]
fn a_released_worker_id_is_granted_again_with_its_marks() {
    let Some((_serial, app, uri)) = ETCD.namespace(&SERIAL, "marks", "2s") else {
        return;
    };
    let layout = single_worker();
    let gen = open(&uri, layout, LeaseOptions::default()).unwrap();
    let before = paced(100, || gen.next_id().unwrap());
    let worker_key = format!("/clockflake/{app}/workers/0");
    let held = etcdctl(&["get", &worker_key, "-w", "json"]);
    assert!(held.contains("\"lease\""), "bound to a lease: {held}");
    gen.close().unwrap();
    assert_eq!(etcdctl(&["get", &worker_key]), "", "revoked on release");
    let record = etcdctl(&[
        "get",
        "--print-value-only",
        &format!("/clockflake/{app}/state/0"),
    ]);
    assert!(record.contains("high_water_ms"), "{record}");
    // A holder a minute behind (the start-up clock check off) continues under another clock
    // sequence, above the marks: it was given the record.
    let again = open(
        &format!("{uri}&max_skew=off"),
        layout,
        offset_clock(-60_000),
    )
    .unwrap();
    assert_eq!(again.worker_id(), 0);
    let after = patiently(|| again.next_id());
    let old_seq = layout.decode(before[0]).unwrap().clock_seq;
    assert_ne!(
        layout.decode(after).unwrap().clock_seq,
        old_seq,
        "a minute behind the marks, without them it would reuse clock sequence {old_seq}"
    );
    assert_unique("before and after", before.iter().copied().chain([after]));
    again.close().unwrap();
}

#[test]
fn a_corrupt_record_is_refused_and_left_as_it_is() {
    let Some((_serial, app, uri)) = ETCD.namespace(&SERIAL, "corrupt", "2s") else {
        return;
    };
    let layout = single_worker();
    one_id_and_close(&uri, layout, LeaseOptions::default());
    let key = format!("/clockflake/{app}/state/0");
    let record = etcdctl(&["get", "--print-value-only", &key]);
    // (etcdctl's output is trimmed here: the record's last line ends with a newline)
    let damaged = format!("{}\n", record.replacen("clock_seq ", "clock_seq 9", 1));
    etcdctl(&["put", &key, &damaged]);
    let error = open_refused(&uri, layout, "INVALID_STATE");
    assert!(error.to_string().contains("checksum mismatch"), "{error}");
    assert_eq!(
        etcdctl(&["get", &format!("/clockflake/{app}/workers/0")]),
        "",
        "given back"
    );
    assert_eq!(
        etcdctl(&["get", "--print-value-only", &key]),
        damaged.trim_end(),
        "not reset"
    );
}

#[test]
fn a_holder_whose_lease_is_revoked_stops_and_cannot_write_its_record() {
    let Some((_serial, app, uri)) = ETCD.namespace(&SERIAL, "revoked", "2s") else {
        return;
    };
    let layout = single_worker();
    let gen = open(&uri, layout, LeaseOptions::default()).unwrap();
    let before = paced(50, || gen.next_id().unwrap());
    let worker_key = format!("/clockflake/{app}/workers/0");
    let held = etcdctl(&["get", &worker_key, "-w", "json"]);
    let lease: i64 = serde_json::from_str::<serde_json::Value>(&held).unwrap()["kvs"][0]["lease"]
        .as_i64()
        .unwrap();
    etcdctl(&["lease", "revoke", &format!("{lease:x}")]);
    // A newcomer takes the worker id at once; the old holder's next renewal finds its lease
    // gone and it stops.
    let (rival, _) = open_when_free(&uri, layout, Duration::from_secs(5));
    let rival_ids = paced(50, || rival.next_id().unwrap());
    let stopped = within(Duration::from_secs(5), {
        let gen = std::sync::Arc::new(gen);
        move || loop {
            match gen.next_id() {
                Ok(_) => std::thread::sleep(Duration::from_millis(5)),
                Err(error) => return error.code(),
            }
        }
    });
    let (code, _) = stopped.expect("the holder stopped within 5 s");
    assert_eq!(code, "LEASE_LOST");
    assert_unique("holder and rival", before.iter().chain(&rival_ids).copied());
    rival.close().unwrap();
}

#[test]
fn the_start_up_clock_check_reads_the_members_clock() {
    let Some((_serial, _, uri)) = ETCD.namespace(&SERIAL, "skew", "2s") else {
        return;
    };
    // In time: accepted (the member's clock is read from its HTTP Date header).
    one_id_and_close(&uri, Layout::CLOCKSEQ, LeaseOptions::default());
    let error = open(&uri, Layout::CLOCKSEQ, offset_clock(10_000)).unwrap_err();
    assert_eq!(error.code(), "CLOCK_SKEW", "{error}");
    assert!(error.to_string().contains("ahead"), "{error}");
    // max_skew=off: not checked.
    one_id_and_close(
        &format!("{uri}&max_skew=off"),
        Layout::CLOCKSEQ,
        offset_clock(10_000),
    );
}

/// Restores the cluster's authentication to off however the test ends.
struct AuthOn {
    user: &'static str,
    password: &'static str,
}

impl Drop for AuthOn {
    fn drop(&mut self) {
        script("etcd-cluster.sh", &["auth-off", self.user, self.password]);
    }
}

#[test]
fn no_password_in_messages_and_a_wrong_one_is_refused() {
    let Some((_serial, app, _)) = ETCD.namespace(&SERIAL, "secret", "2s") else {
        return;
    };
    let (user, password) = ("clockflake", "Etcd/S3cret:pw");
    script("etcd-cluster.sh", &["auth-on", user, password]);
    let _auth = AuthOn { user, password };
    let hosts = ETCD.url().trim_start_matches("etcd://").to_owned();
    let uri = format!("etcd://{user}:Etcd%2FS3cret%3Apw@{hosts}/?app={app}&ttl=2s");
    let gen = open(&uri, Layout::CLOCKSEQ, LeaseOptions::default()).unwrap();
    gen.next_id().unwrap();
    for shown in [gen.coordinator().to_owned(), format!("{gen:?}")] {
        assert!(!shown.contains("S3cret"), "{shown}");
    }
    gen.close().unwrap();
    for wrong in [
        format!("etcd://{user}:Wr0ngEtcdPw@{hosts}/?app={app}&ttl=2s"),
        format!("etcd://{hosts}/?app={app}&ttl=2s"),
    ] {
        let error = open_refused(&wrong, Layout::CLOCKSEQ, "COORDINATOR_UNAVAILABLE");
        for shown in [error.to_string(), format!("{error:?}")] {
            assert!(
                !shown.contains("Wr0ngEtcdPw") && !shown.contains("S3cret"),
                "{shown}"
            );
        }
    }
}

/// Fencing: a worker key deleted by hand (the holder's etcd lease still alive) is taken by a
/// newcomer; the old holder's keep-alive still succeeds, but its record write compares the
/// key's revision and lease, fails, and the holder stops: it never writes over the
/// newcomer's record nor issues beside it past that renewal.
#[test]
fn a_holder_whose_worker_key_was_taken_over_stops_at_its_next_renewal() {
    let Some((_serial, app, uri)) = ETCD.namespace(&SERIAL, "fenced", "2s") else {
        return;
    };
    let layout = single_worker();
    let gen = std::sync::Arc::new(open(&uri, layout, LeaseOptions::default()).unwrap());
    let before = paced(50, || gen.next_id().unwrap());
    etcdctl(&["del", &format!("/clockflake/{app}/workers/0")]);
    let (rival, _) = open_when_free(&uri, layout, Duration::from_secs(5));
    let stopped = within(Duration::from_secs(5), {
        let gen = std::sync::Arc::clone(&gen);
        move || loop {
            match gen.next_id() {
                Ok(_) => std::thread::sleep(Duration::from_millis(5)),
                Err(error) => return error,
            }
        }
    });
    let (error, _) = stopped.expect("the old holder stopped within 5 s");
    assert_eq!(error.code(), "LEASE_LOST", "{error}");
    assert!(error.to_string().contains("revision"), "{error}");
    let rival_ids = paced(50, || rival.next_id().unwrap());
    assert_unique("holder and rival", before.iter().chain(&rival_ids).copied());
    rival.close().unwrap();
}

/// `workers=LO-HI`: each pool leases only its range, a full range is `WORKER_POOL_EXHAUSTED`
/// naming it, and a pool whose range overlaps a live holder's different range is refused.
#[test]
fn worker_ranges_are_kept_and_overlapping_ones_refused() {
    let Some((_serial, _, uri)) = ETCD.namespace(&SERIAL, "ranges", "2s") else {
        return;
    };
    let low = open(
        &format!("{uri}&workers=0-1"),
        Layout::CLOCKSEQ,
        LeaseOptions::default(),
    )
    .unwrap();
    let high = open(
        &format!("{uri}&workers=64-127"),
        Layout::CLOCKSEQ,
        LeaseOptions::default(),
    )
    .unwrap();
    assert_eq!((low.worker_id(), high.worker_id()), (0, 64));
    let second = open(
        &format!("{uri}&workers=0-1"),
        Layout::CLOCKSEQ,
        LeaseOptions::default(),
    )
    .unwrap();
    assert_eq!(second.worker_id(), 1);
    let full = open_refused(
        &format!("{uri}&workers=0-1"),
        Layout::CLOCKSEQ,
        "WORKER_POOL_EXHAUSTED",
    );
    assert!(full.to_string().contains("workers=0-1"), "{full}");
    open_refused(
        &format!("{uri}&workers=32-95"),
        Layout::CLOCKSEQ,
        "WORKER_RANGE_CONFLICT",
    );
    for gen in [low, high, second] {
        gen.close().unwrap();
    }
}

/// A record written behind the holder's back (a renewal of its own that reached the server
/// late, a hand edit) is never written over: the holder's next write expects the revision of
/// the record it wrote last, finds another, and the holder stops with `LEASE_LOST`.
#[test]
fn a_record_changed_behind_the_holder_is_kept_and_the_holder_stops() {
    let Some((_serial, app, uri)) = ETCD.namespace(&SERIAL, "changed", "2s") else {
        return;
    };
    let layout = single_worker();
    let gen = std::sync::Arc::new(open(&uri, layout, LeaseOptions::default()).unwrap());
    paced(50, || gen.next_id().unwrap());
    let key = format!("/clockflake/{app}/state/0");
    let planted = format!("{}\n", etcdctl(&["get", "--print-value-only", &key]));
    etcdctl(&["put", &key, &planted]);
    let stopped = within(Duration::from_secs(5), {
        let gen = std::sync::Arc::clone(&gen);
        move || loop {
            match gen.next_id() {
                Ok(_) => std::thread::sleep(Duration::from_millis(5)),
                Err(error) => return error.code(),
            }
        }
    });
    let (code, _) = stopped.expect("the holder stopped within 5 s");
    assert_eq!(code, "LEASE_LOST");
    assert_eq!(
        etcdctl(&["get", "--print-value-only", &key]),
        planted.trim_end(),
        "not written over"
    );
}
