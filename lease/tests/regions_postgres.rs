//! One id space across regions on PostgreSQL (`make test-lease`'s throwaway server): two
//! regions whose coordinators know nothing of each other, here two lease tables
//! (`table=`), each region's pool with its own `workers=` range.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::HashSet;
use std::sync::Mutex;

use clockflake::Layout;
use clockflake_lease::{open, LeaseOptions, LeasedGenerator};
use common::*;

static SERIAL: Mutex<()> = Mutex::new(());

fn holders(uri: &str, count: usize) -> Vec<LeasedGenerator> {
    (0..count)
        .map(|_| open(uri, Layout::CLOCKSEQ, LeaseOptions::default()).unwrap())
        .collect()
}

/// 64 holders of `workers=0-63` in region A's table and 64 of `workers=64-127` in region B's
/// issue ids at once: no id twice, every worker id in its range; the 65th holder of a region
/// is refused naming its range; in A, a pool whose range overlaps the live holders' is refused,
/// read from the `owner` column (no schema change). Without ranges both start at worker id 0.
#[test]
fn two_regions_on_two_lease_tables_share_one_id_space() {
    let Some(_serial) = PG.turn(&SERIAL) else {
        return;
    };
    let app = app("regions");
    let uri_a = format!("{}?app={app}&ttl=10s&table=regions_a", PG.url());
    let uri_b = format!("{}?app={app}&ttl=10s&table=regions_b", PG.url());
    let plain_a = open(&uri_a, Layout::CLOCKSEQ, LeaseOptions::default()).unwrap();
    let plain_b = open(&uri_b, Layout::CLOCKSEQ, LeaseOptions::default()).unwrap();
    assert_eq!((plain_a.worker_id(), plain_b.worker_id()), (0, 0));
    plain_a.close().unwrap();
    plain_b.close().unwrap();

    let ranged_a = format!("{uri_a}&workers=0-63");
    let ranged_b = format!("{uri_b}&workers=64-127");
    let region_a = holders(&ranged_a, 64);
    let region_b = holders(&ranged_b, 64);
    let issued: Vec<(u64, u64, Vec<u64>)> = std::thread::scope(|scope| {
        let running: Vec<_> = region_a
            .iter()
            .map(|gen| (0, 63, gen))
            .chain(region_b.iter().map(|gen| (64, 127, gen)))
            .map(|(first, last, gen)| {
                scope.spawn(move || {
                    let worker = gen.worker_id();
                    assert!(
                        (first..=last).contains(&worker),
                        "{worker} in {first}-{last}"
                    );
                    (worker, first, next_ids(gen, 500))
                })
            })
            .collect();
        running.into_iter().map(|t| t.join().unwrap()).collect()
    });
    let mut seen = HashSet::new();
    let workers: HashSet<u64> = issued.iter().map(|(worker, ..)| *worker).collect();
    assert_eq!(workers.len(), 128);
    for (worker, _, ids) in &issued {
        for id in ids {
            assert_eq!(Layout::CLOCKSEQ.decode(*id).unwrap().worker_id, *worker);
            assert!(seen.insert(*id), "duplicate id {id}");
        }
    }
    assert_eq!(seen.len(), 128 * 500);
    for (uri, range) in [(&ranged_a, "workers=0-63"), (&ranged_b, "workers=64-127")] {
        let error = open_refused(uri, Layout::CLOCKSEQ, "WORKER_POOL_EXHAUSTED");
        assert!(error.to_string().contains(range), "{error}");
    }
    for overlapping in ["32-95", "0-127"] {
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
    for gen in region_a.into_iter().chain(region_b) {
        gen.close().unwrap();
    }
    // Once its holders are gone, region A's table takes any plan again.
    let replanned = open(
        &format!("{uri_a}&workers=0-127"),
        Layout::CLOCKSEQ,
        LeaseOptions::default(),
    )
    .unwrap();
    replanned.close().unwrap();
}
