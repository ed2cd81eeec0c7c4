//! `make bench-lease`: the per-id cost of a leased generator against a static
//! `clockflake::Generator`, one thread, same layout, medians of interleaved rounds.
//!
//! The layout has 23 sequence bits, so neither generator ever waits for the next
//! millisecond: what is measured is the id itself (clock read, checks, compare-and-swap).
//! The block rows take runs of 256 ids in one step (what the Node binding does) and count
//! the cost per id, the iteration over the block included.

use std::hint::black_box;
use std::time::Instant;

use clockflake::{Generator, MonotonicClock, Options};
use clockflake_lease::{open, LeaseError, LeaseOptions};

mod common;
use common::{median, no_wait_layout, per_id_ns, IDS, ROUNDS};

/// Per id, taking blocks of `BLOCK` ids.
fn per_id_ns_blocks<B: Iterator<Item = u64>>(mut next: impl FnMut() -> B) -> f64 {
    let started = Instant::now();
    let (mut taken, mut calls) = (0u32, 0u32);
    // (An error gives an empty block; the call count bounds the loop.)
    while taken < IDS && calls < IDS {
        calls += 1;
        for id in next() {
            black_box(id);
            taken += 1;
        }
    }
    started.elapsed().as_nanos() as f64 / f64::from(taken)
}

const BLOCK: u64 = 256;

fn main() -> Result<(), LeaseError> {
    if std::env::args().any(|a| a == "--test" || a == "--list") {
        return Ok(()); // `cargo test --benches` smoke run
    }
    let layout = no_wait_layout()?;
    let dir = std::env::temp_dir().join(format!("clockflake-lease-bench-{}", std::process::id()));
    let uri = format!("file://{}?app=bench", dir.display());
    let fixed = Generator::new(layout, 1, Options::default())?;
    let leased = open(&uri, layout, LeaseOptions::default())?;
    let clock = MonotonicClock::new();
    let mut rows: Vec<(&str, Vec<f64>)> = vec![
        ("static `Generator::next_id`", Vec::new()),
        ("leased `LeasedGenerator::next_id` (file://)", Vec::new()),
        (
            "leased `LeasedGenerator::try_next_id` (file://)",
            Vec::new(),
        ),
        (
            "static `Generator::try_next_block_with` (blocks of 256, per id)",
            Vec::new(),
        ),
        (
            "leased `LeasedGenerator::next_block` (file://, blocks of 256, per id)",
            Vec::new(),
        ),
    ];
    for _ in 0..ROUNDS {
        rows[0].1.push(per_id_ns(|| fixed.next_id().unwrap_or(0)));
        rows[1].1.push(per_id_ns(|| leased.next_id().unwrap_or(0)));
        rows[2]
            .1
            .push(per_id_ns(|| leased.try_next_id().unwrap_or(0)));
        rows[3].1.push(per_id_ns_blocks(|| {
            fixed
                .try_next_block_with(&clock, BLOCK)
                .into_iter()
                .flatten()
        }));
        rows[4].1.push(per_id_ns_blocks(|| {
            leased.next_block(BLOCK).into_iter().flatten()
        }));
    }
    let base = median(rows[0].1.clone());
    println!("| generator | median ns/id | ratio to static |");
    println!("|---|---|---|");
    for (name, samples) in rows {
        let m = median(samples);
        println!("| {name} | {m:.1} | {:.2} |", m / base);
    }
    println!(
        "\n{ROUNDS} interleaved rounds of {IDS} ids each, one thread; layout timestamp 30 / clock_seq 3 / worker 7 / sequence 23 bits."
    );
    leased.close()?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
