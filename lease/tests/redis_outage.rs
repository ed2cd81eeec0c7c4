//! Redis stopped for 3x the TTL, and frozen by SIGSTOP (its own test binary: it stops the
//! shared server; the tests here take turns). Skipped without `CLOCKFLAKE_REDIS_URL` unless
//! `CLOCKFLAKE_REDIS_REQUIRED` is set.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clockflake::Layout;
use clockflake_lease::{boot_ms, open, LeaseOptions, LeasedGenerator};
use common::*;

/// The tests stop the one server: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

/// Calls `next_id` every ms on another thread until told to stop: (boot ms before the call,
/// how long it took, the id or the error code).
type Log = Vec<(u64, Duration, Result<u64, &'static str>)>;

fn issue_until_stopped(
    gen: &Arc<LeasedGenerator>,
    running: &Arc<AtomicBool>,
) -> std::thread::JoinHandle<Log> {
    let (gen, running) = (Arc::clone(gen), Arc::clone(running));
    std::thread::spawn(move || {
        let mut log = Vec::new();
        while running.load(Ordering::Relaxed) {
            let (asked, started) = (boot_ms(), Instant::now());
            let result = gen.next_id().map_err(|e| e.code());
            log.push((asked, started.elapsed(), result));
            std::thread::sleep(Duration::from_millis(1));
        }
        log
    })
}

/// A new lease once the server answers again: generation resumes, above every id issued.
fn reopen(uri: &str) -> LeasedGenerator {
    let started = Instant::now();
    loop {
        match open(uri, Layout::CLOCKSEQ, LeaseOptions::default()) {
            Ok(gen) => return gen,
            Err(error) => {
                assert!(started.elapsed() < Duration::from_secs(15), "{error}");
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
}

#[test]
fn the_server_stopped_for_3x_the_ttl_halts_generation_at_the_deadline() {
    if !redis_available() {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let uri = format!("{}?app={}&ttl=1s", redis_url(), app("outage"));
    let gen = Arc::new(open(&uri, Layout::CLOCKSEQ, LeaseOptions::default()).unwrap());
    let running = Arc::new(AtomicBool::new(true));
    let worker = issue_until_stopped(&gen, &running);
    std::thread::sleep(Duration::from_millis(700));
    redis_script("halt");
    // A renewal sent before the halt may still have landed: read the deadline once it
    // cannot move any more (every renewal from now on fails to connect).
    std::thread::sleep(Duration::from_millis(100));
    let deadline = gen.deadline_boot_ms().unwrap();
    std::thread::sleep(Duration::from_millis(3000));
    redis_script("resume");
    running.store(false, Ordering::Relaxed);
    let log = worker.join().unwrap();

    let first_error = log.iter().position(|(_, _, r)| r.is_err()).unwrap();
    // Ids went on up to the deadline the generator reported, and not one after it.
    for (asked, _, result) in &log {
        if result.is_ok() {
            assert!(
                *asked < deadline,
                "an id {} ms after the deadline",
                asked - deadline
            );
        }
    }
    assert!(
        log[first_error - 1].0 + 100 >= deadline,
        "stopped {} ms before the deadline",
        deadline - log[first_error - 1].0
    );
    for (_, _, result) in &log[first_error..] {
        assert_eq!(*result, Err("LEASE_LOST"));
    }
    assert_eq!(gen.next_id().unwrap_err().code(), "LEASE_LOST");
    let before: Vec<u64> = log.iter().filter_map(|(_, _, r)| r.ok()).collect();

    let again = reopen(&uri);
    let after = paced(200, || again.next_id().unwrap());
    assert!(!after.is_empty());
    assert_unique(
        "before and after the outage",
        before.iter().chain(&after).copied(),
    );
    again.close().unwrap();
    gen.close().unwrap();
}

#[test]
fn a_frozen_server_never_holds_an_id_call_and_ids_stop_at_the_deadline() {
    if !redis_available() {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let uri = format!("{}?app={}&ttl=1s", redis_url(), app("frozen"));
    let gen = Arc::new(open(&uri, Layout::CLOCKSEQ, LeaseOptions::default()).unwrap());
    let running = Arc::new(AtomicBool::new(true));
    let worker = issue_until_stopped(&gen, &running);
    std::thread::sleep(Duration::from_millis(500));
    redis_script("freeze");
    std::thread::sleep(Duration::from_millis(100));
    let deadline = gen.deadline_boot_ms().unwrap();
    // Past the deadline, with the renewal thread stuck on the frozen server meanwhile.
    while boot_ms() < deadline + 500 {
        std::thread::sleep(Duration::from_millis(20));
    }
    redis_script("thaw");
    running.store(false, Ordering::Relaxed);
    let log = worker.join().unwrap();

    let slowest = log.iter().map(|(_, took, _)| *took).max().unwrap();
    assert!(
        slowest < Duration::from_millis(100),
        "an id call took {slowest:?}"
    );
    let first_error = log.iter().position(|(_, _, r)| r.is_err()).unwrap();
    for (asked, _, result) in &log {
        if result.is_ok() {
            assert!(
                *asked < deadline,
                "an id {} ms after the deadline",
                asked - deadline
            );
        }
    }
    for (_, _, result) in &log[first_error..] {
        assert_eq!(*result, Err("LEASE_LOST"));
    }
    assert!(
        log.iter()
            .any(|(asked, _, r)| r.is_ok() && asked + 100 >= deadline),
        "ids went on until the deadline"
    );
    // Thawed, the server has expired the lease: the old generator stays lost, a new one
    // continues above everything issued.
    assert_eq!(gen.next_id().unwrap_err().code(), "LEASE_LOST");
    let before: Vec<u64> = log.iter().filter_map(|(_, _, r)| r.ok()).collect();
    let again = reopen(&uri);
    let after = paced(200, || again.next_id().unwrap());
    assert_unique(
        "before and after the freeze",
        before.iter().chain(&after).copied(),
    );
    again.close().unwrap();
    gen.close().unwrap();
}
