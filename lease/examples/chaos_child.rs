//! One side of the chaos tests (tests/chaos/): leases a worker id from `URI`, prints `ready`,
//! then calls `next_id()` in a tight loop for `MS` milliseconds while the test freezes the
//! coordinator, and prints a JSON summary; then opens a new generator (retrying while the
//! coordinator recovers) and checks that its ids lie above every id of the first.
//!
//! ```text
//! cargo run -p clockflake-lease --example chaos_child -- URI MS
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::io::Write;
use std::time::{Duration, Instant};

use clockflake::Layout;
use clockflake_lease::{open, wall_ms, LeaseOptions};

fn open_retrying(uri: &str) -> clockflake_lease::LeasedGenerator {
    let started = Instant::now();
    loop {
        match open(uri, Layout::CLOCKSEQ, LeaseOptions::default()) {
            Ok(gen) => return gen,
            Err(error) if started.elapsed() < Duration::from_secs(30) => {
                eprintln!("open: {error}");
                std::thread::sleep(Duration::from_millis(200));
            }
            Err(error) => panic!("no lease after 30 s: {error}"),
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (uri, run_ms) = (&args[1], args[2].parse::<u64>().unwrap());
    let gen = open_retrying(uri);
    println!("ready");
    std::io::stdout().flush().unwrap();

    let layout = Layout::CLOCKSEQ;
    let mut max_by_clock_seq: BTreeMap<u64, u64> = BTreeMap::new();
    let (mut ok, mut calls, mut max_call_us) = (0u64, 0u64, 0u64);
    let (mut last_ok_wall_ms, mut first_lost_wall_ms) = (0u64, 0u64);
    let mut errors: BTreeMap<String, u64> = BTreeMap::new();
    let mut error_before_lost: Option<String> = None;
    let mut ok_after_lost = 0u64;
    let started = Instant::now();
    while started.elapsed() < Duration::from_millis(run_ms) {
        let call = Instant::now();
        let result = gen.next_id();
        max_call_us = max_call_us.max(call.elapsed().as_micros() as u64);
        calls += 1;
        match result {
            Ok(id) => {
                ok += 1;
                last_ok_wall_ms = wall_ms();
                if first_lost_wall_ms != 0 {
                    ok_after_lost += 1;
                }
                let cs = layout.decode(id).unwrap().clock_seq;
                let max = max_by_clock_seq.entry(cs).or_insert(0);
                *max = (*max).max(id);
            }
            Err(error) => {
                *errors.entry(error.code().to_owned()).or_insert(0) += 1;
                if error.code() == "LEASE_LOST" {
                    if first_lost_wall_ms == 0 {
                        first_lost_wall_ms = wall_ms();
                    }
                } else if first_lost_wall_ms == 0 && error_before_lost.is_none() {
                    error_before_lost = Some(error.to_string());
                }
                // A refusal is cheap; do not spin the CPU the coordinator needs.
                std::thread::sleep(Duration::from_micros(200));
            }
        }
    }
    let worker = gen.worker_id();
    let _ = gen.close();
    drop(gen);

    // After the coordinator is back: a new holder continues above every id of the first.
    let again = open_retrying(uri);
    let mut below_old = 0u64;
    for _ in 0..1000 {
        let id = again.next_id().unwrap();
        let parts = layout.decode(id).unwrap();
        if parts.worker_id == worker {
            if let Some(max) = max_by_clock_seq.get(&parts.clock_seq) {
                if id <= *max {
                    below_old += 1;
                }
            }
        }
    }
    let json = format!(
        "{{\"language\": \"rust\", \"worker\": {worker}, \"calls\": {calls}, \"ok\": {ok}, \
         \"max_call_ms\": {:.3}, \"last_ok_wall_ms\": {last_ok_wall_ms}, \
         \"first_lost_wall_ms\": {first_lost_wall_ms}, \"ok_after_lost\": {ok_after_lost}, \
         \"errors\": {{{}}}, \"error_before_lost\": {}, \"new_worker\": {}, \"new_ids_below_old\": {below_old}}}",
        max_call_us as f64 / 1000.0,
        errors
            .iter()
            .map(|(code, count)| format!("\"{code}\": {count}"))
            .collect::<Vec<_>>()
            .join(", "),
        error_before_lost.map_or("null".to_owned(), |e| format!("{e:?}")),
        again.worker_id(),
    );
    println!("{json}");
    again.close().unwrap();
}
