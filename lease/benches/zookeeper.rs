//! `make bench-zookeeper`: what a `zookeeper://` lease costs, against a real ZooKeeper
//! (scripts/zookeeper.sh, `CLOCKFLAKE_ZK_URL`): start-up latency (open to first id) for a new
//! server identity, a returning one and a returning one with a cache file; then the per-id
//! cost of the leased generator against a static `clockflake::Generator` (medians of
//! interleaved rounds, one thread, a layout with 23 sequence bits so neither ever waits).

use clockflake::{Generator, Options};
use clockflake_lease::{open, wall_ms, LeaseError, LeaseOptions};

mod common;
use common::{median, no_wait_layout, per_id_ns, start_ms, IDS, ROUNDS};

const STARTS: usize = 21;

fn main() -> Result<(), LeaseError> {
    if std::env::args().any(|a| a == "--test" || a == "--list") {
        return Ok(()); // `cargo test --benches` smoke run
    }
    let Ok(url) = std::env::var("CLOCKFLAKE_ZK_URL") else {
        eprintln!("CLOCKFLAKE_ZK_URL is not set: run `make bench-zookeeper`");
        return Ok(());
    };
    let app = format!("bench-{}-{}", std::process::id(), wall_ms());
    let cache = std::env::temp_dir().join(format!("clockflake-zk-bench-{}", std::process::id()));
    let base = format!("{url}/snowflake/{app}?ttl=10s");
    let mut starts: Vec<(&str, Vec<f64>)> = vec![
        ("new server identity (smallest free id)", Vec::new()),
        ("returning server identity (its own id)", Vec::new()),
        ("returning, with `cache=` file", Vec::new()),
    ];
    for round in 0..STARTS {
        starts[0]
            .1
            .push(start_ms(&format!("{base}&server=new-{round}"))?);
        starts[1]
            .1
            .push(start_ms(&format!("{base}&server=returning"))?);
        let cached = format!("{base}&server=cached&cache={}", cache.display());
        starts[2].1.push(start_ms(&cached)?);
    }
    println!("| start-up (open to first id) | median ms |");
    println!("|---|---|");
    for (name, samples) in starts {
        println!("| {name} | {:.2} |", median(samples));
    }

    let layout = no_wait_layout()?;
    let fixed = Generator::new(layout, 1, Options::default())?;
    let leased = open(
        &format!("{base}&server=per-id"),
        layout,
        LeaseOptions::default(),
    )?;
    let mut rows: Vec<(&str, Vec<f64>)> = vec![
        ("static `Generator::next_id`", Vec::new()),
        (
            "leased `LeasedGenerator::next_id` (zookeeper://)",
            Vec::new(),
        ),
    ];
    for _ in 0..ROUNDS {
        rows[0].1.push(per_id_ns(|| fixed.next_id().unwrap_or(0)));
        rows[1].1.push(per_id_ns(|| leased.next_id().unwrap_or(0)));
    }
    let static_ns = median(rows[0].1.clone());
    println!("\n| generator | median ns/id | ratio to static |");
    println!("|---|---|---|");
    for (name, samples) in rows {
        let m = median(samples);
        println!("| {name} | {m:.1} | {:.2} |", m / static_ns);
    }
    println!(
        "\n{STARTS} start-ups each; {ROUNDS} interleaved rounds of {IDS} ids, one thread; \
         layout timestamp 30 / clock_seq 3 / worker 7 / sequence 23 bits."
    );
    leased.close()?;
    let _ = std::fs::remove_file(&cache);
    Ok(())
}
