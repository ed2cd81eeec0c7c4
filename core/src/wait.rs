//! The rule of every wait for the clock, in core and in the bindings, without a clock or a
//! sleep of its own: `std`'s [`crate::wait_until`] runs it on threads, the JavaScript
//! package on `Atomics.wait`.

use crate::Error;

/// What a wait for the clock does next ([`wait_step`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitStep {
    /// The clock reads the time waited for: stop.
    Done,
    /// Sleep about this many ms (the rest of the wait less a millisecond), then read the clock.
    Sleep(u64),
    /// Spin once, or sleep a few microseconds, then read the clock: the last 2 ms.
    Spin,
}

/// One step of a wait for the clock to read `at_ms`: the wait began when the clock read
/// `start_ms`, it reads `now_ms` now, and `elapsed_ms` of real time have passed. A clock that
/// has not got there within the wait plus a second of real time is refused with
/// `CLOCK_NOT_ADVANCING`, rather than waited on forever.
///
/// ```
/// use clockflake::{wait_step, WaitStep};
/// assert_eq!(wait_step(1_010, 1_000, 1_000, 0), Ok(WaitStep::Sleep(9)));
/// assert_eq!(wait_step(1_010, 1_000, 1_008, 8), Ok(WaitStep::Spin));
/// assert_eq!(wait_step(1_010, 1_000, 1_010, 10), Ok(WaitStep::Done));
/// assert!(wait_step(1_010, 1_000, 1_000, 1_011).is_err()); // the clock stood still
/// ```
pub const fn wait_step(
    at_ms: u64,
    start_ms: u64,
    now_ms: u64,
    elapsed_ms: u64,
) -> Result<WaitStep, Error> {
    if now_ms >= at_ms {
        return Ok(WaitStep::Done);
    }
    if elapsed_ms > at_ms.saturating_sub(start_ms).saturating_add(1000) {
        return Err(Error::ClockNotAdvancing {
            waiting_for_ms: at_ms,
            now_ms,
        });
    }
    let remaining_ms = at_ms - now_ms;
    Ok(if remaining_ms > 2 {
        WaitStep::Sleep(remaining_ms - 1)
    } else {
        WaitStep::Spin
    })
}
