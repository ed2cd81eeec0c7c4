//! Two servers leasing from a real three-member etcd cluster (`--lease etcd://...`) serve ids
//! over HTTP while the cluster's leader is killed and restarted, then the new leader is frozen
//! for 3 s and thawed. A majority serves throughout and each outage (3 s) is shorter than the
//! TTL (6 s), so no lease may be lost: different worker ids, no id repeats across the two, no
//! refusal at all (a lost lease would show as 503 `COORDINATOR_UNAVAILABLE` while the server
//! leases again), `/readyz` green throughout, each lease renewed through the outages. Stopped
//! with SIGTERM, both release their worker ids: no key left under `workers/`, and a newcomer
//! takes one of them at once and serves above its previous holder's ids.
//!
//! Needs the cluster of `scripts/etcd-cluster.sh` with its URL in `CLOCKFLAKE_ETCD_URL` and its
//! directory in `CLOCKFLAKE_ETCD_DIR` (make test-server-etcd starts one in a temp dir); without
//! them this test says so and passes, unless `CLOCKFLAKE_ETCD_REQUIRED=1` (make
//! test-server-etcd sets it), which makes a missing one fail.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::{BTreeMap, HashSet};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use clockflake::Layout;
use clockflake_lease::wall_ms;
use common::{Rng, Server};

fn required() -> bool {
    std::env::var("CLOCKFLAKE_ETCD_REQUIRED").is_ok_and(|v| v == "1")
}

/// The cluster's URL, or `None` (skipped) when no cluster was started for this run.
fn cluster_or_skip() -> Option<String> {
    for name in ["CLOCKFLAKE_ETCD_URL", "CLOCKFLAKE_ETCD_DIR"] {
        if std::env::var(name).map_or(true, |value| value.is_empty()) {
            assert!(!required(), "{name} is not set");
            eprintln!("skipped: {name} is not set (make test-server-etcd sets it)");
            return None;
        }
    }
    std::env::var("CLOCKFLAKE_ETCD_URL").ok()
}

/// `scripts/etcd-cluster.sh ARGS`: its stdout, trimmed; it must succeed.
fn cluster(args: &[&str]) -> String {
    let path = format!("{}/../scripts/etcd-cluster.sh", env!("CARGO_MANIFEST_DIR"));
    let output = Command::new(path).args(args).output().unwrap();
    assert!(
        output.status.success(),
        "etcd-cluster.sh {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap().trim().to_owned()
}

/// The keys under `/clockflake/APP/DIR/`, sorted.
fn keys(app: &str, dir: &str) -> Vec<String> {
    let listed = cluster(&[
        "etcdctl",
        "get",
        "--prefix",
        "--keys-only",
        &format!("/clockflake/{app}/{dir}/"),
    ]);
    let mut keys: Vec<String> = listed
        .lines()
        .filter(|line| !line.is_empty())
        .map(str::to_owned)
        .collect();
    keys.sort();
    keys
}

/// A counter of `/metrics`.
fn metric(server: &Server, name: &str) -> u64 {
    let metrics = common::get(&server.url("/metrics")).body;
    metrics
        .lines()
        .find_map(|line| line.strip_prefix(&format!("{name} ")))
        .unwrap_or_else(|| panic!("no {name} in {metrics}"))
        .trim()
        .parse()
        .unwrap()
}

/// What one collector saw: every id; every refusal (arrival time, status, body); the longest
/// request.
#[derive(Default)]
struct Seen {
    ids: Vec<u64>,
    refusals: Vec<(u64, u16, String)>,
    longest: Duration,
}

/// Fetches `/v1/ids?count=...` and `/v1/id` from `base` until `stop` (only `/v1/id` unless
/// `batches`), keeping every id. A batch waits through refusals that end within its 10 s, so
/// an outage shows in a batch as a slow answer; `/v1/id` waits at most 100 ms, then answers
/// 503.
fn collector(base: String, stop: Arc<AtomicBool>, seed: u64, batches: bool) -> JoinHandle<Seen> {
    std::thread::spawn(move || {
        let client = common::client();
        let mut rng = Rng(seed);
        let mut seen = Seen::default();
        while !stop.load(Ordering::Relaxed) {
            let single = !batches || rng.below(4) == 0;
            let url = if single {
                format!("{base}/v1/id")
            } else {
                format!("{base}/v1/ids?count={}", 1 + rng.below(500))
            };
            let asked = Instant::now();
            let response = client
                .get(&url)
                .send()
                .unwrap_or_else(|error| panic!("{url}: {error}"));
            let status = response.status().as_u16();
            let text = response.text().unwrap();
            seen.longest = seen.longest.max(asked.elapsed());
            match status {
                200 => {
                    let body: serde_json::Value = serde_json::from_str(&text).unwrap();
                    if single {
                        seen.ids.push(body["id"].as_str().unwrap().parse().unwrap());
                    } else {
                        seen.ids.extend(common::ids_of(&body));
                    }
                }
                _ => seen.refusals.push((wall_ms(), status, text)),
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        seen
    })
}

/// Polls `/readyz` until `stop`, keeping (arrival time, status, body) of every red answer.
fn watcher(base: String, stop: Arc<AtomicBool>) -> JoinHandle<Vec<(u64, u16, String)>> {
    std::thread::spawn(move || {
        let client = common::client();
        let mut red = Vec::new();
        while !stop.load(Ordering::Relaxed) {
            let response = client.get(format!("{base}/readyz")).send().unwrap();
            let status = response.status().as_u16();
            if status != 200 {
                red.push((wall_ms(), status, response.text().unwrap()));
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        red
    })
}

#[test]
fn two_servers_keep_their_leases_through_a_leader_killed_and_a_member_frozen() {
    let Some(url) = cluster_or_skip() else { return };
    let app = common::app("server-etcd");
    let lease = format!("{url}/?app={app}&ttl=6s");
    let mut servers: Vec<Server> = (0..2).map(|_| Server::start(&lease, &[], &[])).collect();
    let workers: Vec<u64> = servers
        .iter()
        .map(|server| {
            server.wait_ready(Duration::from_secs(20))["workerId"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert_ne!(workers[0], workers[1], "worker ids {workers:?}");
    let mut held: Vec<String> = workers
        .iter()
        .map(|w| format!("/clockflake/{app}/workers/{w}"))
        .collect();
    held.sort();
    assert_eq!(keys(&app, "workers"), held);
    let renewals_at_start: Vec<u64> = servers
        .iter()
        .map(|s| metric(s, "clockflake_lease_renewals_total"))
        .collect();

    let stop = Arc::new(AtomicBool::new(false));
    // Two clients per server: batches and single ids, and single ids only.
    let collectors: Vec<[JoinHandle<Seen>; 2]> = servers
        .iter()
        .enumerate()
        .map(|(i, s)| {
            [true, false].map(|batches| {
                collector(
                    s.base.clone(),
                    Arc::clone(&stop),
                    0xe7cd + i as u64,
                    batches,
                )
            })
        })
        .collect();
    let watchers: Vec<JoinHandle<Vec<(u64, u16, String)>>> = servers
        .iter()
        .map(|s| watcher(s.base.clone(), Arc::clone(&stop)))
        .collect();

    let mut steps = Vec::new();
    std::thread::sleep(Duration::from_millis(1500));
    let killed = cluster(&["leader"]);
    cluster(&["kill", &killed]);
    steps.push(format!("killed leader {killed} at {}", wall_ms()));
    std::thread::sleep(Duration::from_millis(3000));
    cluster(&["restart", &killed]);
    steps.push(format!("restarted {killed} at {}", wall_ms()));
    std::thread::sleep(Duration::from_millis(1000));
    // The member that leads now, frozen: the others elect a new leader, and requests sent to
    // it wait until their share of the budget runs out, then go to the next member.
    let frozen = cluster(&["leader"]);
    cluster(&["freeze", &frozen]);
    steps.push(format!("froze leader {frozen} at {}", wall_ms()));
    std::thread::sleep(Duration::from_millis(3000));
    cluster(&["thaw", &frozen]);
    steps.push(format!("thawed {frozen} at {}", wall_ms()));
    std::thread::sleep(Duration::from_millis(1500));

    stop.store(true, Ordering::Relaxed);
    let seen: Vec<Seen> = collectors
        .into_iter()
        .map(|clients| {
            let mut seen = Seen::default();
            for client in clients {
                let mut one = client.join().unwrap();
                seen.ids.append(&mut one.ids);
                seen.refusals.append(&mut one.refusals);
                seen.longest = seen.longest.max(one.longest);
            }
            seen
        })
        .collect();
    let red: Vec<_> = watchers.into_iter().map(|w| w.join().unwrap()).collect();
    let steps = steps.join(", ");

    // Zero duplicates among every id from both servers, each id under its server's worker id.
    let layout = Layout::CLOCKSEQ;
    let mut all = HashSet::new();
    for (i, s) in seen.iter().enumerate() {
        let what = format!("server {i} (worker id {}; {steps})", workers[i]);
        assert!(s.ids.len() > 1000, "{what}: {} ids", s.ids.len());
        assert_eq!(s.refusals, Vec::new(), "{what}: refusals");
        assert_eq!(red[i], Vec::new(), "{what}: /readyz red");
        for id in &s.ids {
            assert_eq!(layout.decode(*id).unwrap().worker_id, workers[i], "{what}");
            assert!(all.insert(*id), "{what}: duplicate id {id}");
        }
        // Still the first lease, renewed through the kill and the freeze.
        let (status, ready) = servers[i].readiness();
        assert_eq!(status, 200, "{what}: {ready}");
        assert_eq!(
            ready["workerId"].as_u64(),
            Some(workers[i]),
            "{what}: {ready}"
        );
        assert_eq!(ready["leases"].as_u64(), Some(1), "{what}: {ready}");
        assert_eq!(ready["leasesLost"].as_u64(), Some(0), "{what}: {ready}");
        let renewals =
            metric(&servers[i], "clockflake_lease_renewals_total") - renewals_at_start[i];
        assert!(renewals >= 3, "{what}: {renewals} renewals during the run");
        eprintln!(
            "etcd: {what}: {} ids, longest request {:?}, {renewals} renewals, {} failed",
            s.ids.len(),
            s.longest,
            metric(&servers[i], "clockflake_lease_renewal_failures_total")
        );
    }

    // SIGTERM: each exits cleanly and releases its worker id (the key deleted with its lease
    // revoked); the records stay.
    for server in &mut servers {
        server.signal("TERM");
        let status = server.wait(Duration::from_secs(20));
        assert!(status.success(), "graceful exit: {status:?}");
    }
    assert_eq!(
        keys(&app, "workers"),
        Vec::<String>::new(),
        "worker ids held after SIGTERM"
    );
    let records: Vec<String> = {
        let mut records: Vec<String> = workers
            .iter()
            .map(|w| format!("/clockflake/{app}/state/{w}"))
            .collect();
        records.sort();
        records
    };
    assert_eq!(keys(&app, "state"), records);

    // A newcomer takes one of the released worker ids at once (a worker id not released would
    // stay held for the TTL) and serves above its previous holder's ids.
    let mut newcomer = Server::start(&lease, &[], &[]);
    let worker = newcomer.wait_ready(Duration::from_secs(20))["workerId"]
        .as_u64()
        .unwrap();
    let previous = workers
        .iter()
        .position(|w| *w == worker)
        .unwrap_or_else(|| panic!("the newcomer took worker id {worker}, none of {workers:?}"));
    let highest = seen[previous].ids.iter().max().copied().unwrap();
    let new_ids = common::ids_of(&common::get(&newcomer.url("/v1/ids?count=1000")).json());
    for id in &new_ids {
        assert!(
            *id > highest,
            "{id} not above the previous holder's {highest}"
        );
        assert!(!all.contains(id), "duplicate id {id} from the newcomer");
    }
    newcomer.signal("TERM");
    assert!(newcomer.wait(Duration::from_secs(20)).success());
    assert_eq!(
        keys(&app, "workers"),
        Vec::<String>::new(),
        "the newcomer's worker id held"
    );
    let by_server: BTreeMap<u64, usize> = workers
        .iter()
        .zip(&seen)
        .map(|(w, s)| (*w, s.ids.len()))
        .collect();
    eprintln!(
        "etcd: {} ids unique from 2 servers (ids by worker id {by_server:?}; {steps}); both \
         released their worker ids on SIGTERM, the newcomer took {worker}",
        all.len()
    );
}
