//! Choosing a layout on purpose: one sized from a fleet, a rate and a lifetime
//! ([`Layout::suggest`]), and telling whether an id's time is plausible for a layout
//! ([`Layout::is_plausible`], [`Layout::guess_preset`]).

use crate::error::{Error, LayoutProblem};
use crate::id::Parts;
use crate::layout::{Field, Layout};

/// Milliseconds in a year of 365.25 days.
const YEAR_MS: u64 = 31_557_600_000;

/// Clock-sequence bits a suggested layout gets when they fit (the default's 3: 8 clock sequences).
const SUGGESTED_CLOCK_SEQ_BITS: u32 = 3;

/// The timestamp width spare bits go to first: 41 bits of ms, about 69 years.
const USUAL_TIMESTAMP_BITS: u32 = 41;

/// Bits needed to hold `count` distinct values (0 for one value).
const fn bits_for(count: u64) -> u32 {
    if count <= 1 {
        0
    } else {
        u64::BITS - (count - 1).leading_zeros()
    }
}

impl Layout {
    /// A layout sized for a fleet: `workers` processes alive at once (count a rolling deploy's
    /// surge), `peak_ids_per_sec` from any one process, and ids that must keep being made for
    /// `lifetime_years` after the default's epoch (2024-01-01, in ms ticks).
    ///
    /// The rule, so a reader can redo it by hand: worker bits hold `workers`; sequence bits hold
    /// the peak rate's ids per millisecond; timestamp bits last `lifetime_years`; then 3
    /// clock-sequence bits if they fit (fewer if not), then spare bits go to the timestamp up to
    /// 41 bits (about 69 years), then to the sequence (up to 32 bits). Inputs of 0 count as 1.
    /// Refuses with `INVALID_LAYOUT` (too wide) when the needs add up to more than 63 bits.
    ///
    /// ```
    /// use clockflake::{Field, Layout};
    /// // 300 processes, 10,000 ids/s each at peak, for 30 years:
    /// let layout = Layout::suggest(300, 10_000, 30)?;
    /// assert_eq!(layout.bits(Field::Worker), 9); // 512 worker ids
    /// assert_eq!(layout.bits(Field::ClockSeq), 3);
    /// assert_eq!(layout.bits(Field::Timestamp), 41);
    /// assert_eq!(layout.bits(Field::Sequence), 10); // 1,024 ids per ms per process
    /// // The default fits 128 processes:
    /// assert_eq!(Layout::suggest(128, 4_096_000, 60)?, Layout::CLOCKSEQ);
    /// # Ok::<(), clockflake::Error>(())
    /// ```
    pub fn suggest(
        workers: u64,
        peak_ids_per_sec: u64,
        lifetime_years: u64,
    ) -> Result<Layout, Error> {
        let worker = bits_for(workers.max(1));
        let per_ms = peak_ids_per_sec.max(1).div_ceil(1000);
        let mut sequence = bits_for(per_ms).max(1);
        let lifetime_ms = lifetime_years.max(1).saturating_mul(YEAR_MS);
        let mut timestamp = bits_for(lifetime_ms).max(1);
        let needed = timestamp + worker + sequence;
        if needed > 63 || worker > 32 || sequence > 32 {
            return Err(Error::InvalidLayout(LayoutProblem::TooWide {
                bits: needed,
            }));
        }
        let clock_seq = SUGGESTED_CLOCK_SEQ_BITS.min(63 - needed);
        let mut spare = 63 - needed - clock_seq;
        let more_time = spare.min(USUAL_TIMESTAMP_BITS.saturating_sub(timestamp));
        timestamp += more_time;
        spare -= more_time;
        sequence += spare.min(32 - sequence);
        Layout::new(
            &[
                (Field::Timestamp, timestamp),
                (Field::ClockSeq, clock_seq),
                (Field::Worker, worker),
                (Field::Sequence, sequence),
            ],
            1,
            Layout::CLOCKSEQ.epoch_ms(),
        )
    }

    /// Whether `id` is one this layout could have issued by `now_ms`: it decodes, and its time
    /// is not after `now_ms + margin_ms` (clocks differ a little between hosts). A `false` means
    /// the id was most likely made under another layout: decoding an old Twitter id with the
    /// default layout gives a time in 2040. (Decoded times are never before the epoch: the
    /// timestamp field counts from it.)
    ///
    /// ```
    /// use clockflake::Layout;
    /// let twitter_id = 2_125_537_250_721_665_024; // made on 2026-11-25T10:29:05.801Z
    /// let now = 1_795_700_000_000; // a day later
    /// assert!(Layout::TWITTER.is_plausible(twitter_id, now, 86_400_000));
    /// assert!(!Layout::CLOCKSEQ.is_plausible(twitter_id, now, 86_400_000)); // 2040
    /// ```
    pub fn is_plausible(&self, id: u64, now_ms: u64, margin_ms: u64) -> bool {
        match self.decode(id) {
            Ok(parts) => parts.timestamp_ms <= now_ms.saturating_add(margin_ms),
            Err(_) => false,
        }
    }

    /// The preset under which `id` has a plausible time ([`Layout::is_plausible`]), the one whose
    /// time is latest when several are (an id being looked at is more often recent than old),
    /// with the id decoded under it; `None` when no preset fits.
    ///
    /// ```
    /// use clockflake::Layout;
    /// let now = 1_795_700_000_000;
    /// let (name, parts) = Layout::guess_preset(2_125_537_250_721_665_024, now, 86_400_000)
    ///     .expect("a Twitter id");
    /// assert_eq!(name, "twitter"); // baidu's layout would read 2018, the default 2040
    /// assert_eq!(parts.timestamp_ms, 1_795_602_545_801);
    /// ```
    pub fn guess_preset(id: u64, now_ms: u64, margin_ms: u64) -> Option<(&'static str, Parts)> {
        let mut best: Option<(&'static str, Parts)> = None;
        for (name, layout) in Layout::PRESETS {
            if !layout.is_plausible(id, now_ms, margin_ms) {
                continue;
            }
            let Ok(parts) = layout.decode(id) else {
                continue;
            };
            if best.is_none_or(|(_, kept)| parts.timestamp_ms > kept.timestamp_ms) {
                best = Some((name, parts));
            }
        }
        best
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_for_counts() {
        assert_eq!(bits_for(0), 0);
        assert_eq!(bits_for(1), 0);
        assert_eq!(bits_for(2), 1);
        assert_eq!(bits_for(128), 7);
        assert_eq!(bits_for(129), 8);
        assert_eq!(bits_for(300), 9);
    }

    #[test]
    fn suggestions_hold_what_was_asked() {
        for workers in [1, 2, 100, 300, 1000, 70_000] {
            for rate in [1, 999, 1000, 50_000, 4_000_000] {
                for years in [1, 10, 69, 200] {
                    let Ok(layout) = Layout::suggest(workers, rate, years) else {
                        continue;
                    };
                    assert!(layout.max_worker_id() + 1 >= workers, "{workers}");
                    assert!(layout.field_max(Field::Sequence) + 1 >= rate.div_ceil(1000));
                    let lifetime = layout.lifetime_end_ms() - layout.epoch_ms();
                    assert!(lifetime >= years * YEAR_MS, "{workers} {rate} {years}");
                    assert!(layout.total_bits() <= 63);
                }
            }
        }
    }

    #[test]
    fn too_much_is_refused_as_too_wide() {
        let error = Layout::suggest(1 << 30, 1 << 40, 1000).unwrap_err();
        assert_eq!(error.code(), "INVALID_LAYOUT");
    }

    #[test]
    fn a_small_fleet_keeps_three_clock_sequence_bits() {
        let layout = Layout::suggest(10, 1000, 50).unwrap();
        assert_eq!(layout.bits(Field::ClockSeq), 3);
        assert_eq!(layout.total_bits(), 63);
    }
}
