//! Per-call cost of the generator, the clock and decode, beside the `snowflaked` crate.
//!
//! Calls that read the clock are timed in bursts of 1,000 that start just after a tick, so
//! that no burst reaches the 4,096-per-ms cap (which `throughput` measures on its own).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use clockflake::{Clock, Generator, Layout, MonotonicClock, Options};
use criterion::{criterion_group, criterion_main, Criterion};

const T0: u64 = 1_735_689_600_000;
const BURST: u64 = 1000;

/// Times `call` in bursts of 1,000 calls, each starting on a fresh millisecond; the wait for
/// the tick is not timed.
fn in_bursts(iters: u64, mut call: impl FnMut()) -> Duration {
    let clock = MonotonicClock::global();
    let mut timed = Duration::ZERO;
    let mut left = iters;
    while left > 0 {
        let start_tick = clock.now_ms();
        while clock.now_ms() == start_tick {
            std::hint::spin_loop();
        }
        let n = left.min(BURST);
        let start = Instant::now();
        for _ in 0..n {
            call();
        }
        timed += start.elapsed();
        left -= n;
    }
    timed
}

fn generator(c: &mut Criterion) {
    let mut group = c.benchmark_group("generator");
    group
        .measurement_time(Duration::from_secs(2))
        .sample_size(30);

    group.bench_function("next_id_at (no clock)", |b| {
        let gen = Generator::new(Layout::CLOCKSEQ, 1, Options::default()).unwrap();
        let mut i = 0u64;
        b.iter(|| {
            i += 1;
            // A new millisecond every 4,096 ids: the tick never fills.
            black_box(gen.next_id_at(black_box(T0 + (i >> 12))).unwrap())
        });
    });

    // The floor under any lock-free shared generator: one load and one compare-and-swap on a
    // shared word, no work at all. `next_id_at` is this plus its rules.
    group.bench_function("atomic floor (load + compare_exchange_weak)", |b| {
        let word = std::sync::atomic::AtomicU64::new(0);
        b.iter(|| {
            let last = word.load(std::sync::atomic::Ordering::Acquire);
            black_box(
                word.compare_exchange_weak(
                    last,
                    last + 1,
                    std::sync::atomic::Ordering::AcqRel,
                    std::sync::atomic::Ordering::Acquire,
                )
                .is_ok(),
            )
        });
    });

    group.bench_function("next_id_at_mut (no clock, exclusive)", |b| {
        let mut gen = Generator::new(Layout::CLOCKSEQ, 1, Options::default()).unwrap();
        let mut i = 0u64;
        b.iter(|| {
            i += 1;
            black_box(gen.next_id_at_mut(black_box(T0 + (i >> 12))).unwrap())
        });
    });

    group.bench_function("next_block_at 4096, per id", |b| {
        let gen = Generator::new(Layout::CLOCKSEQ, 1, Options::default()).unwrap();
        let mut now = T0;
        b.iter_custom(|iters| {
            let start = Instant::now();
            let mut made = 0;
            while made < iters {
                now += 1;
                let block = gen.next_block_at(now, 4096).unwrap();
                made += block.len() as u64;
                for id in block {
                    black_box(id);
                }
            }
            start.elapsed().mul_f64(iters as f64 / made as f64)
        });
    });

    group.bench_function("MonotonicClock::now_ms", |b| {
        let clock = MonotonicClock::global();
        b.iter(|| black_box(clock.now_ms()));
    });

    group.bench_function("SystemTime::now", |b| {
        b.iter(|| black_box(std::time::SystemTime::now()));
    });

    group.bench_function("next_id (monotonic clock, bursts)", |b| {
        let gen = Generator::new(Layout::CLOCKSEQ, 1, Options::default()).unwrap();
        b.iter_custom(|iters| {
            in_bursts(iters, || {
                black_box(gen.next_id().unwrap());
            })
        });
    });

    group.bench_function("peer snowflaked::Generator (bursts)", |b| {
        let mut gen = snowflaked::Generator::new(1);
        b.iter_custom(|iters| {
            in_bursts(iters, || {
                black_box(gen.generate::<u64>());
            })
        });
    });

    group.bench_function("peer snowflaked::sync::Generator (bursts)", |b| {
        let gen = snowflaked::sync::Generator::new(1);
        b.iter_custom(|iters| {
            in_bursts(iters, || {
                black_box(gen.generate::<u64>());
            })
        });
    });

    group.bench_function("decode", |b| {
        let mut id = 383_188_013_854_781_440u64;
        b.iter(|| {
            id += 4097;
            black_box(Layout::CLOCKSEQ.decode(black_box(id)).unwrap())
        });
    });

    group.bench_function("parse_id (19 digits)", |b| {
        b.iter(|| {
            black_box(
                Layout::CLOCKSEQ
                    .parse_id(black_box("383188013854781440"))
                    .unwrap(),
            )
        });
    });
    group.finish();
}

fn public_ids(c: &mut Criterion) {
    let mut group = c.benchmark_group("public_ids");
    group
        .measurement_time(Duration::from_secs(2))
        .sample_size(30);
    let codec = clockflake::PublicIds::new(1, *b"clockflake-key-1").unwrap();
    let mut id = 383_188_013_854_781_440u64;
    group.bench_function("encode", |b| {
        b.iter(|| {
            id += 1;
            black_box(codec.encode(black_box(id)).unwrap())
        })
    });
    group.bench_function("decode", |b| {
        b.iter(|| {
            id += 1;
            black_box(codec.decode(black_box(id)).unwrap())
        })
    });
    group.bench_function("encode_text", |b| {
        b.iter(|| {
            id += 1;
            black_box(codec.encode_text(black_box(id)).unwrap())
        })
    });
    let text = codec.encode_text(id).unwrap();
    group.bench_function("decode_text", |b| {
        b.iter(|| black_box(codec.decode_text(black_box(text.as_str())).unwrap()))
    });
    group.finish();
}

criterion_group!(benches, generator, public_ids);
criterion_main!(benches);
