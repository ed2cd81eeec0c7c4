//! The lease error type: core's errors plus what only a coordinator can know.

use std::fmt;

/// Why a leased generator refused. [`LeaseError::code`] is a stable SCREAMING_SNAKE string:
/// core's codes (`INVALID_STATE`, `GENERATOR_CLOSED`, `SEQUENCE_EXHAUSTED`, ...) where core has
/// one, and the lease's own, [`LeaseError::CODES`] (`LEASE_LOST`, `WORKER_POOL_EXHAUSTED`,
/// `INVALID_URI`, `COORDINATOR_UNAVAILABLE`, `CLOCK_SKEW`, `WORKER_RANGE_CONFLICT`), for what
/// core cannot know.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LeaseError {
    /// A refusal from the core generator or layout (its code is core's).
    Core(clockflake::Error),
    /// `LEASE_LOST`: the lease's deadline passed without a renewal, or the coordinator said
    /// the lease is gone. The generator issues no more ids; open a new one.
    LeaseLost {
        /// What happened, for people.
        reason: String,
    },
    /// `INVALID_STATE`: a stored state record that cannot be read. It is refused, never reset:
    /// repair or remove it by hand once you know no live generator uses its worker id.
    CorruptState {
        /// Where the record lives (a file path, or a table row).
        location: String,
        /// What is wrong with it.
        reason: String,
    },
    /// `INVALID_URI`: a coordinator URI this crate cannot use.
    InvalidUri {
        /// The URI, with any password removed.
        uri: String,
        /// What is wrong with it.
        reason: String,
    },
    /// `COORDINATOR_UNAVAILABLE`: the coordinator could not be reached or failed (I/O error,
    /// database down). Opening fails; a running generator keeps issuing ids until its lease
    /// deadline or reservation runs out.
    CoordinatorUnavailable {
        /// Which coordinator.
        coordinator: String,
        /// The underlying error.
        reason: String,
    },
    /// `COORDINATOR_UNAVAILABLE`, retryable: the id needs a reservation (a later time, or a
    /// new clock sequence after the clock stepped back) that the renewal thread has not
    /// persisted yet. Id calls never wait on coordinator I/O: they ask the renewal thread and
    /// wait at most a few ms for it. Retry at [`LeaseError::retry_at_ms`].
    RenewalLate {
        /// Which coordinator.
        coordinator: String,
        /// Wall ms up to which the reservation persisted so far reaches.
        reserved_until_ms: u64,
        /// The last renewal's error, if it failed.
        last_error: Option<String>,
        /// When to try again, Unix ms.
        retry_at_ms: u64,
    },
    /// `COORDINATOR_UNAVAILABLE`, retryable: a [`crate::HealingGenerator`] lost its lease and
    /// is leasing again; no id is issued until it holds one. Retry at
    /// [`LeaseError::retry_at_ms`].
    Healing {
        /// Which coordinator.
        coordinator: String,
        /// Why the lease was lost.
        lost: String,
        /// The last failed attempt to lease again, if one failed.
        last_error: Option<String>,
        /// When to try again, Unix ms.
        retry_at_ms: u64,
    },
    /// `GENERATOR_CLOSED`: `close()` was called; the worker id has been released.
    Closed,
    /// `CLOCK_SKEW`: at start-up the local clock (the generator's) and the coordinator's
    /// differed by more than the URI's `max_skew` (default 5 s). The worker id was given back
    /// untouched and no id was issued: a clock set back (or far ahead) at start-up would
    /// otherwise issue ids out of time order, or wait out or skip the stored marks.
    ClockSkew {
        /// Which coordinator.
        coordinator: String,
        /// The local clock at the midpoint of the request that read the server's, Unix ms.
        local_ms: u64,
        /// The coordinator's clock, Unix ms.
        server_ms: u64,
        /// `local_ms - server_ms`: positive when the local clock is ahead.
        skew_ms: i64,
        /// The round trip of that request, ms (the measurement is good to half of it).
        round_trip_ms: u64,
        /// The largest skew allowed, ms.
        max_skew_ms: u64,
    },
    /// `WORKER_POOL_EXHAUSTED`: every worker id of the layout is held (a URI without
    /// `workers=LO-HI`; with one, [`LeaseError::RangeExhausted`]).
    WorkerPoolExhausted {
        /// How many worker ids the layout has.
        workers: u64,
    },
    /// `WORKER_POOL_EXHAUSTED`: every worker id of the pool's range (the URI's
    /// `workers=LO-HI`) is held.
    RangeExhausted {
        /// Which coordinator.
        coordinator: String,
        /// The range, `LO-HI`.
        range: String,
    },
    /// `WORKER_RANGE_CONFLICT`: a live holder of the same application on this coordinator
    /// declared a `workers` range that overlaps this pool's and differs from it: two pools'
    /// ranges overlap, so the region plan is inconsistent. Nothing was taken.
    WorkerRangeConflict {
        /// Which coordinator.
        coordinator: String,
        /// This pool's range, `LO-HI`.
        declared: String,
        /// The live holder's range, `LO-HI`.
        live: String,
        /// The worker id that holder has.
        worker_id: u64,
    },
    /// `WORKER_ID_OUT_OF_RANGE`: a worker id assigned from outside (`k8s://`'s pod ordinal,
    /// `env://`'s `CLOCKFLAKE_WORKER_ID`) that is not in the URI's `workers` range. It is
    /// refused, never shifted into the range.
    AssignedOutOfRange {
        /// The worker id assigned.
        worker_id: u64,
        /// Where it was read (`CLOCKFLAKE_POD_INDEX=3`, `hostname ids-3`, ...).
        source: String,
        /// The range, `LO-HI`.
        range: String,
    },
    /// `INVALID_LAYOUT`: a layout with more worker ids than a coordinator hands out
    /// ([`crate::MAX_LEASED_WORKERS`]).
    TooManyWorkers {
        /// How many worker ids the layout has.
        workers: u64,
    },
}

impl LeaseError {
    /// The stable code, the same string in Rust, JS and Python.
    pub fn code(&self) -> &'static str {
        match self {
            LeaseError::Core(error) => error.code(),
            LeaseError::LeaseLost { .. } => "LEASE_LOST",
            LeaseError::CorruptState { .. } => "INVALID_STATE",
            LeaseError::InvalidUri { .. } => "INVALID_URI",
            LeaseError::CoordinatorUnavailable { .. }
            | LeaseError::RenewalLate { .. }
            | LeaseError::Healing { .. } => "COORDINATOR_UNAVAILABLE",
            LeaseError::Closed => "GENERATOR_CLOSED",
            LeaseError::ClockSkew { .. } => "CLOCK_SKEW",
            LeaseError::TooManyWorkers { .. } => "INVALID_LAYOUT",
            LeaseError::WorkerPoolExhausted { .. } | LeaseError::RangeExhausted { .. } => {
                "WORKER_POOL_EXHAUSTED"
            }
            LeaseError::AssignedOutOfRange { .. } => "WORKER_ID_OUT_OF_RANGE",
            LeaseError::WorkerRangeConflict { .. } => "WORKER_RANGE_CONFLICT",
        }
    }

    /// The codes this crate adds to core's [`clockflake::Error::CODES`] (its other errors
    /// carry core's codes: `INVALID_STATE`, `GENERATOR_CLOSED`, `INVALID_LAYOUT`, ...).
    pub const CODES: [&'static str; 6] = [
        "LEASE_LOST",
        "WORKER_POOL_EXHAUSTED",
        "INVALID_URI",
        "COORDINATOR_UNAVAILABLE",
        "CLOCK_SKEW",
        "WORKER_RANGE_CONFLICT",
    ];

    /// One error of each code of [`LeaseError::CODES`], in that order: the table bindings
    /// check their error mapping against, beside core's [`clockflake::Error::EXAMPLES`].
    pub const EXAMPLES: [LeaseError; 6] = [
        LeaseError::LeaseLost {
            reason: String::new(),
        },
        LeaseError::WorkerPoolExhausted { workers: 128 },
        LeaseError::InvalidUri {
            uri: String::new(),
            reason: String::new(),
        },
        LeaseError::CoordinatorUnavailable {
            coordinator: String::new(),
            reason: String::new(),
        },
        LeaseError::ClockSkew {
            coordinator: String::new(),
            local_ms: 0,
            server_ms: 0,
            skew_ms: 0,
            round_trip_ms: 0,
            max_skew_ms: 0,
        },
        LeaseError::WorkerRangeConflict {
            coordinator: String::new(),
            declared: String::new(),
            live: String::new(),
            worker_id: 0,
        },
    ];

    /// When a retry of the same call can succeed, Unix ms (core's sequence and clock refusals).
    pub fn retry_at_ms(&self) -> Option<u64> {
        match self {
            LeaseError::Core(error) => error.retry_at_ms(),
            LeaseError::RenewalLate { retry_at_ms, .. }
            | LeaseError::Healing { retry_at_ms, .. } => Some(*retry_at_ms),
            _ => None,
        }
    }

    /// Whether the error is about bad input (bindings map these to `ValueError`/`RangeError`).
    pub fn is_input_error(&self) -> bool {
        match self {
            LeaseError::Core(error) => error.is_input_error(),
            LeaseError::InvalidUri { .. }
            | LeaseError::TooManyWorkers { .. }
            | LeaseError::AssignedOutOfRange { .. } => true,
            _ => false,
        }
    }

    pub(crate) fn lost(reason: impl Into<String>) -> LeaseError {
        LeaseError::LeaseLost {
            reason: reason.into(),
        }
    }

    /// The end of a renewal: `Ok` if the coordinator `applied` it, else the lease on
    /// `worker_id` under `epoch` is gone and no longer `held`.
    #[cfg(any(feature = "postgres", feature = "redis"))]
    pub(crate) fn unless_renewed<T>(
        applied: bool,
        held: &mut Option<T>,
        worker_id: u64,
        epoch: impl fmt::Display,
    ) -> Result<(), LeaseError> {
        if applied {
            return Ok(());
        }
        *held = None;
        Err(LeaseError::lost(format!(
            "the lease on worker id {worker_id} expired or was taken over (epoch {epoch})"
        )))
    }

    pub(crate) fn unavailable(coordinator: &str, reason: impl fmt::Display) -> LeaseError {
        LeaseError::CoordinatorUnavailable {
            coordinator: coordinator.to_owned(),
            reason: reason.to_string(),
        }
    }

    pub(crate) fn corrupt(location: impl Into<String>, reason: impl Into<String>) -> LeaseError {
        LeaseError::CorruptState {
            location: location.into(),
            reason: reason.into(),
        }
    }
}

impl From<clockflake::Error> for LeaseError {
    fn from(error: clockflake::Error) -> Self {
        LeaseError::Core(error)
    }
}

impl fmt::Display for LeaseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LeaseError::Core(error) => error.fmt(f),
            LeaseError::LeaseLost { reason } => write!(
                f,
                "lease lost: {reason}; this generator issues no more ids, open a new one"
            ),
            LeaseError::CorruptState { location, reason } => write!(
                f,
                "invalid state: the stored state record at {location} cannot be read ({reason}); \
                 refusing to reset it, since ids issued under it could repeat"
            ),
            LeaseError::InvalidUri { uri, reason } => write!(
                f,
                "invalid uri: {reason}, found {uri:?}; expected file:///DIR?app=NAME, \
                 postgres://USER@HOST:PORT/DB?app=NAME&ttl=10s, \
                 redis://[USER:PASSWORD@]HOST:PORT/DB?app=NAME&ttl=10s (rediss:// for TLS), \
                 zookeeper://HOST:PORT[,HOST:PORT...]/snowflake/APP?ttl=10s, \
                 k8s:///DIR?app=NAME (a StatefulSet pod's ordinal) or env:///DIR?app=NAME \
                 (CLOCKFLAKE_WORKER_ID)"
            ),
            LeaseError::CoordinatorUnavailable {
                coordinator,
                reason,
            } => write!(f, "coordinator unavailable: {coordinator}: {reason}"),
            LeaseError::RenewalLate {
                coordinator,
                reserved_until_ms,
                last_error,
                retry_at_ms,
            } => {
                write!(
                    f,
                    "coordinator unavailable: {coordinator}: the reservation persisted so far \
                     ends at {reserved_until_ms} (Unix ms) and its renewal has not completed"
                )?;
                if let Some(error) = last_error {
                    write!(f, " (last error: {error})")?;
                }
                write!(f, "; retry at {retry_at_ms}")
            }
            LeaseError::Healing {
                coordinator,
                lost,
                last_error,
                retry_at_ms,
            } => {
                write!(f, "coordinator unavailable: {coordinator}: the lease was lost")?;
                // The reason is recorded a moment after the id path stops: an early refusal
                // has none yet.
                if !lost.is_empty() {
                    write!(f, " ({lost})")?;
                }
                write!(f, " and is being taken again; no id until then")?;
                if let Some(error) = last_error {
                    write!(f, " (last attempt: {error})")?;
                }
                write!(f, "; retry at {retry_at_ms}")
            }
            LeaseError::Closed => clockflake::Error::GeneratorClosed.fmt(f),
            LeaseError::ClockSkew {
                coordinator,
                local_ms,
                server_ms,
                skew_ms,
                round_trip_ms,
                max_skew_ms,
            } => write!(
                f,
                "clock skew: the local clock reads {local_ms} (Unix ms) and {coordinator}'s \
                 clock {server_ms}: the local clock is {} ms {} (measured over a {round_trip_ms} ms \
                 round trip), more than max_skew={max_skew_ms}ms; the worker id was given back \
                 untouched and no id was issued: correct the clock (NTP) or set max_skew",
                skew_ms.unsigned_abs(),
                if *skew_ms >= 0 { "ahead" } else { "behind" }
            ),
            LeaseError::WorkerPoolExhausted { workers } => write!(
                f,
                "worker pool exhausted: all {workers} worker ids of the layout are leased; a larger \
                 fleet needs a layout with more worker bits: see suggest_layout and \
                 docs/concepts/layouts.md#when-128-workers-are-not-enough"
            ),
            LeaseError::RangeExhausted { coordinator, range } => write!(
                f,
                "worker pool exhausted: every worker id of workers={range} is held at \
                 {coordinator}; stop a holder, or give this pool a larger range"
            ),
            LeaseError::WorkerRangeConflict {
                coordinator,
                declared,
                live,
                worker_id,
            } => write!(
                f,
                "worker range conflict: this pool declares workers={declared}, but a live \
                 holder of worker id {worker_id} at {coordinator} declares workers={live}; \
                 the ranges of two pools of one application must not overlap"
            ),
            LeaseError::AssignedOutOfRange {
                worker_id,
                source,
                range,
            } => write!(
                f,
                "worker id out of range: {source} gives worker id {worker_id}, outside this \
                 pool's workers={range}; give the pod or process a worker id in the range \
                 (a StatefulSet's spec.ordinals.start sets its first ordinal)"
            ),
            LeaseError::TooManyWorkers { workers } => write!(
                f,
                "invalid layout: leases cover layouts of at most {} worker ids, found {workers}",
                crate::MAX_LEASED_WORKERS
            ),
        }
    }
}

impl std::error::Error for LeaseError {}

#[cfg(test)]
mod tests {
    use super::LeaseError;

    #[test]
    fn examples_give_every_code_once_and_none_of_cores() {
        let codes = LeaseError::EXAMPLES.map(|error| error.code());
        assert_eq!(codes, LeaseError::CODES);
        assert!(codes
            .iter()
            .all(|code| !clockflake::Error::CODES.contains(code)));
        assert!(clockflake::Error::CODES.contains(&LeaseError::Closed.code()));
    }

    #[test]
    fn lease_lost_and_a_full_pool_are_the_leases_codes_with_the_messages_users_know() {
        for code in ["LEASE_LOST", "WORKER_POOL_EXHAUSTED"] {
            assert!(LeaseError::CODES.contains(&code), "{code}");
        }
        let full = LeaseError::WorkerPoolExhausted { workers: 128 };
        assert_eq!(full.code(), "WORKER_POOL_EXHAUSTED");
        assert!(!full.is_input_error() && full.retry_at_ms().is_none());
        assert_eq!(
            full.to_string(),
            "worker pool exhausted: all 128 worker ids of the layout are leased; a larger fleet \
             needs a layout with more worker bits: see suggest_layout and \
             docs/concepts/layouts.md#when-128-workers-are-not-enough"
        );
        let lost = LeaseError::lost("the deadline passed");
        assert_eq!(lost.code(), "LEASE_LOST");
        assert!(!lost.is_input_error() && lost.retry_at_ms().is_none());
    }
}
