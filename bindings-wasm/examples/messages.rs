//! Prints core's own message for a sample of every error kind, with the numbers the wasm build
//! hands to JS (`src/describe.rs`), one JSON object a line. The Node tests rebuild each message
//! in JS from the numbers and compare: `cargo run -q -p clockflake-wasm --example messages`.

#[path = "../src/describe.rs"]
mod describe;

use clockflake::{Error, Field, InvalidId, LayoutProblem, PublicIdProblem, StateProblem};

fn main() {
    let big = 9_223_372_036_854_775_808u64;
    let mut samples = vec![
        Error::InvalidId(InvalidId::Empty),
        Error::InvalidId(InvalidId::Negative),
        Error::InvalidId(InvalidId::TooLarge),
        Error::InvalidId(InvalidId::SignBitSet(big)),
        Error::InvalidId(InvalidId::SignBitSet(u64::MAX)),
        Error::InvalidId(InvalidId::AboveLayoutMax {
            id: 1 << 52,
            max: (1 << 52) - 1,
        }),
        Error::InvalidLayout(LayoutProblem::TooWide { bits: 64 }),
        Error::InvalidLayout(LayoutProblem::FieldTooNarrow(Field::Timestamp)),
        Error::InvalidLayout(LayoutProblem::DuplicateField),
        Error::InvalidLayout(LayoutProblem::UnknownField),
        Error::InvalidLayout(LayoutProblem::TimestampNotFirst),
        Error::InvalidLayout(LayoutProblem::MissingSequence),
        Error::InvalidLayout(LayoutProblem::ZeroUnit),
        Error::InvalidLayout(LayoutProblem::LifetimeTooLong),
        Error::UnknownLayout,
        Error::UnknownPolicy,
        Error::WorkerIdOutOfRange {
            worker_id: 128,
            max: 127,
        },
        Error::TimestampOutOfRange {
            timestamp_ms: 5,
            min_ms: 1_704_067_200_000,
            max_ms: 3_903_090_455_551,
        },
        Error::ClockSeqOutOfRange {
            clock_seq: 8,
            max: 7,
        },
        Error::SequenceOutOfRange {
            sequence: 4096,
            max: 4095,
        },
        Error::InvalidRange {
            from_ms: 2,
            to_ms: 1,
        },
        Error::EpochInFuture {
            now_ms: 0,
            epoch_ms: 1_704_067_200_000,
        },
        Error::TimestampExhausted {
            now_ms: 1_795_000_000_000,
            lifetime_end_ms: 1_732_109_056_000,
        },
        Error::SequenceExhausted {
            retry_at_ms: 1_795_000_000_001,
        },
        Error::ClockMovedBackwards {
            last_ms: 1_795_000_000_100,
            now_ms: 1_795_000_000_000,
            retry_at_ms: None,
        },
        Error::ClockMovedBackwards {
            last_ms: 1_795_000_000_003,
            now_ms: 1_795_000_000_000,
            retry_at_ms: Some(1_795_000_000_004),
        },
        Error::ClockSequenceExhausted {
            now_ms: 1_795_000_000_000,
            retry_at_ms: None,
        },
        Error::ClockSequenceExhausted {
            now_ms: 1_795_000_000_000,
            retry_at_ms: Some(1_795_000_000_002),
        },
        Error::InvalidState(StateProblem::LayoutMismatch {
            expected: u64::MAX - 1,
            found: 3,
        }),
        Error::InvalidState(StateProblem::ClockSeqOutOfRange),
        Error::InvalidState(StateProblem::HighWaterOutOfRange),
        Error::ClockNotAdvancing {
            waiting_for_ms: 1_795_000_001_000,
            now_ms: 1_795_000_000_000,
        },
        Error::WorkerIdInvalidated,
        Error::LeaseLost,
        Error::WorkerPoolExhausted { workers: 128 },
        Error::InvalidPublicId(PublicIdProblem::WrongLength { found: 0 }),
        Error::InvalidPublicId(PublicIdProblem::WrongLength { found: 17 }),
        Error::InvalidPublicId(PublicIdProblem::ChecksumMismatch),
        Error::InvalidPublicId(PublicIdProblem::OutOfRange),
        Error::UnknownKeyVersion { version: 5 },
        Error::InvalidKeyVersion { version: 32 },
        Error::InvalidKeyVersion { version: 255 },
    ];
    for field in [
        Field::Timestamp,
        Field::ClockSeq,
        Field::Worker,
        Field::Sequence,
    ] {
        samples.push(Error::InvalidLayout(LayoutProblem::FieldTooWide {
            field,
            bits: 99,
            max: 4,
        }));
        samples.push(Error::InvalidLayout(LayoutProblem::FieldTooNarrow(field)));
    }
    for (at, found) in [
        'a', ' ', '+', '.', '\n', '\t', '\r', '\0', '\'', '"', '\\', 'é', '😀', '\u{301}',
        '\u{7f}', '\u{1b}', '\u{a0}', '\u{200b}', '\u{2028}', '１',
    ]
    .into_iter()
    .enumerate()
    {
        samples.push(Error::InvalidId(InvalidId::NotADigit { found, at }));
        samples.push(Error::InvalidPublicId(PublicIdProblem::BadCharacter {
            found,
            at: at + 3,
        }));
    }
    for error in samples {
        let (kind, fields) = describe::describe(&error);
        let fields: Vec<String> = fields.iter().map(|f| format!("\"{f}\"")).collect();
        let message = error.to_string().replace('\\', "\\\\").replace('"', "\\\"");
        let message: String = message
            .chars()
            .map(|c| {
                if (c as u32) < 0x20 {
                    format!("\\u{:04x}", c as u32)
                } else {
                    c.to_string()
                }
            })
            .collect();
        println!(
            "{{\"code\":\"{}\",\"kind\":{kind},\"fields\":[{}],\"message\":\"{message}\"}}",
            error.code(),
            fields.join(",")
        );
    }
}
