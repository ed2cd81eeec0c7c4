//! `make bench-lease`: what a lease costs on each coordinator, in one run, beside a static
//! `clockflake::Generator`: start-up latency (`open` to the first id) and the per-id cost.
//!
//! `file://`, `k8s://` and `env://` need no server; `postgres://`, `zookeeper://`,
//! `redis://` and `etcd://` are measured when `CLOCKFLAKE_PG_URL`, `CLOCKFLAKE_ZK_URL`,
//! `CLOCKFLAKE_REDIS_URL` and `CLOCKFLAKE_ETCD_URL` name a server (`make bench-lease` starts
//! throwaway ones on loopback; etcd a three-member cluster) and reported as skipped otherwise.
//!
//! Per renewal: the median of [`RENEWALS`] calls of `Coordinator::renew` (extend the lease and
//! store the record, what the renewal thread does every quarter TTL), on a coordinator from
//! `clockflake_lease::connect` holding one worker id.
//!
//! Start-up: the median of [`STARTS`] runs of `open` + first id, each closed before the next
//! (the same server identity, pod or namespace every time, as a restart). Per id: one thread,
//! interleaved rounds of [`IDS`] ids each, medians; the layout has 23 sequence bits, so no
//! generator ever waits for the next millisecond and the figure is the cost of an id itself
//! (clock read, checks, compare-and-swap); each round starts with another generator. The block rows take runs of 256 ids in one step
//! (what the Node binding does) and count the cost per id, the iteration included.

use std::hint::black_box;
use std::path::PathBuf;
use std::time::Instant;

use clockflake::{Generator, MonotonicClock, Options};
use clockflake_lease::{open, wall_ms, LeaseOptions, LeasedGenerator};

mod common;
use common::{median, no_wait_layout, per_id_ns, start_ms, IDS, ROUNDS};

/// Start-ups per coordinator.
const STARTS: usize = 21;
/// Renewals per coordinator.
const RENEWALS: usize = 101;
const BLOCK: u64 = 256;

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

/// A coordinator to measure: its name and the URI for start-ups and for the per-id
/// generator (distinct namespaces, so the per-id generator's worker id stays held).
struct Coordinator {
    name: &'static str,
    uris: Option<(String, String)>,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    if std::env::args().any(|a| a == "--test" || a == "--list") {
        return Ok(()); // `cargo test --benches` smoke run
    }
    let run = format!("bench-{}-{}", std::process::id(), wall_ms());
    let dir: PathBuf = std::env::temp_dir().join(format!("clockflake-lease-{run}"));
    // k8s:// reads the pod's ordinal, env:// the hand-assigned worker id, from the environment.
    std::env::set_var("CLOCKFLAKE_POD_INDEX", "1");
    std::env::set_var("CLOCKFLAKE_WORKER_ID", "2");
    std::fs::create_dir_all(&dir)?;
    // file://, k8s:// and env:// keep their state in a directory of their own per use (k8s://
    // and env:// have but one worker id each).
    let local = |scheme: &str| {
        let uri =
            |used_for: &str| format!("{scheme}://{}/{scheme}-{used_for}?app=a", dir.display());
        Some((uri("start"), uri("per-id")))
    };
    let server = |variable: &str, make: &dyn Fn(&str, &str) -> String| {
        std::env::var(variable)
            .ok()
            .map(|url| (make(&url, "start"), make(&url, "per-id")))
    };
    let coordinators = [
        Coordinator {
            name: "file://",
            uris: local("file"),
        },
        Coordinator {
            name: "k8s://",
            uris: local("k8s"),
        },
        Coordinator {
            name: "env://",
            uris: local("env"),
        },
        Coordinator {
            name: "postgres://",
            uris: server("CLOCKFLAKE_PG_URL", &|url, app| {
                format!("{url}?app={run}-{app}&ttl=10s")
            }),
        },
        Coordinator {
            name: "zookeeper://",
            uris: server("CLOCKFLAKE_ZK_URL", &|url, app| {
                format!("{url}/snowflake/{run}-{app}?ttl=10s&server=bench")
            }),
        },
        Coordinator {
            name: "redis://",
            uris: server("CLOCKFLAKE_REDIS_URL", &|url, app| {
                format!("{url}?app={run}-{app}&ttl=10s")
            }),
        },
        Coordinator {
            name: "etcd://",
            uris: server("CLOCKFLAKE_ETCD_URL", &|url, app| {
                format!("{url}/?app={run}-{app}&ttl=10s")
            }),
        },
    ];

    // Start-up latency, one coordinator after the other.
    println!("| coordinator | start-up, open to first id (median ms) | slowest (ms) |");
    println!("|---|---|---|");
    for coordinator in &coordinators {
        let Some((start_uri, _)) = &coordinator.uris else {
            println!("| {} | skipped (no server) | |", coordinator.name);
            continue;
        };
        let mut samples = Vec::with_capacity(STARTS);
        for _ in 0..STARTS {
            samples.push(start_ms(start_uri)?);
        }
        let slowest = samples.iter().copied().fold(0.0, f64::max);
        println!(
            "| {} | {:.2} | {slowest:.2} |",
            coordinator.name,
            median(samples)
        );
    }

    // Per renewal: one worker id held through the coordinator itself, renewed in a loop.
    println!("\n| coordinator | per renewal (median ms) | slowest (ms) |");
    println!("|---|---|---|");
    for coordinator in &coordinators {
        let Some((start_uri, _)) = &coordinator.uris else {
            println!("| {} | skipped (no server) | |", coordinator.name);
            continue;
        };
        let renewal_uri = start_uri.replacen("start", "renew", 1);
        let (mut held, _) = clockflake_lease::connect(&renewal_uri)?;
        let layout = clockflake::Layout::CLOCKSEQ;
        let grant = held.acquire(&layout, wall_ms())?;
        let state = Generator::new(layout, grant.worker_id, Options::default())?.state();
        let mut samples = Vec::with_capacity(RENEWALS);
        for _ in 0..RENEWALS {
            let started = Instant::now();
            held.renew(&state)?;
            samples.push(started.elapsed().as_secs_f64() * 1000.0);
        }
        held.release(Some(&state))?;
        let slowest = samples.iter().copied().fold(0.0, f64::max);
        println!(
            "| {} | {:.3} | {slowest:.2} |",
            coordinator.name,
            median(samples)
        );
    }

    // Per id: a static generator and one leased generator per coordinator, interleaved.
    let layout = no_wait_layout()?;
    let fixed = Generator::new(layout, 1, Options::default())?;
    let mut leased: Vec<(&str, LeasedGenerator)> = Vec::new();
    for coordinator in &coordinators {
        if let Some((_, per_id_uri)) = &coordinator.uris {
            leased.push((
                coordinator.name,
                open(per_id_uri, layout, LeaseOptions::default())?,
            ));
        }
    }
    let clock = MonotonicClock::new();
    let mut static_ns = Vec::new();
    let mut leased_ns: Vec<Vec<f64>> = vec![Vec::new(); leased.len()];
    let mut static_block_ns = Vec::new();
    let mut leased_block_ns = Vec::new();
    // Each round starts one generator later, so that no generator always runs first or
    // last in a round (a fixed order showed a drift from the first to the last).
    let generators = leased.len() + 1;
    for round in 0..ROUNDS {
        for turn in 0..generators {
            match (round + turn) % generators {
                0 => static_ns.push(per_id_ns(|| fixed.next_id().unwrap_or(0))),
                i => {
                    let gen = &leased[i - 1].1;
                    leased_ns[i - 1].push(per_id_ns(|| gen.next_id().unwrap_or(0)));
                }
            }
        }
        let static_block = || {
            per_id_ns_blocks(|| {
                fixed
                    .try_next_block_with(&clock, BLOCK)
                    .into_iter()
                    .flatten()
            })
        };
        let leased_block = |file: &LeasedGenerator| {
            per_id_ns_blocks(|| file.next_block(BLOCK).into_iter().flatten())
        };
        if round % 2 == 0 {
            static_block_ns.push(static_block());
        }
        if let Some((_, file)) = leased.first() {
            leased_block_ns.push(leased_block(file));
        }
        if round % 2 == 1 {
            static_block_ns.push(static_block());
        }
    }
    let base = median(static_ns);
    println!("\n| generator | median ns/id | ratio to static |");
    println!("|---|---|---|");
    println!("| static `Generator::next_id` | {base:.1} | 1.00 |");
    for ((name, _), samples) in leased.iter().zip(leased_ns) {
        let m = median(samples);
        println!(
            "| leased `LeasedGenerator::next_id` ({name}) | {m:.1} | {:.2} |",
            m / base
        );
    }
    let block_base = median(static_block_ns);
    println!(
        "| static `Generator::try_next_block_with` (blocks of 256, per id) | {block_base:.2} | |"
    );
    if !leased_block_ns.is_empty() {
        println!(
            "| leased `LeasedGenerator::next_block` (file://, blocks of 256, per id) | {:.2} | |",
            median(leased_block_ns)
        );
    }
    println!(
        "\n{STARTS} start-ups and {RENEWALS} renewals per coordinator; {ROUNDS} interleaved \
         rounds of {IDS} ids each, one thread; per-id layout timestamp 30 / clock_seq 3 / \
         worker 7 / sequence 23 bits."
    );
    for (_, gen) in leased {
        gen.close()?;
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
