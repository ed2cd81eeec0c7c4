//! Redis stopped for 3x the TTL, and frozen by SIGSTOP (its own test binary: it stops the
//! shared server; the tests here take turns). Skipped without `CLOCKFLAKE_REDIS_URL` unless
//! `CLOCKFLAKE_REDIS_REQUIRED` is set.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clockflake::Layout;
use clockflake_lease::{boot_ms, open, LeaseOptions, LeasedGenerator};
use common::*;

/// The tests stop the one server: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

/// One `next_id` call: (boot ms before the call, how long it took, the id or the error code).
type Call = (u64, Duration, Result<u64, &'static str>);

/// Opens `uri` and calls `next_id` every ms on another thread until stopped.
fn issuing_every_ms(uri: &str) -> (Arc<LeasedGenerator>, Repeating<Call>) {
    let gen = Arc::new(open(uri, Layout::CLOCKSEQ, LeaseOptions::default()).unwrap());
    let issuing = {
        let gen = Arc::clone(&gen);
        Repeating::start(move || {
            let (asked, started) = (boot_ms(), Instant::now());
            let result = gen.next_id().map_err(|e| e.code());
            std::thread::sleep(Duration::from_millis(1));
            (asked, started.elapsed(), result)
        })
    };
    (gen, issuing)
}

/// A generator issuing every ms on `uri` (see `issuing_every_ms`), cut off from Redis after
/// `after_ms` by `scripts/redis.sh action` (halt, freeze): the generator, its calls and its
/// deadline, read 100 ms later (a renewal sent before the cut may still have landed; from then
/// on the deadline cannot move).
fn cut_off_after(
    uri: &str,
    after_ms: u64,
    action: &str,
) -> (Arc<LeasedGenerator>, Repeating<Call>, u64) {
    let (gen, issuing) = issuing_every_ms(uri);
    std::thread::sleep(Duration::from_millis(after_ms));
    redis_script(action);
    std::thread::sleep(Duration::from_millis(100));
    let deadline = gen.deadline_boot_ms().unwrap();
    (gen, issuing, deadline)
}

/// Ids were issued up to the `deadline` (the last one less than 100 ms before it) and not one
/// after it, and every call from the first refusal on was refused with `LEASE_LOST` (as is the
/// next one): the ids issued.
fn ids_stopped_at_the_deadline(gen: &LeasedGenerator, log: &[Call], deadline: u64) -> Vec<u64> {
    for (asked, _, result) in log {
        if result.is_ok() {
            assert!(
                *asked < deadline,
                "an id {} ms after the deadline",
                asked - deadline
            );
        }
    }
    let first_error = log.iter().position(|(_, _, r)| r.is_err()).unwrap();
    for (_, _, result) in &log[first_error..] {
        assert_eq!(*result, Err("LEASE_LOST"));
    }
    assert!(
        log[first_error - 1].0 + 100 >= deadline,
        "stopped {} ms before the deadline",
        deadline - log[first_error - 1].0
    );
    assert_eq!(gen.next_id().unwrap_err().code(), "LEASE_LOST");
    log.iter().filter_map(|(_, _, r)| r.ok()).collect()
}

#[test]
fn the_server_stopped_for_3x_the_ttl_halts_generation_at_the_deadline() {
    let Some((_serial, _, uri)) = REDIS.namespace(&SERIAL, "outage", "1s") else {
        return;
    };
    // Every renewal from the halt on fails to connect.
    let (gen, issuing, deadline) = cut_off_after(&uri, 700, "halt");
    std::thread::sleep(Duration::from_millis(3000));
    redis_script("resume");
    let log = issuing.stop();

    // Ids went on up to the deadline the generator reported, and not one after it.
    let before = ids_stopped_at_the_deadline(&gen, &log, deadline);
    a_new_lease_continues_after(&uri, &before, "before and after the outage");
    gen.close().unwrap();
}

#[test]
fn a_frozen_server_never_holds_an_id_call_and_ids_stop_at_the_deadline() {
    let Some((_serial, _, uri)) = REDIS.namespace(&SERIAL, "frozen", "1s") else {
        return;
    };
    let (gen, issuing, deadline) = cut_off_after(&uri, 500, "freeze");
    // Past the deadline, with the renewal thread stuck on the frozen server meanwhile.
    while boot_ms() < deadline + 500 {
        std::thread::sleep(Duration::from_millis(20));
    }
    redis_script("thaw");
    let log = issuing.stop();

    let slowest = log.iter().map(|(_, took, _)| *took).max().unwrap();
    assert!(
        slowest < Duration::from_millis(100),
        "an id call took {slowest:?}"
    );
    // Ids went on until the deadline; thawed, the server has expired the lease: the old
    // generator stays lost, a new one continues above everything issued.
    let before = ids_stopped_at_the_deadline(&gen, &log, deadline);
    a_new_lease_continues_after(&uri, &before, "before and after the freeze");
    gen.close().unwrap();
}
