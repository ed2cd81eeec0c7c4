//! The generator: a state machine handed the time, returning an id or a typed refusal.
//!
//! State (DESIGN.md): the current clock sequence `cs`, the last tick and sequence issued with
//! it, and per clock sequence `k` its high-water mark `hwm[k]`, the greatest tick ever issued
//! with `k`. The first three live in one atomic word, the last id issued, so the fast path is a
//! single compare-and-swap. `hwm[k]` of the clock sequences not in use change only when the
//! generator switches away from one, which is the rare slow path and takes a spin lock.

use core::fmt;

use crate::block::IdBlock;
use crate::error::{Error, StateProblem};
use crate::layout::{Field, Layout, MAX_CLOCK_SEQ_BITS};
use crate::options::{Options, Policy};
use crate::sync::{self, AtomicBool, AtomicU64, Ordering};
use crate::Clock;

/// Slots in the high-water table: the most clock sequences a layout can have.
pub const MAX_CLOCK_SEQS: usize = 1 << MAX_CLOCK_SEQ_BITS;

/// The word of a generator that has issued nothing in its clock sequence yet: bit 63 is never
/// set in an id, and the clock-sequence bits below it say which sequence to start in.
const FRESH: u64 = 1 << 63;

/// A generator's saved state: enough to continue without repeating an id after a restart,
/// or to hand its worker id over to another process.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct State {
    /// [`Layout::fingerprint`] of the layout the ids were issued under.
    pub layout_fingerprint: u64,
    /// The worker id.
    pub worker_id: u64,
    /// The clock sequence in use.
    pub clock_seq: u64,
    /// Per clock sequence, the start (Unix ms) of the latest tick issued with it, or a later
    /// time reserved ahead; `None` if never used. Slots past the layout's clock sequences are `None`.
    pub high_water_ms: [Option<u64>; MAX_CLOCK_SEQS],
}

impl State {
    /// Reads a state record as the bindings hand it out and take it back (JSON-safe: the
    /// layout's fingerprint as a decimal string, one high-water mark per clock sequence of
    /// `layout`, `None` for one never used). The record's form is checked here, the rest by
    /// [`Generator::resume`]: a record with fewer marks than the layout has clock sequences is
    /// refused, as a mark left out would let a used clock sequence pass for a fresh one.
    ///
    /// ```
    /// use clockflake::{Generator, Layout, Options, State};
    /// let gen = Generator::new(Layout::TWITTER, 3, Options::default())?;
    /// gen.next_id_at(1_735_689_600_000)?;
    /// let saved = gen.state();
    /// let text = saved.layout_fingerprint.to_string();
    /// let marks = saved.marks(&Layout::TWITTER).to_vec();
    /// assert_eq!(State::from_record(&Layout::TWITTER, &text, 3, 0, marks.clone())?, saved);
    /// assert!(State::from_record(&Layout::TWITTER, "x", 3, 0, marks).is_err());
    /// assert!(State::from_record(&Layout::TWITTER, &text, 3, 0, []).is_err());
    /// # Ok::<(), clockflake::Error>(())
    /// ```
    #[doc(hidden)] // for the bindings that store records as text (Python's, JavaScript's)
    pub fn from_record<M>(
        layout: &Layout,
        layout_fingerprint: &str,
        worker_id: u64,
        clock_seq: u64,
        marks: M,
    ) -> Result<State, Error>
    where
        M: IntoIterator<Item = Option<u64>>,
        M::IntoIter: ExactSizeIterator,
    {
        let invalid = |problem| Error::InvalidState(problem);
        // Digits by hand rather than `str::parse`, whose code would double this in the wasm.
        let not_decimal = || invalid(StateProblem::FingerprintNotDecimal);
        if layout_fingerprint.is_empty() {
            return Err(not_decimal());
        }
        let mut fingerprint: u64 = 0;
        for byte in layout_fingerprint.bytes() {
            let digit = byte.wrapping_sub(b'0');
            if digit > 9 {
                return Err(not_decimal());
            }
            fingerprint = fingerprint
                .checked_mul(10)
                .and_then(|value| value.checked_add(u64::from(digit)))
                .ok_or_else(not_decimal)?;
        }
        let layout_fingerprint = fingerprint;
        let marks = marks.into_iter();
        if marks.len() as u64 != layout.clock_seqs() {
            return Err(invalid(StateProblem::MarkCount {
                expected: layout.clock_seqs(),
                found: marks.len() as u64,
            }));
        }
        let mut high_water_ms = [None; MAX_CLOCK_SEQS];
        for (slot, mark) in high_water_ms.iter_mut().zip(marks) {
            *slot = mark;
        }
        Ok(State {
            layout_fingerprint,
            worker_id,
            clock_seq,
            high_water_ms,
        })
    }

    /// The high-water marks of the state record: one per clock sequence of `layout`.
    pub fn marks(&self, layout: &Layout) -> &[Option<u64>] {
        // A layout has at most MAX_CLOCK_SEQS clock sequences (checked by `Layout::new`).
        let count = layout.clock_seqs() as usize;
        self.high_water_ms
            .get(..count)
            .unwrap_or(&self.high_water_ms)
    }

    /// Raises the current clock sequence's mark to `until_ms`: persist the result before
    /// issuing ids up to that time, and a crash never loses track of what was issued.
    pub fn reserve(&mut self, until_ms: u64) {
        if let Some(mark) = self.high_water_ms.get_mut(self.clock_seq as usize) {
            *mark = Some(mark.map_or(until_ms, |ms| ms.max(until_ms)));
        }
    }

    /// Where a new holder of this state continues at `now_ms`: the clock sequence, and the
    /// Unix ms from which it can issue ids in it (0: at once). This is the rotation rule of
    /// `clock-sequence` applied to a stored state: the first clock sequence in rotation from
    /// the stored one whose mark is below the clock's tick (never used counts); if none is,
    /// the one whose mark passes first, ready on the first tick after that mark.
    ///
    /// ```
    /// use clockflake::{Layout, State, MAX_CLOCK_SEQS};
    /// let layout = Layout::CLOCKSEQ;
    /// let t = 1_735_689_600_000;
    /// let mut state = State {
    ///     layout_fingerprint: layout.fingerprint(),
    ///     worker_id: 1,
    ///     clock_seq: 0,
    ///     high_water_ms: [None; MAX_CLOCK_SEQS],
    /// };
    /// state.reserve(t);
    /// assert_eq!(state.resume_point(&layout, t + 1), (0, 0)); // past the mark: stay
    /// assert_eq!(state.resume_point(&layout, t - 60_000), (1, 0)); // behind it: the next one
    /// ```
    pub fn resume_point(&self, layout: &Layout, now_ms: u64) -> (u64, u64) {
        let count = layout.clock_seqs();
        let tick = |ms: u64| ms.saturating_sub(layout.epoch_ms()) / layout.unit_ms();
        let now_tick = tick(now_ms);
        let mark_of = |k: u64| self.high_water_ms.get(k as usize).copied().flatten();
        for step in 0..count {
            let k = (self.clock_seq + step) % count;
            match mark_of(k) {
                None => return (k, 0),
                Some(mark) if tick(mark) < now_tick => return (k, 0),
                Some(_) => {}
            }
        }
        let (k, mark) = (0..count)
            .filter_map(|k| Some((k, mark_of(k)?)))
            .min_by_key(|&(_, mark)| mark)
            .unwrap_or((self.clock_seq, now_ms));
        (k, layout.tick_to_ms(tick(mark) + 1))
    }
}

/// Generates ids for one worker id. Share it between threads by reference: every method takes
/// `&self`, and the fast path is one lock-free compare-and-swap.
///
/// The generator reads no clock: [`Generator::next_id_at`] is handed the time, and
/// [`Generator::try_next_id_with`] a [`Clock`]. With the `std` feature,
/// [`Generator::next_id`] reads the system's monotonic clock and waits out sequence exhaustion.
///
/// ```
/// use clockflake::{Generator, Layout, Options};
/// let gen = Generator::new(Layout::CLOCKSEQ, 7, Options::default())?;
/// let t = 1_735_689_600_000; // 2025-01-01T00:00:00Z
/// let a = gen.next_id_at(t)?;
/// let b = gen.next_id_at(t)?;
/// assert!(b > a);
/// // The clock steps back one second: the generator moves to another clock sequence.
/// let c = gen.next_id_at(t - 1000)?;
/// assert_eq!(Layout::CLOCKSEQ.decode(c)?.clock_seq, 1);
/// # Ok::<(), clockflake::Error>(())
/// ```
pub struct Generator {
    /// The last id issued, or [`FRESH`] with the clock sequence to start in.
    last: AtomicU64,
    /// Per clock sequence `k`: 1 + the greatest tick issued with `k` before the generator last
    /// switched away from it; 0 if never. The current sequence's own mark is in `last`.
    high_water: [AtomicU64; MAX_CLOCK_SEQS],
    /// Held by the slow path and by [`Generator::state`], never by the fast path.
    slow_path: AtomicBool,
    layout: Layout,
    worker_id: u64,
    policy: Policy,
    max_wait_ms: u64,
    max_drift_ms: u64,
    // Constants of the fast path, derived from the layout.
    worker_in_place: u64,
    timestamp_shift: u32,
    max_tick: u64,
    clock_seq_mask: u64,
    sequence_mask: u64,
    sequence_one: u64,
    sequence_shift: u32,
    sequences_per_tick: u64,
    epoch_ms: u64,
    unit_ms: u64,
}

/// An id decided on by the slow path.
struct Decision {
    id: u64,
    /// Set when the id is in another clock sequence than the last one issued: the clock
    /// sequence left behind, whose mark must be raised past its last tick.
    leaves: Option<LeftClockSeq>,
}

/// A clock sequence a switch leaves, and the last tick issued in it.
struct LeftClockSeq {
    clock_seq: u64,
    last_tick: u64,
}

impl Decision {
    fn stay(id: u64) -> Result<Decision, Error> {
        Ok(Decision { id, leaves: None })
    }
}

impl Generator {
    /// A generator that has issued nothing, starting in clock sequence 0.
    ///
    /// Fails with `WORKER_ID_OUT_OF_RANGE` if the worker id does not fit the layout.
    pub fn new(layout: Layout, worker_id: u64, options: Options) -> Result<Generator, Error> {
        Generator::build(layout, worker_id, options, FRESH, [None; MAX_CLOCK_SEQS])
    }

    /// Continues from a saved [`State`] (after a restart, or taking over a worker id).
    ///
    /// Nothing is issued at or below a high-water mark in its clock sequence: if the clock is
    /// now behind the current sequence's mark, the first id switches clock sequence (or waits,
    /// or refuses, as the policy says).
    ///
    /// ```
    /// use clockflake::{Generator, Layout, Options};
    /// let t = 1_735_689_600_000;
    /// let before = Generator::new(Layout::CLOCKSEQ, 3, Options::default())?;
    /// let last = before.next_id_at(t)?;
    /// let after = Generator::resume(Layout::CLOCKSEQ, &before.state(), Options::default())?;
    /// let next = after.next_id_at(t - 3_600_000)?; // restarted with the clock an hour behind
    /// assert_ne!(next, last);
    /// assert_eq!(Layout::CLOCKSEQ.decode(next)?.clock_seq, 1);
    /// # Ok::<(), clockflake::Error>(())
    /// ```
    pub fn resume(layout: Layout, state: &State, options: Options) -> Result<Generator, Error> {
        let invalid = |problem| Err(Error::InvalidState(problem));
        if state.layout_fingerprint != layout.fingerprint() {
            return invalid(StateProblem::LayoutMismatch {
                expected: layout.fingerprint(),
                found: state.layout_fingerprint,
            });
        }
        if state.clock_seq >= layout.clock_seqs() {
            return invalid(StateProblem::ClockSeqOutOfRange);
        }
        let mut ticks = [None; MAX_CLOCK_SEQS];
        for (k, (mark, tick)) in state.high_water_ms.iter().zip(&mut ticks).enumerate() {
            let Some(ms) = *mark else { continue };
            if k as u64 >= layout.clock_seqs() {
                return invalid(StateProblem::HighWaterOutOfRange);
            }
            *tick = Some(
                layout
                    .tick_of(ms)
                    .map_err(|_| Error::InvalidState(StateProblem::HighWaterOutOfRange))?,
            );
        }
        let cs = state.clock_seq;
        // Treat the current sequence's mark as a tick whose every sequence number is used.
        let last = match ticks.get(cs as usize).copied().flatten() {
            Some(tick) => {
                layout.compose(tick, cs, state.worker_id, layout.field_max(Field::Sequence))
            }
            None => FRESH | layout.compose(0, cs, 0, 0),
        };
        Generator::build(layout, state.worker_id, options, last, ticks)
    }

    fn build(
        layout: Layout,
        worker_id: u64,
        options: Options,
        last: u64,
        ticks: [Option<u64>; MAX_CLOCK_SEQS],
    ) -> Result<Generator, Error> {
        if worker_id > layout.max_worker_id() {
            return Err(Error::WorkerIdOutOfRange {
                worker_id,
                max: layout.max_worker_id(),
            });
        }
        let in_place = |field: Field| layout.field_max(field) << layout.shift(field);
        Ok(Generator {
            last: AtomicU64::new(last),
            high_water: ticks.map(|tick| AtomicU64::new(tick.map_or(0, |t| t + 1))),
            slow_path: AtomicBool::new(false),
            layout,
            worker_id,
            policy: options.policy_for(&layout),
            max_wait_ms: options.max_wait_ms,
            max_drift_ms: options.max_drift_ms,
            worker_in_place: worker_id << layout.shift(Field::Worker),
            timestamp_shift: layout.shift(Field::Timestamp),
            max_tick: layout.field_max(Field::Timestamp),
            clock_seq_mask: in_place(Field::ClockSeq),
            sequence_mask: in_place(Field::Sequence),
            sequence_one: 1 << layout.shift(Field::Sequence),
            sequence_shift: layout.shift(Field::Sequence),
            sequences_per_tick: layout.field_max(Field::Sequence) + 1,
            epoch_ms: layout.epoch_ms(),
            unit_ms: layout.unit_ms(),
        })
    }

    /// The layout ids are issued under.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The worker id.
    pub fn worker_id(&self) -> u64 {
        self.worker_id
    }

    /// The rollback policy in force.
    pub fn policy(&self) -> Policy {
        self.policy
    }

    /// The options in force (with the policy resolved).
    pub fn options(&self) -> Options {
        Options {
            on_rollback: Some(self.policy),
            max_wait_ms: self.max_wait_ms,
            max_drift_ms: self.max_drift_ms,
        }
    }

    /// The longest a blocking call waits for the next tick when the current one is full
    /// (1000 ms): a layout with long ticks (a 1-day unit, say) refuses at once with
    /// `SEQUENCE_EXHAUSTED` and its `retry_at_ms` instead of sleeping until then. Waits for the
    /// clock after a step back are bounded by the generator's `max_wait_ms` (the core names a
    /// retry time only within it).
    pub const MAX_TICK_WAIT_MS: u64 = 1000;

    /// When a blocking call that got `error` at `now_ms` waits and tries again: the error's
    /// retry time, if it has one and the wait is within the bounds of
    /// [`Generator::MAX_TICK_WAIT_MS`] (a full tick) or `max_wait_ms` (the clock went back).
    /// `None`: return the error at once.
    ///
    /// ```
    /// use clockflake::{Error, Generator};
    /// let full = Error::SequenceExhausted { retry_at_ms: 5_000 };
    /// assert_eq!(Generator::blocking_retry_at(&full, 4_999), Some(5_000));
    /// assert_eq!(Generator::blocking_retry_at(&full, 1_000), None); // 4 s away: refuse
    /// ```
    pub fn blocking_retry_at(error: &Error, now_ms: u64) -> Option<u64> {
        let at = error.retry_at_ms()?;
        match error {
            Error::SequenceExhausted { .. }
                if at.saturating_sub(now_ms) > Generator::MAX_TICK_WAIT_MS =>
            {
                None
            }
            _ => Some(at),
        }
    }

    /// The next id at an explicit time (Unix ms). Never blocks: where the blocking call would
    /// wait, it refuses with the time to retry at ([`Error::retry_at_ms`]).
    #[inline]
    pub fn next_id_at(&self, now_ms: u64) -> Result<u64, Error> {
        self.issue(&mut || Ok(now_ms))
    }

    /// [`Generator::next_id_at`] for a generator this thread owns (`&mut`): the same rules and
    /// the same state, without the atomic instruction on the fast path.
    ///
    /// ```
    /// use clockflake::{Generator, Layout, Options};
    /// let mut gen = Generator::new(Layout::CLOCKSEQ, 7, Options::default())?;
    /// let a = gen.next_id_at_mut(1_735_689_600_000)?;
    /// assert!(gen.next_id_at(1_735_689_600_000)? > a);
    /// # Ok::<(), clockflake::Error>(())
    /// ```
    #[inline]
    pub fn next_id_at_mut(&mut self, now_ms: u64) -> Result<u64, Error> {
        let tick = self.tick_unchecked(now_ms);
        let last = sync::load_mut(&mut self.last);
        match self.fast_room(last, tick) {
            Some((next, _)) => {
                sync::store_mut(&mut self.last, next);
                Ok(next)
            }
            None => self.issue_slow(&mut || Ok(now_ms)),
        }
    }

    /// The next id, reading `clock` after the generator's state so that a thread never takes
    /// another thread's newer id for a clock step back. Never blocks.
    #[inline]
    pub fn try_next_id_with<C: Clock + ?Sized>(&self, clock: &C) -> Result<u64, Error> {
        self.issue(&mut || clock.try_now_ms())
    }

    /// The next id at the time `now` gives, read after the generator's state as
    /// [`Generator::try_next_id_with`] reads its clock; `now` may refuse with an error of its
    /// own type (a lease at its deadline), and the generator then issues nothing and returns
    /// that refusal. Core's own refusals come back converted with `From<Error>`.
    ///
    /// ```
    /// use clockflake::{Error, Generator, Layout, Options};
    /// #[derive(Debug, PartialEq)]
    /// enum Refused { Expired, Core(Error) }
    /// impl From<Error> for Refused {
    ///     fn from(error: Error) -> Refused { Refused::Core(error) }
    /// }
    /// let gen = Generator::new(Layout::CLOCKSEQ, 7, Options::default())?;
    /// let deadline_ms = 1_735_689_600_010;
    /// let covered = |now_ms: u64| match now_ms < deadline_ms {
    ///     true => Ok(now_ms),
    ///     false => Err(Refused::Expired),
    /// };
    /// assert!(gen.try_next_id_from(|| covered(deadline_ms - 10)).is_ok());
    /// assert_eq!(gen.try_next_id_from(|| covered(deadline_ms)), Err(Refused::Expired));
    /// # Ok::<(), clockflake::Error>(())
    /// ```
    #[inline]
    pub fn try_next_id_from<E: From<Error>>(
        &self,
        mut now: impl FnMut() -> Result<u64, E>,
    ) -> Result<u64, E> {
        self.issue(&mut now)
    }

    /// Up to `max_count` consecutive ids of one tick at an explicit time, taken in one atomic
    /// step: as many as the tick still holds (a whole tick's worth when the clock moved on).
    /// The cases the slow path decides (the very first id, the clock going back, a full tick
    /// left behind) give a block of one id. Never blocks; an empty block only when
    /// `max_count` is 0.
    pub fn next_block_at(&self, now_ms: u64, max_count: u64) -> Result<IdBlock, Error> {
        self.issue_block(&mut || Ok(now_ms), max_count)
    }

    /// [`Generator::next_block_at`], reading `clock` after the generator's state.
    pub fn try_next_block_with<C: Clock + ?Sized>(
        &self,
        clock: &C,
        max_count: u64,
    ) -> Result<IdBlock, Error> {
        self.issue_block(&mut || clock.try_now_ms(), max_count)
    }

    /// [`Generator::next_block_at`] at the time `now` gives, which may refuse with an error of
    /// its own type, as in [`Generator::try_next_id_from`].
    #[inline]
    pub fn try_next_block_from<E: From<Error>>(
        &self,
        mut now: impl FnMut() -> Result<u64, E>,
        max_count: u64,
    ) -> Result<IdBlock, E> {
        self.issue_block(&mut now, max_count)
    }

    #[inline(always)]
    fn issue<E: From<Error>, T: FnMut() -> Result<u64, E>>(&self, now: &mut T) -> Result<u64, E> {
        let mut last = self.last.load(Ordering::Acquire);
        loop {
            let Some((next, _)) = self.fast_room(last, self.tick_unchecked(now()?)) else {
                return self.issue_slow(now);
            };
            match self
                .last
                .compare_exchange_weak(last, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return Ok(next),
                Err(actual) => last = actual,
            }
        }
    }

    fn issue_block<E: From<Error>, T: FnMut() -> Result<u64, E>>(
        &self,
        now: &mut T,
        max_count: u64,
    ) -> Result<IdBlock, E> {
        if max_count == 0 {
            return Ok(IdBlock::EMPTY);
        }
        let mut last = self.last.load(Ordering::Acquire);
        loop {
            let Some((first, room)) = self.fast_room(last, self.tick_unchecked(now()?)) else {
                return self.issue_slow(now).map(|id| self.block(id, 1));
            };
            let count = room.min(max_count);
            let block_last = first + (count - 1) * self.sequence_one;
            match self.last.compare_exchange_weak(
                last,
                block_last,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return Ok(self.block(first, count)),
                Err(actual) => last = actual,
            }
        }
    }

    /// `count` ids from `first`, served within their tick.
    #[inline(always)]
    fn block(&self, first: u64, count: u64) -> IdBlock {
        let tick_ms = self.epoch_ms + (first >> self.timestamp_shift) * self.unit_ms;
        IdBlock::within_tick(first, count, self.sequence_one, tick_ms)
    }

    /// The tick of `now_ms`, wrapping to a huge value before the epoch (caught by `max_tick`).
    #[inline(always)]
    fn tick_unchecked(&self, now_ms: u64) -> u64 {
        let since_epoch = now_ms.wrapping_sub(self.epoch_ms);
        if self.unit_ms == 1 {
            since_epoch
        } else {
            since_epoch / self.unit_ms
        }
    }

    /// The common case: the clock moved on, or this tick still has sequence numbers. Returns the
    /// next id and how many consecutive ids from it the tick still holds.
    #[inline(always)]
    fn fast_room(&self, last: u64, tick: u64) -> Option<(u64, u64)> {
        if tick > self.max_tick {
            return None;
        }
        let last_tick = last >> self.timestamp_shift; // above max_tick when FRESH
        if tick > last_tick {
            let first = (tick << self.timestamp_shift)
                | (last & self.clock_seq_mask)
                | self.worker_in_place;
            return Some((first, self.sequences_per_tick));
        }
        let used = last & self.sequence_mask;
        if tick == last_tick && used != self.sequence_mask {
            let room = (self.sequence_mask - used) >> self.sequence_shift;
            return Some((last + self.sequence_one, room));
        }
        None
    }

    /// Everything else: the first id, a full tick, the clock before the epoch or past the
    /// layout's lifetime, and the clock going back.
    #[cold]
    #[inline(never)]
    fn issue_slow<E: From<Error>>(
        &self,
        now: &mut dyn FnMut() -> Result<u64, E>,
    ) -> Result<u64, E> {
        let _lock = self.lock_slow_path();
        loop {
            let last = self.last.load(Ordering::Acquire);
            let now_ms = now()?;
            let tick = self.layout.tick_of(now_ms)?;
            let decision = self.decide(last, tick, now_ms)?;
            if self
                .last
                .compare_exchange(last, decision.id, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                if let Some(left) = decision.leaves {
                    (self.mark(left.clock_seq)).fetch_max(left.last_tick + 1, Ordering::Relaxed);
                }
                return Ok(decision.id);
            }
        }
    }

    /// The rules of DESIGN.md, for a tick known to be within the layout's lifetime.
    fn decide(&self, last: u64, tick: u64, now_ms: u64) -> Result<Decision, Error> {
        let layout = &self.layout;
        let cs = layout.extract(last & !FRESH, Field::ClockSeq);
        if last & FRESH != 0 {
            return Decision::stay(layout.compose(tick, cs, self.worker_id, 0));
        }
        let last_tick = layout.extract(last, Field::Timestamp);
        let sequence_full = last & self.sequence_mask == self.sequence_mask;
        if tick > last_tick {
            return Decision::stay(layout.compose(tick, cs, self.worker_id, 0));
        }
        if tick == last_tick && !sequence_full {
            return Decision::stay(last + self.sequence_one);
        }
        let last_ms = layout.tick_to_ms(last_tick);
        let next_tick_ms = layout.tick_to_ms(last_tick + 1);
        match self.policy {
            Policy::Logical => self.run_ahead(last, tick, now_ms),
            _ if tick == last_tick => Err(Error::SequenceExhausted {
                retry_at_ms: next_tick_ms,
            }),
            Policy::Fail => Err(Error::ClockMovedBackwards {
                last_ms,
                now_ms,
                retry_at_ms: None,
            }),
            Policy::Wait => Err(Error::ClockMovedBackwards {
                last_ms,
                now_ms,
                retry_at_ms: self.within_wait(next_tick_ms, now_ms),
            }),
            Policy::ClockSequence => self.switch_clock_seq(cs, last_tick, tick, now_ms),
        }
    }

    /// `logical`: issue at the last tick while it has room, then one tick ahead of it, as long
    /// as that stays within `max_drift_ms` of the clock.
    fn run_ahead(&self, last: u64, tick: u64, now_ms: u64) -> Result<Decision, Error> {
        let layout = &self.layout;
        if last & self.sequence_mask != self.sequence_mask {
            return Decision::stay(last + self.sequence_one);
        }
        let last_tick = layout.extract(last, Field::Timestamp);
        let next_tick = last_tick + 1;
        if next_tick > self.max_tick {
            return Err(Error::TimestampExhausted {
                now_ms,
                lifetime_end_ms: layout.lifetime_end_ms(),
            });
        }
        let drift_ticks = self.max_drift_ms / self.unit_ms;
        if next_tick <= tick + drift_ticks {
            let cs = layout.extract(last, Field::ClockSeq);
            return Decision::stay(layout.compose(next_tick, cs, self.worker_id, 0));
        }
        let retry_at_ms = layout.tick_to_ms(next_tick - drift_ticks);
        if tick < last_tick {
            Err(Error::ClockMovedBackwards {
                last_ms: layout.tick_to_ms(last_tick),
                now_ms,
                retry_at_ms: self.within_wait(retry_at_ms, now_ms),
            })
        } else {
            Err(Error::SequenceExhausted { retry_at_ms })
        }
    }

    /// `clock-sequence`: the next sequence after `cs` in rotation whose mark is below `tick`.
    fn switch_clock_seq(
        &self,
        cs: u64,
        last_tick: u64,
        tick: u64,
        now_ms: u64,
    ) -> Result<Decision, Error> {
        let count = self.layout.clock_seqs();
        // 1 + the greatest tick issued with k; 0 if never.
        let mark = |k: u64| {
            let stored = self.mark(k).load(Ordering::Relaxed);
            if k == cs {
                stored.max(last_tick + 1)
            } else {
                stored
            }
        };
        for step in 1..count {
            let k = (cs + step) % count;
            if mark(k) <= tick {
                return Ok(Decision {
                    id: self.layout.compose(tick, k, self.worker_id, 0),
                    leaves: Some(LeftClockSeq {
                        clock_seq: cs,
                        last_tick,
                    }),
                });
            }
        }
        let first_free_tick = (0..count).map(mark).min().unwrap_or(last_tick + 1);
        Err(Error::ClockSequenceExhausted {
            now_ms,
            retry_at_ms: self.within_wait(self.layout.tick_to_ms(first_free_tick), now_ms),
        })
    }

    fn within_wait(&self, retry_at_ms: u64, now_ms: u64) -> Option<u64> {
        (retry_at_ms.saturating_sub(now_ms) <= self.max_wait_ms).then_some(retry_at_ms)
    }

    fn mark(&self, clock_seq: u64) -> &AtomicU64 {
        // clock_seq < layout.clock_seqs() <= MAX_CLOCK_SEQS, so the mask never changes it.
        &self.high_water[clock_seq as usize % MAX_CLOCK_SEQS]
    }

    /// A snapshot of the state to save. Ids issued after the call are not in it: save it after
    /// the last id, or [`State::reserve`] ahead and never issue past the reservation.
    pub fn state(&self) -> State {
        let _lock = self.lock_slow_path();
        let last = self.last.load(Ordering::Acquire);
        let cs = self.layout.extract(last & !FRESH, Field::ClockSeq);
        let mut high_water_ms = [None; MAX_CLOCK_SEQS];
        for (k, slot) in high_water_ms.iter_mut().enumerate() {
            let mut stored = self.high_water[k].load(Ordering::Relaxed);
            if k as u64 == cs && last & FRESH == 0 {
                stored = stored.max(self.layout.extract(last, Field::Timestamp) + 1);
            }
            *slot = stored
                .checked_sub(1)
                .map(|tick| self.layout.tick_to_ms(tick));
        }
        State {
            layout_fingerprint: self.layout.fingerprint(),
            worker_id: self.worker_id,
            clock_seq: cs,
            high_water_ms,
        }
    }

    fn lock_slow_path(&self) -> SlowPathGuard<'_> {
        while self
            .slow_path
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            sync::spin_loop();
        }
        SlowPathGuard(&self.slow_path)
    }
}

struct SlowPathGuard<'a>(&'a AtomicBool);

impl Drop for SlowPathGuard<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

impl fmt::Debug for Generator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Generator")
            .field("layout", &self.layout)
            .field("worker_id", &self.worker_id)
            .field("policy", &self.policy)
            .field("max_wait_ms", &self.max_wait_ms)
            .field("max_drift_ms", &self.max_drift_ms)
            .finish_non_exhaustive()
    }
}
