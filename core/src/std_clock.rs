//! System clocks and the blocking conveniences (feature `std`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::{wait_step, Clock, Error, Generator, WaitStep};

/// The wall clock as it is, steps back included.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        wall_ms()
    }
}

fn wall_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, millis)
}

fn millis(duration: Duration) -> u64 {
    // Not `as_millis()`: its u128 division costs more than the clock read.
    duration.as_secs() * 1000 + u64::from(duration.subsec_millis())
}

/// How often the monotonic clock compares itself with the wall clock.
const REANCHOR_EVERY_MS: u64 = 1000;

/// Wall-clock time that does not step back for small steps while the process runs: the
/// monotonic clock, anchored to the wall clock at start.
///
/// Once a second it looks at the wall clock again. It follows it forward (after a suspend, or a
/// wall clock set right) at once. It smooths small steps back (an NTP step of a few hundred ms):
/// it keeps reading ahead of the wall clock, never back. Once the wall clock reads more than
/// [`MonotonicClock::FOLLOW_BACK_AFTER_MS`] (1 s) behind it, it follows it back, so that an
/// excursion to the future (a clock mis-set, then corrected) does not leave ids carrying a
/// future time for the rest of the process; the generator's rollback policy handles that step
/// (under `clock-sequence`, a new clock sequence). So a generator on this clock sees the wall
/// clock step back only by more than a second, and at most a second after it happened.
#[derive(Debug)]
pub struct MonotonicClock {
    origin: Instant,
    /// Wall-clock Unix ms at `origin`: raised when the wall clock is found ahead, lowered when
    /// it is found more than `FOLLOW_BACK_AFTER_MS` behind.
    wall_at_origin_ms: AtomicU64,
    /// Monotonic ms since `origin` at which to look at the wall clock again.
    next_check_ms: AtomicU64,
}

impl MonotonicClock {
    /// How far the wall clock may read behind this clock and still be smoothed over (1000 ms);
    /// beyond it, the clock follows the wall clock back at its next look (within a second).
    pub const FOLLOW_BACK_AFTER_MS: u64 = 1000;

    /// A clock anchored to the wall clock now.
    pub fn new() -> MonotonicClock {
        let origin = Instant::now();
        MonotonicClock {
            origin,
            wall_at_origin_ms: AtomicU64::new(wall_ms()),
            next_check_ms: AtomicU64::new(REANCHOR_EVERY_MS),
        }
    }

    /// The process-wide clock used by [`Generator::next_id`].
    pub fn global() -> &'static MonotonicClock {
        static GLOBAL: OnceLock<MonotonicClock> = OnceLock::new();
        GLOBAL.get_or_init(MonotonicClock::new)
    }

    /// Looks at the wall clock again; one thread per check (the one that moves `next_check_ms`
    /// on), the others keep reading the anchor they have.
    #[cold]
    fn reanchor(&self, elapsed_ms: u64, due_ms: u64) {
        if self
            .next_check_ms
            .compare_exchange(
                due_ms,
                elapsed_ms + REANCHOR_EVERY_MS,
                Ordering::Relaxed,
                Ordering::Relaxed,
            )
            .is_err()
        {
            return;
        }
        let wall_at_origin = wall_ms().saturating_sub(elapsed_ms);
        let anchor = self.wall_at_origin_ms.load(Ordering::Relaxed);
        self.wall_at_origin_ms
            .store(next_anchor(anchor, wall_at_origin), Ordering::Relaxed);
    }
}

/// The anchor after a look at the wall clock: the wall clock's when it is ahead, or more than
/// `FOLLOW_BACK_AFTER_MS` behind; the current one when it is behind by less (smoothed).
fn next_anchor(anchor_ms: u64, wall_anchor_ms: u64) -> u64 {
    if wall_anchor_ms > anchor_ms
        || anchor_ms - wall_anchor_ms > MonotonicClock::FOLLOW_BACK_AFTER_MS
    {
        wall_anchor_ms
    } else {
        anchor_ms
    }
}

impl Default for MonotonicClock {
    fn default() -> Self {
        MonotonicClock::new()
    }
}

impl Clock for MonotonicClock {
    #[inline]
    fn now_ms(&self) -> u64 {
        let elapsed_ms = millis(self.origin.elapsed());
        let due_ms = self.next_check_ms.load(Ordering::Relaxed);
        if elapsed_ms >= due_ms {
            self.reanchor(elapsed_ms, due_ms);
        }
        self.wall_at_origin_ms.load(Ordering::Relaxed) + elapsed_ms
    }
}

impl Generator {
    /// The next id, on the process's [`MonotonicClock`]. Waits out sequence exhaustion (until
    /// the next tick, never borrowing future time, if it starts within
    /// [`Generator::MAX_TICK_WAIT_MS`]) and the short waits the policy allows (`max_wait_ms`);
    /// refuses at once, with `retry_at_ms`, where the wait would be longer.
    ///
    /// ```
    /// use clockflake::{Generator, Layout, Options};
    /// let gen = Generator::new(Layout::CLOCKSEQ, 1, Options::default())?;
    /// let (a, b) = (gen.next_id()?, gen.next_id()?);
    /// assert!(b > a);
    /// # Ok::<(), clockflake::Error>(())
    /// ```
    #[inline]
    pub fn next_id(&self) -> Result<u64, Error> {
        self.next_id_with(MonotonicClock::global())
    }

    /// [`Generator::next_id`] on a clock of your choice.
    #[inline]
    pub fn next_id_with<C: Clock + ?Sized>(&self, clock: &C) -> Result<u64, Error> {
        let first = self.try_next_id_with(clock);
        if first.is_ok() {
            return first;
        }
        retry_after(clock, first, || self.try_next_id_with(clock), pass_time)
    }

    /// Fills `out` with new ids, consecutive within each tick, taking whole runs of a tick at
    /// once. Waits for the next tick when one is full, like [`Generator::next_id`] (and refuses
    /// where it would; the ids already taken are then lost).
    pub fn next_ids_with<C: Clock + ?Sized>(
        &self,
        clock: &C,
        out: &mut [u64],
    ) -> Result<(), Error> {
        let mut slots = out.iter_mut();
        while slots.len() > 0 {
            let wanted = slots.len() as u64;
            let attempt = || self.try_next_block_with(clock, wanted);
            let first = attempt();
            let block = if first.is_ok() {
                first
            } else {
                retry_after(clock, first, attempt, pass_time)
            }?;
            // The block first: `zip` must not take a slot the block has no id for.
            for (id, slot) in block.zip(slots.by_ref()) {
                *slot = id;
            }
        }
        Ok(())
    }
}

/// The one retry loop of every blocking call, in core and in the bindings: waits for the time
/// a refusal names and tries again, until success or a final refusal (one without a retry
/// time, or whose wait [`Generator::blocking_retry_at`] finds too long). `outcome` is the
/// first attempt's; each wait runs [`wait_until`] with `pause`, the caller's way of passing
/// time.
///
/// ```
/// use clockflake::{retry_after, Error, Generator, Layout, Options};
/// let gen = Generator::new(Layout::CLOCKSEQ, 1, Options::default())?;
/// let clock = clockflake::MonotonicClock::global();
/// let first = gen.try_next_id_with(clock);
/// let id = retry_after(clock, first, || gen.try_next_id_with(clock), |pause| {
///     std::thread::sleep(pause.unwrap_or_default());
///     Ok::<(), Error>(())
/// })?;
/// assert!(id > 0);
/// # Ok::<(), Error>(())
/// ```
#[cold]
pub fn retry_after<C, T, E>(
    clock: &C,
    mut outcome: Result<T, Error>,
    mut attempt: impl FnMut() -> Result<T, Error>,
    mut pause: impl FnMut(Option<Duration>) -> Result<(), E>,
) -> Result<T, E>
where
    C: Clock + ?Sized,
    E: From<Error>,
{
    loop {
        match outcome {
            Ok(value) => return Ok(value),
            Err(error) => match Generator::blocking_retry_at(&error, clock.now_ms()) {
                Some(at) => wait_until(clock, at, &mut pause)?,
                None => return Err(error.into()),
            },
        }
        outcome = attempt();
    }
}

/// How a thread with nothing else to do passes time in [`wait_until`] and [`retry_after`]
/// (core's own blocking calls, the lease's): a sleep, or a spin through the last 2 ms.
pub fn sleep_or_spin(pause: Option<Duration>) {
    match pause {
        Some(duration) => std::thread::sleep(duration),
        None => core::hint::spin_loop(),
    }
}

/// [`sleep_or_spin`] as the pause of core's blocking calls.
fn pass_time(pause: Option<Duration>) -> Result<(), Error> {
    sleep_or_spin(pause);
    Ok(())
}

/// The one wait loop of every blocking call, in core and in the bindings, on [`wait_step`]'s
/// rule: reads `clock` until it reaches `at_ms`, handing each pause to `pause`: `Some(duration)`
/// (sleep about that long; the rest of the wait minus a millisecond) while more than 2 ms
/// remain, then `None` (spin once, or sleep a few microseconds) through the last 2 ms. `pause`
/// is how the caller passes time: a plain sleep here, the GIL released and signals checked in
/// Python; an error it returns ends the wait. A clock that does not get there within the wait
/// plus a second of real time is reported as `CLOCK_NOT_ADVANCING` rather than waited on forever.
///
/// ```
/// use clockflake::{wait_until, Error};
/// let reads = std::cell::Cell::new(0u64);
/// let clock = || { reads.set(reads.get() + 1); 1_000 + reads.get() };
/// let mut pauses = 0;
/// wait_until(&clock, 1_010, |_| { pauses += 1; Ok::<(), Error>(()) })?;
/// assert_eq!(pauses, 9);
/// # Ok::<(), Error>(())
/// ```
pub fn wait_until<C, E>(
    clock: &C,
    at_ms: u64,
    mut pause: impl FnMut(Option<Duration>) -> Result<(), E>,
) -> Result<(), E>
where
    C: Clock + ?Sized,
    E: From<Error>,
{
    let start_ms = clock.now_ms();
    let started = Instant::now();
    let mut now_ms = start_ms;
    loop {
        let elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        match wait_step(at_ms, start_ms, now_ms, elapsed_ms)? {
            WaitStep::Done => return Ok(()),
            WaitStep::Sleep(ms) => pause(Some(Duration::from_millis(ms)))?,
            WaitStep::Spin => pause(None)?,
        }
        now_ms = clock.now_ms();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Layout, Options};
    use std::sync::atomic::AtomicU64;

    #[test]
    fn monotonic_clock_tracks_the_wall_clock() {
        let clock = MonotonicClock::new();
        let (wall, mono) = (wall_ms(), clock.now_ms());
        assert!(mono.abs_diff(wall) < 50, "{mono} vs {wall}");
    }

    #[test]
    fn the_anchor_follows_forward_smooths_small_steps_back_and_follows_big_ones() {
        let anchor = 1_735_689_600_000;
        assert_eq!(next_anchor(anchor, anchor + 1), anchor + 1);
        assert_eq!(next_anchor(anchor, anchor + 3_600_000), anchor + 3_600_000);
        assert_eq!(next_anchor(anchor, anchor), anchor);
        assert_eq!(next_anchor(anchor, anchor - 300), anchor); // an NTP step: smoothed
        let bound = MonotonicClock::FOLLOW_BACK_AFTER_MS;
        assert_eq!(next_anchor(anchor, anchor - bound), anchor);
        assert_eq!(next_anchor(anchor, anchor - bound - 1), anchor - bound - 1);
        assert_eq!(next_anchor(anchor, anchor - 3_600_000), anchor - 3_600_000);
    }

    #[test]
    fn a_long_wait_for_the_next_tick_is_refused_a_short_one_taken() {
        let max = Generator::MAX_TICK_WAIT_MS;
        let full = Error::SequenceExhausted {
            retry_at_ms: 10_000,
        };
        assert_eq!(
            Generator::blocking_retry_at(&full, 10_000 - max),
            Some(10_000)
        );
        assert_eq!(Generator::blocking_retry_at(&full, 10_000 - max - 1), None);
        assert_eq!(Generator::blocking_retry_at(&full, 20_000), Some(10_000));
        // Clock refusals: the core already bounded them by max_wait_ms.
        let back = Error::ClockMovedBackwards {
            last_ms: 9_000,
            now_ms: 4_000,
            retry_at_ms: Some(9_001),
        };
        assert_eq!(Generator::blocking_retry_at(&back, 4_000), Some(9_001));
        let final_refusal = Error::ClockSequenceExhausted {
            now_ms: 4_000,
            retry_at_ms: None,
        };
        assert_eq!(Generator::blocking_retry_at(&final_refusal, 4_000), None);
    }

    #[test]
    fn blocking_call_waits_for_the_next_tick_instead_of_repeating() {
        // A clock that advances 1 ms every 10,000 reads: the 4097th id must wait for it.
        let reads = AtomicU64::new(0);
        let base = 1_735_689_600_000;
        let clock = || base + reads.fetch_add(1, Ordering::Relaxed) / 10_000;
        let gen = Generator::new(Layout::CLOCKSEQ, 1, Options::default()).unwrap();
        let mut ids = std::vec![0u64; 5000];
        gen.next_ids_with(&clock, &mut ids).unwrap();
        for (i, w) in ids.windows(2).enumerate() {
            assert!(
                w[0] < w[1],
                "{i}: {w:?} {:?} {:?}",
                Layout::CLOCKSEQ.decode(w[0]),
                Layout::CLOCKSEQ.decode(w[1])
            );
        }
        let parts = Layout::CLOCKSEQ.decode(ids[4096]).unwrap();
        assert!(parts.timestamp_ms > base);
        assert_eq!(parts.sequence, 0);
    }

    #[test]
    fn a_frozen_clock_is_reported_not_waited_on_forever() {
        let gen = Generator::new(Layout::JS53, 1, Options::default()).unwrap();
        let frozen = || 1_735_689_600_000u64;
        for _ in 0..(1 << 15) {
            gen.next_id_with(&frozen).unwrap();
        }
        let error = gen.next_id_with(&frozen).unwrap_err();
        assert_eq!(error.code(), "CLOCK_NOT_ADVANCING");
    }
}
