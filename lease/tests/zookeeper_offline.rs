//! `zookeeper://` with `takeover=off` and `offline=cache`: worker ids bound to their server
//! identity, and the start from the cache file with the real ZooKeeper server stopped
//! (scripts/zookeeper.sh halt, restarted afterwards). A separate test binary, since it stops
//! the server every other ZooKeeper test uses; its tests take turns (`TURN`).
#![allow(clippy::unwrap_used, clippy::panic)] // test helpers outside #[test] functions

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use std::sync::Mutex;

use clockflake::{Field, Layout};
use clockflake_lease::{open, LeaseError, LeaseOptions, LeasedGenerator};
use common::*;

/// The tests of this binary one at a time: one stops the server the other needs.
static TURN: Mutex<()> = Mutex::new(());

/// Starts the server again when dropped, also when the test fails halfway.
struct Restart;

impl Drop for Restart {
    fn drop(&mut self) {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/zookeeper.sh");
        let _ = Command::new(script).arg("start").output();
    }
}

/// One worker id and no clock-sequence bits: every id of the worker is above every id issued
/// before it only if start-up continues above the stored marks (it waits for them to pass).
fn one_worker_no_clock_seq() -> Layout {
    Layout::new(
        &[(Field::Timestamp, 41), (Field::Sequence, 12)],
        1,
        Layout::CLOCKSEQ.epoch_ms(),
    )
    .unwrap()
}

/// A TTL of 3 s: the lease's deadline counts from before the grant, and the first grant of this
/// binary opens a session on a server started seconds before (a cold JVM). With 1 s, a fresh
/// `make test` saw that grant come back past its deadline (`open` now refuses such a grant).
fn offline_uri(app: &str, cache: &Path) -> String {
    format!(
        "{}/snowflake/{app}?ttl=3s&server=10.7.0.1:80&takeover=off&offline=cache&cache={}\
         &max_skew=off",
        ZK.url(),
        cache.display()
    )
}

/// Opens `uri` with the clock `offset_ms` off, takes 1000 ids, all above `above`, closes.
fn run(uri: &str, offset_ms: i64, above: u64, label: &str) -> (u64, Vec<u64>) {
    let gen = open(uri, one_worker_no_clock_seq(), offset_clock(offset_ms))
        .unwrap_or_else(|error| panic!("{label}: {error}"));
    let taken = next_ids(&gen, 1000);
    let lowest = taken.iter().min().copied().unwrap();
    assert!(
        lowest > above,
        "{label}: id {lowest} is not above {above}, issued before"
    );
    let worker = gen.worker_id();
    gen.close().unwrap();
    (worker, taken)
}

fn refusal(result: Result<LeasedGenerator, LeaseError>) -> LeaseError {
    match result {
        Ok(gen) => panic!("opened worker id {}", gen.worker_id()),
        Err(error) => error,
    }
}

#[test]
fn offline_cache_needs_takeover_off_a_cache_and_a_stable_identity() {
    for (query, says) in [
        ("offline=cache&cache=/tmp/c&server=a", "takeover=off"),
        (
            "offline=cache&takeover=on&cache=/tmp/c&server=a",
            "takeover=off",
        ),
        ("offline=cache&takeover=off&server=a", "cache=/PATH"),
        (
            "offline=cache&takeover=off&cache=/tmp/c",
            "server= or port=",
        ),
    ] {
        let uri = format!("zookeeper://127.0.0.1:1/snowflake/a?{query}");
        let error = refusal(open(&uri, Layout::CLOCKSEQ, LeaseOptions::default()));
        assert_eq!(error.code(), "INVALID_URI", "{query}: {error}");
        assert!(error.to_string().contains(says), "{query}: {error}");
    }
}

#[test]
fn started_from_the_cache_with_zookeeper_stopped() {
    let Some(_turn) = ZK.turn(&TURN) else {
        return;
    };
    let app = app("offline");
    let dir = temp_dir("zk-offline");
    let cache = dir.join("worker.cache");
    let uri = offline_uri(&app, &cache);
    let mut all = Vec::new();

    // Online first, on a clock 1 s ahead: the cache gets the worker id, its record, 0600.
    let (worker, online) = run(&uri, 1000, 0, "online");
    let mode = std::fs::metadata(&cache).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "cache file mode");
    let mut highest = online.iter().max().copied().unwrap();
    all.extend(online);

    let _restart = Restart;
    zookeeper_script("halt");

    // Without offline=cache, a stopped ZooKeeper refuses the start.
    let plain = format!(
        "{}/snowflake/{app}?ttl=3s&server=10.7.0.1:80&takeover=off&cache={}&max_skew=off",
        ZK.url(),
        cache.display()
    );
    let error = refusal(open(&plain, one_worker_no_clock_seq(), offset_clock(0)));
    assert_eq!(error.code(), "COORDINATOR_UNAVAILABLE", "{error}");

    // With it: the cached worker id, above the online marks, on a clock 2 s ahead.
    let offline = open(&uri, one_worker_no_clock_seq(), offset_clock(2000)).unwrap();
    assert_eq!(offline.worker_id(), worker);
    let taken = next_ids(&offline, 1000);
    assert!(taken.iter().min().copied().unwrap() > highest);
    // A second process of the identity with the same cache is refused while it runs.
    let error = refusal(open(&uri, one_worker_no_clock_seq(), offset_clock(2000)));
    assert_eq!(error.code(), "COORDINATOR_UNAVAILABLE", "{error}");
    assert!(error.to_string().contains("cache lock"), "{error}");
    offline.close().unwrap();
    highest = highest.max(taken.iter().max().copied().unwrap());
    all.extend(taken);

    // Offline again on the system's clock, 2 s behind the last one: above its ids, so its
    // reservations went to the cache.
    let (_, taken) = run(&uri, 0, highest, "offline, clock behind");
    highest = highest.max(taken.iter().max().copied().unwrap());
    all.extend(taken);
    // And once more 3 s ahead, for the online start below to find above ZooKeeper's record.
    let (_, taken) = run(&uri, 3000, highest, "offline, clock ahead");
    highest = highest.max(taken.iter().max().copied().unwrap());
    all.extend(taken);

    // ZooKeeper back: an online start on the system's clock continues above the ids issued
    // offline, which only the cache knew of.
    zookeeper_script("start");
    let (worker_again, taken) = run(&uri, 0, highest, "online again");
    assert_eq!(worker_again, worker);
    all.extend(taken);
    assert_unique("offline", all);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn worker_ids_bound_with_takeover_off_are_never_taken_over() {
    let Some(_turn) = ZK.turn(&TURN) else {
        return;
    };
    // Two worker ids.
    let layout = Layout::new(
        &[
            (Field::Timestamp, 41),
            (Field::Worker, 1),
            (Field::Sequence, 12),
        ],
        1,
        Layout::CLOCKSEQ.epoch_ms(),
    )
    .unwrap();
    let app = app("bound");
    let uri = |server: &str, extra: &str| {
        format!("{}/snowflake/{app}?ttl=1s&server={server}{extra}", ZK.url())
    };
    let open_as = |server: &str, extra: &str| open(&uri(server, extra), layout, offset_clock(0));
    // The bound identity takes worker id 0 and stops; another takes 1 and stops.
    let bound = open_as("10.7.1.1:80", "&takeover=off").unwrap();
    assert_eq!(bound.worker_id(), 0);
    bound.close().unwrap();
    let other = open_as("10.7.1.2:80", "").unwrap();
    assert_eq!(other.worker_id(), 1);
    other.close().unwrap();
    // Both ids are named and free. A new identity takes over the least recently used id
    // that is not bound: 1, not the bound identity's 0 (used longer ago).
    let newcomer = open_as("10.7.1.3:80", "").unwrap();
    assert_eq!(newcomer.worker_id(), 1);
    // Now only the bound id is free: refused, for takeover=on and takeover=off alike.
    for extra in ["", "&takeover=off"] {
        let error = refusal(open_as("10.7.1.4:80", extra));
        assert_eq!(error.code(), "WORKER_POOL_EXHAUSTED", "{extra}: {error}");
    }
    newcomer.close().unwrap();
    // The bound identity still gets its own id back.
    let bound = open_as("10.7.1.1:80", "&takeover=off").unwrap();
    assert_eq!(bound.worker_id(), 0);
    bound.close().unwrap();
}
