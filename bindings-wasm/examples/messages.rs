//! Prints core's own message for a sample of every error kind, with the numbers the wasm build
//! hands to JS (`src/error_numbers.rs`), one JSON object a line. The Node tests rebuild each message
//! in JS from the numbers and compare: `cargo run -q -p clockflake-wasm --example messages`.

#[path = "../src/error_numbers.rs"]
mod error_numbers;

use clockflake::{Error, Field, InvalidId, LayoutProblem, PublicIdProblem, StateProblem};

fn main() {
    let big = 9_223_372_036_854_775_808u64;
    // Core's table (one error of each code), then the other shapes each message can take.
    let mut samples = Error::EXAMPLES.to_vec();
    samples.extend([
        Error::InvalidId(InvalidId::Negative),
        Error::InvalidId(InvalidId::TooLarge),
        Error::InvalidId(InvalidId::SignBitSet(big)),
        Error::InvalidId(InvalidId::SignBitSet(u64::MAX)),
        Error::InvalidId(InvalidId::AboveLayoutMax {
            id: 1 << 52,
            max: (1 << 52) - 1,
        }),
        Error::InvalidLayout(LayoutProblem::TooWide { bits: 64 }),
        Error::InvalidLayout(LayoutProblem::DuplicateField),
        Error::InvalidLayout(LayoutProblem::UnknownField),
        Error::InvalidLayout(LayoutProblem::TimestampNotFirst),
        Error::InvalidLayout(LayoutProblem::MissingSequence),
        Error::InvalidLayout(LayoutProblem::LifetimeTooLong),
        Error::ClockMovedBackwards {
            last_ms: 1_795_000_000_003,
            now_ms: 1_795_000_000_000,
            retry_at_ms: Some(1_795_000_000_004),
        },
        Error::ClockSequenceExhausted {
            now_ms: 1_795_000_000_000,
            retry_at_ms: Some(1_795_000_000_002),
        },
        Error::InvalidState(StateProblem::LayoutMismatch {
            expected: u64::MAX - 1,
            found: 3,
        }),
        Error::InvalidState(StateProblem::HighWaterOutOfRange),
        Error::InvalidState(StateProblem::FingerprintNotDecimal),
        Error::InvalidState(StateProblem::MarkCount {
            expected: 8,
            found: 1,
        }),
        Error::InvalidPublicId(PublicIdProblem::WrongLength { found: 0 }),
        Error::InvalidPublicId(PublicIdProblem::WrongLength { found: 17 }),
        Error::InvalidPublicId(PublicIdProblem::OutOfRange),
        Error::InvalidKeyVersion { version: 255 },
    ]);
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
        let (kind, fields) = error_numbers::error_numbers(&error);
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
