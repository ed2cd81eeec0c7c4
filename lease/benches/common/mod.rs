//! What the lease benchmarks share: the no-wait layout, the timing loops and the median.
#![allow(dead_code)] // each bench uses its own subset

use std::hint::black_box;
use std::time::Instant;

use clockflake::{Error, Field, Layout};
use clockflake_lease::{open, wall_ms, LeaseError, LeaseOptions};

/// Ids per timed round.
pub const IDS: u32 = 2_000_000;
/// Interleaved rounds per generator; the median is reported.
pub const ROUNDS: usize = 9;

/// 23 sequence bits, so no generator ever waits for the next millisecond: what is measured is
/// the id itself (clock read, checks, compare-and-swap). Epoch a day ago.
pub fn no_wait_layout() -> Result<Layout, Error> {
    Layout::new(
        &[
            (Field::Timestamp, 30),
            (Field::ClockSeq, 3),
            (Field::Worker, 7),
            (Field::Sequence, 23),
        ],
        1,
        wall_ms() - 86_400_000,
    )
}

/// Nanoseconds per call of `next` over [`IDS`] calls.
pub fn per_id_ns(mut next: impl FnMut() -> u64) -> f64 {
    let started = Instant::now();
    for _ in 0..IDS {
        black_box(next());
    }
    started.elapsed().as_nanos() as f64 / f64::from(IDS)
}

pub fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// Milliseconds from `open` to the first id, then closes (not timed).
pub fn start_ms(uri: &str) -> Result<f64, LeaseError> {
    let started = Instant::now();
    let gen = open(uri, Layout::CLOCKSEQ, LeaseOptions::default())?;
    black_box(gen.next_id()?);
    let elapsed = started.elapsed().as_secs_f64() * 1000.0;
    gen.close()?;
    Ok(elapsed)
}
