//! Blocks of ids (`next_block_at`): what the bindings serve from without a call per id.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use clockflake::{Generator, Layout, Options};

const T: u64 = 1_735_689_600_000;

#[test]
fn a_block_takes_up_to_a_whole_tick_and_single_ids_continue_after_it() {
    let gen = Generator::new(Layout::CLOCKSEQ, 5, Options::default()).unwrap();
    // The very first id is decided by the slow path: a block of one.
    let first = gen.next_block_at(T - 1, 100).unwrap();
    assert_eq!(first.len(), 1);
    let block: Vec<u64> = gen.next_block_at(T, 100).unwrap().collect();
    assert_eq!(block.len(), 100);
    assert!(block.windows(2).all(|w| w[1] == w[0] + 1));
    assert_eq!(Layout::CLOCKSEQ.decode(block[99]).unwrap().sequence, 99);
    let next = gen.next_id_at(T).unwrap();
    assert_eq!(next, block[99] + 1);
    // The rest of the tick in one block: 4,096 - 101 ids, never more than the tick holds.
    let rest = gen.next_block_at(T, u64::MAX).unwrap();
    assert_eq!(rest.len(), 4096 - 101);
    let last = rest.last().unwrap();
    assert_eq!(Layout::CLOCKSEQ.decode(last).unwrap().sequence, 4095);
}

#[test]
fn a_full_tick_refuses_with_the_retry_time_and_the_next_tick_starts_over() {
    let gen = Generator::new(Layout::CLOCKSEQ, 5, Options::default()).unwrap();
    gen.next_id_at(T - 1).unwrap();
    assert_eq!(gen.next_block_at(T, 5000).unwrap().len(), 4096);
    let error = gen.next_block_at(T, 1).unwrap_err();
    assert_eq!(error.code(), "SEQUENCE_EXHAUSTED");
    assert_eq!(error.retry_at_ms(), Some(T + 1));
    let next = gen.next_block_at(T + 1, 3).unwrap();
    assert_eq!(
        next.peek()
            .map(|id| Layout::CLOCKSEQ.decode(id).unwrap().sequence),
        Some(0)
    );
}

#[test]
fn an_empty_block_only_when_none_is_asked_for() {
    let gen = Generator::new(Layout::CLOCKSEQ, 5, Options::default()).unwrap();
    let empty = gen.next_block_at(T, 0).unwrap();
    assert_eq!((empty.len(), empty.peek()), (0, None));
    // Asking for nothing used no id.
    let first = gen.next_id_at(T).unwrap();
    assert_eq!(Layout::CLOCKSEQ.decode(first).unwrap().sequence, 0);
}

#[test]
fn a_block_after_the_clock_steps_back_moves_to_another_clock_sequence() {
    let gen = Generator::new(Layout::CLOCKSEQ, 5, Options::default()).unwrap();
    gen.next_id_at(T - 1).unwrap();
    let before: Vec<u64> = gen.next_block_at(T, 50).unwrap().collect();
    assert_eq!(before.len(), 50);
    // The step back is the slow path's decision: one id, on a fresh clock sequence...
    let after: Vec<u64> = gen.next_block_at(T - 1_000, 50).unwrap().collect();
    assert_eq!(after.len(), 1);
    // ...and the next block of that tick is a full one again.
    let after: Vec<u64> = after
        .into_iter()
        .chain(gen.next_block_at(T - 1_000, 50).unwrap())
        .collect();
    assert_eq!(after.len(), 51);
    let (a, b) = (
        Layout::CLOCKSEQ.decode(before[0]).unwrap(),
        Layout::CLOCKSEQ.decode(after[0]).unwrap(),
    );
    assert_ne!(a.clock_seq, b.clock_seq);
    assert_eq!(b.timestamp_ms, T - 1_000);
    assert!(before.iter().all(|id| !after.contains(id)));
}

#[test]
fn a_block_says_which_tick_its_ids_carry() {
    // Sonyflake ticks are 10 ms: a block taken mid-tick is served from the tick's start to its end.
    let gen = Generator::new(Layout::SONYFLAKE, 1, Options::default()).unwrap();
    let now = T + 3;
    gen.next_block_at(now, 1).unwrap(); // the first id: the slow path, a block of one
    let block = gen.next_block_at(now, 50).unwrap();
    let tick_start = now - (now - Layout::SONYFLAKE.epoch_ms()) % 10;
    assert_eq!(block.tick_ms(), tick_start);
    assert_eq!(
        Layout::SONYFLAKE
            .decode(block.peek().unwrap())
            .unwrap()
            .timestamp_ms,
        tick_start
    );
    // An empty block has no ids.
    assert_eq!(gen.next_block_at(now, 0).unwrap().len(), 0);
}

/// A clock that covers time only while `open` holds, refusing with one of core's errors
/// otherwise (here the one a copy of the process gets).
struct Covering {
    now_ms: u64,
    open: std::cell::Cell<bool>,
}

impl clockflake::Clock for Covering {
    fn now_ms(&self) -> u64 {
        self.now_ms
    }
    fn try_now_ms(&self) -> Result<u64, clockflake::Error> {
        if self.open.get() {
            Ok(self.now_ms)
        } else {
            Err(clockflake::Error::WorkerIdInvalidated)
        }
    }
}

#[test]
fn a_clock_that_refuses_time_stops_the_generator_without_using_an_id() {
    let gen = Generator::new(Layout::CLOCKSEQ, 2, Options::default()).unwrap();
    let clock = Covering {
        now_ms: T,
        open: std::cell::Cell::new(true),
    };
    let first = gen.try_next_id_with(&clock).unwrap();
    let before = gen.state();
    clock.open.set(false);
    for _ in 0..3 {
        assert_eq!(
            gen.try_next_id_with(&clock),
            Err(clockflake::Error::WorkerIdInvalidated)
        );
        assert_eq!(
            gen.try_next_block_with(&clock, 10),
            Err(clockflake::Error::WorkerIdInvalidated)
        );
    }
    assert_eq!(gen.state(), before, "nothing issued while refused");
    clock.open.set(true);
    assert_eq!(
        gen.try_next_id_with(&clock).unwrap(),
        first + 1,
        "no id skipped or repeated"
    );
}

/// A refusal of the caller's own type (the lease's), carried through the core untouched.
#[derive(Debug, PartialEq)]
enum Refused {
    Expired,
    Core(clockflake::Error),
}

impl From<clockflake::Error> for Refused {
    fn from(error: clockflake::Error) -> Refused {
        Refused::Core(error)
    }
}

#[test]
fn a_time_source_refusing_with_its_own_error_stops_the_generator_without_using_an_id() {
    let gen = Generator::new(Layout::CLOCKSEQ, 2, Options::default()).unwrap();
    let open = std::cell::Cell::new(true);
    let now = || {
        if open.get() {
            Ok(T)
        } else {
            Err(Refused::Expired)
        }
    };
    let first = gen.try_next_id_from(now).unwrap();
    let before = gen.state();
    open.set(false);
    assert_eq!(gen.try_next_id_from(now), Err(Refused::Expired));
    assert_eq!(gen.try_next_block_from(now, 10), Err(Refused::Expired));
    assert_eq!(gen.state(), before, "nothing issued while refused");
    open.set(true);
    assert_eq!(gen.try_next_id_from(now).unwrap(), first + 1);
    // Core's own refusals arrive converted: a time before the epoch.
    assert!(matches!(
        gen.try_next_id_from(|| Ok::<u64, Refused>(0)),
        Err(Refused::Core(clockflake::Error::EpochInFuture { .. }))
    ));
}
