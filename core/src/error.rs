//! The one error type, with a stable code per variant.
//!
//! Core knows nothing of leases: a lease's refusals (`LEASE_LOST`, `WORKER_POOL_EXHAUSTED`, ...)
//! are `clockflake_lease::LeaseError`'s, and a time source that refuses for a reason of its own
//! (a lease past its deadline) returns its own error through
//! [`Generator::try_next_id_from`](crate::Generator::try_next_id_from).

use core::fmt;

use crate::layout::Field;

/// Why clockflake refused. [`Error::code`] is stable and the same in every language.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// `INVALID_ID`: a text or number that is not an id of this layout.
    InvalidId(InvalidId),
    /// `INVALID_LAYOUT`: a custom layout breaks a rule.
    InvalidLayout(LayoutProblem),
    /// `UNKNOWN_LAYOUT`: no preset has that name.
    UnknownLayout,
    /// `UNKNOWN_POLICY`: no rollback policy has that name.
    UnknownPolicy,
    /// `WORKER_ID_OUT_OF_RANGE`: the worker id does not fit the layout's worker field.
    WorkerIdOutOfRange {
        /// The worker id given.
        worker_id: u64,
        /// The largest the layout holds.
        max: u64,
    },
    /// `TIMESTAMP_OUT_OF_RANGE`: a time before the epoch or past the layout's lifetime.
    TimestampOutOfRange {
        /// The time given, Unix ms.
        timestamp_ms: u64,
        /// The layout's epoch, Unix ms.
        min_ms: u64,
        /// The last Unix ms the layout can hold.
        max_ms: u64,
    },
    /// `CLOCK_SEQ_OUT_OF_RANGE`: a clock sequence that does not fit the layout.
    ClockSeqOutOfRange {
        /// The clock sequence given.
        clock_seq: u64,
        /// The largest the layout holds.
        max: u64,
    },
    /// `SEQUENCE_OUT_OF_RANGE`: a sequence number that does not fit the layout.
    SequenceOutOfRange {
        /// The sequence given.
        sequence: u64,
        /// The largest the layout holds.
        max: u64,
    },
    /// `INVALID_RANGE`: a time window whose start is after its end.
    InvalidRange {
        /// Start of the window, Unix ms.
        from_ms: u64,
        /// End of the window, Unix ms.
        to_ms: u64,
    },
    /// `EPOCH_IN_FUTURE`: the clock reads a time before the layout's epoch.
    EpochInFuture {
        /// The clock's reading, Unix ms.
        now_ms: u64,
        /// The layout's epoch, Unix ms.
        epoch_ms: u64,
    },
    /// `TIMESTAMP_EXHAUSTED`: the layout's timestamp field has run out; it can no longer generate.
    TimestampExhausted {
        /// The clock's reading, Unix ms.
        now_ms: u64,
        /// First Unix ms the layout cannot hold.
        lifetime_end_ms: u64,
    },
    /// `SEQUENCE_EXHAUSTED`: every sequence number of this tick is used; retry at `retry_at_ms`.
    SequenceExhausted {
        /// When the next tick starts, Unix ms.
        retry_at_ms: u64,
    },
    /// `CLOCK_MOVED_BACKWARDS`: the clock reads before the last id issued, and the policy refuses.
    ClockMovedBackwards {
        /// Time of the last id issued, Unix ms.
        last_ms: u64,
        /// The clock's reading, Unix ms.
        now_ms: u64,
        /// When a retry can succeed, if that is within the policy's `max_wait_ms`.
        retry_at_ms: Option<u64>,
    },
    /// `CLOCK_SEQUENCE_EXHAUSTED`: the clock went back and every clock sequence was already
    /// used at this time.
    ClockSequenceExhausted {
        /// The clock's reading, Unix ms.
        now_ms: u64,
        /// When a clock sequence frees up, if that is within the policy's `max_wait_ms`.
        retry_at_ms: Option<u64>,
    },
    /// `INVALID_STATE`: a saved state that cannot be resumed with this layout.
    InvalidState(StateProblem),
    /// `CLOCK_NOT_ADVANCING`: a blocking call waited for a time its clock never reached.
    ClockNotAdvancing {
        /// The time waited for, Unix ms.
        waiting_for_ms: u64,
        /// The clock's last reading, Unix ms.
        now_ms: u64,
    },
    /// `WORKER_ID_INVALIDATED`: the generator's worker id is no longer this process's (for
    /// example in the child after a fork); it needs a new worker id.
    WorkerIdInvalidated,
    /// `GENERATOR_CLOSED`: `close()` was called on the generator (a binding's, or a leased
    /// one's, whose worker id has been released); it issues no more ids.
    GeneratorClosed,
    /// `INVALID_PUBLIC_ID`: text or a number that is not a public id (a typo, a wrong length).
    InvalidPublicId(PublicIdProblem),
    /// `UNKNOWN_KEY_VERSION`: a public id made with a key version the codec does not hold.
    UnknownKeyVersion {
        /// The version found.
        version: u8,
    },
    /// `INVALID_KEY_VERSION`: a key version above 31, or one already in the key ring.
    InvalidKeyVersion {
        /// The version given.
        version: u8,
    },
}

/// What is wrong with a public id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PublicIdProblem {
    /// The text is not 16 characters long.
    WrongLength {
        /// Its length in characters.
        found: usize,
    },
    /// A character outside Crockford base32.
    BadCharacter {
        /// The character.
        found: char,
        /// Its byte offset.
        at: usize,
    },
    /// The check characters do not match: a character was mistyped or two were swapped.
    ChecksumMismatch,
    /// The value does not fit 63 bits.
    OutOfRange,
}

/// What is wrong with an id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum InvalidId {
    /// The text is empty.
    Empty,
    /// The text starts with a minus sign.
    Negative,
    /// A character that is not a decimal digit, and where (byte offset).
    NotADigit {
        /// The offending character.
        found: char,
        /// Its byte offset.
        at: usize,
    },
    /// The number does not fit in 64 bits.
    TooLarge,
    /// The number has bit 63 set: ids are below 2^63.
    SignBitSet(u64),
    /// The id has bits above the layout's width, so its timestamp lies beyond the layout's lifetime.
    AboveLayoutMax {
        /// The id.
        id: u64,
        /// The largest id of the layout.
        max: u64,
    },
}

/// What is wrong with a custom layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LayoutProblem {
    /// Widths add up to more than 63 bits.
    TooWide {
        /// Their sum.
        bits: u32,
    },
    /// A field is wider than its type allows.
    FieldTooWide {
        /// The field.
        field: Field,
        /// Its width.
        bits: u32,
        /// The widest allowed.
        max: u32,
    },
    /// A field that needs at least one bit has none.
    FieldTooNarrow(Field),
    /// A field is listed twice.
    DuplicateField,
    /// A field name that is not `timestamp`, `clock_seq`, `worker` or `sequence`.
    UnknownField,
    /// The timestamp is not the most significant field.
    TimestampNotFirst,
    /// No sequence field.
    MissingSequence,
    /// A time unit of 0 ms.
    ZeroUnit,
    /// The layout's lifetime would end after 2^53 - 1 Unix ms.
    LifetimeTooLong,
}

/// What is wrong with a saved generator state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum StateProblem {
    /// It was saved under another layout.
    LayoutMismatch {
        /// The fingerprint of the layout given.
        expected: u64,
        /// The fingerprint stored in the state.
        found: u64,
    },
    /// Its clock sequence does not exist in the layout.
    ClockSeqOutOfRange,
    /// A high-water mark lies outside the layout's lifetime, or names a clock sequence the layout lacks.
    HighWaterOutOfRange,
    /// The layout fingerprint of a state record is not a decimal number below 2^64.
    FingerprintNotDecimal,
    /// A state record holds another number of high-water marks than the layout has clock
    /// sequences (a mark left out would let a used clock sequence pass for a fresh one).
    MarkCount {
        /// The layout's clock sequences.
        expected: u64,
        /// The marks in the record.
        found: u64,
    },
}

impl Error {
    /// The stable code: SCREAMING_SNAKE, the same string in Rust, JS and Python.
    ///
    /// ```
    /// let error = clockflake::Layout::CLOCKSEQ.parse_id("abc").unwrap_err();
    /// assert_eq!(error.code(), "INVALID_ID");
    /// ```
    pub const fn code(&self) -> &'static str {
        match self {
            Error::InvalidId(_) => "INVALID_ID",
            Error::InvalidLayout(_) => "INVALID_LAYOUT",
            Error::UnknownLayout => "UNKNOWN_LAYOUT",
            Error::UnknownPolicy => "UNKNOWN_POLICY",
            Error::WorkerIdOutOfRange { .. } => "WORKER_ID_OUT_OF_RANGE",
            Error::TimestampOutOfRange { .. } => "TIMESTAMP_OUT_OF_RANGE",
            Error::ClockSeqOutOfRange { .. } => "CLOCK_SEQ_OUT_OF_RANGE",
            Error::SequenceOutOfRange { .. } => "SEQUENCE_OUT_OF_RANGE",
            Error::InvalidRange { .. } => "INVALID_RANGE",
            Error::EpochInFuture { .. } => "EPOCH_IN_FUTURE",
            Error::TimestampExhausted { .. } => "TIMESTAMP_EXHAUSTED",
            Error::SequenceExhausted { .. } => "SEQUENCE_EXHAUSTED",
            Error::ClockMovedBackwards { .. } => "CLOCK_MOVED_BACKWARDS",
            Error::ClockSequenceExhausted { .. } => "CLOCK_SEQUENCE_EXHAUSTED",
            Error::InvalidState(_) => "INVALID_STATE",
            Error::ClockNotAdvancing { .. } => "CLOCK_NOT_ADVANCING",
            Error::WorkerIdInvalidated => "WORKER_ID_INVALIDATED",
            Error::GeneratorClosed => "GENERATOR_CLOSED",
            Error::InvalidPublicId(_) => "INVALID_PUBLIC_ID",
            Error::UnknownKeyVersion { .. } => "UNKNOWN_KEY_VERSION",
            Error::InvalidKeyVersion { .. } => "INVALID_KEY_VERSION",
        }
    }

    /// Every code, for bindings that define one exception class per code.
    pub const CODES: [&'static str; 21] = [
        "INVALID_ID",
        "INVALID_LAYOUT",
        "UNKNOWN_LAYOUT",
        "UNKNOWN_POLICY",
        "WORKER_ID_OUT_OF_RANGE",
        "TIMESTAMP_OUT_OF_RANGE",
        "CLOCK_SEQ_OUT_OF_RANGE",
        "SEQUENCE_OUT_OF_RANGE",
        "INVALID_RANGE",
        "EPOCH_IN_FUTURE",
        "TIMESTAMP_EXHAUSTED",
        "SEQUENCE_EXHAUSTED",
        "CLOCK_MOVED_BACKWARDS",
        "CLOCK_SEQUENCE_EXHAUSTED",
        "INVALID_STATE",
        "CLOCK_NOT_ADVANCING",
        "WORKER_ID_INVALIDATED",
        "INVALID_PUBLIC_ID",
        "UNKNOWN_KEY_VERSION",
        "INVALID_KEY_VERSION",
        "GENERATOR_CLOSED",
    ];

    /// One error of each code, in the order of [`Error::CODES`]: the table bindings check their
    /// error mapping against (a class per code, input or runtime, the message passed through).
    #[doc(hidden)] // for the bindings' tests
    pub const EXAMPLES: [Error; 21] = [
        Error::InvalidId(InvalidId::Empty),
        Error::InvalidLayout(LayoutProblem::ZeroUnit),
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
            now_ms: 3_903_090_455_552,
            lifetime_end_ms: 3_903_090_455_551,
        },
        Error::SequenceExhausted {
            retry_at_ms: 1_735_689_600_001,
        },
        Error::ClockMovedBackwards {
            last_ms: 1_735_689_600_000,
            now_ms: 1_735_689_590_000,
            retry_at_ms: None,
        },
        Error::ClockSequenceExhausted {
            now_ms: 1_735_689_590_000,
            retry_at_ms: None,
        },
        Error::InvalidState(StateProblem::ClockSeqOutOfRange),
        Error::ClockNotAdvancing {
            waiting_for_ms: 1_735_689_600_001,
            now_ms: 1_735_689_600_000,
        },
        Error::WorkerIdInvalidated,
        Error::InvalidPublicId(PublicIdProblem::ChecksumMismatch),
        Error::UnknownKeyVersion { version: 3 },
        Error::InvalidKeyVersion { version: 32 },
        Error::GeneratorClosed,
    ];

    /// When a retry of the same call can succeed, Unix ms: set for sequence exhaustion, and
    /// for clock refusals whose wait fits the policy's `max_wait_ms`. `None` means final.
    pub const fn retry_at_ms(&self) -> Option<u64> {
        match *self {
            Error::SequenceExhausted { retry_at_ms } => Some(retry_at_ms),
            Error::ClockMovedBackwards { retry_at_ms, .. }
            | Error::ClockSequenceExhausted { retry_at_ms, .. } => retry_at_ms,
            _ => None,
        }
    }

    /// Whether the error is about bad input (as opposed to the clock or the state of the world).
    /// Bindings map input errors to `ValueError` / `RangeError` and the rest to runtime errors.
    pub const fn is_input_error(&self) -> bool {
        !matches!(
            self,
            Error::EpochInFuture { .. }
                | Error::TimestampExhausted { .. }
                | Error::SequenceExhausted { .. }
                | Error::ClockMovedBackwards { .. }
                | Error::ClockSequenceExhausted { .. }
                | Error::ClockNotAdvancing { .. }
                | Error::WorkerIdInvalidated
                | Error::GeneratorClosed
        )
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Error::InvalidId(problem) => write!(f, "invalid id: {problem}"),
            Error::InvalidLayout(problem) => write!(f, "invalid layout: {problem}"),
            Error::UnknownLayout => f.write_str(
                "unknown layout: expected one of clockseq, twitter, discord, sonyflake, baidu, js53",
            ),
            Error::UnknownPolicy => f.write_str(
                "unknown rollback policy: expected one of clock-sequence, wait, logical, fail",
            ),
            Error::WorkerIdOutOfRange { worker_id, max } => write!(
                f,
                "worker id out of range: expected 0..={max} for this layout, found {worker_id}"
            ),
            Error::TimestampOutOfRange {
                timestamp_ms,
                min_ms,
                max_ms,
            } => write!(
                f,
                "timestamp out of range: expected {min_ms}..={max_ms} Unix ms for this layout, found {timestamp_ms}"
            ),
            Error::ClockSeqOutOfRange { clock_seq, max } => write!(
                f,
                "clock sequence out of range: expected 0..={max} for this layout, found {clock_seq}"
            ),
            Error::SequenceOutOfRange { sequence, max } => write!(
                f,
                "sequence out of range: expected 0..={max} for this layout, found {sequence}"
            ),
            Error::InvalidRange { from_ms, to_ms } => write!(
                f,
                "invalid range: expected from_ms <= to_ms, found {from_ms} > {to_ms}"
            ),
            Error::EpochInFuture { now_ms, epoch_ms } => write!(
                f,
                "epoch in the future: the clock reads {now_ms} Unix ms, before the layout's epoch {epoch_ms}"
            ),
            Error::TimestampExhausted {
                now_ms,
                lifetime_end_ms,
            } => write!(
                f,
                "timestamp exhausted: the layout's timestamp field ran out at {lifetime_end_ms} Unix ms; the clock reads {now_ms}"
            ),
            Error::SequenceExhausted { retry_at_ms } => write!(
                f,
                "sequence exhausted: every sequence number of this tick is used, retry at {retry_at_ms} Unix ms"
            ),
            Error::ClockMovedBackwards {
                last_ms,
                now_ms,
                retry_at_ms,
            } => {
                write!(
                    f,
                    "clock moved backwards: the clock reads {now_ms} Unix ms, {} ms before the last id issued at {last_ms}",
                    last_ms.saturating_sub(now_ms)
                )?;
                write_retry(f, retry_at_ms)
            }
            Error::ClockSequenceExhausted {
                now_ms,
                retry_at_ms,
            } => {
                write!(
                    f,
                    "clock sequence exhausted: the clock went back to {now_ms} Unix ms and every clock sequence was already used at that time"
                )?;
                write_retry(f, retry_at_ms)
            }
            Error::InvalidState(problem) => write!(f, "invalid state: {problem}"),
            Error::ClockNotAdvancing {
                waiting_for_ms,
                now_ms,
            } => write!(
                f,
                "clock not advancing: waited for {waiting_for_ms} Unix ms but the clock still reads {now_ms}"
            ),
            Error::GeneratorClosed => f.write_str(
                "generator closed: close() was called; make a new generator",
            ),
            Error::WorkerIdInvalidated => f.write_str(
                "worker id invalidated: this generator's worker id belongs to another process (after a fork, another copy of the process or restored()); give it a new worker id",
            ),
            Error::InvalidPublicId(problem) => write!(f, "invalid public id: {problem}"),
            Error::UnknownKeyVersion { version } => write!(
                f,
                "unknown key version: the public id was made with key version {version}, which this codec does not hold"
            ),
            Error::InvalidKeyVersion { version } => write!(
                f,
                "invalid key version: expected 0..=31 and not already in the key ring, found {version}"
            ),
        }
    }
}

fn write_retry(f: &mut fmt::Formatter<'_>, retry_at_ms: Option<u64>) -> fmt::Result {
    match retry_at_ms {
        Some(at) => write!(f, "; retry at {at} Unix ms"),
        None => f.write_str("; the wait would exceed max_wait_ms"),
    }
}

impl fmt::Display for InvalidId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            InvalidId::Empty => f.write_str("expected a decimal integer, found an empty string"),
            InvalidId::Negative => {
                f.write_str("expected a non-negative decimal integer, found a minus sign")
            }
            InvalidId::NotADigit { found, at } => write!(
                f,
                "expected a decimal digit, found {found:?} at byte {at}"
            ),
            InvalidId::TooLarge => f.write_str("expected an integer below 2^63, found one of more than 64 bits"),
            InvalidId::SignBitSet(id) => write!(
                f,
                "expected an integer below 2^63 (9223372036854775808), found {id}"
            ),
            InvalidId::AboveLayoutMax { id, max } => write!(
                f,
                "expected at most {max} for this layout, found {id}: its timestamp lies beyond the layout's lifetime"
            ),
        }
    }
}

impl fmt::Display for LayoutProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            LayoutProblem::TooWide { bits } => {
                write!(f, "expected fields of at most 63 bits in all, found {bits}")
            }
            LayoutProblem::FieldTooWide { field, bits, max } => write!(
                f,
                "expected {} to be at most {max} bits, found {bits}",
                field.name()
            ),
            LayoutProblem::FieldTooNarrow(field) => {
                write!(f, "expected {} to be at least 1 bit, found 0", field.name())
            }
            LayoutProblem::DuplicateField => f.write_str("a field is listed twice"),
            LayoutProblem::UnknownField => f.write_str(
                "unknown field: expected timestamp, clock_seq, worker or sequence",
            ),
            LayoutProblem::TimestampNotFirst => {
                f.write_str("expected timestamp as the most significant field")
            }
            LayoutProblem::MissingSequence => f.write_str("expected a sequence field"),
            LayoutProblem::ZeroUnit => f.write_str("expected a time unit of at least 1 ms, found 0"),
            LayoutProblem::LifetimeTooLong => f.write_str(
                "expected the layout's lifetime to end by 2^53 - 1 Unix ms (epoch + 2^timestamp_bits * unit_ms)",
            ),
        }
    }
}

impl fmt::Display for StateProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            StateProblem::LayoutMismatch { expected, found } => write!(
                f,
                "saved under another layout: expected fingerprint {expected}, found {found}"
            ),
            StateProblem::ClockSeqOutOfRange => {
                f.write_str("its clock sequence does not exist in this layout")
            }
            StateProblem::HighWaterOutOfRange => f.write_str(
                "a high-water mark lies outside the layout's lifetime or names a missing clock sequence",
            ),
            StateProblem::FingerprintNotDecimal => {
                f.write_str("the layout fingerprint is not a decimal number below 2^64")
            }
            StateProblem::MarkCount { expected, found } => write!(
                f,
                "expected {expected} high-water marks (one per clock sequence), found {found}"
            ),
        }
    }
}

impl fmt::Display for PublicIdProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            PublicIdProblem::WrongLength { found } => {
                write!(f, "expected 16 characters, found {found}")
            }
            PublicIdProblem::BadCharacter { found, at } => write!(
                f,
                "expected a Crockford base32 character (0-9, A-Z without I L O U), found {found:?} at byte {at}"
            ),
            PublicIdProblem::ChecksumMismatch => f.write_str(
                "the check characters do not match: a character was mistyped or two were swapped",
            ),
            PublicIdProblem::OutOfRange => f.write_str("expected a value below 2^63"),
        }
    }
}

impl core::error::Error for Error {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_lists_every_code_once() {
        let codes: [&str; 21] = Error::EXAMPLES.map(|e| e.code());
        assert_eq!(codes, Error::CODES);
    }
}
