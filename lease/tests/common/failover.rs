//! Holders issuing ids through a coordinator's failover, every id and every call's time kept
//! (the failover tests of PostgreSQL and Redis).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clockflake::Layout;
use clockflake_lease::{open, LeaseOptions, LeasedGenerator, CLOSE_WAIT};

use super::{assert_unique, turn, Repeating};

/// The start of a failover test on servers a script starts in the directory `dir_variable`
/// names: the test's turn (the servers are shared by the binary's tests), or `None` (skipped)
/// when the variable is not set; a failure when `required_variable` is set too.
pub fn servers(
    serial: &'static Mutex<()>,
    dir_variable: &str,
    required_variable: &str,
) -> Option<std::sync::MutexGuard<'static, ()>> {
    if std::env::var_os(dir_variable).is_none() {
        assert!(
            std::env::var_os(required_variable).is_none(),
            "{dir_variable} is not set"
        );
        eprintln!("skipped: {dir_variable} is not set");
        return None;
    }
    Some(turn(serial))
}

/// What a holder saw: its ids, its longest id call, its refusals by code, and the first
/// message of each code (what a failure prints).
#[derive(Default)]
pub struct Seen {
    pub ids: Vec<u64>,
    pub longest_call: Duration,
    pub refusals: BTreeMap<&'static str, usize>,
    pub first_messages: BTreeMap<&'static str, String>,
}

/// An id call: its id or its refusal (code and message), and how long it took.
type Call = (Result<u64, (&'static str, String)>, Duration);

/// A holder: opens `uri` (retrying while the coordinator cannot grant) and issues ids until
/// stopped, every call timed.
pub struct Holder {
    run: Repeating<Option<Call>>,
    gen: Arc<Mutex<Option<Arc<LeasedGenerator>>>>,
    close_bound: Duration,
}

/// The longest `close` may take on `uri` (DESIGN, "close"): `CLOSE_WAIT` for a renewal in
/// flight, then the release, one request bounded by half the TTL (`ttl=Ns` in `uri`) after a
/// new connection, and 2 s for that connection and a loaded machine's scheduling. A holder cut
/// off from its coordinator may use it all: a renewal cancelled at half the TTL, then a
/// release cancelled at half the TTL (4.7 s with a 4 s TTL in a make test with the checks
/// beside it; the bound was 3 s).
fn close_bound(uri: &str) -> Duration {
    let ttl_s: u64 = uri
        .split(['?', '&'])
        .find_map(|part| part.strip_prefix("ttl=")?.strip_suffix('s')?.parse().ok())
        .unwrap_or_else(|| panic!("no ttl=Ns parameter in {uri}"));
    CLOSE_WAIT + Duration::from_secs(ttl_s) / 2 + Duration::from_secs(2)
}

impl Holder {
    pub fn start(uri: String) -> Holder {
        let close_bound = close_bound(&uri);
        let gen: Arc<Mutex<Option<Arc<LeasedGenerator>>>> = Arc::default();
        let slot = Arc::clone(&gen);
        let options = LeaseOptions {
            // A call refuses at once while the clock is behind the marks: no call waits.
            max_handover_wait: Duration::ZERO,
            ..LeaseOptions::default()
        };
        let run = Repeating::start(move || {
            let current = slot.lock().unwrap().clone();
            let Some(gen) = current else {
                match open(&uri, Layout::CLOCKSEQ, options.clone()) {
                    Ok(opened) => *slot.lock().unwrap() = Some(Arc::new(opened)),
                    Err(_) => std::thread::sleep(Duration::from_millis(50)),
                }
                return None;
            };
            let started = Instant::now();
            let result = gen
                .next_id()
                .map_err(|error| (error.code(), error.to_string()));
            let took = started.elapsed();
            std::thread::sleep(Duration::from_micros(200));
            Some((result, took))
        });
        Holder {
            run,
            gen,
            close_bound,
        }
    }

    pub fn stop(self) -> Seen {
        let calls = self.run.stop();
        if let Some(gen) = self.gen.lock().unwrap().take() {
            let started = Instant::now();
            let _ = gen.close();
            assert!(
                started.elapsed() < self.close_bound,
                "close took {:?} (bound: {:?})",
                started.elapsed(),
                self.close_bound
            );
        }
        let mut seen = Seen::default();
        for (result, took) in calls.into_iter().flatten() {
            seen.longest_call = seen.longest_call.max(took);
            match result {
                Ok(id) => seen.ids.push(id),
                Err((code, message)) => {
                    *seen.refusals.entry(code).or_default() += 1;
                    seen.first_messages.entry(code).or_insert(message);
                }
            }
        }
        seen
    }
}

pub fn start_holders(uri: &str, count: usize) -> Vec<Holder> {
    (0..count).map(|_| Holder::start(uri.to_owned())).collect()
}

/// Every id of every holder unique, no call over 100 ms; the holders of `newcomers` issued.
/// What each holder saw, old ones first.
pub fn check(old: Vec<Holder>, newcomers: Vec<Holder>) -> Vec<Seen> {
    let old: Vec<Seen> = old.into_iter().map(Holder::stop).collect();
    let new: Vec<Seen> = newcomers.into_iter().map(Holder::stop).collect();
    for (label, seen) in old
        .iter()
        .map(|s| ("old", s))
        .chain(new.iter().map(|s| ("new", s)))
    {
        eprintln!(
            "{label} holder: {} ids, longest call {:?}, refusals {:?}, first of each: {:?}",
            seen.ids.len(),
            seen.longest_call,
            seen.refusals,
            seen.first_messages
        );
        assert!(
            seen.longest_call < Duration::from_millis(100),
            "an id call took {:?}",
            seen.longest_call
        );
    }
    assert!(
        old.iter().all(|seen| !seen.ids.is_empty()),
        "an old holder issued nothing"
    );
    assert!(
        new.iter().all(|seen| !seen.ids.is_empty()),
        "a newcomer issued nothing"
    );
    let all = old
        .iter()
        .chain(&new)
        .flat_map(|seen| seen.ids.iter().copied());
    let count = assert_unique("across the failover", all);
    eprintln!("{count} ids, no duplicate");
    old.into_iter().chain(new).collect()
}
