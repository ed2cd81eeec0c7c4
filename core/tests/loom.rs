//! Model checks of the generator's atomics with [loom](https://docs.rs/loom): every
//! interleaving of the threads below (within the preemption bound each model states) runs
//! the shipped generator, whose atomics come from loom under `--cfg loom` (`src/sync.rs`).
//!
//! Run by `make test-loom`:
//! `RUSTFLAGS="--cfg loom" cargo test -p clockflake --release --test loom` (own target dir).
//! Each model asserts that no id is issued twice, that each thread's ids in one clock sequence
//! strictly increase, and, where it matters, that no id comes from a stale state: a generator
//! resumed from the final [`Generator::state`] issues none of the ids already issued.
//!
//! What is exhausted: every model but one explores every interleaving of every atomic access
//! (loom's default, no preemption bound), with 2 threads, and with 3 in
//! `three_threads_same_tick`; `three_threads_exhaustion_and_rollback` (3 threads, slow path
//! and lock included) every interleaving with at most [`PREEMPTIONS`] preemptions. Orderings are checked under loom's C11 model (loom
//! does not model `SeqCst` fences' full strength or spurious `compare_exchange_weak` failure
//! beyond what it documents).
#![cfg(loom)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use clockflake::{Error, Field, Generator, Layout, Options, Policy};
use loom::sync::Arc;
use loom::thread;

/// 2025-01-01T00:00:00Z.
const T: u64 = 1_735_689_600_000;

/// The preemption bound of the one bounded model: enough to interleave every thread's CAS with
/// both others' (tokio's loom tests use 2 to 4). Unbounded, that model takes about 90 s here.
const PREEMPTIONS: usize = 3;

/// `clock_seq_bits` clock sequences, 2 workers, 2 ids per tick: small enough that a model
/// reaches sequence and clock-sequence exhaustion in a few ids.
fn tiny(clock_seq_bits: u32) -> Layout {
    let fields = [
        (Field::Timestamp, 41),
        (Field::ClockSeq, clock_seq_bits),
        (Field::Worker, 1),
        (Field::Sequence, 1),
    ];
    Layout::new(&fields, 1, 1_704_067_200_000).unwrap()
}

/// A generator of worker 1 that has issued one id at each of `warm_at`, and those ids.
fn generator(layout: Layout, warm_at: &[u64]) -> (Arc<Generator>, Vec<u64>) {
    let options = Options {
        on_rollback: Some(Policy::ClockSequence),
        ..Options::default()
    };
    let gen = Generator::new(layout, 1, options).unwrap();
    let issued = warm_at
        .iter()
        .map(|&t| gen.next_id_at(t).unwrap())
        .collect();
    (Arc::new(gen), issued)
}

/// What one thread does: the ids it got or the refusals, in order.
type Results = Vec<Result<u64, Error>>;
/// One thread's work.
type Task = fn(&Generator) -> Results;

/// Runs `work` on each thread, with the generator, and returns every thread's results in order.
fn race(gen: &Arc<Generator>, work: Vec<Task>) -> Vec<Results> {
    let handles: Vec<_> = work
        .into_iter()
        .map(|task| {
            let gen = Arc::clone(gen);
            thread::spawn(move || task(&gen))
        })
        .collect();
    handles
        .into_iter()
        .map(|handle| handle.join().expect("a thread panicked"))
        .collect()
}

/// The checks every model makes: no id twice (counting the `earlier` ones, issued before the
/// threads started); each thread's ids in one clock sequence strictly increase; the final state
/// covers every id issued (a generator resumed from it at any of `times` issues none of them).
/// Returns every id the threads issued.
fn check(gen: &Generator, earlier: &[u64], per_thread: &[Results], times: &[u64]) -> Vec<u64> {
    let layout = *gen.layout();
    let mut all = earlier.to_vec();
    for results in per_thread {
        let ids: Vec<u64> = results
            .iter()
            .filter_map(|r| r.as_ref().ok().copied())
            .collect();
        for pair in ids.windows(2) {
            let (a, b) = (layout.decode(pair[0]), layout.decode(pair[1]));
            let (Ok(a), Ok(b)) = (a, b) else {
                panic!("an id that does not decode")
            };
            if a.clock_seq == b.clock_seq {
                assert!(pair[1] > pair[0], "a thread's ids went back: {pair:?}");
            }
        }
        all.extend(ids);
    }
    let mut sorted = all.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), all.len(), "an id issued twice: {all:?}");
    let resumed = Generator::resume(layout, &gen.state(), gen.options()).unwrap();
    for &t in times {
        for _ in 0..2 {
            if let Ok(id) = resumed.next_id_at(t) {
                assert!(
                    !all.contains(&id),
                    "resumed from a stale state: {id} at {t}"
                );
            }
        }
    }
    all.split_off(earlier.len())
}

/// Explores every interleaving of `body`, or those with at most `preemptions` preemptions.
fn model(preemptions: Option<usize>, body: impl Fn() + Send + Sync + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = preemptions;
    builder.check(body);
}

/// Two threads take two ids each in one tick: the fast path's CAS against itself.
#[test]
fn two_threads_same_tick() {
    model(None, || {
        let (gen, earlier) = generator(Layout::CLOCKSEQ, &[T]);
        let work: Vec<Task> = vec![|gen| vec![gen.next_id_at(T), gen.next_id_at(T)], |gen| {
            vec![gen.next_id_at(T), gen.next_id_at(T)]
        }];
        let results = race(&gen, work);
        assert_eq!(check(&gen, &earlier, &results, &[T]).len(), 4);
    });
}

/// A fresh generator: the first id goes through the slow path (under its lock) while the
/// other thread's fast path sees the fresh word or the first id.
#[test]
fn two_threads_first_ids() {
    model(None, || {
        let (gen, earlier) = generator(Layout::CLOCKSEQ, &[]);
        let work: Vec<Task> = vec![|gen| vec![gen.next_id_at(T)], |gen| {
            vec![gen.next_id_at(T), gen.next_id_at(T + 1)]
        }];
        let results = race(&gen, work);
        assert_eq!(check(&gen, &earlier, &results, &[T, T + 1]).len(), 3);
    });
}

/// The clock goes back in one thread while the other's CAS is in flight: the slow path
/// switches clock sequence and records the old one's mark; the other thread's fast path
/// either lands first or retries on the new word.
#[test]
fn clock_back_during_cas() {
    model(None, || {
        let (gen, earlier) = generator(Layout::CLOCKSEQ, &[T]);
        let work: Vec<Task> = vec![
            |gen| vec![gen.next_id_at(T), gen.next_id_at(T + 1)],
            |gen| vec![gen.next_id_at(T - 3)],
        ];
        let results = race(&gen, work);
        assert!(
            results[1][0].is_ok(),
            "a free clock sequence: {:?}",
            results[1]
        );
        check(&gen, &earlier, &results, &[T - 3, T, T + 1, T + 2]);
    });
}

/// Both threads see the clock go back, to different times: the slow path's lock orders the
/// switches; each lands in a clock sequence not used at its time.
#[test]
fn two_rollbacks_at_once() {
    model(None, || {
        let (gen, earlier) = generator(tiny(2), &[T]);
        let work: Vec<Task> = vec![
            |gen| vec![gen.next_id_at(T - 5), gen.next_id_at(T)],
            |gen| vec![gen.next_id_at(T - 2)],
        ];
        let results = race(&gen, work);
        check(&gen, &earlier, &results, &[T - 5, T - 2, T, T + 1]);
    });
}

/// The clock goes back in both threads on a layout of two clock sequences: one thread switches
/// from 0 to 1, the other, behind both, must see clock sequence 0's mark (written after the
/// switch's CAS, under the slow path's lock) and refuse rather than reissue an id of sequence
/// 0's past. Without the lock, loom finds the schedule that reissues it.
#[test]
fn rollback_sees_the_mark_it_left() {
    model(None, || {
        let (gen, earlier) = generator(tiny(1), &[T - 3, T]);
        let work: Vec<Task> = vec![|gen| vec![gen.next_id_at(T - 1)], |gen| {
            vec![gen.next_id_at(T - 3)]
        }];
        let results = race(&gen, work);
        check(&gen, &earlier, &results, &[T - 3, T - 1, T, T + 1]);
    });
}

/// The last free sequence number of a tick, wanted by two threads: exactly one gets it, the
/// other is refused with `SEQUENCE_EXHAUSTED` and the next tick to retry at.
#[test]
fn sequence_exhaustion_race() {
    model(None, || {
        let (gen, earlier) = generator(tiny(2), &[T]); // sequence 0 of tick T used; 1 left
        let work: Vec<Task> = vec![|gen| vec![gen.next_id_at(T)], |gen| vec![gen.next_id_at(T)]];
        let results = race(&gen, work);
        let refused: Vec<&Error> = results
            .iter()
            .flatten()
            .filter_map(|r| r.as_ref().err())
            .collect();
        assert_eq!(refused, [&Error::SequenceExhausted { retry_at_ms: T + 1 }]);
        check(&gen, &earlier, &results, &[T, T + 1]);
    });
}

/// A block of ids taken in one CAS against single ids: no id in both.
#[test]
fn block_against_ids() {
    model(None, || {
        let (gen, earlier) = generator(Layout::CLOCKSEQ, &[T]);
        let work: Vec<Task> = vec![
            |gen| match gen.next_block_at(T, 3) {
                Ok(block) => block.map(Ok).collect(),
                Err(error) => vec![Err(error)],
            },
            |gen| vec![gen.next_id_at(T), gen.next_id_at(T)],
        ];
        let results = race(&gen, work);
        assert_eq!(check(&gen, &earlier, &results, &[T]).len(), 5);
    });
}

/// Three threads, one id each in one tick, on a warmed generator (fast paths only).
#[test]
fn three_threads_same_tick() {
    model(None, || {
        let (gen, earlier) = generator(Layout::CLOCKSEQ, &[T]);
        let work: Vec<Task> = vec![
            |gen| vec![gen.next_id_at(T)],
            |gen| vec![gen.next_id_at(T)],
            |gen| vec![gen.next_id_at(T + 1)],
        ];
        let results = race(&gen, work);
        assert_eq!(check(&gen, &earlier, &results, &[T, T + 1]).len(), 3);
    });
}

/// Three threads on the tiny layout: one tick's last sequence number, the next tick and a step
/// back, racing: the fast path, sequence exhaustion and a clock-sequence switch at once.
#[test]
fn three_threads_exhaustion_and_rollback() {
    model(Some(PREEMPTIONS), || {
        let (gen, earlier) = generator(tiny(2), &[T]);
        let work: Vec<Task> = vec![
            |gen| vec![gen.next_id_at(T)],
            |gen| vec![gen.next_id_at(T)],
            |gen| vec![gen.next_id_at(T - 4)],
        ];
        let results = race(&gen, work);
        for result in results.iter().flatten() {
            if let Err(error) = result {
                assert!(
                    matches!(error, Error::SequenceExhausted { .. }),
                    "only a full tick may refuse here: {error}"
                );
            }
        }
        check(&gen, &earlier, &results, &[T - 4, T, T + 1]);
    });
}
