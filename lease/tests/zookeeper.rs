//! The `zookeeper://` coordinator against a real ZooKeeper (Debian's package, started on
//! loopback by `make test-zookeeper` through scripts/zookeeper.sh), with real processes.
#![allow(clippy::unwrap_used, clippy::panic)] // test helpers outside #[test] functions

mod common;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use clockflake::{Field, Layout};
use clockflake_lease::{
    open, wall_ms, Coordinator, LeaseError, LeaseOptions, LeasedGenerator, ZooKeeperCoordinator,
};
use common::*;

/// `zookeeper://127.0.0.1:PORT/snowflake/APP?ttl=TTL&server=SERVER`
fn uri(app: &str, server: &str, ttl: &str) -> String {
    format!("{}/snowflake/{app}?ttl={ttl}&server={server}", ZK.url())
}

fn open_as(app: &str, server: &str) -> Result<LeasedGenerator, LeaseError> {
    open(
        &uri(app, server, "2s"),
        Layout::CLOCKSEQ,
        LeaseOptions::default(),
    )
}

/// One worker id and no clock-sequence bits: a clock behind the stored marks can only wait.
fn single_worker_no_clock_seq() -> Layout {
    Layout::new(
        &[(Field::Timestamp, 41), (Field::Sequence, 12)],
        1,
        Layout::CLOCKSEQ.epoch_ms(),
    )
    .unwrap()
}

#[test]
fn stable_ids_per_server_identity_and_the_smallest_free_id() {
    let Some(app) = ZK.app("stable") else {
        return;
    };
    let a = open_as(&app, "10.0.0.1:8080").unwrap();
    let b = open_as(&app, "10.0.0.2:8080").unwrap();
    let c = open_as(&app, "10.0.0.3:8080").unwrap();
    assert_eq!([a.worker_id(), b.worker_id(), c.worker_id()], [0, 1, 2]);
    let mut all = next_ids(&a, 1000);
    all.extend(next_ids(&b, 1000));
    b.close().unwrap();
    // 1 is free but keeps b's persistent node: a new server gets the smallest id no node names.
    let d = open_as(&app, "10.0.0.4:8080").unwrap();
    assert_eq!(d.worker_id(), 3);
    // Restarts keep their ids.
    a.close().unwrap();
    let a = open_as(&app, "10.0.0.1:8080").unwrap();
    assert_eq!(a.worker_id(), 0);
    let b = open_as(&app, "10.0.0.2:8080").unwrap();
    assert_eq!(b.worker_id(), 1);
    all.extend(next_ids(&a, 1000));
    all.extend(next_ids(&b, 1000));
    assert_unique("restarts", all);

    // A process killed with -9 keeps its id too: the restart waits for the old session to expire.
    let server = uri(&app, "10.0.0.5:8080", "1s");
    let first = Watched::spawn(probe(&["--uri", &server, "--every-ms", "2"]));
    first.wait_for_ids(10);
    let lines = first.finish();
    assert_eq!(lines[0].1, "worker 4", "{lines:?}");
    let started = Instant::now();
    let output = probe_stdout(&["--uri", &server, "--count", "100"]);
    let text = String::from_utf8_lossy(&output);
    assert!(text.starts_with("worker 4\n"), "{text}");
    assert!(started.elapsed() < Duration::from_secs(10));
    let mut both: Vec<u64> = lines
        .iter()
        .filter_map(|(_, l)| l.strip_prefix("id ")?.parse().ok())
        .collect();
    both.extend(text_ids(&text));
    assert_unique("kill -9 restart", both);
}

#[test]
fn one_hundred_twenty_nine_contenders_for_128_ids() {
    let Some(app) = ZK.app("pool") else {
        return;
    };
    let contenders = (0..129)
        .map(|i| uri(&app, &format!("10.1.0.{i}:7000"), "5s"))
        .collect();
    let results = open_all_at_once(contenders);
    let mut held = Vec::new();
    let mut refused = Vec::new();
    for result in results {
        match result {
            Ok(gen) => held.push(gen),
            Err(error) => refused.push(error),
        }
    }
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(refused[0], LeaseError::WorkerPoolExhausted { workers: 128 });
    let workers: HashSet<u64> = held.iter().map(|g| g.worker_id()).collect();
    assert_eq!(workers, (0..128).collect::<HashSet<_>>());
    assert_eq!(
        open_as(&app, "late").unwrap_err().code(),
        "WORKER_POOL_EXHAUSTED"
    );

    // Every id has a persistent node now: a new server takes over the least recently used one
    // whose holder is gone.
    held.sort_by_key(|g| match g.worker_id() {
        77 => 0,
        5 => 1,
        other => other + 2,
    });
    for gen in &held {
        gen.close().unwrap();
        std::thread::sleep(Duration::from_millis(3));
    }
    let newcomer = open_as(&app, "newcomer").unwrap();
    assert_eq!(newcomer.worker_id(), 77);
    let second = open_as(&app, "second").unwrap();
    assert_eq!(second.worker_id(), 5);
    // The returning holder of 77 lost it and gets the next least recently used id.
    let returning = open_as(&app, "10.1.0.77:7000").unwrap();
    assert_ne!(returning.worker_id(), 77);
}

#[test]
fn a_cache_file_never_bypasses_the_ephemeral_node() {
    let Some(app) = ZK.app("cache") else {
        return;
    };
    let dir = temp_dir("zk-cache");
    let cache = dir.join("worker");
    let with_cache = format!("{}&cache={}", uri(&app, "cached:1", "1s"), cache.display());
    let first = open(&with_cache, Layout::CLOCKSEQ, LeaseOptions::default()).unwrap();
    assert_eq!(first.worker_id(), 0);
    assert!(std::fs::read_to_string(&cache)
        .unwrap()
        .contains("worker 0"));
    // Same identity, same cache, while the first still holds 0: never 0.
    let second = open(&with_cache, Layout::CLOCKSEQ, LeaseOptions::default()).unwrap();
    assert_eq!(second.worker_id(), 1);
    let mut all = next_ids(&first, 1000);
    all.extend(next_ids(&second, 1000));
    assert_unique("cache", all);
    first.close().unwrap();
    second.close().unwrap();
    // The cache names 1 now; 1 is free and this identity's: taken from the cache.
    let third = open(&with_cache, Layout::CLOCKSEQ, LeaseOptions::default()).unwrap();
    assert_eq!(third.worker_id(), 1);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn session_expiry_stops_generation() {
    let Some(app) = ZK.app("expiry") else {
        return;
    };
    let holder_uri = uri(&app, "holder", "2s");
    // A pause shorter than the session timeout costs nothing.
    let holder = Watched::spawn(probe(&[
        "--uri",
        &holder_uri,
        "--every-ms",
        "2",
        "--single-worker",
    ]));
    holder.wait_for_ids(20);
    signal(&holder.child, "STOP");
    std::thread::sleep(Duration::from_millis(1000));
    signal(&holder.child, "CONT");
    let before = holder.count_ids();
    holder.wait_for_ids(before + 20);

    // Paused past the session timeout: a rival gets the worker id, the holder never issues again.
    signal(&holder.child, "STOP");
    let stopped_at = wall_ms();
    let started = Instant::now();
    let rival = loop {
        match open(
            &uri(&app, "rival", "2s"),
            single_worker(),
            LeaseOptions::default(),
        ) {
            Ok(gen) => break gen,
            Err(error) => {
                assert_eq!(error.code(), "WORKER_POOL_EXHAUSTED");
                assert!(
                    started.elapsed() < Duration::from_secs(10),
                    "rival never got the id"
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    };
    let mut rival_ids = next_ids(&rival, 2000);
    signal(&holder.child, "CONT");
    let continued_at = wall_ms();
    rival_ids.extend(next_ids(&rival, 2000));
    std::thread::sleep(Duration::from_millis(500));
    rival_ids.extend(next_ids(&rival, 2000));
    let lines = holder.finish();
    assert!(
        lines.iter().any(|(_, l)| l.starts_with("error LEASE_LOST")),
        "{:?}",
        &lines[lines.len().saturating_sub(3)..]
    );
    let layout = single_worker();
    let holder_ids = text_ids(
        &lines
            .iter()
            .map(|(_, l)| format!("{l}\n"))
            .collect::<String>(),
    );
    for &id in &holder_ids {
        let issued_at = layout.decode(id).unwrap().timestamp_ms;
        assert!(
            issued_at < stopped_at + 50,
            "holder issued an id at {issued_at} after the pause began at {stopped_at}"
        );
        assert!(issued_at < continued_at);
    }
    assert_unique("expiry", rival_ids.into_iter().chain(holder_ids));
}

#[test]
fn handover_with_a_clock_2s_behind_repeats_nothing() {
    let Some(app) = ZK.app("handover") else {
        return;
    };
    // Graceful: the holder closes, a server whose clock runs 2 s behind takes over at once.
    let ahead = open(
        &uri(&app, "ahead", "2s"),
        single_worker(),
        LeaseOptions::default(),
    )
    .unwrap();
    let mut all = next_ids(&ahead, 20_000);
    ahead.close().unwrap();
    let behind = open(
        &uri(&app, "behind", "2s"),
        single_worker(),
        offset_clock(-2000),
    )
    .unwrap();
    assert_eq!(behind.worker_id(), 0);
    all.extend(next_ids(&behind, 20_000));
    behind.close().unwrap();

    // Abrupt: kill -9 the holder mid-stream; the server 2 s behind takes over once the
    // session expires, from the reservation the holder stored ahead of time.
    let killed = Watched::spawn(probe(&[
        "--uri",
        &uri(&app, "killed", "1s"),
        "--single-worker",
        "--every-ms",
        "1",
    ]));
    killed.wait_for_ids(200);
    let lines = killed.finish();
    let started = Instant::now();
    let output = loop {
        let output = probe(&[
            "--uri",
            &uri(&app, "late", "1s"),
            "--single-worker",
            "--offset-ms",
            "-2000",
            "--count",
            "20000",
        ])
        .output()
        .unwrap();
        if output.status.success() {
            break output;
        }
        let text = String::from_utf8_lossy(&output.stderr);
        assert!(text.contains("WORKER_POOL_EXHAUSTED"), "{text}");
        assert!(started.elapsed() < Duration::from_secs(10));
        std::thread::sleep(Duration::from_millis(100));
    };
    all.extend(
        lines
            .iter()
            .filter_map(|(_, l)| l.strip_prefix("id ")?.parse::<u64>().ok()),
    );
    all.extend(text_ids(&String::from_utf8_lossy(&output.stdout)));
    assert!(assert_unique("handover 2 s behind", all) >= 60_200);
}

#[test]
fn without_a_free_clock_sequence_start_up_waits_within_its_bound_or_refuses() {
    let Some(app) = ZK.app("noseq") else {
        return;
    };
    let layout = single_worker_no_clock_seq();
    let first = open(&uri(&app, "first", "2s"), layout, LeaseOptions::default()).unwrap();
    let mut all = next_ids(&first, 5000);
    first.close().unwrap();
    // 2 s behind, allowed to wait 0.5 s: refused, never a repeat.
    let impatient = LeaseOptions {
        max_handover_wait: Duration::from_millis(500),
        ..offset_clock(-2000)
    };
    let refused = open(&uri(&app, "impatient", "2s"), layout, impatient).unwrap();
    let code = refused.next_id().unwrap_err().code();
    assert!(
        ["CLOCK_SEQUENCE_EXHAUSTED", "CLOCK_MOVED_BACKWARDS"].contains(&code),
        "{code}"
    );
    refused.close().unwrap();
    // 1 s behind with the default bound: waits for its clock to pass the stored mark.
    let patient = open(&uri(&app, "patient", "2s"), layout, offset_clock(-1000)).unwrap();
    let later = next_ids(&patient, 5000);
    assert!(later[0] > *all.iter().max().unwrap());
    all.extend(later);
    assert_unique("no clock sequence", all);
}

#[test]
fn the_coordinator_directly() {
    let Some(app) = ZK.app("direct") else {
        return;
    };
    let mut coordinator = ZooKeeperCoordinator::from_uri(&uri(&app, "direct:1", "1s")).unwrap();
    assert!(coordinator.redacted_uri().contains("/snowflake/"));
    let grant = coordinator
        .acquire(&Layout::CLOCKSEQ, clockflake_lease::wall_ms())
        .unwrap();
    assert_eq!((grant.worker_id, grant.state), (0, None));
    assert_eq!(grant.ttl, Some(Duration::from_secs(1)));
    let gen = clockflake::Generator::new(Layout::CLOCKSEQ, 0, Default::default()).unwrap();
    gen.next_id_at(wall_ms()).unwrap();
    let mut state = gen.state();
    state.reserve(wall_ms() + 5000);
    coordinator.renew(&state).unwrap();
    coordinator.release(Some(&state)).unwrap();
    assert_eq!(coordinator.read_state(0).unwrap(), Some(state));
    // After release the lease is gone.
    assert_eq!(coordinator.renew(&state).unwrap_err().code(), "LEASE_LOST");
    // A new start-up on the same coordinator gets the same id and the stored record.
    let again = coordinator
        .acquire(&Layout::CLOCKSEQ, clockflake_lease::wall_ms())
        .unwrap();
    assert_eq!((again.worker_id, again.state), (0, Some(state)));
    coordinator.release(None).unwrap();
}

#[test]
fn unreachable_zookeeper_is_coordinator_unavailable() {
    if !ZK.available() {
        return;
    }
    let error = open(
        "zookeeper://127.0.0.1:1/snowflake/x?ttl=1s&server=s",
        Layout::CLOCKSEQ,
        LeaseOptions::default(),
    )
    .unwrap_err();
    assert_eq!(error.code(), "COORDINATOR_UNAVAILABLE", "{error}");
}

/// Deletes (`None`) or overwrites a node behind the coordinators' backs, with a client of the
/// test's own.
fn tamper(path: String, data: Option<&'static [u8]>) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let hosts = ZK.url().trim_start_matches("zookeeper://").to_owned();
    runtime.block_on(async move {
        let client = zookeeper_client::Client::connect(&hosts).await.unwrap();
        match data {
            None => client.delete(&path, None).await.unwrap(),
            Some(data) => {
                client.set_data(&path, data, None).await.unwrap();
            }
        }
    });
}

#[test]
fn a_corrupt_record_is_refused_never_reset() {
    let Some(app) = ZK.app("corrupt") else {
        return;
    };
    let first = open_as(&app, "corrupt:1").unwrap();
    let mut issued = next_ids(&first, 1000);
    first.close().unwrap();
    let node = format!("/snowflake/{app}/servers/corrupt:1_0");
    tamper(
        node.clone(),
        Some(b"clockflake-state 1\nlayout_fingerprint 1\n"),
    );
    let error = open_as(&app, "corrupt:1").unwrap_err();
    assert_eq!(error.code(), "INVALID_STATE", "{error}");
    assert!(error.to_string().contains(&node), "{error}");
    // Refused again (nothing was reset), and the worker id was not left held.
    assert_eq!(
        open_as(&app, "corrupt:1").unwrap_err().code(),
        "INVALID_STATE"
    );
    // Repaired by hand (the node removed once nobody uses worker 0): worker 0 starts afresh.
    tamper(node, None);
    let repaired = open_as(&app, "corrupt:1").unwrap();
    assert_eq!(repaired.worker_id(), 0);
    issued.extend(next_ids(&repaired, 1000));
    assert_unique("repaired", issued);
}

#[test]
fn a_holder_whose_nodes_are_taken_over_loses_its_lease() {
    if !ZK.available() {
        return;
    }
    // An operator deletes the ephemeral node of a live holder; the next holder's start-up
    // rewrites (or removes) the holder's servers node, so the holder's renewal fails.
    for (rival, same_identity) in [("rival:1", false), ("holder:1", true)] {
        let app = app("fence");
        let holder_uri = uri(&app, "holder:1", "5s");
        let mut holder = ZooKeeperCoordinator::from_uri(&holder_uri).unwrap();
        let layout = single_worker();
        let grant = holder
            .acquire(&layout, clockflake_lease::wall_ms())
            .unwrap();
        let gen = clockflake::Generator::new(layout, grant.worker_id, Default::default()).unwrap();
        gen.next_id_at(wall_ms()).unwrap();
        holder.renew(&gen.state()).unwrap();
        tamper(format!("/snowflake/{app}/instances/0"), None);
        let mut taker = ZooKeeperCoordinator::from_uri(&uri(&app, rival, "5s")).unwrap();
        let taken = taker.acquire(&layout, clockflake_lease::wall_ms()).unwrap();
        assert_eq!(taken.worker_id, 0);
        assert_eq!(
            taken.state,
            Some(gen.state()),
            "same identity: {same_identity}"
        );
        let error = holder.renew(&gen.state()).unwrap_err();
        assert_eq!(
            error.code(),
            "LEASE_LOST",
            "same identity {same_identity}: {error}"
        );
        taker.renew(&gen.state()).unwrap();
        taker.release(None).unwrap();
        holder.release(None).unwrap();
    }
}
