//! One generator shared by threads: no duplicates, on the real clock and on clocks that step back.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::atomic::{AtomicU64, Ordering};

use clockflake::{Generator, Layout, Options};

fn assert_no_duplicates(mut ids: Vec<u64>) {
    ids.sort_unstable();
    if let Some(pair) = ids.windows(2).find(|w| w[0] == w[1]) {
        panic!("duplicate id {}", pair[0]);
    }
}

#[test]
fn two_threads_five_million_ids_each_on_the_real_clock() {
    const PER_THREAD: usize = 5_000_000;
    let gen = Generator::new(Layout::CLOCKSEQ, 42, Options::default()).unwrap();
    let batches: Vec<Vec<u64>> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..2)
            .map(|_| {
                scope.spawn(|| {
                    let mut ids = Vec::with_capacity(PER_THREAD);
                    for _ in 0..PER_THREAD {
                        ids.push(gen.next_id().unwrap());
                    }
                    ids
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    for ids in &batches {
        // Each thread sees its own ids increase: the clock is read after the shared state, so
        // a thread never mistakes another thread's newer id for the clock going back.
        assert!(ids.windows(2).all(|w| w[0] < w[1]));
    }
    let all: Vec<u64> = batches.concat();
    assert!(all
        .iter()
        .all(|id| Layout::CLOCKSEQ.decode(*id).unwrap().clock_seq == 0));
    assert_eq!(all.len(), 2 * PER_THREAD);
    assert_no_duplicates(all);
}

#[test]
fn threads_sharing_a_clock_that_steps_back() {
    // A shared clock that advances 1 ms every 50 reads and jumps back 1..=300 ms every 5,000.
    let reads = AtomicU64::new(0);
    let clock = || {
        let n = reads.fetch_add(1, Ordering::Relaxed);
        let back = if (n / 5_000) % 3 == 2 {
            (n / 5_000) % 300 + 1
        } else {
            0
        };
        1_735_689_600_000 + n / 50 - back
    };
    let gen = Generator::new(Layout::CLOCKSEQ, 1, Options::default()).unwrap();
    let ids: Vec<u64> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..4)
            .map(|_| {
                scope.spawn(|| {
                    let mut ids = Vec::new();
                    for _ in 0..100_000 {
                        if let Ok(id) = gen.try_next_id_with(&clock) {
                            ids.push(id);
                        }
                    }
                    ids
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap())
            .collect()
    });
    assert!(ids.len() > 100_000, "only {} ids issued", ids.len());
    let switched = ids
        .iter()
        .any(|id| Layout::CLOCKSEQ.decode(*id).unwrap().clock_seq != 0);
    assert!(
        switched,
        "the schedule never made the generator switch clock sequence"
    );
    assert_no_duplicates(ids);
}
