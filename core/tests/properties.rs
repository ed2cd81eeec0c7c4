//! Property tests: random clock schedules, asking for single ids and blocks, never produce a
//! duplicate; `logical` never goes back;
//! encode and decode are inverses for every preset.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashSet;

use clockflake::{Field, Generator, Layout, Options, Parts, Policy};
use proptest::prelude::*;

const START_MS: u64 = 1_735_689_600_000; // 2025-01-01T00:00:00Z

/// One move of the clock, then how many ids to ask for at that time.
#[derive(Clone, Debug)]
enum Move {
    Forward(u64),
    Stall,
    Back(u64),
    /// Save the state and continue in a new generator, as after a restart.
    Restart,
}

fn moves() -> impl Strategy<Value = Vec<(Move, u32)>> {
    let one = prop_oneof![
        4 => (1u64..5).prop_map(Move::Forward),
        2 => Just(Move::Stall),
        3 => prop_oneof![1u64..10, 10u64..1_000, 1_000u64..=10_000].prop_map(Move::Back),
        1 => Just(Move::Restart),
    ];
    prop::collection::vec((one, 1u32..6), 1..300)
}

/// A layout with 2 sequence bits and 2 clock-sequence bits, so exhaustion and refusals are common.
fn tiny() -> Layout {
    Layout::new(
        &[
            (Field::Timestamp, 40),
            (Field::ClockSeq, 2),
            (Field::Worker, 3),
            (Field::Sequence, 2),
        ],
        1,
        1_704_067_200_000,
    )
    .unwrap()
}

/// Runs a schedule; returns every id issued, in order. Refusals are allowed, never duplicates.
fn run(layout: Layout, options: Options, schedule: &[(Move, u32)]) -> Vec<u64> {
    let mut gen = Generator::new(layout, 3, options).unwrap();
    let mut now = START_MS;
    let mut issued = Vec::new();
    for (step, asks) in schedule {
        match step {
            Move::Forward(ms) => now += ms,
            Move::Stall => {}
            Move::Back(ms) => now -= ms,
            Move::Restart => {
                gen = Generator::resume(layout, &gen.state(), options).unwrap();
            }
        }
        for ask in 0..*asks {
            // The three entry points share one state: take turns.
            let outcome = match ask % 3 {
                0 => gen.next_id_at(now).map(|id| vec![id]),
                1 => gen.next_id_at_mut(now).map(|id| vec![id]),
                _ => gen
                    .next_block_at(now, u64::from(ask))
                    .map(|block| block_ids(&layout, block)),
            };
            match outcome {
                Ok(ids) => issued.extend(ids),
                Err(error) => assert!(
                    matches!(
                        error.code(),
                        "SEQUENCE_EXHAUSTED" | "CLOCK_SEQUENCE_EXHAUSTED" | "CLOCK_MOVED_BACKWARDS"
                    ),
                    "{error}"
                ),
            }
        }
    }
    issued
}

/// A block's ids: at least one, consecutive sequence numbers of one tick and clock sequence.
fn block_ids(layout: &Layout, block: clockflake::IdBlock) -> Vec<u64> {
    let first = block.peek();
    let ids: Vec<u64> = block.collect();
    assert!(!ids.is_empty() && first == Some(ids[0]));
    let head = layout.decode(ids[0]).unwrap();
    for (k, id) in ids.iter().enumerate() {
        let parts = layout.decode(*id).unwrap();
        assert_eq!(
            (parts.timestamp_ms, parts.clock_seq, parts.sequence),
            (head.timestamp_ms, head.clock_seq, head.sequence + k as u64)
        );
    }
    ids
}

fn assert_unique(ids: &[u64]) {
    let mut seen = HashSet::new();
    for id in ids {
        assert!(seen.insert(*id), "duplicate id {id}");
    }
}

fn with_policy(policy: Policy, max_wait_ms: u64) -> Options {
    Options {
        on_rollback: Some(policy),
        max_wait_ms,
        max_drift_ms: 1000,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn clock_sequence_never_repeats_an_id(schedule in moves(), max_wait_ms in 0u64..20) {
        for layout in [Layout::CLOCKSEQ, tiny()] {
            assert_unique(&run(layout, with_policy(Policy::ClockSequence, max_wait_ms), &schedule));
        }
    }

    #[test]
    fn logical_ids_strictly_increase(schedule in moves()) {
        for layout in [Layout::CLOCKSEQ, tiny()] {
            let ids = run(layout, with_policy(Policy::Logical, 5), &schedule);
            prop_assert!(ids.windows(2).all(|w| w[0] < w[1]));
        }
    }

    #[test]
    fn wait_and_fail_never_repeat_and_never_go_back(schedule in moves()) {
        for policy in [Policy::Wait, Policy::Fail] {
            let ids = run(tiny(), with_policy(policy, 5), &schedule);
            prop_assert!(ids.windows(2).all(|w| w[0] < w[1]));
        }
    }

    #[test]
    fn encode_then_decode_is_identity(
        preset in 0..Layout::PRESETS.len(),
        tick in any::<u64>(), clock_seq in any::<u64>(), worker in any::<u64>(), sequence in any::<u64>(),
    ) {
        let layout = Layout::PRESETS[preset].1;
        let parts = Parts {
            timestamp_ms: layout.epoch_ms()
                + (tick % (layout.field_max(Field::Timestamp) + 1)) * layout.unit_ms(),
            clock_seq: clock_seq % layout.clock_seqs(),
            worker_id: worker % (layout.max_worker_id() + 1),
            sequence: sequence % (layout.field_max(Field::Sequence) + 1),
        };
        let id = layout.encode(&parts).unwrap();
        prop_assert_eq!(layout.decode(id).unwrap(), parts);
        prop_assert_eq!(layout.parse_id(&id.to_string()).unwrap(), id);
    }

    #[test]
    fn decode_then_encode_is_identity(preset in 0..Layout::PRESETS.len(), raw in any::<u64>()) {
        let layout = Layout::PRESETS[preset].1;
        let id = raw & layout.max_id();
        prop_assert_eq!(layout.encode(&layout.decode(id).unwrap()).unwrap(), id);
    }
}
