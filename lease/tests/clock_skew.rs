//! The start-up clock check (`max_skew`) against the real coordinators: PostgreSQL (started by
//! `make test-lease` / `make test-clock-skew`, `CLOCKFLAKE_PG_URL`) and ZooKeeper (started by
//! `make test-zookeeper` / `make test-clock-skew`, `CLOCKFLAKE_ZK_URL`; skipped without it
//! unless `CLOCKFLAKE_ZK_REQUIRED` is set). The local clock is an injected one, offset from
//! the system's (which both servers, on this machine, share).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use clockflake_lease::{open, wall_ms, LeaseOptions};
use common::*;

/// On the coordinator `uri` names (with one worker id, so a later open proves it free):
/// ±10 s refused with `CLOCK_SKEW` naming both clocks, the worker id given back each time;
/// 1 s opens and reports about 1000 ms; with `&max_skew=off` added to `uri`, 10 s ahead
/// opens, measuring nothing.
fn the_clock_check(uri: &str) {
    for (offset_ms, direction) in [(10_000, "ahead"), (-10_000, "behind")] {
        let started_ms = wall_ms();
        let error = open(uri, single_worker(), offset_clock(offset_ms)).unwrap_err();
        assert_eq!(error.code(), "CLOCK_SKEW", "{offset_ms}: {error}");
        let clockflake_lease::LeaseError::ClockSkew {
            local_ms,
            server_ms,
            skew_ms,
            max_skew_ms,
            ..
        } = error
        else {
            panic!("{offset_ms}: {error:?}")
        };
        let message = error.to_string();
        for part in [
            local_ms.to_string(),
            server_ms.to_string(),
            skew_ms.unsigned_abs().to_string(),
            direction.to_owned(),
            "max_skew=5000ms".to_owned(),
        ] {
            assert!(message.contains(&part), "{part:?} in {message}");
        }
        assert_eq!(max_skew_ms, 5000);
        assert!((skew_ms - offset_ms).abs() < 1000, "{message}");
        assert!(
            server_ms >= started_ms && server_ms <= wall_ms(),
            "{message}"
        );
        // The worker id went back at once: the only one there is opens now.
        let next = open(uri, single_worker(), LeaseOptions::default()).unwrap();
        assert_eq!(next.worker_id(), 0);
        next.close().unwrap();
    }

    let gen = open(uri, single_worker(), offset_clock(1000)).unwrap();
    let skew = gen.stats().measured_skew_ms.expect("measured");
    assert!(
        (700..=1300).contains(&skew),
        "1 s ahead measured as {skew} ms"
    );
    gen.next_id().unwrap();
    gen.close().unwrap();

    let gen = open(uri, single_worker(), LeaseOptions::default()).unwrap();
    let skew = gen.stats().measured_skew_ms.expect("measured");
    assert!(skew.abs() <= 300, "the same clock measured {skew} ms apart");
    gen.close().unwrap();

    let off_uri = format!("{uri}&max_skew=off");
    let gen = open(&off_uri, single_worker(), offset_clock(10_000)).unwrap();
    assert_eq!(
        gen.stats().measured_skew_ms,
        None,
        "max_skew=off measures nothing"
    );
    gen.next_id().unwrap();
    gen.close().unwrap();
}

#[test]
fn postgres_refuses_a_clock_10s_off_and_reports_the_skew() {
    let app = app("skew");
    the_clock_check(&format!("{}?app={app}&ttl=2s", PG.url()));
    // Refused, the row was given back untouched: no owner, the empty record of its first grant.
    let mut client = PgClient::connect(&PG.url()).unwrap();
    let refused = format!("{app}-refused");
    let uri = format!("{}?app={refused}&ttl=2s", PG.url());
    let error = open(&uri, single_worker(), offset_clock(-10_000)).unwrap_err();
    assert_eq!(error.code(), "CLOCK_SKEW", "{error}");
    let marks = pg_given_back_marks(&mut client, &refused);
    assert!(
        marks.unwrap().iter().all(Option::is_none),
        "no mark written"
    );
}

#[test]
fn a_tighter_max_skew_is_honoured() {
    let uri = format!("{}?app={}&ttl=2s&max_skew=500ms", PG.url(), app("tight"));
    let error = open(&uri, single_worker(), offset_clock(2000)).unwrap_err();
    assert_eq!(error.code(), "CLOCK_SKEW", "{error}");
    assert!(error.to_string().contains("max_skew=500ms"), "{error}");
}

#[test]
fn zookeeper_refuses_a_clock_10s_off_and_reports_the_skew() {
    if !ZK.available() {
        return;
    }
    the_clock_check(&format!(
        "{}/snowflake/{}?ttl=2s&server=skew",
        ZK.url(),
        app("skew")
    ));
}

#[test]
fn redis_refuses_a_clock_10s_off_and_reports_the_skew() {
    if !REDIS.available() {
        return;
    }
    the_clock_check(&format!("{}?app={}&ttl=2s", REDIS.url(), app("skew")));
}
