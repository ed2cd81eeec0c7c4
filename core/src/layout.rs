//! Bit layouts: which field sits where in the 63 usable bits, the time unit, the epoch.

use crate::error::{Error, LayoutProblem};

/// Greatest Unix-ms time any layout may reach: 2^53 - 1, so that every
/// `timestamp_ms` is exact as a JavaScript number and a Python float.
pub const MAX_TIME_MS: u64 = (1 << 53) - 1;

/// Most clock-sequence bits a layout may have (16 clock sequences).
pub const MAX_CLOCK_SEQ_BITS: u32 = 4;

/// One field of an id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Field {
    /// Time since the layout's epoch, in the layout's unit. Always the most significant field.
    Timestamp,
    /// Which clock sequence issued the id (changes when the clock goes back). May be 0 bits.
    ClockSeq,
    /// The worker id. May be 0 bits.
    Worker,
    /// Counter within one tick.
    Sequence,
}

impl Field {
    /// The field's name, the same in every language: `timestamp`, `clock_seq`, `worker`, `sequence`.
    pub const fn name(self) -> &'static str {
        match self {
            Field::Timestamp => "timestamp",
            Field::ClockSeq => "clock_seq",
            Field::Worker => "worker",
            Field::Sequence => "sequence",
        }
    }

    /// Looks a field up by [`Field::name`].
    pub fn from_name(name: &str) -> Result<Field, Error> {
        match name {
            "timestamp" => Ok(Field::Timestamp),
            "clock_seq" => Ok(Field::ClockSeq),
            "worker" => Ok(Field::Worker),
            "sequence" => Ok(Field::Sequence),
            _ => Err(Error::InvalidLayout(LayoutProblem::UnknownField)),
        }
    }

    /// Widest this field may be: a worker id and a sequence are `u32`s, the
    /// clock sequence indexes a table of 16.
    const fn max_bits(self) -> u32 {
        match self {
            Field::Timestamp => 63,
            Field::ClockSeq => MAX_CLOCK_SEQ_BITS,
            Field::Worker | Field::Sequence => 32,
        }
    }

    const fn index(self) -> usize {
        self as usize
    }
}

/// A bit layout: the fields from most to least significant bit with their widths,
/// the time unit and the epoch. Build one with [`Layout::new`] or take a preset.
///
/// ```
/// use clockflake::{Field, Layout};
/// let layout = Layout::new(
///     &[(Field::Timestamp, 41), (Field::Worker, 10), (Field::Sequence, 12)],
///     1,
///     1_288_834_974_657,
/// )?;
/// assert_eq!(layout, Layout::TWITTER);
/// # Ok::<(), clockflake::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Layout {
    order: [Field; 4],
    bits: [u8; 4],
    shift: [u8; 4],
    unit_ms: u64,
    epoch_ms: u64,
}

impl Layout {
    /// `clockseq`, the default: timestamp 41, clock_seq 3, worker 7, sequence 12; 1 ms; epoch 2024-01-01T00:00:00Z.
    pub const CLOCKSEQ: Layout = Layout::preset(
        [
            Field::Timestamp,
            Field::ClockSeq,
            Field::Worker,
            Field::Sequence,
        ],
        [41, 3, 7, 12],
        1,
        1_704_067_200_000,
    );
    /// `twitter`: timestamp 41, worker 10, sequence 12; 1 ms; epoch 1288834974657.
    pub const TWITTER: Layout = Layout::preset(
        [
            Field::Timestamp,
            Field::ClockSeq,
            Field::Worker,
            Field::Sequence,
        ],
        [41, 0, 10, 12],
        1,
        1_288_834_974_657,
    );
    /// `discord`: timestamp 41, worker 10 (5 worker + 5 process), sequence 12; 1 ms; epoch 2015-01-01.
    pub const DISCORD: Layout = Layout::preset(
        [
            Field::Timestamp,
            Field::ClockSeq,
            Field::Worker,
            Field::Sequence,
        ],
        [41, 0, 10, 12],
        1,
        1_420_070_400_000,
    );
    /// `sonyflake`: timestamp 39, sequence 8, worker 16 (this order); 10 ms; epoch 2014-09-01T00:00:00Z.
    pub const SONYFLAKE: Layout = Layout::preset(
        [
            Field::Timestamp,
            Field::ClockSeq,
            Field::Sequence,
            Field::Worker,
        ],
        [39, 0, 8, 16],
        10,
        1_409_529_600_000,
    );
    /// `baidu`: timestamp 28, worker 22, sequence 13; 1 s; epoch 2016-05-20T00:00:00+08:00.
    /// Its 28 bits of seconds ran out on 2024-11-20: it decodes, but refuses to generate.
    pub const BAIDU: Layout = Layout::preset(
        [
            Field::Timestamp,
            Field::ClockSeq,
            Field::Worker,
            Field::Sequence,
        ],
        [28, 0, 22, 13],
        1000,
        1_463_673_600_000,
    );
    /// `js53`: timestamp 33, worker 4, sequence 15; 1 s; epoch 2024-01-01. Every id is below 2^53.
    pub const JS53: Layout = Layout::preset(
        [
            Field::Timestamp,
            Field::ClockSeq,
            Field::Worker,
            Field::Sequence,
        ],
        [33, 0, 4, 15],
        1000,
        1_704_067_200_000,
    );

    /// Every preset with its name, the default first. The names are the same in every language.
    pub const PRESETS: [(&'static str, Layout); 6] = [
        ("clockseq", Layout::CLOCKSEQ),
        ("twitter", Layout::TWITTER),
        ("discord", Layout::DISCORD),
        ("sonyflake", Layout::SONYFLAKE),
        ("baidu", Layout::BAIDU),
        ("js53", Layout::JS53),
    ];

    /// A preset by name.
    ///
    /// ```
    /// assert_eq!(clockflake::Layout::by_name("sonyflake")?.unit_ms(), 10);
    /// assert_eq!(clockflake::Layout::by_name("nope").unwrap_err().code(), "UNKNOWN_LAYOUT");
    /// # Ok::<(), clockflake::Error>(())
    /// ```
    pub fn by_name(name: &str) -> Result<Layout, Error> {
        Layout::PRESETS
            .iter()
            .find(|(preset, _)| *preset == name)
            .map(|(_, layout)| *layout)
            .ok_or(Error::UnknownLayout)
    }

    /// The preset name of this layout, if it is one.
    pub fn preset_name(&self) -> Option<&'static str> {
        Layout::PRESETS
            .iter()
            .find(|(_, layout)| layout == self)
            .map(|(name, _)| *name)
    }

    /// A custom layout: `fields` from most to least significant bit, each with its width.
    ///
    /// Rules: `timestamp` comes first and `sequence` is present, each field at most once
    /// (`clock_seq` and `worker` may be left out, meaning 0 bits); widths add up to at most 63;
    /// `clock_seq` at most 4 bits, `worker` and `sequence` at most 32; `unit_ms` at least 1;
    /// the layout's whole lifetime ends by 2^53 - 1 Unix ms.
    pub fn new(fields: &[(Field, u32)], unit_ms: u64, epoch_ms: u64) -> Result<Layout, Error> {
        let invalid = |problem| Err(Error::InvalidLayout(problem));
        let mut order = [Field::Timestamp; 4];
        let mut bits = [0u8; 4];
        let mut seen = [false; 4];
        let mut count = 0;
        let mut total = 0u32;
        for &(field, width) in fields {
            if seen[field.index()] {
                return invalid(LayoutProblem::DuplicateField);
            }
            if width > field.max_bits() {
                return invalid(LayoutProblem::FieldTooWide {
                    field,
                    bits: width,
                    max: field.max_bits(),
                });
            }
            seen[field.index()] = true;
            order[count] = field;
            count += 1;
            bits[field.index()] = width as u8;
            total += width;
        }
        if fields.first().map(|(field, _)| *field) != Some(Field::Timestamp) {
            return invalid(LayoutProblem::TimestampNotFirst);
        }
        if bits[Field::Timestamp.index()] == 0 {
            return invalid(LayoutProblem::FieldTooNarrow(Field::Timestamp));
        }
        if !seen[Field::Sequence.index()] {
            return invalid(LayoutProblem::MissingSequence);
        }
        if total > 63 {
            return invalid(LayoutProblem::TooWide { bits: total });
        }
        if unit_ms == 0 {
            return invalid(LayoutProblem::ZeroUnit);
        }
        // Fields left out are 0 bits wide; put them last so the order stays a permutation.
        for field in [Field::ClockSeq, Field::Worker] {
            if !seen[field.index()] {
                order[count] = field;
                count += 1;
            }
        }
        let ticks = 1u64 << bits[Field::Timestamp.index()];
        let lifetime_end = ticks
            .checked_mul(unit_ms)
            .and_then(|span| span.checked_add(epoch_ms));
        match lifetime_end {
            Some(end) if end - 1 <= MAX_TIME_MS => {}
            _ => return invalid(LayoutProblem::LifetimeTooLong),
        }
        Ok(Layout::preset(
            order,
            bits_in_order(order, bits),
            unit_ms,
            epoch_ms,
        ))
    }

    /// Builds a layout from fields known to be valid (checked by the presets test).
    /// Zero-width fields move to the end, so equal layouts compare equal however they were listed.
    const fn preset(listed: [Field; 4], widths: [u8; 4], unit_ms: u64, epoch_ms: u64) -> Layout {
        let mut order = [Field::Timestamp; 4];
        let mut bits = [0u8; 4];
        let mut shift = [0u8; 4];
        let mut total = 0u8;
        let mut i = 0;
        while i < 4 {
            total += widths[i];
            i += 1;
        }
        let mut below = total;
        let mut placed = 0;
        let mut zero_width = [true; 4];
        let mut i = 0;
        while i < 4 {
            if widths[i] > 0 {
                let field = listed[i];
                order[placed] = field;
                placed += 1;
                bits[field.index()] = widths[i];
                below -= widths[i];
                shift[field.index()] = below;
                zero_width[field.index()] = false;
            }
            i += 1;
        }
        // The zero-width fields in one fixed order, however they were listed (or left out).
        let fixed = [
            Field::Timestamp,
            Field::ClockSeq,
            Field::Worker,
            Field::Sequence,
        ];
        let mut k = 0;
        while k < 4 {
            if zero_width[fixed[k].index()] {
                order[placed] = fixed[k];
                placed += 1;
            }
            k += 1;
        }
        Layout {
            order,
            bits,
            shift,
            unit_ms,
            epoch_ms,
        }
    }

    /// Width of a field in bits (0 when the layout has no such field).
    pub const fn bits(&self, field: Field) -> u32 {
        self.bits[field.index()] as u32
    }

    /// Position of a field's least significant bit within the id.
    pub const fn shift(&self, field: Field) -> u32 {
        self.shift[field.index()] as u32
    }

    /// Largest value a field can hold.
    pub const fn field_max(&self, field: Field) -> u64 {
        (1u64 << self.bits(field)) - 1
    }

    /// A field's value in its place within an id (masked to the field's width), for composing
    /// ids from parts bit by bit.
    ///
    /// ```
    /// use clockflake::{Field, Layout};
    /// assert_eq!(Layout::CLOCKSEQ.place(Field::ClockSeq, 1), 1 << 19);
    /// ```
    pub const fn place(&self, field: Field, value: u64) -> u64 {
        (value & self.field_max(field)) << self.shift(field)
    }

    /// The fields that have at least one bit, most significant first, with their widths.
    pub fn fields(&self) -> impl Iterator<Item = (Field, u32)> + '_ {
        self.order
            .iter()
            .map(|field| (*field, self.bits(*field)))
            .filter(|(_, bits)| *bits > 0)
    }

    /// Bits used by all fields together (at most 63).
    pub const fn total_bits(&self) -> u32 {
        self.bits[0] as u32 + self.bits[1] as u32 + self.bits[2] as u32 + self.bits[3] as u32
    }

    /// Milliseconds per timestamp tick.
    pub const fn unit_ms(&self) -> u64 {
        self.unit_ms
    }

    /// The epoch, in Unix milliseconds.
    pub const fn epoch_ms(&self) -> u64 {
        self.epoch_ms
    }

    /// Number of clock sequences (1 when the layout has no clock-sequence bits).
    pub const fn clock_seqs(&self) -> u64 {
        1 << self.bits(Field::ClockSeq)
    }

    /// Largest worker id the layout can hold.
    pub const fn max_worker_id(&self) -> u64 {
        self.field_max(Field::Worker)
    }

    /// Largest id the layout can produce: every field at its maximum.
    pub const fn max_id(&self) -> u64 {
        (1u64 << self.total_bits()) - 1
    }

    /// First Unix ms that the timestamp field can no longer hold.
    pub const fn lifetime_end_ms(&self) -> u64 {
        self.epoch_ms + (self.field_max(Field::Timestamp) + 1) * self.unit_ms
    }

    /// Unix ms at which a tick starts.
    pub(crate) const fn tick_to_ms(&self, tick: u64) -> u64 {
        self.epoch_ms + tick * self.unit_ms
    }

    /// The tick containing a Unix-ms time, or why there is none.
    pub(crate) const fn tick_of(&self, time_ms: u64) -> Result<u64, Error> {
        if time_ms < self.epoch_ms {
            return Err(Error::EpochInFuture {
                now_ms: time_ms,
                epoch_ms: self.epoch_ms,
            });
        }
        let tick = (time_ms - self.epoch_ms) / self.unit_ms;
        if tick > self.field_max(Field::Timestamp) {
            return Err(Error::TimestampExhausted {
                now_ms: time_ms,
                lifetime_end_ms: self.lifetime_end_ms(),
            });
        }
        Ok(tick)
    }

    /// Checks that a generator can start at `now_ms`: the epoch is not in the
    /// future and the timestamp field has not run out.
    ///
    /// ```
    /// use clockflake::Layout;
    /// let nov_2026 = 1_795_000_000_000;
    /// assert!(Layout::CLOCKSEQ.check_time(nov_2026).is_ok());
    /// assert_eq!(Layout::BAIDU.check_time(nov_2026).unwrap_err().code(), "TIMESTAMP_EXHAUSTED");
    /// assert_eq!(Layout::CLOCKSEQ.check_time(0).unwrap_err().code(), "EPOCH_IN_FUTURE");
    /// ```
    pub const fn check_time(&self, now_ms: u64) -> Result<(), Error> {
        match self.tick_of(now_ms) {
            Ok(_) => Ok(()),
            Err(error) => Err(error),
        }
    }

    /// A stable 64-bit fingerprint of the layout (FNV-1a over its fields, unit and epoch),
    /// stored in generator state so that state is never resumed under another layout.
    pub fn fingerprint(&self) -> u64 {
        const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
        const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;
        let mut hash = FNV_OFFSET;
        let mut eat = |byte: u8| hash = (hash ^ u64::from(byte)).wrapping_mul(FNV_PRIME);
        for (field, bits) in self.fields() {
            eat(field as u8);
            eat(bits as u8);
        }
        for byte in self.unit_ms.to_le_bytes() {
            eat(byte);
        }
        for byte in self.epoch_ms.to_le_bytes() {
            eat(byte);
        }
        hash
    }
}

impl Default for Layout {
    fn default() -> Self {
        Layout::CLOCKSEQ
    }
}

impl core::str::FromStr for Layout {
    type Err = Error;
    fn from_str(name: &str) -> Result<Layout, Error> {
        Layout::by_name(name)
    }
}

/// Widths indexed by field, reordered to follow `order`.
fn bits_in_order(order: [Field; 4], bits_by_field: [u8; 4]) -> [u8; 4] {
    order.map(|field| bits_by_field[field.index()])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_width_fields_listed_or_not_give_equal_layouts() {
        // Found by the server_config fuzz target: a 0-bit worker listed or left out.
        let listed = [
            (Field::Timestamp, 40),
            (Field::Sequence, 0),
            (Field::Worker, 0),
        ];
        let left_out = [(Field::Timestamp, 40), (Field::Sequence, 0)];
        assert_eq!(
            Layout::new(&listed, 10, 200),
            Layout::new(&left_out, 10, 200)
        );
        let twitter = [
            (Field::Timestamp, 41),
            (Field::ClockSeq, 0),
            (Field::Worker, 10),
            (Field::Sequence, 12),
        ];
        let twitter = Layout::new(&twitter, 1, Layout::TWITTER.epoch_ms());
        assert_eq!(twitter, Ok(Layout::TWITTER));
    }

    #[test]
    fn presets_pass_validation_unchanged() {
        for (name, preset) in Layout::PRESETS {
            let fields: [(Field, u32); 4] = preset.order.map(|f| (f, preset.bits(f)));
            let rebuilt = Layout::new(&fields, preset.unit_ms, preset.epoch_ms);
            assert_eq!(rebuilt, Ok(preset), "{name}");
            assert_eq!(Layout::by_name(name), Ok(preset));
            assert_eq!(preset.preset_name(), Some(name));
        }
    }

    #[test]
    fn clockseq_shifts_match_the_design() {
        let l = Layout::CLOCKSEQ;
        assert_eq!(l.total_bits(), 63);
        assert_eq!(l.shift(Field::Timestamp), 22);
        assert_eq!(l.shift(Field::ClockSeq), 19);
        assert_eq!(l.shift(Field::Worker), 12);
        assert_eq!(l.shift(Field::Sequence), 0);
        assert_eq!(Layout::SONYFLAKE.shift(Field::Sequence), 16);
        assert_eq!(Layout::SONYFLAKE.shift(Field::Worker), 0);
        assert_eq!(Layout::JS53.max_id(), (1 << 52) - 1);
    }

    #[test]
    fn invalid_layouts_are_refused_with_a_reason() {
        use Field::*;
        let bad = |fields: &[(Field, u32)], unit| Layout::new(fields, unit, 0).unwrap_err();
        let problem = |e: Error| match e {
            Error::InvalidLayout(p) => p,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            problem(bad(&[(Timestamp, 42), (Worker, 10), (Sequence, 12)], 1)),
            LayoutProblem::TooWide { bits: 64 }
        );
        assert_eq!(
            problem(bad(&[(Worker, 10), (Timestamp, 41), (Sequence, 12)], 1)),
            LayoutProblem::TimestampNotFirst
        );
        assert_eq!(
            problem(bad(&[(Timestamp, 41), (Worker, 10)], 1)),
            LayoutProblem::MissingSequence
        );
        assert_eq!(
            problem(bad(&[(Timestamp, 41), (Sequence, 1), (Sequence, 1)], 1)),
            LayoutProblem::DuplicateField
        );
        assert_eq!(
            problem(bad(&[(Timestamp, 41), (ClockSeq, 5), (Sequence, 1)], 1)),
            LayoutProblem::FieldTooWide {
                field: ClockSeq,
                bits: 5,
                max: 4
            }
        );
        assert_eq!(
            problem(bad(&[(Timestamp, 41), (Sequence, 12)], 0)),
            LayoutProblem::ZeroUnit
        );
        assert_eq!(
            problem(bad(&[(Timestamp, 54), (Sequence, 9)], 1)),
            LayoutProblem::LifetimeTooLong
        );
        assert_eq!(
            problem(bad(&[(Timestamp, 0), (Sequence, 9)], 1)),
            LayoutProblem::FieldTooNarrow(Timestamp)
        );
    }

    #[test]
    fn fingerprints_differ_between_presets() {
        for (i, (_, a)) in Layout::PRESETS.iter().enumerate() {
            for (_, b) in Layout::PRESETS.iter().skip(i + 1) {
                assert_ne!(a.fingerprint(), b.fingerprint());
            }
        }
    }
}
