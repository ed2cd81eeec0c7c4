//! How a generator behaves when the clock goes back: the rollback [`Policy`] and the
//! [`Options`] a generator is made with.

use crate::error::Error;
use crate::layout::{Field, Layout};

/// What the generator does when the clock reads earlier than the last id it issued.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "kebab-case"))]
pub enum Policy {
    /// `clock-sequence`: move to a clock sequence not used at this time; if none, wait up to
    /// `max_wait_ms`, else refuse with `CLOCK_SEQUENCE_EXHAUSTED`. The default when the layout
    /// has clock-sequence bits.
    ClockSequence,
    /// `wait`: wait up to `max_wait_ms` for the clock to pass the last id, else refuse with
    /// `CLOCK_MOVED_BACKWARDS`. The default for layouts without clock-sequence bits.
    Wait,
    /// `logical`: never go back; keep issuing at the last tick and, when its sequence is full,
    /// run up to `max_drift_ms` ahead of the clock. Ids strictly increase.
    Logical,
    /// `fail`: refuse with `CLOCK_MOVED_BACKWARDS` at once.
    Fail,
}

impl Policy {
    /// Every policy, in the order of DESIGN.md.
    pub const ALL: [Policy; 4] = [
        Policy::ClockSequence,
        Policy::Wait,
        Policy::Logical,
        Policy::Fail,
    ];

    /// The name, the same in every language: `clock-sequence`, `wait`, `logical`, `fail`.
    pub const fn name(self) -> &'static str {
        match self {
            Policy::ClockSequence => "clock-sequence",
            Policy::Wait => "wait",
            Policy::Logical => "logical",
            Policy::Fail => "fail",
        }
    }

    /// Looks a policy up by [`Policy::name`].
    pub fn from_name(name: &str) -> Result<Policy, Error> {
        Policy::ALL
            .into_iter()
            .find(|policy| policy.name() == name)
            .ok_or(Error::UnknownPolicy)
    }

    /// `clock-sequence` for layouts with clock-sequence bits, `wait` for the others.
    pub const fn default_for(layout: &Layout) -> Policy {
        if layout.bits(Field::ClockSeq) > 0 {
            Policy::ClockSequence
        } else {
            Policy::Wait
        }
    }
}

impl core::str::FromStr for Policy {
    type Err = Error;
    fn from_str(name: &str) -> Result<Policy, Error> {
        Policy::from_name(name)
    }
}

/// How a generator behaves when the clock goes back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Options {
    /// The rollback policy; `None` takes [`Policy::default_for`] the layout.
    pub on_rollback: Option<Policy>,
    /// Longest wait a refusal may ask for and still carry a `retry_at_ms` (default 5 ms).
    pub max_wait_ms: u64,
    /// How far ahead of the clock the `logical` policy may run (default 1000 ms).
    pub max_drift_ms: u64,
}

impl Options {
    /// The rollback policy these options give a generator of `layout`: `on_rollback`, or
    /// [`Policy::default_for`] the layout when it is unset.
    ///
    /// ```
    /// use clockflake::{Layout, Options, Policy};
    /// let unset = Options::default();
    /// assert_eq!(unset.policy_for(&Layout::CLOCKSEQ), Policy::ClockSequence);
    /// assert_eq!(unset.policy_for(&Layout::TWITTER), Policy::Wait); // no clock-sequence bits
    /// let set = Options { on_rollback: Some(Policy::Fail), ..unset };
    /// assert_eq!(set.policy_for(&Layout::CLOCKSEQ), Policy::Fail);
    /// ```
    pub const fn policy_for(&self, layout: &Layout) -> Policy {
        match self.on_rollback {
            Some(policy) => policy,
            None => Policy::default_for(layout),
        }
    }
}

impl Default for Options {
    fn default() -> Self {
        Options {
            on_rollback: None,
            max_wait_ms: 5,
            max_drift_ms: 1000,
        }
    }
}
