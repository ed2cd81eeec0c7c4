//! One id space across regions: `workers=LO-HI` gives each pool (each region, on its own
//! coordinator) a part of the worker ids. `file://`, `env://` and `k8s://` here always; two
//! Redis servers (two regions, each with its own coordinator) under `make test-lease-regions`,
//! which starts them through scripts/redis.sh and sets `CLOCKFLAKE_REDIS_URL` (region A) and
//! `CLOCKFLAKE_REDIS_B_URL` (region B); skipped without them unless `CLOCKFLAKE_REDIS_REQUIRED`
//! is set.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::HashSet;
use std::process::Stdio;

use clockflake::Layout;
use clockflake_lease::{open, LeaseOptions, LeasedGenerator};
use common::*;

fn file_uri(dir: &std::path::Path, app: &str, workers: &str) -> String {
    format!("file://{}?app={app}&workers={workers}", dir.display())
}

/// What each holder of a region issued: (its worker id, its ids).
type Issued = Vec<(u64, Vec<u64>)>;

/// A region's range (first, last) and what its holders issued.
type Region = (u64, u64, Issued);

/// `count` holders of `uri`, every one granted.
fn holders(uri: &str, count: usize) -> Vec<LeasedGenerator> {
    (0..count)
        .map(|_| open(uri, Layout::CLOCKSEQ, LeaseOptions::default()).unwrap())
        .collect()
}

/// Every holder issues `per_holder` ids at once, each on a thread of its own: (worker id, its
/// ids) per holder.
fn issue_everywhere(holders: &[LeasedGenerator], per_holder: usize) -> Issued {
    std::thread::scope(|scope| {
        let running: Vec<_> = holders
            .iter()
            .map(|gen| scope.spawn(move || (gen.worker_id(), next_ids(gen, per_holder))))
            .collect();
        running.into_iter().map(|t| t.join().unwrap()).collect()
    })
}

/// Every id decodes to its holder's worker id, which is in `first..=last`; no id twice across
/// every region's ids. Returns how many ids were checked.
fn check_regions(regions: &[Region]) -> usize {
    let mut seen = HashSet::new();
    for (first, last, issued) in regions {
        let workers: HashSet<u64> = issued.iter().map(|(worker, _)| *worker).collect();
        assert_eq!(workers.len(), issued.len(), "one worker id per holder");
        for (worker, ids) in issued {
            assert!(
                (*first..=*last).contains(worker),
                "worker id {worker} outside {first}-{last}"
            );
            for id in ids {
                assert_eq!(Layout::CLOCKSEQ.decode(*id).unwrap().worker_id, *worker);
                assert!(seen.insert(*id), "duplicate id {id} (worker id {worker})");
            }
        }
    }
    seen.len()
}

#[test]
fn two_file_pools_with_their_own_ranges_share_one_id_space() {
    let (a, b) = (TempDir::new("region-a"), TempDir::new("region-b"));
    let region_a = holders(&file_uri(&a, "orders", "0-63"), 8);
    let region_b = holders(&file_uri(&b, "orders", "64-127"), 8);
    let checked = check_regions(&[
        (0, 63, issue_everywhere(&region_a, 2000)),
        (64, 127, issue_everywhere(&region_b, 2000)),
    ]);
    assert_eq!(checked, 16 * 2000);
    // The lowest free worker id of each range.
    assert_eq!(region_a[0].worker_id(), 0);
    assert_eq!(region_b[0].worker_id(), 64);
    for gen in region_a.into_iter().chain(region_b) {
        gen.close().unwrap();
    }
}

#[test]
fn a_full_range_is_exhausted_naming_it_and_a_single_worker_id_is_a_range() {
    let dir = TempDir::new("exhausted");
    let uri = file_uri(&dir, "orders", "5-6");
    let held = holders(&uri, 2);
    let mut workers: Vec<u64> = held.iter().map(LeasedGenerator::worker_id).collect();
    workers.sort_unstable();
    assert_eq!(workers, [5, 6]);
    let error = open_refused(&uri, Layout::CLOCKSEQ, "WORKER_POOL_EXHAUSTED");
    assert!(error.to_string().contains("workers=5-6"), "{error}");
    // Another pool of the same range on another coordinator is not this one's business.
    let other = TempDir::new("exhausted-other");
    let single = open(
        &file_uri(&other, "orders", "7"),
        Layout::CLOCKSEQ,
        LeaseOptions::default(),
    )
    .unwrap();
    assert_eq!(single.worker_id(), 7);
    single.close().unwrap();
    for gen in held {
        gen.close().unwrap();
    }
}

#[test]
fn a_range_outside_the_layout_is_refused_at_open() {
    let dir = TempDir::new("outside");
    for workers in ["64-128", "128", "0-1000"] {
        let error = open_refused(
            &file_uri(&dir, "orders", workers),
            Layout::CLOCKSEQ,
            "INVALID_URI",
        );
        assert!(
            error
                .to_string()
                .contains("outside the layout's worker ids 0-127"),
            "{error}"
        );
    }
    // js53 has 16 worker ids.
    let js53 = Layout::by_name("js53").unwrap();
    let error = open_refused(&file_uri(&dir, "orders", "8-31"), js53, "INVALID_URI");
    assert!(error.to_string().contains("0-15"), "{error}");
}

#[test]
fn an_overlapping_different_range_on_the_same_pool_is_refused() {
    let dir = TempDir::new("overlap");
    let first = open(
        &file_uri(&dir, "orders", "0-63"),
        Layout::CLOCKSEQ,
        LeaseOptions::default(),
    )
    .unwrap();
    assert_eq!(first.worker_id(), 0);
    for other in ["0-127", "0-31", "63-100"] {
        let error = open_refused(
            &file_uri(&dir, "orders", other),
            Layout::CLOCKSEQ,
            "WORKER_RANGE_CONFLICT",
        );
        let text = error.to_string();
        assert!(
            text.contains(&format!("declares workers={other}")) && text.contains("workers=0-63"),
            "{text}"
        );
    }
    // Without workers= an instance is the whole layout: refused beside a declared range.
    let plain = format!("file://{}?app=orders", dir.display());
    let error = open_refused(&plain, Layout::CLOCKSEQ, "WORKER_RANGE_CONFLICT");
    assert!(
        error.to_string().contains("no workers parameter"),
        "{error}"
    );
    // The same range again, and a range apart, are fine; another app is another pool.
    let same = open(
        &file_uri(&dir, "orders", "0-63"),
        Layout::CLOCKSEQ,
        LeaseOptions::default(),
    )
    .unwrap();
    assert_eq!(same.worker_id(), 1);
    let apart = open(
        &file_uri(&dir, "orders", "64-127"),
        Layout::CLOCKSEQ,
        LeaseOptions::default(),
    )
    .unwrap();
    assert_eq!(apart.worker_id(), 64);
    let other_app = open(
        &file_uri(&dir, "invoices", "0-127"),
        Layout::CLOCKSEQ,
        LeaseOptions::default(),
    )
    .unwrap();
    for gen in [first, same, apart, other_app] {
        gen.close().unwrap();
    }
    // Once the holders are gone, a different plan can start (the lock files keep no claim).
    let replanned = open(
        &file_uri(&dir, "orders", "0-127"),
        Layout::CLOCKSEQ,
        LeaseOptions::default(),
    )
    .unwrap();
    replanned.close().unwrap();
}

#[test]
fn holders_without_a_range_do_not_block_a_pool_moving_to_ranges() {
    let dir = TempDir::new("migrate");
    let plain = format!("file://{}?app=orders", dir.display());
    let old = open(&plain, Layout::CLOCKSEQ, LeaseOptions::default()).unwrap();
    let ranged = open(
        &file_uri(&dir, "orders", "0-63"),
        Layout::CLOCKSEQ,
        LeaseOptions::default(),
    )
    .unwrap();
    assert_eq!((old.worker_id(), ranged.worker_id()), (0, 1));
    old.close().unwrap();
    ranged.close().unwrap();
}

/// Runs the probe with `uri` and `env` (and nothing inherited that assigns a worker id):
/// its stdout and stderr together.
fn assigned_probe(uri: &str, env: &[(&str, &str)]) -> String {
    let mut command = probe(&["--uri", uri, "--count", "1"]);
    command
        .env_remove("CLOCKFLAKE_POD_INDEX")
        .env_remove("CLOCKFLAKE_WORKER_ID")
        .env("HOSTNAME", "")
        .stdin(Stdio::null());
    for (key, value) in env {
        command.env(key, value);
    }
    let output = command.output().unwrap();
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[test]
fn assigned_worker_ids_outside_the_range_are_refused_not_shifted() {
    let dir = TempDir::new("assigned");
    let env_uri = format!("env://{}?app=orders&workers=64-127", dir.display());
    let refused = assigned_probe(&env_uri, &[("CLOCKFLAKE_WORKER_ID", "3")]);
    assert!(
        refused.contains("error WORKER_ID_OUT_OF_RANGE")
            && refused.contains("CLOCKFLAKE_WORKER_ID=3")
            && refused.contains("workers=64-127"),
        "{refused}"
    );
    assert!(text_ids(&refused).is_empty(), "{refused}");
    let granted = assigned_probe(&env_uri, &[("CLOCKFLAKE_WORKER_ID", "70")]);
    let ids = text_ids(&granted);
    assert_eq!(ids.len(), 1, "{granted}");
    assert_eq!(Layout::CLOCKSEQ.decode(ids[0]).unwrap().worker_id, 70);
    // A StatefulSet in region B starts its ordinals at 64 (spec.ordinals.start).
    let k8s_uri = format!("k8s://{}?app=orders&workers=64-127", dir.display());
    let refused = assigned_probe(&k8s_uri, &[("CLOCKFLAKE_POD_INDEX", "0")]);
    assert!(
        refused.contains("error WORKER_ID_OUT_OF_RANGE"),
        "{refused}"
    );
    let granted = assigned_probe(&k8s_uri, &[("CLOCKFLAKE_POD_INDEX", "64")]);
    let ids = text_ids(&granted);
    assert_eq!(ids.len(), 1, "{granted}");
    assert_eq!(Layout::CLOCKSEQ.decode(ids[0]).unwrap().worker_id, 64);
}

/// Region B's Redis, beside `REDIS` (region A).
fn redis_b() -> Option<String> {
    if !REDIS.available() {
        return None;
    }
    match std::env::var("CLOCKFLAKE_REDIS_B_URL") {
        Ok(url) => Some(url),
        Err(_) if std::env::var_os("CLOCKFLAKE_REDIS_REQUIRED").is_some() => {
            panic!("CLOCKFLAKE_REDIS_B_URL is not set: run `make test-lease-regions`")
        }
        Err(_) => {
            eprintln!("skipped: CLOCKFLAKE_REDIS_B_URL is not set (run `make test-lease-regions`)");
            None
        }
    }
}

/// Two regions, each with its own Redis: 64 holders of `workers=0-63` on A and 64 of
/// `workers=64-127` on B issue ids at once: no id twice, every worker id in its range; the
/// 65th holder of a region is refused naming its range; on A, a pool whose range overlaps the
/// live holders' is refused. Without ranges, both regions start at worker id 0: the ids the
/// ranges keep apart would repeat.
#[test]
fn two_regions_on_two_redis_servers_share_one_id_space() {
    let Some(url_b) = redis_b() else {
        return;
    };
    let app = app("regions");
    let uri_a = format!("{}?app={app}&ttl=10s", REDIS.url());
    let uri_b = format!("{url_b}?app={app}&ttl=10s");
    // Without ranges: worker id 0 in both regions.
    let plain_a = open(&uri_a, Layout::CLOCKSEQ, LeaseOptions::default()).unwrap();
    let plain_b = open(&uri_b, Layout::CLOCKSEQ, LeaseOptions::default()).unwrap();
    assert_eq!((plain_a.worker_id(), plain_b.worker_id()), (0, 0));
    plain_a.close().unwrap();
    plain_b.close().unwrap();

    let ranged_a = format!("{uri_a}&workers=0-63");
    let ranged_b = format!("{uri_b}&workers=64-127");
    let region_a = holders(&ranged_a, 64);
    let region_b = holders(&ranged_b, 64);
    let checked = check_regions(&[
        (0, 63, issue_everywhere(&region_a, 1000)),
        (64, 127, issue_everywhere(&region_b, 1000)),
    ]);
    assert_eq!(checked, 128 * 1000);
    for (uri, range) in [(&ranged_a, "workers=0-63"), (&ranged_b, "workers=64-127")] {
        let error = open_refused(uri, Layout::CLOCKSEQ, "WORKER_POOL_EXHAUSTED");
        assert!(error.to_string().contains(range), "{error}");
    }
    // Visible on A: its live holders declared 0-63.
    for overlapping in ["32-95", "0-127", "63"] {
        let error = open_refused(
            &format!("{uri_a}&workers={overlapping}"),
            Layout::CLOCKSEQ,
            "WORKER_RANGE_CONFLICT",
        );
        assert!(error.to_string().contains("workers=0-63"), "{error}");
    }
    let error = open_refused(&uri_a, Layout::CLOCKSEQ, "WORKER_RANGE_CONFLICT");
    assert!(
        error.to_string().contains("no workers parameter"),
        "{error}"
    );
    // A holder gone frees its worker id for its own range only.
    let gone = region_a.iter().position(|g| g.worker_id() == 10).unwrap();
    let mut region_a = region_a;
    region_a.remove(gone).close().unwrap();
    let again = open(&ranged_a, Layout::CLOCKSEQ, LeaseOptions::default()).unwrap();
    assert_eq!(again.worker_id(), 10);
    region_a.push(again);
    for gen in region_a.into_iter().chain(region_b) {
        gen.close().unwrap();
    }
}

/// ZooKeeper: two regions as two roots (`/region-a/APP`, `/region-b/APP`), each a coordinator
/// the other cannot see; within a root, the range is kept in the data of each holder's
/// `instances/<worker>` node, where a newcomer with an overlapping different range reads it.
#[test]
fn zookeeper_pools_keep_to_their_ranges_and_refuse_an_overlap() {
    if !ZK.available() {
        return;
    }
    let app = app("regions");
    let uri = |region: &str, server: usize, workers: &str| {
        format!(
            "{}/region-{region}/{app}?ttl=10s&server=s{server}&workers={workers}",
            ZK.url()
        )
    };
    let mut held = Vec::new();
    for server in 0..4 {
        for (region, workers) in [("a", "0-3"), ("b", "64-67")] {
            let gen = open(
                &uri(region, server, workers),
                Layout::CLOCKSEQ,
                LeaseOptions::default(),
            )
            .unwrap();
            let first = if region == "a" { 0 } else { 64 };
            assert!((first..first + 4).contains(&gen.worker_id()), "{region}");
            held.push((first, gen));
        }
    }
    let regions: Vec<Region> = [0, 64]
        .into_iter()
        .map(|first| {
            let issued = held
                .iter()
                .filter(|(f, _)| *f == first)
                .map(|(_, gen)| (gen.worker_id(), next_ids(gen, 1000)))
                .collect();
            (first, first + 3, issued)
        })
        .collect();
    assert_eq!(check_regions(&regions), 8 * 1000);
    let error = open_refused(
        &uri("a", 9, "0-3"),
        Layout::CLOCKSEQ,
        "WORKER_POOL_EXHAUSTED",
    );
    assert!(error.to_string().contains("workers=0-3"), "{error}");
    let error = open_refused(
        &uri("a", 9, "2-5"),
        Layout::CLOCKSEQ,
        "WORKER_RANGE_CONFLICT",
    );
    assert!(error.to_string().contains("workers=0-3"), "{error}");
    for (_, gen) in held {
        gen.close().unwrap();
    }
}
