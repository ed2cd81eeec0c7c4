//! The `redis://` coordinator against a real Redis (Debian's `redis-server`, started on
//! loopback by `make test-redis` through scripts/redis.sh), with real processes. Skipped
//! without `CLOCKFLAKE_REDIS_URL` unless `CLOCKFLAKE_REDIS_REQUIRED` is set.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::Mutex;
use std::time::Duration;

use clockflake::Layout;
use clockflake_lease::{open, LeaseOptions};
use common::*;
use redis::Commands;

/// The timing tests run one at a time, so that they do not slow each other down.
static SERIAL: Mutex<()> = Mutex::new(());

fn worker_key(app: &str, worker: u64) -> String {
    format!("clockflake:{{{app}}}:worker:{worker}")
}

fn lease_key(app: &str, worker: u64) -> String {
    format!("clockflake:{{{app}}}:lease:{worker}")
}

common::expiring_lease_tests! {
    REDIS, SERIAL, paused_ttl: ("1s", 1000), settle_ms: 500,
    fresh: a_fresh_worker_id_is_used_at_once_and_then_carries_a_record
}

#[test]
fn a_worker_hash_keeps_epoch_and_record_and_the_lease_key_expires() {
    let Some((_serial, app, uri)) = REDIS.namespace(&SERIAL, "keys", "2s") else {
        return;
    };
    let gen = open(&uri, Layout::CLOCKSEQ, LeaseOptions::default()).unwrap();
    let id = gen.next_id().unwrap();
    let worker = gen.worker_id();
    let mut redis = redis_connection();
    let lease: String = redis.get(lease_key(&app, worker)).unwrap();
    assert!(lease.starts_with("1 "), "epoch 1, then the owner: {lease}");
    let ttl: i64 = redis.pttl(lease_key(&app, worker)).unwrap();
    assert!(ttl > 0 && ttl <= 2000, "expires on the server: {ttl} ms");
    assert_eq!(
        redis.pttl::<_, i64>(worker_key(&app, worker)).unwrap(),
        -1,
        "the record never expires"
    );
    // The first renewal (a quarter of the TTL in) stores the record with the reservation.
    std::thread::sleep(Duration::from_millis(800));
    let record: String = redis.hget(worker_key(&app, worker), "state").unwrap();
    let mark: u64 = record
        .lines()
        .find_map(|l| l.strip_prefix("high_water_ms "))
        .and_then(|marks| marks.split(' ').next())
        .and_then(|mark| mark.parse().ok())
        .unwrap_or_else(|| panic!("{record}"));
    assert!(mark >= Layout::CLOCKSEQ.decode(id).unwrap().timestamp_ms);
    gen.close().unwrap();
    assert!(
        !redis.exists::<_, bool>(lease_key(&app, worker)).unwrap(),
        "released"
    );
    let epoch: i64 = redis.hget(worker_key(&app, worker), "epoch").unwrap();
    assert_eq!(epoch, 1);
    // The next grant of that worker id raises the epoch.
    let again = open(&uri, Layout::CLOCKSEQ, LeaseOptions::default()).unwrap();
    assert_eq!(again.worker_id(), worker);
    let epoch: i64 = redis.hget(worker_key(&app, worker), "epoch").unwrap();
    assert_eq!(epoch, 2);
    again.close().unwrap();
}

#[test]
fn a_corrupt_record_is_refused_and_left_as_it_is() {
    let Some((_serial, app, uri)) = REDIS.namespace(&SERIAL, "corrupt", "2s") else {
        return;
    };
    let layout = single_worker();
    one_id_and_close(&uri, layout, LeaseOptions::default());
    let mut redis = redis_connection();
    let key = worker_key(&app, 0);
    let record: String = redis.hget(&key, "state").unwrap();
    let damaged = record.replacen("clock_seq ", "clock_seq 9", 1);
    let () = redis.hset(&key, "state", &damaged).unwrap();
    let error = open_refused(&uri, layout, "INVALID_STATE");
    assert!(error.to_string().contains("checksum mismatch"), "{error}");
    assert!(
        !redis.exists::<_, bool>(lease_key(&app, 0)).unwrap(),
        "given back"
    );
    let kept: String = redis.hget(&key, "state").unwrap();
    assert_eq!(kept, damaged, "not reset");
    // Another layout's record is refused too.
    let () = redis.hset(&key, "state", &record).unwrap();
    open_refused(&uri, Layout::CLOCKSEQ, "INVALID_STATE");
}

#[test]
fn a_record_that_lost_its_marks_is_refused_never_read_as_unused() {
    let Some((_serial, app, uri)) = REDIS.namespace(&SERIAL, "lost-marks", "2s") else {
        return;
    };
    let mut redis = redis_connection();
    common::a_record_that_lost_its_marks_is_refused(&uri, || {
        let () = redis.hdel(worker_key(&app, 0), "state").unwrap();
    });
    assert!(
        !redis.exists::<_, bool>(lease_key(&app, 0)).unwrap(),
        "given back"
    );
    assert!(
        !redis
            .hexists::<_, _, bool>(worker_key(&app, 0), "state")
            .unwrap(),
        "left as it is"
    );
}

#[test]
fn no_password_in_messages_and_a_wrong_one_is_refused() {
    if !REDIS.available() {
        return;
    }
    let url = REDIS.url();
    let password = url
        .split_once("://:")
        .and_then(|(_, rest)| rest.split_once('@'))
        .map(|(password, _)| password.to_owned())
        .unwrap();
    let gen = open(
        &REDIS.app_uri(&app("secret"), "2s"),
        Layout::CLOCKSEQ,
        LeaseOptions::default(),
    )
    .unwrap();
    assert!(
        !gen.coordinator().contains(&password),
        "{}",
        gen.coordinator()
    );
    assert!(!format!("{gen:?}").contains(&password));
    gen.close().unwrap();
    let wrong = url.replace(&password, "Wr0ngR3disPw");
    let error = open_refused(
        &format!("{wrong}?app=x&ttl=1s"),
        Layout::CLOCKSEQ,
        "COORDINATOR_UNAVAILABLE",
    );
    assert!(!error.to_string().contains("Wr0ngR3disPw"), "{error}");
    assert!(!format!("{error:?}").contains("Wr0ngR3disPw"), "{error:?}");
}

#[test]
fn rediss_verifies_the_servers_certificate() {
    if !REDIS.available() {
        return;
    }
    let tls = redis_script("url-tls");
    if tls.is_empty() {
        eprintln!("skipped: the test server has no TLS port (no openssl)");
        return;
    }
    let app = app("tls");
    let gen = open(
        &format!("{tls}&app={app}&ttl=2s"),
        Layout::CLOCKSEQ,
        LeaseOptions::default(),
    )
    .unwrap();
    let ids = paced(50, || gen.next_id().unwrap());
    assert!(!ids.is_empty());
    assert!(
        gen.coordinator().starts_with("rediss://"),
        "{}",
        gen.coordinator()
    );
    gen.close().unwrap();
    // Without the test CA the certificate is not trusted: refused, never sent in the clear.
    let untrusted = tls.split('?').next().unwrap();
    let error = open_refused(
        &format!("{untrusted}?app={app}&ttl=2s"),
        Layout::CLOCKSEQ,
        "COORDINATOR_UNAVAILABLE",
    );
    assert!(error.to_string().contains("certificate"), "{error}");
    // rediss:// to the plain port: no TLS there, refused (not a plain-text fallback).
    let port_of = |url: &str| {
        let after = url.split("127.0.0.1:").nth(1).unwrap();
        format!(":{}/", after.split('/').next().unwrap())
    };
    let to_plain = tls.replace(&port_of(&tls), &port_of(&REDIS.url()));
    open_refused(
        &format!("{to_plain}&app={app}&ttl=2s"),
        Layout::CLOCKSEQ,
        "COORDINATOR_UNAVAILABLE",
    );
}
