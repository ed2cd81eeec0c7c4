//! Snowflake-style 64-bit ids that never repeat, even when the wall clock steps back.
//!
//! An id packs a timestamp since a custom epoch, a clock sequence, a worker id and a per-tick
//! sequence into a positive 63-bit integer that sorts roughly by time. The default layout,
//! [`Layout::CLOCKSEQ`], is 41 bits of milliseconds, 3 clock-sequence bits, 7 worker bits and 12
//! sequence bits. When the clock goes back, the [`Generator`] moves to a clock sequence that was
//! not used at that time instead of repeating an id or failing (see [`Policy`]).
//!
//! The crate is `no_std`: the generator reads no clock, it is handed the time
//! ([`Generator::next_id_at`]) or a [`Clock`]. The `std` feature adds the system clock and the
//! blocking [`Generator::next_id`].
//!
//! | feature | default | adds |
//! |---|---|---|
//! | `std` | yes | [`MonotonicClock`], [`SystemClock`], blocking `next_id`, `next_id_with`, `next_ids_with`, and [`retry_after`] and [`wait_until`], the retry and wait loops they and the bindings share |
//! | `serde` | no | `Serialize`/`Deserialize` for [`Parts`], [`State`] and [`Policy`] |
//!
//! ```
//! # #[cfg(feature = "std")] {
//! use clockflake::{Generator, Layout, Options};
//! let gen = Generator::new(Layout::CLOCKSEQ, 7, Options::default())?;
//! let id = gen.next_id()?;
//! let parts = Layout::CLOCKSEQ.decode(id)?;
//! assert_eq!(parts.worker_id, 7);
//! # }
//! # Ok::<(), clockflake::Error>(())
//! ```
#![no_std]
#![forbid(unsafe_code)]
#![deny(missing_docs)]

#[cfg(feature = "std")]
extern crate std;

mod block;
mod error;
mod generator;
mod id;
mod layout;
mod options;
mod public;
#[cfg(feature = "std")]
mod std_clock;
mod suggest;
mod sync;
mod wait;

pub use block::IdBlock;
pub use error::{Error, InvalidId, LayoutProblem, PublicIdProblem, StateProblem};
pub use generator::{Generator, State, MAX_CLOCK_SEQS};
pub use id::Parts;
pub use layout::{Field, Layout, MAX_CLOCK_SEQ_BITS, MAX_TIME_MS};
pub use options::{Options, Policy};
pub use public::{PublicIds, PublicText, MAX_KEY_VERSION};
#[cfg(feature = "std")]
pub use std_clock::{retry_after, wait_until, MonotonicClock, SystemClock};
// What bindings need to wait as core does, not for users: the wait rule step by step (the
// JavaScript package runs it on `Atomics.wait`) and core's pause.
#[cfg(feature = "std")]
#[doc(hidden)]
pub use std_clock::sleep_or_spin;
#[doc(hidden)]
pub use wait::{wait_step, WaitStep};

/// A source of Unix-millisecond time. Any `Fn() -> u64` is one, which is how tests inject
/// clocks that jump.
pub trait Clock {
    /// The current time, Unix ms.
    fn now_ms(&self) -> u64;

    /// The time to issue an id at, or why no id may be issued now. A clock that stops
    /// covering time refuses, and the generator returns that refusal having issued nothing
    /// (a refusal of the caller's own error type: [`Generator::try_next_id_from`]). Every
    /// read the generator makes to issue an id goes through here; the default never refuses.
    #[inline(always)]
    fn try_now_ms(&self) -> Result<u64, Error> {
        Ok(self.now_ms())
    }
}

impl<F: Fn() -> u64> Clock for F {
    fn now_ms(&self) -> u64 {
        self()
    }
}
