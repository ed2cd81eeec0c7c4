//! PostgreSQL stopped for 3x the TTL (its own test binary: it stops the shared server).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clockflake::Layout;
use clockflake_lease::{boot_ms, open, LeaseOptions};
use common::*;

#[test]
fn the_server_stopped_for_3x_the_ttl_halts_generation_at_the_deadline() {
    let uri = format!("{}?app={}&ttl=1s", pg_url(), app("outage"));
    let gen = Arc::new(open(&uri, Layout::CLOCKSEQ, LeaseOptions::default()).unwrap());
    let running = Arc::new(AtomicBool::new(true));
    let worker = {
        let (gen, running) = (Arc::clone(&gen), Arc::clone(&running));
        std::thread::spawn(move || {
            let mut log = Vec::new();
            while running.load(Ordering::Relaxed) {
                log.push((boot_ms(), gen.next_id().map_err(|e| e.code())));
                std::thread::sleep(Duration::from_millis(1));
            }
            log
        })
    };
    std::thread::sleep(Duration::from_millis(700));
    let halting = boot_ms();
    pg_script("halt");
    let halted = boot_ms();
    std::thread::sleep(Duration::from_millis(3000));
    pg_script("resume");
    running.store(false, Ordering::Relaxed);
    let log = worker.join().unwrap();

    let first_error = log.iter().position(|(_, r)| r.is_err()).unwrap();
    let last_ok = log[first_error - 1].0;
    // Ids went on while the lease could still be valid, and stopped before it could expire
    // on the server (1 s after the last renewal, which was before the server went down).
    assert!(
        last_ok >= halting + 400,
        "stopped early: {} ms",
        last_ok - halting
    );
    assert!(
        last_ok < halted + 1000,
        "went on too long: {} ms",
        last_ok - halted
    );
    for (_, result) in &log[first_error..] {
        assert_eq!(*result, Err("LEASE_LOST"));
    }
    assert_eq!(gen.next_id().unwrap_err().code(), "LEASE_LOST");
    let before: Vec<u64> = log.iter().filter_map(|(_, r)| r.ok()).collect();

    // A new lease once the server is back: generation resumes, above every id issued.
    let started = Instant::now();
    let again = loop {
        match open(&uri, Layout::CLOCKSEQ, LeaseOptions::default()) {
            Ok(gen) => break gen,
            Err(error) => {
                assert!(started.elapsed() < Duration::from_secs(15), "{error}");
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    };
    let after = paced(200, || again.next_id().unwrap());
    assert!(!after.is_empty());
    assert_unique(
        "before and after the outage",
        before.iter().chain(&after).copied(),
    );
    again.close().unwrap();
    gen.close().unwrap();
}
