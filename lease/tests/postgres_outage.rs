//! PostgreSQL stopped for 3x the TTL (its own test binary: it stops the shared server; the
//! tests here take turns).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clockflake::Layout;
use clockflake_lease::{boot_ms, open, HealEvent, HealingGenerator, LeaseOptions, CLOSE_WAIT};
use common::*;

/// The tests stop the one server: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

#[test]
fn the_server_stopped_for_3x_the_ttl_halts_generation_at_the_deadline() {
    let _serial = turn(&SERIAL);
    let uri = format!("{}?app={}&ttl=1s", PG.url(), app("outage"));
    let gen = Arc::new(open(&uri, Layout::CLOCKSEQ, LeaseOptions::default()).unwrap());
    let issuing = {
        let gen = Arc::clone(&gen);
        Repeating::start(move || {
            let call = (boot_ms(), gen.next_id().map_err(|e| e.code()));
            std::thread::sleep(Duration::from_millis(1));
            call
        })
    };
    std::thread::sleep(Duration::from_millis(700));
    let halting = boot_ms();
    pg_script("halt");
    let halted = boot_ms();
    std::thread::sleep(Duration::from_millis(3000));
    pg_script("resume");
    let log = issuing.stop();

    let first_error = log.iter().position(|(_, r)| r.is_err()).unwrap();
    let last_ok = log[first_error - 1].0;
    // Ids went on while the lease could still be valid, and stopped before it could expire
    // on the server (1 s after the last renewal, which was before the server went down).
    assert!(
        last_ok >= halting + 400,
        "stopped early: {} ms",
        last_ok - halting
    );
    assert!(
        last_ok < halted + 1000,
        "went on too long: {} ms",
        last_ok - halted
    );
    for (_, result) in &log[first_error..] {
        assert_eq!(*result, Err("LEASE_LOST"));
    }
    assert_eq!(gen.next_id().unwrap_err().code(), "LEASE_LOST");
    let before: Vec<u64> = log.iter().filter_map(|(_, r)| r.ok()).collect();

    a_new_lease_continues_after(&uri, &before, "before and after the outage");
    gen.close().unwrap();
}

#[test]
fn no_block_is_granted_once_the_deadline_is_within_the_margin() {
    let _serial = turn(&SERIAL);
    let uri = format!("{}?app={}&ttl=1s", PG.url(), app("block-outage"));
    let gen = open(&uri, Layout::CLOCKSEQ, LeaseOptions::default()).unwrap();
    // The documented margin (LeasedGenerator::next_block): two ticks + 10 ms.
    let margin = 2 * Layout::CLOCKSEQ.unit_ms() + 10;
    let mut before = Vec::new();
    for _ in 0..50 {
        before.extend(gen.next_block(4096).unwrap());
        std::thread::sleep(Duration::from_millis(2));
    }
    pg_script("halt");
    // A renewal sent before the halt may still land: read the deadline once it cannot move.
    std::thread::sleep(Duration::from_millis(100));
    let deadline = gen.deadline_boot_ms().unwrap();
    // (boot ms before the call, ids, error code)
    let mut log = Vec::new();
    loop {
        let asked = boot_ms();
        match gen.next_block(4096) {
            Ok(block) => log.push((asked, block.collect::<Vec<_>>(), None)),
            Err(error) => log.push((asked, Vec::new(), Some(error.code()))),
        }
        if asked > deadline + 200 {
            break;
        }
        // Every 0.3 ms or so: a new tick on most calls, so a whole run each time.
        std::thread::sleep(Duration::from_micros(300));
    }
    pg_script("resume");
    assert_eq!(gen.deadline_boot_ms(), Some(0), "lost");
    let mut whole_runs = 0;
    let mut single_near_deadline = 0;
    for (asked, ids, error) in &log {
        if ids.len() > 1 {
            whole_runs += 1;
            assert!(
                asked + margin < deadline,
                "a block of {} ids granted {} ms before the deadline (margin {margin} ms)",
                ids.len(),
                deadline.saturating_sub(*asked)
            );
        } else if ids.len() == 1 {
            assert!(*asked < deadline, "an id after the deadline");
            if asked + margin >= deadline {
                single_near_deadline += 1;
            }
        } else {
            assert_eq!(*error, Some("LEASE_LOST"));
            assert!(asked + 2 >= deadline, "lost {} ms early", deadline - asked);
        }
    }
    assert!(
        whole_runs > 100,
        "blocks while the deadline was far: {whole_runs}"
    );
    assert!(
        single_near_deadline > 5,
        "single ids within the margin: {single_near_deadline}"
    );
    assert_eq!(log.last().unwrap().2, Some("LEASE_LOST"));
    let ids = before
        .into_iter()
        .chain(log.into_iter().flat_map(|(_, ids, _)| ids));
    assert_unique("blocks up to the deadline", ids);
    gen.close().unwrap();
}

/// The server thawed when dropped, whatever the test's outcome.
struct Frozen;

impl Frozen {
    fn now() -> Frozen {
        pg_script("freeze");
        Frozen
    }
}

impl Drop for Frozen {
    fn drop(&mut self) {
        pg_script("thaw");
    }
}

/// A frozen server (SIGSTOP: the kernel still accepts connections and acknowledges packets, so
/// no socket timeout fires) bounds `open` and `close` as a dead one does: `open` gives up with
/// `COORDINATOR_UNAVAILABLE` within the patience of its connection and of its request (half the
/// TTL each), and `close` within `CLOSE_WAIT` and those. Both waited until the thaw: a
/// connection's start-up exchange had no timeout (only its TCP connect had), and a statement's
/// cancel request went to the frozen server too.
#[test]
fn open_and_close_are_bounded_while_the_server_is_frozen() {
    let _serial = turn(&SERIAL);
    let uri = format!("{}?app={}&ttl=1s", PG.url(), app("frozen"));
    let gen = open(&uri, Layout::CLOCKSEQ, LeaseOptions::default()).unwrap();
    gen.next_id().unwrap();
    let frozen = Frozen::now();
    let opening = {
        let uri = uri.clone();
        within(Duration::from_secs(8), move || {
            open(&uri, Layout::CLOCKSEQ, LeaseOptions::default())
                .map(|gen| gen.worker_id())
                .map_err(|error| (error.code(), error.to_string()))
        })
    };
    let closing = within(Duration::from_secs(8), move || {
        gen.close().map_err(|error| error.code())
    });
    drop(frozen);
    let (opened, took) = opening.expect("open() still waiting 8 s into the freeze");
    let (code, message) = opened.expect_err("open() got a lease from a frozen server");
    assert_eq!(code, "COORDINATOR_UNAVAILABLE", "{message}");
    // A connection (half the TTL) and a request (half the TTL), with room for a loaded machine.
    assert!(took < Duration::from_secs(3), "open() took {took:?}");
    let (_, took) = closing.expect("close() still waiting 8 s into the freeze");
    assert!(
        took < CLOSE_WAIT + Duration::from_secs(3),
        "close() took {took:?}"
    );
}

/// Issue 38: a healing generator whose PostgreSQL is frozen past the TTL (1 s, for 2.5 s) and
/// thawed. While it holds no lease it refuses at once with a retryable `COORDINATOR_UNAVAILABLE`
/// and a retry time (never `LEASE_LOST`, never a hang); it leases again without a restart once
/// the server answers, a newcomer opening at the thaw (which may take the old worker id: the
/// healed generator then takes another); every id of both is kept and none repeats.
#[test]
fn a_healing_generator_leases_again_after_the_server_was_frozen_past_the_ttl() {
    let _serial = turn(&SERIAL);
    let uri = format!("{}?app={}&ttl=1s", PG.url(), app("heal"));
    let events = Arc::new(Mutex::new(Vec::new()));
    let gen = {
        let events = Arc::clone(&events);
        Arc::new(
            HealingGenerator::open_with_events(
                &uri,
                Layout::CLOCKSEQ,
                LeaseOptions::default(),
                move |event| events.lock().unwrap().push(event.clone()),
            )
            .unwrap(),
        )
    };
    let first_worker = gen.worker_id().unwrap();
    let issuing = {
        let gen = Arc::clone(&gen);
        Repeating::start(move || {
            let started = Instant::now();
            let result = gen
                .next_id()
                .map_err(|error| (error.code(), error.retry_at_ms(), error.to_string()));
            let took = started.elapsed();
            std::thread::sleep(Duration::from_millis(1));
            (result, took)
        })
    };
    std::thread::sleep(Duration::from_millis(500));
    {
        let _frozen = Frozen::now();
        std::thread::sleep(Duration::from_millis(2500));
    }
    let newcomer = patiently(|| open(&uri, Layout::CLOCKSEQ, LeaseOptions::default()));
    let newcomer_ids = next_ids(&newcomer, 1000);
    let healed_by = Instant::now() + Duration::from_secs(15);
    while !(gen.is_active() && gen.stats().heals >= 1) {
        assert!(
            Instant::now() < healed_by,
            "not healed 15 s after the thaw: {:?}",
            gen.stats()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    let log = issuing.stop();
    let stats = gen.stats();
    eprintln!(
        "worker {first_worker} -> {:?} (newcomer {}); {stats:?}",
        stats.worker_id,
        newcomer.worker_id()
    );

    let refusals: Vec<_> = log.iter().filter_map(|(r, _)| r.as_ref().err()).collect();
    assert!(!refusals.is_empty(), "the lease was never lost");
    for (code, retry_at_ms, message) in &refusals {
        assert_eq!(*code, "COORDINATOR_UNAVAILABLE", "{message}");
        assert!(retry_at_ms.is_some(), "no retry time: {message}");
    }
    assert!(
        refusals
            .iter()
            .any(|(_, _, message)| message.contains("lease was lost")),
        "no refusal said the lease was lost: {refusals:?}"
    );
    let slowest = log.iter().map(|(_, took)| *took).max().unwrap();
    assert!(
        slowest < Duration::from_millis(500),
        "an id call took {slowest:?}"
    );
    let last_refusal = log.iter().rposition(|(r, _)| r.is_err()).unwrap();
    let after = log[last_refusal..]
        .iter()
        .filter(|(r, _)| r.is_ok())
        .count();
    assert!(after > 10, "only {after} ids after the heal");
    assert!(stats.losses >= 1 && stats.heals >= 1, "{stats:?}");
    assert_ne!(stats.worker_id, Some(newcomer.worker_id()));
    // What happened, as the callback heard it: lost, attempts that failed, healed.
    let events = events.lock().unwrap().clone();
    assert!(
        matches!(&events[0], HealEvent::Lost { worker_id: Some(w), .. } if *w == first_worker),
        "{events:?}"
    );
    assert_eq!(
        events.last(),
        Some(&HealEvent::Healed {
            worker_id: stats.worker_id.unwrap()
        }),
        "{events:?}"
    );
    for event in &events[1..events.len() - 1] {
        assert!(
            matches!(event, HealEvent::AttemptFailed { error, .. } if error.code() == "COORDINATOR_UNAVAILABLE"),
            "{events:?}"
        );
    }

    let ids = log.iter().filter_map(|(r, _)| r.as_ref().ok().copied());
    let kept = assert_unique("healed generator and newcomer", ids.chain(newcomer_ids));
    assert!(kept > 1000, "{kept} ids");
    newcomer.close().unwrap();
    gen.close().unwrap();
}
