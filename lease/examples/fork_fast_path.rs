//! What the fork check costs on the fast path: a static `clockflake::Generator`'s `next_id()`
//! (system clock) without and with the comparison every binding now makes before an id,
//! `fork::generation() != made_in` (one relaxed atomic load), side by side in one run.
//!
//! `cargo run --profile bench -p clockflake-lease --example fork_fast_path`
//!
//! An example rather than a `benches/` target only because a bench without the libtest harness
//! needs a `[[bench]]` entry in the crate's manifest; it reuses the lease benches' layout,
//! timing loop and median.

use std::hint::black_box;

use clockflake::{Error, Generator, Options};
use clockflake_lease::fork;

#[path = "../benches/common/mod.rs"]
mod common;
use common::{median, no_wait_layout, per_id_ns, IDS};

/// More rounds than the other lease benches: the difference sought is below a nanosecond.
const ROUNDS: usize = 21;

fn main() -> Result<(), Error> {
    let gen = Generator::new(no_wait_layout()?, 1, Options::default())?;
    let made_in = black_box(fork::watch());
    let checked = || {
        if fork::generation() != made_in {
            Err(Error::WorkerIdInvalidated)
        } else {
            gen.next_id()
        }
    };
    let (mut plain_ns, mut checked_ns, mut differences) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        // Alternate which goes first, so that neither always runs on a warmer cache or clock.
        let (plain, check) = if round % 2 == 0 {
            let plain = per_id_ns(|| gen.next_id().unwrap_or(0));
            (plain, per_id_ns(|| checked().unwrap_or(0)))
        } else {
            let check = per_id_ns(|| checked().unwrap_or(0));
            (per_id_ns(|| gen.next_id().unwrap_or(0)), check)
        };
        plain_ns.push(plain);
        checked_ns.push(check);
        differences.push(check - plain);
    }
    let (plain, check) = (median(plain_ns), median(checked_ns));
    println!("| static `Generator::next_id()`, system clock | median ns/id |");
    println!("|---|---:|");
    println!("| without the fork check | {plain:.2} |");
    println!("| with `fork::generation() != made_in` first | {check:.2} |");
    println!(
        "| difference (median of the {ROUNDS} paired rounds) | {:+.2} |",
        median(differences)
    );
    println!(
        "\n{ROUNDS} rounds of {IDS} ids each, alternating which goes first; one thread; layout \
         timestamp 30 / clock_seq 3 / worker 7 / sequence 23 bits (never waits for a tick)."
    );
    Ok(())
}
