//! Helpers shared by the lease test binaries.
#![allow(dead_code, clippy::unwrap_used, clippy::panic)]

pub mod failover;

use std::collections::HashSet;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use clockflake::{Field, Layout};
use clockflake_lease::{open, wall_ms, LeaseError, LeaseOptions, LeasedGenerator};
// Temp dirs (TempDir: removed on drop) and namespaces, the same as the server's tests
// (clockflake-test-support); not every test binary uses each.
#[allow(unused_imports)]
pub use clockflake_test_support::{app, temp_dir, TempDir};

pub const PROBE: &str = env!("CARGO_BIN_EXE_clockflake-lease-probe");

/// Runs an id call that needs a new reservation persisted first (a step back to another
/// clock sequence): the call waits at most `RENEWAL_WAIT` (50 ms) for the renewal thread, and
/// on a loaded machine the write can take longer, so it refuses with the retryable
/// `COORDINATOR_UNAVAILABLE`. A caller retries; so does the test, for up to 10 s.
pub fn patiently<T>(mut call: impl FnMut() -> Result<T, clockflake_lease::LeaseError>) -> T {
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        match call() {
            Ok(value) => return value,
            Err(error) if error.code() == "COORDINATOR_UNAVAILABLE" && Instant::now() < until => {
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(error) => panic!("{error}"),
        }
    }
}

/// `call` on a thread of its own: what it returned and how long it took, or `None` if it had
/// not returned after `limit` (it is left running: a hang fails the test instead of hanging it).
pub fn within<T: Send + 'static>(
    limit: Duration,
    call: impl FnOnce() -> T + Send + 'static,
) -> Option<(T, Duration)> {
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let started = Instant::now();
        let result = call();
        let _ = sender.send((result, started.elapsed()));
    });
    receiver.recv_timeout(limit).ok()
}

/// The layout of `--single-worker`: one worker id, so a rival can only take that one.
pub fn single_worker() -> Layout {
    Layout::new(
        &[
            (Field::Timestamp, 41),
            (Field::ClockSeq, 3),
            (Field::Sequence, 12),
        ],
        1,
        Layout::CLOCKSEQ.epoch_ms(),
    )
    .unwrap()
}

pub fn probe(args: &[&str]) -> Command {
    let mut command = Command::new(PROBE);
    command.args(args);
    command
}

/// Runs the probe to its end and returns its stdout; a failed run fails the test with both
/// of its outputs.
pub fn probe_stdout(args: &[&str]) -> Vec<u8> {
    let output = probe(args).output().unwrap();
    assert!(
        output.status.success(),
        "probe {args:?}: {}\nstdout: {}",
        String::from_utf8_lossy(&output.stderr),
        String::from_utf8_lossy(&output.stdout)
    );
    output.stdout
}

/// Ids from `--binary` output (a trailing partial id, cut by kill -9, is dropped).
pub fn binary_ids(bytes: &[u8]) -> Vec<u64> {
    bytes
        .chunks_exact(8)
        .map(|chunk| u64::from_le_bytes(chunk.try_into().unwrap()))
        .collect()
}

/// Ids from text output.
pub fn text_ids(text: &str) -> Vec<u64> {
    text.lines()
        .filter_map(|line| line.strip_prefix("id "))
        .map(|id| id.parse().unwrap())
        .collect()
}

pub fn assert_unique(label: &str, ids: impl IntoIterator<Item = u64>) -> usize {
    let mut seen = HashSet::new();
    let mut count = 0;
    for id in ids {
        assert!(seen.insert(id), "{label}: duplicate id {id}");
        count += 1;
    }
    count
}

pub fn signal(child: &Child, name: &str) {
    let status = Command::new("kill")
        .args([&format!("-{name}"), &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "kill -{name}");
}

/// A child whose stdout lines are collected, each with the wall ms it was read at.
pub struct Watched {
    pub child: Child,
    pub lines: Arc<Mutex<Vec<(u64, String)>>>,
    reader: Option<JoinHandle<()>>,
}

impl Watched {
    pub fn spawn(mut command: Command) -> Watched {
        let mut child = command.stdout(Stdio::piped()).spawn().unwrap();
        let stdout = child.stdout.take().unwrap();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&lines);
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                sink.lock()
                    .unwrap()
                    .push((clockflake_lease::wall_ms(), line));
            }
        });
        Watched {
            child,
            lines,
            reader: Some(reader),
        }
    }

    pub fn count_ids(&self) -> usize {
        let lines = self.lines.lock().unwrap();
        lines.iter().filter(|(_, l)| l.starts_with("id ")).count()
    }

    pub fn wait_for_ids(&self, n: usize) {
        let started = std::time::Instant::now();
        while self.count_ids() < n {
            assert!(
                started.elapsed().as_secs() < 20,
                "child produced no ids: {:?}",
                self.lines.lock().unwrap()
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    /// Kills the child and returns every line it printed.
    pub fn finish(mut self) -> Vec<(u64, String)> {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(reader) = self.reader.take() {
            reader.join().unwrap();
        }
        let lines = self.lines.lock().unwrap();
        lines.clone()
    }
}

/// A throwaway test server, which a make target starts and names in an environment variable.
pub struct TestServer {
    /// What it is, for messages.
    name: &'static str,
    /// The variable that holds its URL.
    variable: &'static str,
    /// The variable that turns a missing server into a failure (`None`: always required).
    required: Option<&'static str>,
    /// The make target that starts it.
    target: &'static str,
}

pub const PG: TestServer = TestServer {
    name: "PostgreSQL",
    variable: "CLOCKFLAKE_PG_URL",
    required: None,
    target: "test-lease",
};

pub const ZK: TestServer = TestServer {
    name: "ZooKeeper",
    variable: "CLOCKFLAKE_ZK_URL",
    required: Some("CLOCKFLAKE_ZK_REQUIRED"),
    target: "test-zookeeper",
};

/// Its URL is `redis://:PASSWORD@127.0.0.1:PORT/0`.
pub const REDIS: TestServer = TestServer {
    name: "Redis",
    variable: "CLOCKFLAKE_REDIS_URL",
    required: Some("CLOCKFLAKE_REDIS_REQUIRED"),
    target: "test-redis",
};

impl TestServer {
    fn missing(&self) -> ! {
        panic!(
            "{} is not set: run `make {}`, which starts a throwaway {}",
            self.variable, self.target, self.name
        )
    }

    pub fn url(&self) -> String {
        std::env::var(self.variable).unwrap_or_else(|_| self.missing())
    }

    /// Whether the server is there. Outside its make target (`cargo test`, `make test-lease`)
    /// the tests that need it are skipped, unless its `required` variable is set (as the make
    /// target sets it), which turns a missing server into a failure.
    pub fn available(&self) -> bool {
        if std::env::var_os(self.variable).is_some() {
            return true;
        }
        if self
            .required
            .is_none_or(|required| std::env::var_os(required).is_some())
        {
            self.missing();
        }
        eprintln!(
            "skipped: {} is not set (run `make {}`)",
            self.variable, self.target
        );
        false
    }

    /// `None` without the server (the test is skipped), else the test's `turn`.
    pub fn turn(&self, serial: &'static Mutex<()>) -> Option<MutexGuard<'static, ()>> {
        self.available().then(|| turn(serial))
    }

    /// A fresh namespace `name` (see `app`) for a test that needs no turn; `None` without the
    /// server (the test is skipped).
    pub fn app(&self, name: &str) -> Option<String> {
        self.available().then(|| app(name))
    }

    /// The URI of namespace `app` with a TTL of `ttl`, on a server whose coordinator takes both
    /// as query parameters (PostgreSQL, Redis).
    pub fn app_uri(&self, app: &str, ttl: &str) -> String {
        format!("{}?app={app}&ttl={ttl}", self.url())
    }

    /// The test's `turn` and a fresh namespace `name` with a TTL of `ttl` (see `app_uri`), the
    /// start of most tests against PostgreSQL and Redis: (the turn, the app, its URI); `None`
    /// without the server (the test is skipped).
    pub fn namespace(
        &self,
        serial: &'static Mutex<()>,
        name: &str,
        ttl: &str,
    ) -> Option<(MutexGuard<'static, ()>, String, String)> {
        let turn = self.turn(serial)?;
        let app = app(name);
        let uri = self.app_uri(&app, ttl);
        Some((turn, app, uri))
    }
}

/// The tests that every coordinator whose leases expire on the server's clock (PostgreSQL,
/// Redis) runs alike, written once and expanded as `#[test]`s of the binary that names the
/// `server`, its `serial` turn lock, the paused holders' TTL (as the URI says it and in ms) and
/// settle time (see `paused_holder`), and the name of its test of
/// `a_grant_refused_before_any_id_leaves_the_worker_id_usable`.
#[allow(unused_macros)] // postgres.rs and redis.rs expand it, the other binaries do not
macro_rules! expiring_lease_tests {
    (
        $server:expr, $serial:expr,
        paused_ttl: ($ttl:literal, $ttl_ms:literal), settle_ms: $settle_ms:literal,
        fresh: $fresh:ident $(,)?
    ) => {
        #[test]
        fn two_hundred_clients_race_for_128_worker_ids() {
            let Some((_serial, _, uri)) = $server.namespace(&$serial, "race", "30s") else {
                return;
            };
            $crate::common::two_hundred_clients_race_for_128_worker_ids(&uri);
        }

        /// A holder stopped with SIGSTOP for `factor` x the TTL while a rival tries to take its id.
        fn paused_holder(factor: f64) {
            let Some((_serial, _, uri)) = $server.namespace(&$serial, "pause", $ttl) else {
                return;
            };
            $crate::common::paused_holder(&uri, $ttl_ms, factor, $settle_ms);
        }

        #[test]
        fn a_holder_paused_for_half_the_ttl_keeps_its_lease() {
            paused_holder(0.5);
        }

        #[test]
        fn a_holder_paused_for_the_ttl_issues_nothing_after_its_deadline() {
            paused_holder(1.0);
        }

        #[test]
        fn a_holder_paused_for_twice_the_ttl_issues_nothing_after_its_deadline() {
            paused_holder(2.0);
        }

        #[test]
        fn handover_from_a_holder_whose_clock_runs_2s_ahead_repeats_nothing() {
            let Some((_serial, _, uri)) = $server.namespace(&$serial, "ahead", "1s") else {
                return;
            };
            let killed_uri = uri.replace("app=ahead", "app=ahead-killed");
            $crate::common::handover_from_2s_ahead_released_and_killed(&uri, &killed_uri);
        }

        #[test]
        fn $fresh() {
            let Some((_serial, _, uri)) = $server.namespace(&$serial, "fresh", "2s") else {
                return;
            };
            $crate::common::a_grant_refused_before_any_id_leaves_the_worker_id_usable(&uri);
        }
    };
}
#[allow(unused_imports)]
pub(crate) use expiring_lease_tests;

/// A test's turn on a shared server: the tests of one binary that must not overlap (timing
/// tests, tests that stop the server) each hold `serial` while they run.
pub fn turn(serial: &'static Mutex<()>) -> MutexGuard<'static, ()> {
    serial
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

pub fn pg_script(action: &str) {
    server_script("postgres.sh", action);
}

/// Calls `next` for `ms` milliseconds, pausing 50 µs between ids (about 15 ids per ms).
pub fn paced(ms: u64, mut next: impl FnMut() -> u64) -> Vec<u64> {
    let until = std::time::Instant::now() + std::time::Duration::from_millis(ms);
    let mut ids = Vec::new();
    while std::time::Instant::now() < until {
        ids.push(next());
        std::thread::sleep(std::time::Duration::from_micros(50));
    }
    ids
}

/// Opens `uri`, takes one id and closes (the lease given back, its record stored): that id.
pub fn one_id_and_close(uri: &str, layout: Layout, options: LeaseOptions) -> u64 {
    let gen = open(uri, layout, options).unwrap();
    let id = gen.next_id().unwrap();
    gen.close().unwrap();
    id
}

/// `n` ids from `gen`, one `next_id` call each.
pub fn next_ids(gen: &LeasedGenerator, n: usize) -> Vec<u64> {
    (0..n).map(|_| gen.next_id().unwrap()).collect()
}

/// Options whose clock reads the system's wall clock moved by `offset_ms` (negative: behind).
pub fn offset_clock(offset_ms: i64) -> LeaseOptions {
    LeaseOptions {
        clock: Some(Arc::new(move || wall_ms().saturating_add_signed(offset_ms))),
        ..LeaseOptions::default()
    }
}

/// Handover from a holder whose clock runs 2 s ahead, on the coordinator `uri` names: about
/// 15 ids per ms for 300 ms of the first holder's clock, closed, then 2.5 s of the next
/// holder's, whose clock passes through the first one's times. Had the next holder ignored the
/// stored marks, the same (time, clock_seq, worker, sequence) would repeat. Returns the next
/// holder, still open.
pub fn handover_from_2s_ahead_repeats_nothing(uri: &str, label: &str) -> LeasedGenerator {
    let first = open(uri, Layout::CLOCKSEQ, offset_clock(2000)).unwrap();
    let ids = paced(300, || first.next_id().unwrap());
    first.close().unwrap();
    let second = open(uri, Layout::CLOCKSEQ, LeaseOptions::default()).unwrap();
    assert_eq!(second.worker_id(), first.worker_id());
    let next = paced(2500, || second.next_id().unwrap());
    let cs = |id: u64| Layout::CLOCKSEQ.decode(id).unwrap().clock_seq;
    assert_ne!(
        cs(next[0]),
        cs(ids[0]),
        "the new holder moved clock sequence"
    );
    assert_unique(label, ids.iter().chain(&next).copied());
    second
}

/// Both handovers from a holder whose clock runs 2 s ahead, on a coordinator whose leases
/// expire: released cleanly on `released_uri` (the next holder is granted at once, see
/// `handover_from_2s_ahead_repeats_nothing`), and killed on `killed_uri` (a namespace with one
/// worker id), where the lease expires on the server's clock and the rival resumes from the
/// marks in another clock sequence, repeating nothing.
pub fn handover_from_2s_ahead_released_and_killed(released_uri: &str, killed_uri: &str) {
    let second = handover_from_2s_ahead_repeats_nothing(released_uri, "released handover");
    second.close().unwrap();

    let layout = single_worker();
    let holder = Watched::spawn(probe(&[
        "--uri",
        killed_uri,
        "--single-worker",
        "--offset-ms",
        "2000",
        "--every-ms",
        "1",
    ]));
    holder.wait_for_ids(300);
    std::thread::sleep(Duration::from_millis(300));
    let lines = holder.finish(); // SIGKILL: no release
    let text: String = lines.iter().map(|(_, l)| format!("{l}\n")).collect();
    let killed_ids = text_ids(&text);
    let (rival, _) = open_when_free(killed_uri, layout, Duration::from_secs(5));
    let rival_ids = paced(2500, || rival.next_id().unwrap());
    let cs = |id: u64| layout.decode(id).unwrap().clock_seq;
    assert_ne!(cs(rival_ids[0]), cs(killed_ids[0]));
    assert_unique(
        "killed handover",
        killed_ids.iter().chain(&rival_ids).copied(),
    );
    rival.close().unwrap();
}

/// Runs `scripts/NAME action` (the throwaway test servers), asserting success; its stdout.
pub fn server_script(name: &str, action: &str) -> String {
    script(name, &[action])
}

/// Runs `scripts/NAME ARGS...`; its stdout, trimmed. A failure fails the test with its stderr.
pub fn script(name: &str, args: &[&str]) -> String {
    let path = format!("{}/../scripts/{name}", env!("CARGO_MANIFEST_DIR"));
    let output = Command::new(path).args(args).output().unwrap();
    assert!(
        output.status.success(),
        "{name} {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap().trim().to_owned()
}

pub fn redis_script(action: &str) -> String {
    server_script("redis.sh", action)
}

pub fn zookeeper_script(action: &str) {
    server_script("zookeeper.sh", action);
}

/// A plain connection to the test server, to look at (or damage) the keys.
pub fn redis_connection() -> redis::Connection {
    redis::Client::open(REDIS.url())
        .unwrap()
        .get_connection()
        .unwrap()
}

/// Opens `uri` as soon as a worker id is free (waiting at most `patience`), and when.
pub fn open_when_free(uri: &str, layout: Layout, patience: Duration) -> (LeasedGenerator, u64) {
    let started = Instant::now();
    loop {
        match open(uri, layout, LeaseOptions::default()) {
            Ok(gen) => return (gen, wall_ms()),
            Err(error)
                if error.code() == "WORKER_POOL_EXHAUSTED" && started.elapsed() < patience =>
            {
                std::thread::sleep(Duration::from_millis(20))
            }
            Err(error) => panic!("open: {error}"),
        }
    }
}

fn timestamp_of(layout: &Layout, id: u64) -> u64 {
    layout.decode(id).unwrap().timestamp_ms
}

/// Opens every one of `uris` (with `Layout::CLOCKSEQ`) at once, each on a thread of its own
/// released by one barrier: the results, in the order of `uris`.
pub fn open_all_at_once(uris: Vec<String>) -> Vec<Result<LeasedGenerator, LeaseError>> {
    let barrier = Arc::new(Barrier::new(uris.len()));
    let clients: Vec<_> = uris
        .into_iter()
        .map(|uri| {
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || {
                barrier.wait();
                open(&uri, Layout::CLOCKSEQ, LeaseOptions::default())
            })
        })
        .collect();
    clients.into_iter().map(|c| c.join().unwrap()).collect()
}

/// 200 clients race for the 128 worker ids of `clockseq` on `uri` (a TTL long enough for
/// the race): exactly 128 grants, each worker id once, 72 `WORKER_POOL_EXHAUSTED`, and the
/// holders' ids unique. Run against every coordinator with expiring leases.
pub fn two_hundred_clients_race_for_128_worker_ids(uri: &str) {
    let results = open_all_at_once(vec![uri.to_owned(); 200]);
    let mut granted = Vec::new();
    let mut refused = 0;
    for result in &results {
        match result {
            Ok(gen) => granted.push(gen.worker_id()),
            Err(error) => {
                assert_eq!(error.code(), "WORKER_POOL_EXHAUSTED", "{error}");
                refused += 1;
            }
        }
    }
    granted.sort_unstable();
    assert_eq!(
        granted,
        (0..128).collect::<Vec<_>>(),
        "exactly 128 grants, each id once"
    );
    assert_eq!(refused, 72);
    // Every holder can issue ids, and they are unique across holders.
    let ids = results
        .iter()
        .flatten()
        .flat_map(|gen| (0..50).map(|_| gen.next_id().unwrap()).collect::<Vec<_>>());
    assert_eq!(assert_unique("128 holders", ids), 128 * 50);
    for gen in results.iter().flatten() {
        gen.close().unwrap();
    }
}

/// A holder of the only worker id of `uri` (with a TTL of `ttl_ms`) stopped with SIGSTOP
/// for `factor` x the TTL while a rival tries to take its id; `settle_ms` after the rival's
/// ids, the holder's output is read. Under the TTL it keeps its lease; from the TTL on it
/// issues nothing after its deadline and the rival gets the id; ids never repeat.
pub fn paused_holder(uri: &str, ttl_ms: u64, factor: f64, settle_ms: u64) {
    let layout = single_worker();
    let uri = uri.to_owned();
    let holder = Watched::spawn(probe(&[
        "--uri",
        &uri,
        "--single-worker",
        "--every-ms",
        "2",
    ]));
    holder.wait_for_ids(50);
    let pause = Duration::from_millis((ttl_ms as f64 * factor) as u64);
    signal(&holder.child, "STOP");
    let stopped_at = wall_ms();
    // The rival asks for the only worker id every 20 ms while the holder is stopped. A request
    // slower than its patience (half the TTL: 500 ms at 1 s) is retried, as a caller would: a
    // clean-clone make test saw a Redis reply take longer once, on this loaded 2-core machine.
    let rival = {
        let uri = uri.clone();
        std::thread::spawn(move || {
            let until = Instant::now() + pause;
            loop {
                match open(&uri, layout, LeaseOptions::default()) {
                    Ok(gen) => return Some((gen, wall_ms())),
                    Err(error) if error.code() == "COORDINATOR_UNAVAILABLE" => {}
                    Err(error) => assert_eq!(error.code(), "WORKER_POOL_EXHAUSTED", "{error}"),
                }
                if Instant::now() >= until {
                    return None;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };
    std::thread::sleep(pause);
    signal(&holder.child, "CONT");
    let continued_at = wall_ms();
    let mut rival = rival.join().unwrap();
    if factor >= 1.0 && rival.is_none() {
        // The lease expired at the end of the pause at the latest: the rival gets it now.
        rival = Some(open_when_free(&uri, layout, Duration::from_secs(3)));
    }
    let rival_ids: Vec<u64> = match &rival {
        Some((gen, _)) => paced(300, || gen.next_id().unwrap()),
        None => Vec::new(),
    };
    std::thread::sleep(Duration::from_millis(settle_ms));
    let lines = holder.finish();
    let text: String = lines.iter().map(|(_, l)| format!("{l}\n")).collect();
    let holder_ids = text_ids(&text);
    let after_pause: Vec<u64> = holder_ids
        .iter()
        .copied()
        .filter(|&id| timestamp_of(&layout, id) > stopped_at + 50)
        .collect();
    if factor < 1.0 {
        assert!(rival.is_none(), "the rival got a live lease");
        assert!(
            after_pause
                .iter()
                .any(|&id| timestamp_of(&layout, id) > continued_at),
            "the holder kept its lease and went on"
        );
        assert!(!text.contains("error "), "{text}");
    } else {
        let (_, granted_at) = rival.as_ref().unwrap();
        assert!(*granted_at >= stopped_at);
        assert!(
            after_pause.is_empty(),
            "the paused holder issued ids after its deadline: {:?}",
            after_pause
                .iter()
                .map(|&id| timestamp_of(&layout, id) - stopped_at)
                .collect::<Vec<_>>()
        );
        assert!(text.contains("error LEASE_LOST"), "{text}");
        assert!(rival_ids.len() > 100);
    }
    assert_unique(
        "holder + rival",
        holder_ids.iter().chain(&rival_ids).copied(),
    );
}

/// On `uri` (a single-worker namespace): a grant refused before any id (a layout whose epoch
/// is in the future) issued nothing, and the worker id stays usable, because its first grant
/// wrote an empty record (never NULL, which would read as lost marks).
pub fn a_grant_refused_before_any_id_leaves_the_worker_id_usable(uri: &str) {
    let future = Layout::new(
        &[(Field::Timestamp, 41), (Field::Sequence, 12)],
        1,
        wall_ms() + 3_600_000,
    );
    let refused = open(uri, future.unwrap(), LeaseOptions::default()).unwrap_err();
    assert_eq!(refused.code(), "EPOCH_IN_FUTURE", "{refused}");
    one_id_and_close(uri, single_worker(), LeaseOptions::default());
}

/// Opens `uri` with `layout` and default options, expecting a refusal with `code`: the error,
/// for the test to look at what it says.
pub fn open_refused(uri: &str, layout: Layout, code: &str) -> LeaseError {
    let error = open(uri, layout, LeaseOptions::default()).unwrap_err();
    assert_eq!(error.code(), code, "{error}");
    error
}

/// On `uri` (a single-worker namespace): ids issued and the lease given back, then
/// `lose_marks` erases the stored record (a careless migration, a restored backup). Read as
/// "never used", a holder whose clock is a minute behind would repeat those ids: it is refused
/// with `INVALID_STATE`, saying the marks were lost. The caller checks the record is left alone.
pub fn a_record_that_lost_its_marks_is_refused(uri: &str, lose_marks: impl FnOnce()) {
    let layout = single_worker();
    let gen = open(uri, layout, LeaseOptions::default()).unwrap();
    let issued = paced(50, || gen.next_id().unwrap());
    gen.close().unwrap();
    lose_marks();
    let error = open(uri, layout, offset_clock(-60_000)).unwrap_err();
    assert_eq!(error.code(), "INVALID_STATE", "{error}");
    assert!(error.to_string().contains("lost"), "{error}");
    assert!(!issued.is_empty());
}

/// Runs `processes` probes with `args` (which include `--binary`) at the same time, each to
/// its end, and asserts that each succeeded and issued every id under the one worker id it
/// reported: (that worker id, its ids) per process.
pub fn binary_probes_at_once(processes: usize, args: &[&str]) -> Vec<(u64, Vec<u64>)> {
    let children: Vec<_> = (0..processes)
        .map(|_| {
            probe(args)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    children
        .into_iter()
        .map(|child| {
            let output = child.wait_with_output().unwrap();
            let stderr = String::from_utf8_lossy(&output.stderr).to_string();
            assert!(output.status.success(), "probe failed: {stderr}");
            let worker: u64 = stderr
                .lines()
                .find_map(|l| l.strip_prefix("worker "))
                .unwrap_or_else(|| panic!("no worker line: {stderr}"))
                .parse()
                .unwrap();
            let ids = binary_ids(&output.stdout);
            for id in &ids {
                assert_eq!(
                    Layout::CLOCKSEQ.decode(*id).unwrap().worker_id,
                    worker,
                    "one process, one worker id"
                );
            }
            (worker, ids)
        })
        .collect()
}

/// A call made over and over on a thread of its own until `stop`: its results, in order.
pub struct Repeating<T> {
    running: Arc<AtomicBool>,
    thread: JoinHandle<Vec<T>>,
}

impl<T: Send + 'static> Repeating<T> {
    pub fn start(mut call: impl FnMut() -> T + Send + 'static) -> Repeating<T> {
        let running = Arc::new(AtomicBool::new(true));
        let thread = {
            let running = Arc::clone(&running);
            std::thread::spawn(move || {
                let mut results = Vec::new();
                while running.load(Ordering::Relaxed) {
                    results.push(call());
                }
                results
            })
        };
        Repeating { running, thread }
    }

    /// Stops after the call under way; every result.
    pub fn stop(self) -> Vec<T> {
        self.running.store(false, Ordering::Relaxed);
        self.thread.join().unwrap()
    }
}

/// After an outage of the coordinator `uri` names: a new lease as soon as it answers again
/// (within 15 s) issues ids, and none of them repeats one of `before`.
pub fn a_new_lease_continues_after(uri: &str, before: &[u64], label: &str) {
    let started = Instant::now();
    let again = loop {
        match open(uri, Layout::CLOCKSEQ, LeaseOptions::default()) {
            Ok(gen) => break gen,
            Err(error) => {
                assert!(started.elapsed() < Duration::from_secs(15), "{error}");
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    };
    let after = paced(200, || again.next_id().unwrap());
    assert!(!after.is_empty());
    assert_unique(label, before.iter().chain(&after).copied());
    again.close().unwrap();
}

/// The PostgreSQL row of the single-worker namespace `app` after a refused open: asserts it
/// was given back (no owner) and returns its marks, which the refusal must leave alone.
pub fn pg_given_back_marks(client: &mut PgClient, app: &str) -> Option<Vec<Option<i64>>> {
    let row = client
        .query_one(
            "SELECT owner, high_water_ms FROM clockflake_leases WHERE app = $1",
            &[&app],
        )
        .unwrap();
    assert_eq!(row.get::<_, Option<String>>("owner"), None, "given back");
    row.get("high_water_ms")
}

/// A client for the tests' own statements on a test server: tokio-postgres (as the library uses
/// it) on a one-thread runtime, with the synchronous calls the tests make. Not the `postgres`
/// crate: as a dev-dependency it was built by every test build, the loom build too, where
/// tokio has no `net`.
pub struct PgClient {
    runtime: tokio::runtime::Runtime,
    client: tokio_postgres::Client,
}

type PgResult<T> = Result<T, tokio_postgres::Error>;
type Params<'a> = &'a [&'a (dyn tokio_postgres::types::ToSql + Sync)];

impl PgClient {
    pub fn connect(url: &str) -> PgResult<PgClient> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let (client, connection) =
            runtime.block_on(tokio_postgres::connect(url, tokio_postgres::NoTls))?;
        runtime.spawn(connection);
        Ok(PgClient { runtime, client })
    }

    pub fn batch_execute(&mut self, sql: &str) -> PgResult<()> {
        self.runtime.block_on(self.client.batch_execute(sql))
    }

    pub fn execute(&mut self, sql: &str, params: Params<'_>) -> PgResult<u64> {
        self.runtime.block_on(self.client.execute(sql, params))
    }

    pub fn query(&mut self, sql: &str, params: Params<'_>) -> PgResult<Vec<tokio_postgres::Row>> {
        self.runtime.block_on(self.client.query(sql, params))
    }

    pub fn query_one(&mut self, sql: &str, params: Params<'_>) -> PgResult<tokio_postgres::Row> {
        self.runtime.block_on(self.client.query_one(sql, params))
    }
}
