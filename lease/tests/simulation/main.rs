//! A deterministic simulation of the lease protocol (issue 23): holders running the shipped
//! decision code (`clockflake_lease::protocol`, core's `Generator`) against a simulated
//! coordinator, with simulated clocks and one seeded scheduler; no threads, no real time, no
//! I/O. Each schedule draws its coordinator (PostgreSQL-like row leases on a primary with an
//! asynchronous replica, or `file://`'s lock files), its numbers (TTL, reservation, max skew)
//! and a few hundred steps of id calls, renewals and faults: pauses, clock steps, lost and
//! delayed messages, partitions, crashes and restarts, closes, failovers to a lagging replica,
//! restores from an older copy, lock files removed. After every step it checks that no id was
//! issued twice and that no id was issued after the lease the coordinator acknowledged expired.
//!
//! A duplicate in a schedule that stepped outside docs/DESIGN.md's assumptions (a clock further
//! than `max_skew` from true time in a run with a failover; a restore without the documented
//! procedure) is reported apart, as "outside assumptions"; any other is a failure.
//!
//! `SCHEDULES=N` (default 2,000) from `BASE_SEED` (default 0); `SEED=S` replays one schedule and
//! prints its trace; `MECHANISM=name` switches one mechanism off and searches until it finds the
//! duplicate (or the violation) it prevents: `failover-fence`, `lock-file-check`,
//! `restore-procedure`, `deadline-from-request`. `make simulate` runs it in release mode.

#![allow(clippy::expect_used, clippy::panic)]
// Messages and turns are small in number: their sizes do not matter here.
#![allow(clippy::large_enum_variant, clippy::too_many_arguments)]

mod coordinator;
mod holder;
mod rng;
mod world;

use std::process::ExitCode;

/// The mechanisms a schedule can switch off, each to check that the simulation finds what it
/// prevents.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mechanisms {
    /// PostgreSQL: a grant of a row written before a failover raises its marks past the fence
    /// (`protocol::failover`), and such a row is never renewed.
    pub failover_fence: bool,
    /// `file://`: the holder checks that its lock file is still the one at the path.
    pub lock_file_check: bool,
    /// After a restore from backup, the operator marks every row as written before the current
    /// timeline, so that its next grant raises its marks past the fence (docs/concepts/leases.md).
    pub restore_procedure: bool,
    /// The deadline counts from when the request was sent (`Terms::deadline_after`), not from
    /// when its answer came.
    pub deadline_from_request: bool,
}

impl Mechanisms {
    const ALL: Mechanisms = Mechanisms {
        failover_fence: true,
        lock_file_check: true,
        restore_procedure: true,
        deadline_from_request: true,
    };

    fn without(name: &str) -> Option<Mechanisms> {
        let mut mechanisms = Mechanisms::ALL;
        match name {
            "failover-fence" => mechanisms.failover_fence = false,
            "lock-file-check" => mechanisms.lock_file_check = false,
            "restore-procedure" => mechanisms.restore_procedure = false,
            "deadline-from-request" => mechanisms.deadline_from_request = false,
            _ => return None,
        }
        Some(mechanisms)
    }
}

/// DESIGN's assumptions, which `BREAK=...` breaks in every schedule to show each is needed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Assumption {
    /// Every assumption kept (the default).
    Kept,
    /// Clocks within `max_skew` of true time when the coordinator fails over.
    ClocksWithinMaxSkew,
    /// A restore follows the documented procedure.
    RestoreProcedure,
}

/// Seeds that once found a duplicate, run first on every run (each with what it found).
const REGRESSIONS: &[(u64, &str)] = &[(
    1_764_000_000_304_089,
    "the first restore procedure raised only the clock sequences used in the backup: one used \
     after it was free again, and a holder whose clock was 400 ms behind repeated its ids",
)];

/// Runs schedules from `base` (at most `SCHEDULES`, default 1,000,000) until `found` returns a
/// run, and says after how many.
fn search(
    what: &str,
    replay: &str,
    base: u64,
    found: impl Fn(u64) -> Option<world::Run>,
) -> ExitCode {
    let limit = env_u64("SCHEDULES").unwrap_or(1_000_000);
    for n in 0..limit {
        let seed = base + n;
        if let Some(run) = found(seed) {
            println!(
                "{what}: found after {} schedules: {}\nreplay: SEED={seed} {replay} make simulate",
                n + 1,
                run.summary(seed)
            );
            return ExitCode::SUCCESS;
        }
    }
    println!("{what}: nothing found in {limit} schedules");
    ExitCode::FAILURE
}

fn env_u64(name: &str) -> Option<u64> {
    let text = std::env::var(name).ok()?;
    match text.trim().parse() {
        Ok(value) => Some(value),
        Err(_) => panic!("{name}={text:?} is not a number"),
    }
}

fn main() -> ExitCode {
    // `cargo test` passes harness flags (`--nocapture`, filters): nothing here takes any.
    let mechanisms = match std::env::var("MECHANISM") {
        Ok(name) if !name.is_empty() => match Mechanisms::without(&name) {
            Some(mechanisms) => Some((name, mechanisms)),
            None => {
                eprintln!(
                    "MECHANISM={name:?}: expected failover-fence, lock-file-check, \
                     restore-procedure or deadline-from-request"
                );
                return ExitCode::FAILURE;
            }
        },
        _ => None,
    };
    let broken = match std::env::var("BREAK").as_deref() {
        Ok("clocks-within-max-skew") => Assumption::ClocksWithinMaxSkew,
        Ok("restore-procedure") => Assumption::RestoreProcedure,
        Ok("") | Err(_) => Assumption::Kept,
        Ok(other) => {
            eprintln!("BREAK={other:?}: expected clocks-within-max-skew or restore-procedure");
            return ExitCode::FAILURE;
        }
    };
    let mechanisms_on = mechanisms.as_ref().map_or(Mechanisms::ALL, |(_, m)| *m);
    if let Some(seed) = env_u64("SEED") {
        let run = world::run(seed, mechanisms_on, broken, true);
        for line in &run.trace {
            println!("{line}");
        }
        println!("{}", run.summary(seed));
        return if run.failed() && mechanisms_on == Mechanisms::ALL {
            ExitCode::FAILURE
        } else {
            ExitCode::SUCCESS
        };
    }
    let base = env_u64("BASE_SEED").unwrap_or(0);
    if let Some((name, mechanisms)) = mechanisms {
        let replay = format!("MECHANISM={name}");
        return search(&format!("without {name}"), &replay, base, |seed| {
            let run = world::run(seed, mechanisms, broken, false);
            (run.duplicates > 0 || run.late_ids > 0).then_some(run)
        });
    }
    if broken != Assumption::Kept {
        let name = std::env::var("BREAK").unwrap_or_default();
        let replay = format!("BREAK={name}");
        return search(&format!("with {name} broken"), &replay, base, |seed| {
            let run = world::run(seed, Mechanisms::ALL, broken, false);
            (run.duplicates > 0).then_some(run)
        });
    }
    let schedules = env_u64("SCHEDULES").unwrap_or(2_000);
    let started = std::time::Instant::now();
    let mut totals = world::Totals::default();
    let regressions = REGRESSIONS.iter().map(|&(seed, _)| seed);
    for seed in regressions.chain(base..base + schedules) {
        let run = world::run(seed, Mechanisms::ALL, Assumption::Kept, false);
        totals.add(&run);
        if run.failed() {
            let replay = world::run(seed, Mechanisms::ALL, Assumption::Kept, true);
            for line in replay.trace.iter().rev().take(60).rev() {
                eprintln!("{line}");
            }
            eprintln!("FAILED: {}", run.summary(seed));
            if let Some((_, found)) = REGRESSIONS.iter().find(|&&(known, _)| known == seed) {
                eprintln!("a regression seed, which found before: {found}");
            }
            eprintln!("replay: SEED={seed} make simulate");
            return ExitCode::FAILURE;
        }
    }
    println!(
        "simulation: {schedules} schedules (seeds {base}..{}, and {} regression seeds) in {:.1} s: {}",
        base + schedules,
        REGRESSIONS.len(),
        started.elapsed().as_secs_f64(),
        totals
    );
    ExitCode::SUCCESS
}
