//! An [`Error`] as numbers: which variant (`kind`) and up to four 64-bit fields. The JS wrapper
//! (`js/messages.js`) fills core's message template of that kind with them, so the `.wasm`
//! carries no `core::fmt` (which would cost about 13 KiB); the templates are made from core's own
//! `Display` at build time by `examples/core_tables.rs`, which numbers the fields as this file
//! does. `examples/messages.rs` prints core's own messages for every kind, and the Node tests
//! check the JS rebuild against them.
//!
//! Kinds: 0 for variants without a sub-kind; `InvalidId` 0..=5, `InvalidLayout` 0..=8,
//! `InvalidState` 0..=4 and `InvalidPublicId` 0..=3 in declaration order; 255 for a variant or
//! sub-kind this crate does not know (core's error enums are `#[non_exhaustive]`)
//! (the message then falls back to the code). An absent `retry_at_ms` is `u64::MAX`.

use clockflake::{Error, InvalidId, LayoutProblem, PublicIdProblem, StateProblem};

/// Sentinel for a `None` field.
pub const NONE: u64 = u64::MAX;

/// `(kind, fields)` of an error.
pub fn error_numbers(error: &Error) -> (u32, [u64; 4]) {
    let opt = |v: Option<u64>| v.unwrap_or(NONE);
    match *error {
        Error::InvalidId(problem) => match problem {
            InvalidId::Empty => (0, [0; 4]),
            InvalidId::Negative => (1, [0; 4]),
            InvalidId::NotADigit { found, at } => (2, [u64::from(found), at as u64, 0, 0]),
            InvalidId::TooLarge => (3, [0; 4]),
            InvalidId::SignBitSet(id) => (4, [id, 0, 0, 0]),
            InvalidId::AboveLayoutMax { id, max } => (5, [id, max, 0, 0]),
            _ => (255, [0; 4]),
        },
        Error::InvalidLayout(problem) => match problem {
            LayoutProblem::TooWide { bits } => (0, [u64::from(bits), 0, 0, 0]),
            LayoutProblem::FieldTooWide { field, bits, max } => {
                (1, [field as u64, u64::from(bits), u64::from(max), 0])
            }
            LayoutProblem::FieldTooNarrow(field) => (2, [field as u64, 0, 0, 0]),
            LayoutProblem::DuplicateField => (3, [0; 4]),
            LayoutProblem::UnknownField => (4, [0; 4]),
            LayoutProblem::TimestampNotFirst => (5, [0; 4]),
            LayoutProblem::MissingSequence => (6, [0; 4]),
            LayoutProblem::ZeroUnit => (7, [0; 4]),
            LayoutProblem::LifetimeTooLong => (8, [0; 4]),
            _ => (255, [0; 4]),
        },
        Error::InvalidState(problem) => match problem {
            StateProblem::LayoutMismatch { expected, found } => (0, [expected, found, 0, 0]),
            StateProblem::ClockSeqOutOfRange => (1, [0; 4]),
            StateProblem::HighWaterOutOfRange => (2, [0; 4]),
            StateProblem::FingerprintNotDecimal => (3, [0; 4]),
            StateProblem::MarkCount { expected, found } => (4, [expected, found, 0, 0]),
            _ => (255, [0; 4]),
        },
        Error::UnknownLayout
        | Error::UnknownPolicy
        | Error::WorkerIdInvalidated
        | Error::GeneratorClosed => (0, [0; 4]),
        Error::WorkerIdOutOfRange { worker_id, max } => (0, [worker_id, max, 0, 0]),
        Error::TimestampOutOfRange {
            timestamp_ms,
            min_ms,
            max_ms,
        } => (0, [timestamp_ms, min_ms, max_ms, 0]),
        Error::ClockSeqOutOfRange { clock_seq, max } => (0, [clock_seq, max, 0, 0]),
        Error::SequenceOutOfRange { sequence, max } => (0, [sequence, max, 0, 0]),
        Error::InvalidRange { from_ms, to_ms } => (0, [from_ms, to_ms, 0, 0]),
        Error::EpochInFuture { now_ms, epoch_ms } => (0, [now_ms, epoch_ms, 0, 0]),
        Error::TimestampExhausted {
            now_ms,
            lifetime_end_ms,
        } => (0, [now_ms, lifetime_end_ms, 0, 0]),
        Error::SequenceExhausted { retry_at_ms } => (0, [retry_at_ms, 0, 0, 0]),
        Error::ClockMovedBackwards {
            last_ms,
            now_ms,
            retry_at_ms,
        } => (0, [last_ms, now_ms, opt(retry_at_ms), 0]),
        Error::ClockSequenceExhausted {
            now_ms,
            retry_at_ms,
        } => (0, [now_ms, opt(retry_at_ms), 0, 0]),
        Error::ClockNotAdvancing {
            waiting_for_ms,
            now_ms,
        } => (0, [waiting_for_ms, now_ms, 0, 0]),
        Error::InvalidPublicId(problem) => match problem {
            PublicIdProblem::WrongLength { found } => (0, [found as u64, 0, 0, 0]),
            PublicIdProblem::BadCharacter { found, at } => (1, [u64::from(found), at as u64, 0, 0]),
            PublicIdProblem::ChecksumMismatch => (2, [0; 4]),
            PublicIdProblem::OutOfRange => (3, [0; 4]),
            _ => (255, [0; 4]),
        },
        Error::UnknownKeyVersion { version } | Error::InvalidKeyVersion { version } => {
            (0, [u64::from(version), 0, 0, 0])
        }
        _ => (255, [0; 4]),
    }
}
