//! Encoding, decoding and parsing ids under a layout.

use crate::error::{Error, InvalidId};
use crate::layout::{Field, Layout};

/// What an id says: when, which clock sequence, which worker, which sequence number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Parts {
    /// Start of the id's tick, Unix ms.
    pub timestamp_ms: u64,
    /// Clock sequence (0 when the layout has none).
    pub clock_seq: u64,
    /// Worker id.
    pub worker_id: u64,
    /// Sequence number within the tick.
    pub sequence: u64,
}

/// The parts as the demos and logs print them:
///
/// ```
/// let parts = clockflake::Parts { timestamp_ms: 5, clock_seq: 1, worker_id: 7, sequence: 2 };
/// assert_eq!(parts.to_string(), "timestamp_ms=5 clock_seq=1 worker=7 sequence=2");
/// ```
impl core::fmt::Display for Parts {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "timestamp_ms={} clock_seq={} worker={} sequence={}",
            self.timestamp_ms, self.clock_seq, self.worker_id, self.sequence
        )
    }
}

impl Layout {
    /// Splits an id into its parts.
    ///
    /// ```
    /// use clockflake::Layout;
    /// let parts = Layout::CLOCKSEQ.decode(123_456_789_012_345_678)?;
    /// assert_eq!(Layout::CLOCKSEQ.encode(&parts)?, 123_456_789_012_345_678);
    /// assert_eq!(Layout::JS53.decode(1 << 60).unwrap_err().code(), "INVALID_ID");
    /// # Ok::<(), clockflake::Error>(())
    /// ```
    pub const fn decode(&self, id: u64) -> Result<Parts, Error> {
        if id >> 63 != 0 {
            return Err(Error::InvalidId(InvalidId::SignBitSet(id)));
        }
        if id > self.max_id() {
            return Err(Error::InvalidId(InvalidId::AboveLayoutMax {
                id,
                max: self.max_id(),
            }));
        }
        Ok(self.decode_unchecked(id))
    }

    /// Splits an id already known to fit the layout.
    pub(crate) const fn decode_unchecked(&self, id: u64) -> Parts {
        Parts {
            timestamp_ms: self.tick_to_ms(self.extract(id, Field::Timestamp)),
            clock_seq: self.extract(id, Field::ClockSeq),
            worker_id: self.extract(id, Field::Worker),
            sequence: self.extract(id, Field::Sequence),
        }
    }

    /// One field's value within an id.
    pub(crate) const fn extract(&self, id: u64, field: Field) -> u64 {
        (id >> self.shift(field)) & self.field_max(field)
    }

    /// Joins parts into an id, checking every field's range. A `timestamp_ms` inside a
    /// tick is rounded down to the tick's start, as the generator does with the clock.
    pub const fn encode(&self, parts: &Parts) -> Result<u64, Error> {
        let tick = match self.tick_for_encoding(parts.timestamp_ms) {
            Ok(tick) => tick,
            Err(error) => return Err(error),
        };
        if parts.clock_seq > self.field_max(Field::ClockSeq) {
            return Err(Error::ClockSeqOutOfRange {
                clock_seq: parts.clock_seq,
                max: self.field_max(Field::ClockSeq),
            });
        }
        if parts.worker_id > self.max_worker_id() {
            return Err(Error::WorkerIdOutOfRange {
                worker_id: parts.worker_id,
                max: self.max_worker_id(),
            });
        }
        if parts.sequence > self.field_max(Field::Sequence) {
            return Err(Error::SequenceOutOfRange {
                sequence: parts.sequence,
                max: self.field_max(Field::Sequence),
            });
        }
        Ok(self.compose(tick, parts.clock_seq, parts.worker_id, parts.sequence))
    }

    /// Packs fields known to be in range.
    pub(crate) const fn compose(
        &self,
        tick: u64,
        clock_seq: u64,
        worker_id: u64,
        sequence: u64,
    ) -> u64 {
        (tick << self.shift(Field::Timestamp))
            | (clock_seq << self.shift(Field::ClockSeq))
            | (worker_id << self.shift(Field::Worker))
            | (sequence << self.shift(Field::Sequence))
    }

    /// The smallest and largest id that can carry a time in `from_ms..=to_ms` (both Unix ms,
    /// inclusive): for range scans such as `WHERE id BETWEEN lo AND hi`.
    ///
    /// ```
    /// use clockflake::Layout;
    /// let (lo, hi) = Layout::CLOCKSEQ.id_range(1_735_689_600_000, 1_735_689_600_999)?;
    /// assert_eq!(Layout::CLOCKSEQ.decode(lo)?.timestamp_ms, 1_735_689_600_000);
    /// assert_eq!(Layout::CLOCKSEQ.decode(hi)?.timestamp_ms, 1_735_689_600_999);
    /// # Ok::<(), clockflake::Error>(())
    /// ```
    pub const fn id_range(&self, from_ms: u64, to_ms: u64) -> Result<(u64, u64), Error> {
        if from_ms > to_ms {
            return Err(Error::InvalidRange { from_ms, to_ms });
        }
        let from = match self.tick_for_encoding(from_ms) {
            Ok(tick) => tick,
            Err(error) => return Err(error),
        };
        let to = match self.tick_for_encoding(to_ms) {
            Ok(tick) => tick,
            Err(error) => return Err(error),
        };
        let shift = self.shift(Field::Timestamp);
        let below_timestamp = (1u64 << shift) - 1;
        Ok((from << shift, (to << shift) | below_timestamp))
    }

    /// The tick of a time given as input, or `TIMESTAMP_OUT_OF_RANGE`.
    const fn tick_for_encoding(&self, timestamp_ms: u64) -> Result<u64, Error> {
        match self.tick_of(timestamp_ms) {
            Ok(tick) => Ok(tick),
            Err(_) => Err(Error::TimestampOutOfRange {
                timestamp_ms,
                min_ms: self.epoch_ms(),
                max_ms: self.lifetime_end_ms() - 1,
            }),
        }
    }

    /// Parses a decimal id and checks that it fits the layout. No sign, no spaces;
    /// leading zeros are accepted.
    ///
    /// ```
    /// use clockflake::Layout;
    /// assert_eq!(Layout::CLOCKSEQ.parse_id("42")?, 42);
    /// for bad in ["", "-1", "abc", "12 ", "9223372036854775808", "99999999999999999999"] {
    ///     assert_eq!(Layout::CLOCKSEQ.parse_id(bad).unwrap_err().code(), "INVALID_ID");
    /// }
    /// # Ok::<(), clockflake::Error>(())
    /// ```
    pub fn parse_id(&self, text: &str) -> Result<u64, Error> {
        let invalid = |problem| Err(Error::InvalidId(problem));
        if text.is_empty() {
            return invalid(InvalidId::Empty);
        }
        if text.starts_with('-') {
            return invalid(InvalidId::Negative);
        }
        let mut value: u64 = 0;
        for (at, found) in text.char_indices() {
            let Some(digit) = found.to_digit(10) else {
                return invalid(InvalidId::NotADigit { found, at });
            };
            value = match value
                .checked_mul(10)
                .and_then(|v| v.checked_add(u64::from(digit)))
            {
                Some(v) => v,
                None => return invalid(InvalidId::TooLarge),
            };
        }
        self.decode(value).map(|_| value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worked_example_of_the_default_layout() {
        // 2025-01-01T00:00:00.000Z is 31_622_400_000 ms after the 2024 epoch.
        let parts = Parts {
            timestamp_ms: 1_735_689_600_000,
            clock_seq: 5,
            worker_id: 100,
            sequence: 4095,
        };
        let expected = (31_622_400_000u64 << 22) | (5 << 19) | (100 << 12) | 4095;
        assert_eq!(Layout::CLOCKSEQ.encode(&parts), Ok(expected));
        assert_eq!(Layout::CLOCKSEQ.decode(expected), Ok(parts));
    }

    #[test]
    fn encode_checks_every_field() {
        let l = Layout::CLOCKSEQ;
        let ok = Parts {
            timestamp_ms: l.epoch_ms(),
            clock_seq: 7,
            worker_id: 127,
            sequence: 4095,
        };
        assert!(l.encode(&ok).is_ok());
        let code = |p: Parts| l.encode(&p).unwrap_err().code();
        assert_eq!(code(Parts { clock_seq: 8, ..ok }), "CLOCK_SEQ_OUT_OF_RANGE");
        assert_eq!(
            code(Parts {
                worker_id: 128,
                ..ok
            }),
            "WORKER_ID_OUT_OF_RANGE"
        );
        assert_eq!(
            code(Parts {
                sequence: 4096,
                ..ok
            }),
            "SEQUENCE_OUT_OF_RANGE"
        );
        assert_eq!(
            code(Parts {
                timestamp_ms: l.epoch_ms() - 1,
                ..ok
            }),
            "TIMESTAMP_OUT_OF_RANGE"
        );
        assert_eq!(
            code(Parts {
                timestamp_ms: l.lifetime_end_ms(),
                ..ok
            }),
            "TIMESTAMP_OUT_OF_RANGE"
        );
    }

    #[test]
    fn parse_names_the_problem() {
        let l = Layout::JS53;
        let problem = |t: &str| match l.parse_id(t) {
            Err(Error::InvalidId(p)) => p,
            other => panic!("{t}: {other:?}"),
        };
        assert_eq!(problem(""), InvalidId::Empty);
        assert_eq!(problem("-1"), InvalidId::Negative);
        assert_eq!(problem("+1"), InvalidId::NotADigit { found: '+', at: 0 });
        assert_eq!(problem("1a"), InvalidId::NotADigit { found: 'a', at: 1 });
        assert_eq!(problem("18446744073709551616"), InvalidId::TooLarge);
        assert_eq!(
            problem("9223372036854775808"),
            InvalidId::SignBitSet(1 << 63)
        );
        assert_eq!(
            problem("4503599627370496"),
            InvalidId::AboveLayoutMax {
                id: 1 << 52,
                max: (1 << 52) - 1
            }
        );
        assert_eq!(l.parse_id("0007"), Ok(7));
    }

    #[test]
    fn id_range_covers_whole_ticks() {
        let l = Layout::SONYFLAKE;
        let (lo, hi) = l.id_range(l.epoch_ms() + 25, l.epoch_ms() + 25).unwrap();
        assert_eq!(lo, 2 << 24);
        assert_eq!(hi, (3 << 24) - 1);
        assert_eq!(
            l.id_range(l.epoch_ms() + 1, l.epoch_ms())
                .unwrap_err()
                .code(),
            "INVALID_RANGE"
        );
    }
}
