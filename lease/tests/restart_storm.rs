//! A restart storm with the clock behind: twenty start / issue / close in a row on one pool,
//! on a clock an hour behind the time the records were reserved at, on every coordinator.
//!
//! Each close stores the worker's clock sequence marked at (its clock + `reserve`), ahead of
//! the next start's clock; after eight restarts inside one reserve window every clock sequence
//! of the lowest worker id is marked ahead. A start that took it anyway would have to wait for
//! the clock to pass a mark (or refuse); the coordinators prefer a free worker id whose record
//! can be used at once.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::{Duration, Instant};

use clockflake::Layout;
use clockflake_lease::{open, wall_ms};
use common::*;

const HOUR_MS: u64 = 3_600_000;

fn restart_storm(uri: &str, label: &str) {
    let behind = offset_clock(-(HOUR_MS as i64));
    let layout = Layout::CLOCKSEQ;
    let mut all = Vec::new();
    let mut startups = Vec::new();
    let mut workers = Vec::new();
    for restart in 0..20 {
        let started = Instant::now();
        let gen = open(uri, layout, behind.clone())
            .unwrap_or_else(|error| panic!("{label}: restart {restart} refused: {error}"));
        // The non-blocking call refuses where a start-up would wait for the clock to pass the
        // stored marks: it must not have to.
        let first = gen.try_next_id().unwrap_or_else(|error| {
            panic!(
                "{label}: restart {restart} on worker id {} cannot issue at once: {error}",
                gen.worker_id()
            )
        });
        startups.push(started.elapsed());
        let issued_at = layout.decode(first).unwrap().timestamp_ms;
        let clock = wall_ms() - HOUR_MS;
        assert!(
            issued_at + 1000 > clock && issued_at <= clock,
            "{label}: restart {restart}: first id at {issued_at}, clock {clock}"
        );
        workers.push(gen.worker_id());
        all.push(first);
        all.extend(paced(5, || gen.next_id().unwrap()));
        gen.close().unwrap();
    }
    assert_unique(label, all);
    // More than eight restarts: the lowest worker id ran out of usable clock sequences, and
    // the later ones moved on to another worker id instead of waiting.
    assert!(
        workers.iter().any(|&w| w != workers[0]),
        "{label}: workers {workers:?}"
    );
    startups.sort_unstable();
    let (median, slowest) = (startups[startups.len() / 2], startups[startups.len() - 1]);
    eprintln!("{label}: start-up median {median:?}, slowest {slowest:?}, workers {workers:?}");
    assert!(
        median < Duration::from_millis(100),
        "{label}: median {median:?}"
    );
    assert!(
        slowest < Duration::from_secs(1),
        "{label}: slowest {slowest:?}"
    );
}

#[test]
fn twenty_restarts_an_hour_behind_on_file_start_at_once_and_repeat_nothing() {
    let dir = temp_dir("storm");
    restart_storm(&format!("file://{}?app=storm", dir.display()), "file://");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn twenty_restarts_an_hour_behind_on_postgres_start_at_once_and_repeat_nothing() {
    // A clock an hour behind is what the start-up clock check refuses (max_skew); with it off,
    // the stored marks alone must keep the ids apart.
    let uri = format!("{}?app={}&ttl=10s&max_skew=off", PG.url(), app("storm"));
    restart_storm(&uri, "postgres://");
}

#[test]
fn twenty_restarts_an_hour_behind_on_zookeeper_start_at_once_and_repeat_nothing() {
    if !ZK.available() {
        return;
    }
    let uri = format!(
        "{}/snowflake/{}?ttl=2s&server=storm:1&max_skew=off",
        ZK.url(),
        app("storm")
    );
    restart_storm(&uri, "zookeeper://");
}

#[test]
fn twenty_restarts_an_hour_behind_on_redis_start_at_once_and_repeat_nothing() {
    if !REDIS.available() {
        return;
    }
    let uri = format!("{}?app={}&ttl=10s&max_skew=off", REDIS.url(), app("storm"));
    restart_storm(&uri, "redis://");
}
