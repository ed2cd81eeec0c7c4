//! The coordinator abstraction: who hands out worker ids and keeps their state records.

use std::time::Duration;

use clockflake::{Layout, State};

use crate::LeaseError;

/// A worker id granted by [`Coordinator::acquire`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grant {
    /// The worker id, unique among the live holders of the application namespace.
    pub worker_id: u64,
    /// The worker's stored state record (per-clock-sequence high-water marks), `None` if the
    /// worker id was never used.
    pub state: Option<State>,
    /// How long the lease lasts after the request that granted or last renewed it was
    /// sent; `None` for a lease that lasts until it is released or its process dies
    /// (file locks).
    pub ttl: Option<Duration>,
}

impl Grant {
    /// The grant of a worker id just taken, whose stored record read as `state`. A record that
    /// cannot be used (corrupt, another layout) gives the worker id back before the error is
    /// returned, so that a refused start-up leaves it free for the next holder.
    #[cfg(any(feature = "postgres", feature = "redis"))]
    pub(crate) fn or_release<C: Coordinator + ?Sized>(
        coordinator: &mut C,
        worker_id: u64,
        state: Result<Option<State>, LeaseError>,
        ttl: Duration,
    ) -> Result<Grant, LeaseError> {
        match state {
            Ok(state) => Ok(Grant {
                worker_id,
                state,
                ttl: Some(ttl),
            }),
            Err(error) => {
                let _ = coordinator.release(None);
                Err(error)
            }
        }
    }
}

/// Hands out worker ids of one application namespace and keeps each worker's state record.
///
/// One coordinator value holds at most one lease at a time: [`Coordinator::acquire`] takes a
/// free worker id, [`Coordinator::renew`] extends that lease and stores the state record with
/// it, [`Coordinator::release`] gives the worker id back.
///
/// The contract that makes ids unique: a worker id is granted to one holder at a time; a
/// lease with a `ttl` is not granted to anyone else until `ttl` after the holder's last
/// successful renewal was sent; and whoever is granted a worker id receives the state record
/// its previous holder stored last.
pub trait Coordinator: Send {
    /// The coordinator as messages show it: its URI without any secret
    /// (`file:///var/lib/ids?app=orders`).
    fn redacted_uri(&self) -> String;

    /// Takes a free worker id of `layout`, or fails with `WORKER_POOL_EXHAUSTED` when all
    /// `layout.max_worker_id() + 1` are held.
    ///
    /// `now_ms` is the starting generator's wall clock (Unix ms). Among free worker ids, one
    /// whose record it can use at once (`ready_at_ms` is 0) is preferred over one whose
    /// every clock sequence is marked at or after `now_ms`: a restart with the clock behind
    /// then starts at once instead of waiting for those marks to pass.
    fn acquire(&mut self, layout: &Layout, now_ms: u64) -> Result<Grant, LeaseError>;

    /// Extends the lease (when it expires at all) and stores `state` with it, in one step.
    /// Fails with `LEASE_LOST` when the lease is gone: the caller must stop at once.
    fn renew(&mut self, state: &State) -> Result<(), LeaseError>;

    /// A cheap local check, without I/O to a server, that the lease is still held (the
    /// renewal thread calls it on every wake, about ten times a second, between renewals).
    /// Fails with `LEASE_LOST` when it is not: the file coordinator checks that its lock
    /// file is still the one at the path. The default finds nothing wrong.
    fn check(&mut self) -> Result<(), LeaseError> {
        Ok(())
    }

    /// Stores `state` (if given) and gives the worker id back.
    fn release(&mut self, state: Option<&State>) -> Result<(), LeaseError>;

    /// Reads the stored state record of any worker id, for inspection.
    fn read_state(&mut self, worker_id: u64) -> Result<Option<State>, LeaseError>;

    /// The coordinator's own clock, Unix ms, read with one request to its server, for the
    /// start-up clock check (`holder::Start`): PostgreSQL's `now()`, the `mtime` of a
    /// ZooKeeper node written for it. Called once at start, after [`Coordinator::acquire`]
    /// (so on the connection the grant used) and only when [`Coordinator::max_skew`] is not
    /// `None`; the caller times the request and compares the server's clock with the local
    /// one at its midpoint. The default, `None`, is for coordinators with no clock apart from
    /// this host's (`file://`): nothing to compare.
    fn server_time_ms(&mut self) -> Result<Option<u64>, LeaseError> {
        Ok(None)
    }

    /// The largest difference between the local clock and [`Coordinator::server_time_ms`]
    /// allowed at start (the URI's `max_skew`, see `parse_max_skew`); `None` turns the check
    /// off (`max_skew=off`). The default is `DEFAULT_MAX_SKEW` (5 s).
    fn max_skew(&self) -> Option<Duration> {
        Some(DEFAULT_MAX_SKEW)
    }
}

/// The default `max_skew` of coordinators with a clock of their own (`postgres://`,
/// `zookeeper://`): 5 s.
pub const DEFAULT_MAX_SKEW: Duration = Duration::from_secs(5);

/// Free worker ids in the order a starting holder should try them: those whose record it
/// can use at `now_ms` first, lowest worker id first, then the others by when their record
/// becomes usable. A record that cannot be read keeps its place among the usable ones, so
/// that taking it refuses it (`INVALID_STATE`) as before. `listed` is in worker-id order.
#[cfg(any(feature = "postgres", feature = "redis", feature = "etcd"))]
pub(crate) fn preference_order<W>(
    layout: &Layout,
    now_ms: u64,
    listed: impl IntoIterator<Item = (W, Result<Option<State>, LeaseError>)>,
) -> Vec<W> {
    let mut candidates: Vec<(u64, W)> = listed
        .into_iter()
        .map(|(worker, state)| {
            let ready_at = state.map_or(0, |state| ready_at_ms(layout, state.as_ref(), now_ms));
            (ready_at, worker)
        })
        .collect();
    candidates.sort_by_key(|&(ready_at, _)| ready_at); // stable: worker order within
    candidates.into_iter().map(|(_, worker)| worker).collect()
}

/// From when (wall ms) a holder starting at `now_ms` can issue ids under a stored record
/// (`None`: never used): 0 when at once. Coordinators prefer worker ids for which this is 0.
///
/// A record of another layout counts as usable at once: it is not skipped but taken in its
/// turn, and start-up refuses it (`INVALID_STATE`) as it would without the preference.
pub fn ready_at_ms(layout: &Layout, state: Option<&State>, now_ms: u64) -> u64 {
    match state {
        Some(state) if state.layout_fingerprint == layout.fingerprint() => {
            state.resume_point(layout, now_ms).1
        }
        _ => 0,
    }
}

/// The worker ids one pool may lease: a URI's `workers=LO-HI` (inclusive) or `workers=N`.
///
/// Several pools of one application, each on its own coordinator (one per region), share
/// one id space when each leases from its own range. Every coordinator enumerates only the
/// range (checked against the layout when it looks for a free worker id).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WorkerRange {
    first: u64,
    last: u64,
}

impl WorkerRange {
    /// `first..=last`; `None` when `first > last` (an empty range).
    pub fn new(first: u64, last: u64) -> Option<WorkerRange> {
        (first <= last).then_some(WorkerRange { first, last })
    }

    /// The lowest worker id of the range.
    pub fn first(&self) -> u64 {
        self.first
    }

    /// The highest worker id of the range (inclusive).
    pub fn last(&self) -> u64 {
        self.last
    }

    /// How many worker ids the range holds.
    pub fn len(&self) -> u64 {
        self.last - self.first + 1
    }

    /// Never: a range holds at least one worker id.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Whether `worker_id` is in the range.
    pub fn contains(&self, worker_id: u64) -> bool {
        (self.first..=self.last).contains(&worker_id)
    }

    /// Whether the two ranges share a worker id.
    pub fn overlaps(&self, other: &WorkerRange) -> bool {
        self.first <= other.last && other.first <= self.last
    }

    /// `LO-HI` or `N` (decimal, no sign, no spaces), as written in a URI or stored beside a
    /// lease. The error is a reason that echoes the text (a range holds no secret).
    pub fn parse(text: &str) -> Result<WorkerRange, String> {
        let number = |part: &str| -> Result<u64, String> {
            if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) || part.len() > 19 {
                return Err(format!(
                    "workers must look like 0-63 (first-last, inclusive) or 5, found {text:?}"
                ));
            }
            part.parse::<u64>().map_err(|_| {
                format!("workers must look like 0-63 (first-last, inclusive) or 5, found {text:?}")
            })
        };
        let (first, last) = match text.split_once('-') {
            Some((first, last)) => (number(first)?, number(last)?),
            None => {
                let n = number(text)?;
                (n, n)
            }
        };
        WorkerRange::new(first, last).ok_or_else(|| {
            format!("workers={text} is empty: the first worker id is above the last")
        })
    }
}

impl std::fmt::Display for WorkerRange {
    /// `LO-HI`, or `N` for a single worker id: the form [`WorkerRange::parse`] reads.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.first == self.last {
            write!(f, "{}", self.first)
        } else {
            write!(f, "{}-{}", self.first, self.last)
        }
    }
}

/// The worker ids a coordinator may lease for `layout`: all of them (`0..=max_worker_id`)
/// without a `workers` range, else the range, refused with `INVALID_URI` (naming `uri`, a
/// redacted URI) when it reaches past the layout's largest worker id. Every coordinator
/// calls this when it looks for a free worker id, and enumerates only what it returns.
pub(crate) fn pool(
    uri: &str,
    layout: &Layout,
    workers: Option<&WorkerRange>,
) -> Result<std::ops::RangeInclusive<u64>, LeaseError> {
    let max = layout.max_worker_id();
    match workers {
        None => Ok(0..=max),
        Some(range) if range.last() <= max => Ok(range.first()..=range.last()),
        Some(range) => Err(LeaseError::InvalidUri {
            uri: uri.to_owned(),
            reason: format!(
                "workers={range} is outside the layout's worker ids 0-{max} \
                 ({} worker bits)",
                layout.bits(clockflake::Field::Worker)
            ),
        }),
    }
}

/// `WORKER_POOL_EXHAUSTED` when every worker id of [`pool`]'s range is held: naming the
/// layout's count without a range, else naming the range.
pub(crate) fn exhausted(
    coordinator: &str,
    layout: &Layout,
    workers: Option<&WorkerRange>,
) -> LeaseError {
    match workers {
        None => LeaseError::WorkerPoolExhausted {
            workers: layout.max_worker_id().saturating_add(1),
        },
        Some(range) => LeaseError::RangeExhausted {
            coordinator: coordinator.to_owned(),
            range: range.to_string(),
        },
    }
}

/// The visible overlap check, at acquire: refuses with `WORKER_RANGE_CONFLICT` when a live
/// holder of the same application on this coordinator declared a range (stored beside its
/// lease, in [`WorkerRange`]'s `Display` form) that overlaps this pool's and differs from it.
/// `live` gives each live holder's worker id and stored range text, empty when it declared
/// none. This pool's range is `declared`, or without one all of `pool` (the layout's worker
/// ids): an instance that lacks `workers=` beside holders that declare ranges is refused too.
/// Holders that declared none (the single-pool default, and holders of earlier versions) are
/// not checked against, so that a pool can move to ranges one holder at a time. The same
/// range in two pools of one coordinator is allowed (the lease keeps them apart).
pub(crate) fn check_ranges<'a>(
    coordinator: &str,
    declared: Option<&WorkerRange>,
    pool: &std::ops::RangeInclusive<u64>,
    live: impl IntoIterator<Item = (u64, &'a str)>,
) -> Result<(), LeaseError> {
    let mine = match declared {
        Some(range) => *range,
        None => match WorkerRange::new(*pool.start(), *pool.end()) {
            Some(range) => range,
            None => return Ok(()),
        },
    };
    for (worker_id, text) in live {
        let Ok(theirs) = WorkerRange::parse(text) else {
            continue;
        };
        if theirs != mine && theirs.overlaps(&mine) {
            return Err(LeaseError::WorkerRangeConflict {
                coordinator: coordinator.to_owned(),
                declared: match declared {
                    Some(_) => mine.to_string(),
                    None => format!("{mine} (no workers parameter: every worker id of the layout)"),
                },
                live: theirs.to_string(),
                worker_id,
            });
        }
    }
    Ok(())
}

/// The owner token a holder writes with its lease where the coordinator keeps one
/// (PostgreSQL's `owner` column, the Redis lease's value): `owner` followed by
/// ` workers=LO-HI` when the pool declares a range, so that other pools can read the range
/// without a new column or field ([`declared_range`]).
#[cfg(any(feature = "postgres", feature = "redis"))]
pub(crate) fn owner_with_range(owner: &str, workers: Option<&WorkerRange>) -> String {
    match workers {
        Some(range) => format!("{owner} workers={range}"),
        None => owner.to_owned(),
    }
}

/// The range written into an owner token by [`owner_with_range`], empty when none.
#[cfg(any(feature = "postgres", feature = "redis"))]
pub(crate) fn declared_range(owner: &str) -> &str {
    owner
        .rsplit_once(" workers=")
        .map_or("", |(_, range)| range)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(text: &str) -> WorkerRange {
        WorkerRange::parse(text).unwrap_or_else(|reason| panic!("{text}: {reason}"))
    }

    #[test]
    fn ranges_parse_and_print_as_written() {
        assert_eq!(range("0-63"), WorkerRange { first: 0, last: 63 });
        assert_eq!(range("64-127").len(), 64);
        assert_eq!(range("5"), WorkerRange { first: 5, last: 5 });
        assert_eq!(range("7-7").to_string(), "7");
        assert_eq!(range("0-63").to_string(), "0-63");
        for bad in [
            "", "-", "3-1", "a", "1-b", "-1", "1-", "+1", " 1", "1 - 2", "1-2-3",
        ] {
            assert!(WorkerRange::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn overlaps_and_contains() {
        assert!(range("0-63").overlaps(&range("63-70")));
        assert!(!range("0-63").overlaps(&range("64-127")));
        assert!(range("10-20").overlaps(&range("0-127")));
        assert!(range("10-20").contains(20) && !range("10-20").contains(21));
    }

    #[test]
    fn the_pool_is_the_range_inside_the_layout() {
        let layout = Layout::CLOCKSEQ; // worker ids 0-127
        assert_eq!(pool("u", &layout, None).ok(), Some(0..=127));
        assert_eq!(
            pool("u", &layout, Some(&range("64-127"))).ok(),
            Some(64..=127)
        );
        for outside in ["64-128", "128", "0-1000"] {
            let error = pool("u", &layout, Some(&range(outside))).err();
            let error = error.unwrap_or_else(|| panic!("{outside} accepted"));
            assert_eq!(error.code(), "INVALID_URI");
            assert!(
                error
                    .to_string()
                    .contains("outside the layout's worker ids 0-127"),
                "{error}"
            );
        }
        let error = exhausted("u", &layout, Some(&range("0-63")));
        assert_eq!(error.code(), "WORKER_POOL_EXHAUSTED");
        assert!(error.to_string().contains("workers=0-63"), "{error}");
        assert_eq!(
            exhausted("u", &layout, None),
            LeaseError::WorkerPoolExhausted { workers: 128 }
        );
    }

    #[test]
    fn only_two_declared_ranges_that_overlap_and_differ_conflict() {
        let mine = range("0-63");
        let all = 0..=127;
        let check = |live: &[(u64, &str)]| {
            check_ranges("u", Some(&mine), &all, live.iter().copied()).map_err(|e| e.code())
        };
        assert_eq!(
            check(&[(0, "0-63"), (70, "64-127"), (3, ""), (4, "junk")]),
            Ok(())
        );
        assert_eq!(check(&[(40, "32-95")]), Err("WORKER_RANGE_CONFLICT"));
        assert_eq!(check(&[(100, "0-127")]), Err("WORKER_RANGE_CONFLICT"));
        // A pool without a range is all of the layout: refused beside declared ranges, not
        // beside holders that declared none.
        let error = check_ranges("u", None, &all, [(40, "0-63")]).unwrap_err();
        assert_eq!(error.code(), "WORKER_RANGE_CONFLICT");
        assert!(
            error.to_string().contains("no workers parameter"),
            "{error}"
        );
        assert!(check_ranges("u", None, &all, [(40, ""), (41, "0-127")]).is_ok());
    }
}
