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

use coordinator::Kind;

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
    /// Redis: with `min_replicas=N`, a grant or renewal counts only once `WAIT N` says N
    /// replicas have it.
    pub min_replicas: bool,
    /// Redis: `ROLE` before every grant and renewal (a replica is refused).
    pub role_check: bool,
    /// ZooKeeper: a newcomer merges the marks of every `servers` node naming its worker id and
    /// deletes the others.
    pub merge_marks: bool,
    /// ZooKeeper: the lease's TTL is the session timeout the server negotiated, not the one
    /// asked for.
    pub negotiated_timeout: bool,
    /// etcd: the worker key is created only if absent (`create_revision == 0`).
    pub create_if_absent: bool,
    /// etcd: the record is written only while the worker key is on the writer's lease.
    pub fenced_state_write: bool,
    /// Copies of a process: the wipe-on-fork page (any copy of the address space).
    pub wipe_on_fork: bool,
    /// Copies of a process: the `pthread_atfork` child handler (`fork()` from any language).
    pub at_fork_handler: bool,
    /// A renewal the server applies after a newer one (its client gave up on it) cannot lower the
    /// stored marks: PostgreSQL raises each mark to the stored one, Redis's `RENEW` and etcd's
    /// write refuse an older renewal, ZooKeeper writes at the version last written.
    pub marks_never_lowered: bool,
}

/// Switches one mechanism off.
type SwitchOff = fn(&mut Mechanisms);

/// Each mechanism's name in `MECHANISM=`, the coordinator its schedules use (`None`: any), and
/// how to switch it off.
const MECHANISMS: &[(&str, Option<Kind>, SwitchOff)] = &[
    ("failover-fence", Some(Kind::Rows), |m| {
        m.failover_fence = false
    }),
    ("lock-file-check", Some(Kind::Files), |m| {
        m.lock_file_check = false
    }),
    ("restore-procedure", Some(Kind::Rows), |m| {
        m.restore_procedure = false
    }),
    ("deadline-from-request", None, |m| {
        m.deadline_from_request = false
    }),
    ("min-replicas", Some(Kind::Redis), |m| {
        m.min_replicas = false
    }),
    ("role-check", Some(Kind::Redis), |m| m.role_check = false),
    ("merge-marks", Some(Kind::ZooKeeper), |m| {
        m.merge_marks = false
    }),
    ("negotiated-timeout", Some(Kind::ZooKeeper), |m| {
        m.negotiated_timeout = false
    }),
    ("create-if-absent", Some(Kind::Etcd), |m| {
        m.create_if_absent = false
    }),
    ("fenced-state-write", Some(Kind::Etcd), |m| {
        m.fenced_state_write = false
    }),
    ("wipe-on-fork", None, |m| m.wipe_on_fork = false),
    ("at-fork-handler", None, |m| m.at_fork_handler = false),
    ("marks-never-lowered", None, |m| {
        m.marks_never_lowered = false
    }),
];

impl Mechanisms {
    const ALL: Mechanisms = Mechanisms {
        failover_fence: true,
        lock_file_check: true,
        restore_procedure: true,
        deadline_from_request: true,
        min_replicas: true,
        role_check: true,
        merge_marks: true,
        negotiated_timeout: true,
        create_if_absent: true,
        fenced_state_write: true,
        wipe_on_fork: true,
        at_fork_handler: true,
        marks_never_lowered: true,
    };

    fn without(name: &str) -> Option<(Mechanisms, Option<Kind>)> {
        let &(_, kind, switch_off) = MECHANISMS.iter().find(|(known, ..)| *known == name)?;
        let mut mechanisms = Mechanisms::ALL;
        switch_off(&mut mechanisms);
        Some((mechanisms, kind))
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
    /// Redis: a failover promotes only a replica that acknowledged.
    PromotedReplicaAcknowledged,
    /// Redis: `maxmemory-policy noeviction`.
    Noeviction,
    /// ZooKeeper, etcd: a majority of the ensemble survives with its data.
    QuorumSurvives,
    /// A process restored from a snapshot calls `restored()` first.
    RestoredCalled,
    /// Copies without at-fork handlers (a raw `clone`, `_Fork`) only where the kernel has the
    /// wipe-on-fork page (Linux 4.14 and later).
    RawCloneWithPage,
}

/// Each assumption's name in `BREAK=` and the coordinators its schedules use.
const ASSUMPTIONS: &[(&str, Assumption, &[Kind])] = &[
    (
        "clocks-within-max-skew",
        Assumption::ClocksWithinMaxSkew,
        &[Kind::Rows],
    ),
    (
        "restore-procedure",
        Assumption::RestoreProcedure,
        &[Kind::Rows],
    ),
    (
        "promoted-replica-acknowledged",
        Assumption::PromotedReplicaAcknowledged,
        &[Kind::Redis],
    ),
    ("noeviction", Assumption::Noeviction, &[Kind::Redis]),
    (
        "quorum-survives",
        Assumption::QuorumSurvives,
        &[Kind::ZooKeeper, Kind::Etcd],
    ),
    (
        "raw-clone-with-page",
        Assumption::RawCloneWithPage,
        &[
            Kind::Rows,
            Kind::Files,
            Kind::Redis,
            Kind::ZooKeeper,
            Kind::Etcd,
        ],
    ),
    (
        "restored-called",
        Assumption::RestoredCalled,
        &[
            Kind::Rows,
            Kind::Files,
            Kind::Redis,
            Kind::ZooKeeper,
            Kind::Etcd,
        ],
    ),
];

/// Seeds that once found a duplicate, run first on every run (each with what it found).
const REGRESSIONS: &[(u64, &str)] = &[
    (
        1_764_000_000_304_089,
        "the first restore procedure raised only the clock sequences used in the backup: one used \
         after it was free again, and a holder whose clock was 400 ms behind repeated its ids",
    ),
    (
        1_795_857_892_683_824,
        "a renewal the client gave up on reached PostgreSQL after a newer one and lowered the \
         stored marks; a newcomer resumed below ids the holder had issued",
    ),
    (
        1_795_868_946_447_635,
        "etcd's model wrote a record without the revision its holder last wrote: a renewal the \
         client gave up on landed after a newer one, and a newcomer resumed below ids the holder \
         had issued",
    ),
];

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
    let names = |names: Vec<&str>| names.join(", ");
    let mechanisms = match std::env::var("MECHANISM") {
        Ok(name) if !name.is_empty() => match Mechanisms::without(&name) {
            Some((mechanisms, kind)) => Some((name, mechanisms, kind)),
            None => {
                let known = names(MECHANISMS.iter().map(|(name, ..)| *name).collect());
                eprintln!("MECHANISM={name:?}: expected one of {known}");
                return ExitCode::FAILURE;
            }
        },
        _ => None,
    };
    let broken = match std::env::var("BREAK").as_deref() {
        Ok("") | Err(_) => None,
        Ok(name) => match ASSUMPTIONS.iter().find(|(known, ..)| *known == name) {
            Some(&(_, assumption, kinds)) => Some((name.to_owned(), assumption, kinds)),
            None => {
                let known = names(ASSUMPTIONS.iter().map(|(name, ..)| *name).collect());
                eprintln!("BREAK={name:?}: expected one of {known}");
                return ExitCode::FAILURE;
            }
        },
    };
    let assumption = broken.as_ref().map_or(Assumption::Kept, |(_, a, _)| *a);
    // The coordinator of a schedule searched for a mechanism or an assumption: its own (one
    // of them, by seed), else drawn.
    let focus = |seed: u64| -> Option<Kind> {
        if let Some((_, _, kind)) = &mechanisms {
            return *kind;
        }
        broken
            .as_ref()
            .map(|(_, _, kinds)| kinds[(seed % kinds.len() as u64) as usize])
    };
    let mechanisms_on = mechanisms.as_ref().map_or(Mechanisms::ALL, |(_, m, _)| *m);
    let all = Mechanisms::ALL;
    if let Some(seed) = env_u64("SEED") {
        let run = world::run(seed, mechanisms_on, assumption, focus(seed), true);
        for line in &run.trace {
            println!("{line}");
        }
        println!("{}", run.summary(seed));
        return if run.failed() && mechanisms_on == all {
            ExitCode::FAILURE
        } else {
            ExitCode::SUCCESS
        };
    }
    let base = env_u64("BASE_SEED").unwrap_or(0);
    if let Some((name, mechanisms, _)) = &mechanisms {
        let replay = format!("MECHANISM={name}");
        return search(&format!("without {name}"), &replay, base, |seed| {
            let run = world::run(seed, *mechanisms, assumption, focus(seed), false);
            // Found only within the assumptions: the mechanism alone was missing.
            (run.outside.is_empty() && (run.duplicates > 0 || run.late_ids > 0)).then_some(run)
        });
    }
    if let Some((name, ..)) = &broken {
        let replay = format!("BREAK={name}");
        return search(&format!("with {name} broken"), &replay, base, |seed| {
            let run = world::run(seed, all, assumption, focus(seed), false);
            (run.duplicates > 0).then_some(run)
        });
    }
    let schedules = env_u64("SCHEDULES").unwrap_or(2_000);
    // `KEEP_GOING=1`: count failing schedules and go on (a long run's figures), listing them.
    let keep_going = std::env::var_os("KEEP_GOING").is_some();
    let mut failed: Vec<u64> = Vec::new();
    let started = std::time::Instant::now();
    let mut totals = world::Totals::default();
    let regressions = REGRESSIONS.iter().map(|&(seed, _)| seed);
    for seed in regressions.chain(base..base + schedules) {
        let run = world::run(seed, all, Assumption::Kept, None, false);
        totals.add(&run);
        if run.failed() && keep_going {
            eprintln!("FAILED: {}", run.summary(seed));
            failed.push(seed);
        } else if run.failed() {
            let replay = world::run(seed, all, Assumption::Kept, None, true);
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
    if !failed.is_empty() {
        println!(
            "{} schedules FAILED within the assumptions: seeds {failed:?}",
            failed.len()
        );
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
