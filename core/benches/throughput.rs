//! Sustained single-thread throughput against the layout's cap (4,096 ids per ms for
//! `clockseq`), beside `snowflaked`, with a duplicate count. Prints a Markdown table.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::{Duration, Instant};

use clockflake::{Generator, Layout, Options};

const WINDOW: Duration = Duration::from_secs(1);
const RUNS: usize = 5;
const CAP_PER_S: f64 = 4_096_000.0;

/// Ids per second over one window, and how many of them were duplicates.
fn run(mut next: impl FnMut() -> u64) -> (f64, usize) {
    let mut ids = Vec::with_capacity(4_200_000);
    let start = Instant::now();
    while start.elapsed() < WINDOW {
        for _ in 0..256 {
            ids.push(next());
        }
    }
    let rate = ids.len() as f64 / start.elapsed().as_secs_f64();
    let issued = ids.len();
    ids.sort_unstable();
    ids.dedup();
    (rate, issued - ids.len())
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() {
    // `cargo bench` passes --bench; nothing to parse.
    let mut rows = Vec::new();
    type Contender = (&'static str, Box<dyn Fn() -> Box<dyn FnMut() -> u64>>);
    let contenders: Vec<Contender> = vec![
        (
            "clockflake next_id (clockseq)",
            Box::new(|| {
                let gen = Generator::new(Layout::CLOCKSEQ, 1, Options::default()).unwrap();
                Box::new(move || gen.next_id().unwrap())
            }),
        ),
        (
            "snowflaked::sync::Generator",
            Box::new(|| {
                let gen = snowflaked::sync::Generator::new(1);
                Box::new(move || gen.generate::<u64>())
            }),
        ),
    ];
    for (name, make) in &contenders {
        let mut rates = Vec::new();
        let mut duplicates = 0;
        for _ in 0..RUNS {
            let (rate, dups) = run(make());
            rates.push(rate);
            duplicates += dups;
        }
        rows.push((name, median(rates), duplicates));
    }
    println!("| generator | median ids/s ({RUNS} x 1 s) | % of cap 4,096,000 | duplicates |");
    println!("|---|---:|---:|---:|");
    for (name, rate, duplicates) in rows {
        println!(
            "| {name} | {rate:.0} | {:.2}% | {duplicates} |",
            100.0 * rate / CAP_PER_S
        );
    }
}
