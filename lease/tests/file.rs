//! The embedded `file://` coordinator against the real file system, with real processes.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::fs;
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clockflake::{Layout, State};
use clockflake_lease::{
    open, wall_ms, Coordinator, FileCoordinator, Grant, LeaseError, LeaseOptions, LeasedGenerator,
};
use common::*;

fn uri(dir: &Path, app: &str) -> String {
    format!("file://{}?app={app}", dir.display())
}

#[test]
fn the_129th_holder_gets_worker_pool_exhausted() {
    let dir = TempDir::new("pool");
    let uri = uri(&dir, "orders");
    let held: Vec<_> = (0..128)
        .map(|_| open(&uri, Layout::CLOCKSEQ, LeaseOptions::default()).unwrap())
        .collect();
    let mut workers: Vec<u64> = held.iter().map(|g| g.worker_id()).collect();
    workers.sort_unstable();
    assert_eq!(workers, (0..128).collect::<Vec<_>>());
    let error = open(&uri, Layout::CLOCKSEQ, LeaseOptions::default()).unwrap_err();
    assert_eq!(error.code(), "WORKER_POOL_EXHAUSTED");
    assert_eq!(
        error,
        clockflake_lease::LeaseError::WorkerPoolExhausted { workers: 128 }
    );
    // Another namespace has its own pool.
    let other = open(
        &uri.replace("orders", "billing"),
        Layout::CLOCKSEQ,
        LeaseOptions::default(),
    )
    .unwrap();
    assert_eq!(other.worker_id(), 0);
    // A released worker id is recycled.
    held[77].close().unwrap();
    assert_eq!(held[77].next_id().unwrap_err().code(), "GENERATOR_CLOSED");
    let again = open(&uri, Layout::CLOCKSEQ, LeaseOptions::default()).unwrap();
    assert_eq!(again.worker_id(), 77);
}

#[test]
fn layouts_with_more_than_65536_worker_ids_are_refused() {
    let dir = TempDir::new("wide");
    let wide = Layout::new(
        &[
            (clockflake::Field::Timestamp, 41),
            (clockflake::Field::Worker, 17),
            (clockflake::Field::Sequence, 5),
        ],
        1,
        Layout::CLOCKSEQ.epoch_ms(),
    )
    .unwrap();
    let error = open(&uri(&dir, "w"), wide, LeaseOptions::default()).unwrap_err();
    assert_eq!(error.code(), "INVALID_LAYOUT");
    assert!(error.is_input_error());
}

#[test]
fn sixteen_processes_times_100_000_ids_are_all_unique() {
    let dir = TempDir::new("sixteen");
    let uri = uri(&dir, "many");
    let mut all = Vec::new();
    let mut workers = Vec::new();
    for (worker, ids) in
        binary_probes_at_once(16, &["--uri", &uri, "--count", "100000", "--binary"])
    {
        workers.push(worker);
        assert_eq!(ids.len(), 100_000);
        all.extend(ids);
    }
    workers.sort_unstable();
    workers.dedup();
    assert_eq!(workers.len(), 16, "16 concurrent holders, 16 worker ids");
    assert_eq!(assert_unique("16 x 100,000", all), 1_600_000);
}

#[test]
fn kill_9_mid_write_then_restart_with_the_clock_back_1s_and_1h_never_repeats() {
    let dir = TempDir::new("crash");
    let app = "crash";
    // Each write goes to a temporary file of its own: worker-0.state.tmp.PID.SEQ.
    let temp_exists = || {
        fs::read_dir(dir.join(app)).is_ok_and(|entries| {
            entries.flatten().any(|entry| {
                entry
                    .file_name()
                    .to_string_lossy()
                    .starts_with("worker-0.state.tmp.")
            })
        })
    };
    let state_file = dir.join(app).join("worker-0.state");
    // A slow state write (test hook) and a short reservation: writes happen all the time.
    let slow = format!(
        "file://{}?app={app}&reserve=200ms&debug_write_delay=150ms",
        dir.display()
    );
    let out1 = dir.join("run1.bin");
    let mut killed_mid_write = false;
    for _attempt in 0..5 {
        let mut child = probe(&["--uri", &slow, "--binary", "--every-ms", "1"])
            .stdout(fs::File::create(&out1).unwrap())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Run long enough that a restart with the clock 1 s back lands in this run's times.
        std::thread::sleep(Duration::from_millis(1500));
        let started = Instant::now();
        while !temp_exists() && started.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(2));
        }
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        if temp_exists() {
            killed_mid_write = true;
            break;
        }
    }
    assert!(
        killed_mid_write,
        "never caught the probe between write and rename"
    );
    // The half-written temporary file is ignored; the state file is the last complete one.
    let stored = FileCoordinator::new(&*dir, app)
        .unwrap()
        .read_state(0)
        .unwrap()
        .unwrap();
    assert!(state_file.exists());
    let run1 = binary_ids(&fs::read(&out1).unwrap());
    assert!(run1.len() > 500, "run 1 issued {} ids", run1.len());
    let last1 = Layout::CLOCKSEQ.decode(*run1.last().unwrap()).unwrap();
    assert!(
        stored.high_water_ms[last1.clock_seq as usize].unwrap() >= last1.timestamp_ms,
        "the stored reservation covers the last id issued"
    );

    let plain = uri(&dir, app);
    let run = |offset_ms: &str, for_ms: &str| {
        binary_ids(&probe_stdout(&[
            "--uri",
            &plain,
            "--binary",
            "--every-ms",
            "1",
            "--for-ms",
            for_ms,
            "--offset-ms",
            offset_ms,
        ]))
    };
    let run2 = run("-1000", "1500");
    let run3 = run("-3600000", "300");
    let cs = |ids: &[u64]| Layout::CLOCKSEQ.decode(ids[0]).unwrap().clock_seq;
    // Each restart found the stored marks ahead of its clock and moved clock sequence.
    assert_ne!(cs(&run2), last1.clock_seq);
    assert_ne!(cs(&run3), cs(&run2));
    assert_ne!(cs(&run3), last1.clock_seq);
    // Run 2's clock covered run 1's last second: without the marks, these would collide.
    let first2 = Layout::CLOCKSEQ.decode(run2[0]).unwrap().timestamp_ms;
    assert!(
        first2 <= last1.timestamp_ms,
        "the restarted clock overlaps run 1's times"
    );
    assert_unique(
        "run 1 + run 2 + run 3",
        run1.iter().chain(&run2).chain(&run3).copied(),
    );
}

#[test]
fn a_corrupt_state_file_is_refused_never_reset() {
    let dir = TempDir::new("corrupt");
    let uri = uri(&dir, "c");
    one_id_and_close(&uri, Layout::CLOCKSEQ, LeaseOptions::default());
    let path = dir.join("c").join("worker-0.state");
    let good = fs::read(&path).unwrap();
    for bad in [
        Vec::new(),
        good[..good.len() / 2].to_vec(),
        b"garbage\n".to_vec(),
        String::from_utf8(good.clone())
            .unwrap()
            .replacen("clock_seq 0", "clock_seq 1", 1)
            .into_bytes(),
    ] {
        fs::write(&path, &bad).unwrap();
        let error = open(&uri, Layout::CLOCKSEQ, LeaseOptions::default()).unwrap_err();
        assert_eq!(error.code(), "INVALID_STATE", "{error}");
        let message = error.to_string();
        assert!(message.contains(&path.display().to_string()), "{message}");
        assert!(message.contains("refusing to reset"), "{message}");
        assert_eq!(fs::read(&path).unwrap(), bad, "the file is left as it was");
    }
    // A valid record of another layout is refused too.
    fs::write(&path, &good).unwrap();
    let error = open(&uri, Layout::TWITTER, LeaseOptions::default()).unwrap_err();
    assert_eq!(error.code(), "INVALID_STATE", "{error}");
    // The refused worker id was given back: the good record opens again.
    let gen = open(&uri, Layout::CLOCKSEQ, LeaseOptions::default()).unwrap();
    assert_eq!(gen.worker_id(), 0);
}

#[test]
fn handover_from_a_holder_whose_clock_runs_2s_ahead_repeats_nothing() {
    let dir = TempDir::new("ahead");
    let uri = uri(&dir, "h");
    drop(handover_from_2s_ahead_repeats_nothing(&uri, "both holders"));
}

#[test]
fn ids_in_a_new_clock_sequence_are_persisted_before_they_are_returned() {
    let dir = TempDir::new("explicit");
    let gen = open(&uri(&dir, "x"), Layout::CLOCKSEQ, LeaseOptions::default()).unwrap();
    let now = wall_ms();
    let a = gen.next_id_at(now).unwrap();
    // The clock steps back 5 s (explicit time): a new clock sequence, persisted first.
    let b = patiently(|| gen.next_id_at(now - 5000));
    let (pa, pb) = (
        Layout::CLOCKSEQ.decode(a).unwrap(),
        Layout::CLOCKSEQ.decode(b).unwrap(),
    );
    assert_ne!(pa.clock_seq, pb.clock_seq);
    let stored = FileCoordinator::new(&*dir, "x")
        .unwrap()
        .read_state(0)
        .unwrap()
        .unwrap();
    assert_eq!(stored.clock_seq, pb.clock_seq);
    assert!(stored.high_water_ms[pb.clock_seq as usize].unwrap() >= pb.timestamp_ms);
    // Far ahead of the reservation: renewed before the id is issued.
    let c = patiently(|| gen.next_id_at(now + 60_000));
    let pc = Layout::CLOCKSEQ.decode(c).unwrap();
    let stored = FileCoordinator::new(&*dir, "x")
        .unwrap()
        .read_state(0)
        .unwrap()
        .unwrap();
    assert!(stored.high_water_ms[pc.clock_seq as usize].unwrap() >= pc.timestamp_ms);
}

/// Runs `work` on four threads at once, each with the one generator and its thread's number:
/// every id they returned.
fn from_four_threads(
    gen: LeasedGenerator,
    work: fn(&LeasedGenerator, usize) -> Vec<u64>,
) -> impl Iterator<Item = u64> {
    let gen = Arc::new(gen);
    let threads: Vec<_> = (0..4)
        .map(|thread| {
            let gen = Arc::clone(&gen);
            std::thread::spawn(move || work(&gen, thread))
        })
        .collect();
    threads.into_iter().flat_map(|t| t.join().unwrap())
}

#[test]
fn one_leased_generator_shared_by_four_threads_repeats_nothing() {
    let dir = TempDir::new("threads");
    let gen = open(&uri(&dir, "t"), Layout::CLOCKSEQ, LeaseOptions::default()).unwrap();
    let ids = from_four_threads(gen, |gen, _| {
        (0..100_000).map(|_| gen.next_id().unwrap()).collect()
    });
    assert_eq!(assert_unique("4 threads", ids), 400_000);
}

#[test]
fn after_a_fork_the_child_refuses_and_leaves_the_parents_lock_alone() {
    let dir = TempDir::new("fork");
    let uri = uri(&dir, "f");
    let gen = open(&uri, Layout::CLOCKSEQ, LeaseOptions::default()).unwrap();
    gen.next_id().unwrap();
    // What the Python binding's at-fork hook calls in the child.
    gen.invalidate_after_fork();
    assert_eq!(gen.next_id().unwrap_err().code(), "WORKER_ID_INVALIDATED");
    assert_eq!(
        gen.try_next_id().unwrap_err().code(),
        "WORKER_ID_INVALIDATED"
    );
    assert!(!gen.is_active());
    drop(gen); // must not unlock: in a real child the lock belongs to the parent
    let other = open(&uri, Layout::CLOCKSEQ, LeaseOptions::default()).unwrap();
    assert_eq!(other.worker_id(), 1, "worker id 0 is still locked");
}

#[test]
fn without_clock_sequences_a_new_holder_behind_the_marks_waits_for_them() {
    let dir = TempDir::new("wait");
    let uri = uri(&dir, "w");
    // No clock-sequence bits (nothing to switch to) and one worker id (no other to prefer).
    let layout = Layout::new(
        &[
            (clockflake::Field::Timestamp, 41),
            (clockflake::Field::Sequence, 12),
        ],
        1,
        Layout::TWITTER.epoch_ms(),
    )
    .unwrap();
    let first = open(&uri, layout, offset_clock(500)).unwrap();
    let ids = paced(100, || first.next_id().unwrap());
    first.close().unwrap();
    let mark = FileCoordinator::new(&*dir, "w")
        .unwrap()
        .read_state(0)
        .unwrap()
        .unwrap()
        .high_water_ms[0]
        .unwrap();
    let second = open(&uri, layout, LeaseOptions::default()).unwrap();
    // Not yet: the non-blocking call says so ...
    assert_eq!(
        second.try_next_id().unwrap_err().code(),
        "CLOCK_MOVED_BACKWARDS"
    );
    // ... and the blocking one waits for the clock to pass the previous holder's mark.
    let id = second.next_id().unwrap();
    assert!(layout.decode(id).unwrap().timestamp_ms > mark);
    let more = paced(50, || second.next_id().unwrap());
    assert_unique("both", ids.iter().chain([&id]).chain(&more).copied());
    second.close().unwrap();

    // A mark an hour ahead is beyond max_handover_wait: refused at once, not waited on.
    let far = open(&uri, layout, offset_clock(3_600_000)).unwrap();
    far.next_id().unwrap();
    far.close().unwrap();
    let behind = open(&uri, layout, LeaseOptions::default()).unwrap();
    let started = Instant::now();
    assert_eq!(
        behind.next_id().unwrap_err().code(),
        "CLOCK_MOVED_BACKWARDS"
    );
    assert!(started.elapsed() < Duration::from_secs(1));
}

/// The stored high-water mark of `cs` (what a later holder starts above).
fn stored_mark(dir: &Path, app: &str, worker: u64, cs: u64) -> u64 {
    FileCoordinator::new(dir, app)
        .unwrap()
        .read_state(worker)
        .unwrap()
        .unwrap()
        .high_water_ms[cs as usize]
        .unwrap()
}

#[test]
fn blocks_and_single_ids_never_repeat_and_stay_inside_the_reservation() {
    let dir = TempDir::new("blocks");
    let layout = Layout::CLOCKSEQ;
    let gen = open(&uri(&dir, "b"), layout, LeaseOptions::default()).unwrap();
    let worker = gen.worker_id();
    assert_eq!(gen.deadline_boot_ms(), None, "file:// leases never expire");
    let mut all = Vec::new();
    // Every block is persisted before it is returned: its tick is at or below the stored
    // mark of its clock sequence.
    let check = |ids: Vec<u64>, all: &mut Vec<u64>| {
        assert!(!ids.is_empty());
        let first = layout.decode(ids[0]).unwrap();
        for (i, &id) in ids.iter().enumerate() {
            let parts = layout.decode(id).unwrap();
            assert_eq!(
                (parts.timestamp_ms, parts.clock_seq),
                (first.timestamp_ms, first.clock_seq),
                "one tick, one clock sequence"
            );
            assert_eq!(parts.sequence, first.sequence + i as u64, "consecutive");
        }
        assert!(stored_mark(&dir, "b", worker, first.clock_seq) >= first.timestamp_ms);
        all.extend(ids);
    };
    let now = wall_ms();
    for round in 0..200u64 {
        check(gen.next_block(64).unwrap().collect(), &mut all);
        check(vec![gen.next_id().unwrap()], &mut all);
        check(gen.try_next_block(4096).unwrap().collect(), &mut all);
        if round % 50 == 0 {
            // Explicit times: a step back (a new clock sequence) and a time far ahead of
            // the reservation (renewed first).
            // Both need a reservation persisted first: `patiently` retries while the renewal
            // thread is late.
            check(
                patiently(|| gen.next_block_at(now - 5000 + round, 16)).collect(),
                &mut all,
            );
            check(
                patiently(|| gen.next_block_at(now + 60_000 + round, 16)).collect(),
                &mut all,
            );
            check(
                vec![patiently(|| gen.next_id_at(now + 60_000 + round))],
                &mut all,
            );
        }
    }
    assert_eq!(gen.next_block(0).unwrap().count(), 0);
    let total = all.len();
    assert_eq!(assert_unique("blocks and single ids", all), total);
    gen.close().unwrap();
    assert_eq!(gen.next_block(8).unwrap_err().code(), "GENERATOR_CLOSED");
    assert_eq!(gen.next_block(0).unwrap_err().code(), "GENERATOR_CLOSED");
}

#[test]
fn blocks_and_single_ids_from_four_threads_never_repeat() {
    let dir = TempDir::new("block-threads");
    let gen = open(&uri(&dir, "t"), Layout::CLOCKSEQ, LeaseOptions::default()).unwrap();
    let ids = from_four_threads(gen, |gen, thread| {
        let mut ids = Vec::new();
        while ids.len() < 100_000 {
            if thread % 2 == 0 {
                ids.extend(gen.next_block(1 + ids.len() as u64 % 300).unwrap());
            }
            ids.push(gen.next_id().unwrap());
        }
        ids
    });
    assert!(assert_unique("4 threads, blocks and ids", ids) >= 400_000);
}

#[test]
fn an_invalid_uri_names_every_coordinator_scheme() {
    let error = open("ftp://host/ids", Layout::CLOCKSEQ, LeaseOptions::default()).unwrap_err();
    assert_eq!(error.code(), "INVALID_URI");
    let message = error.to_string();
    for scheme in [
        "file:///",
        "postgres://",
        "zookeeper://",
        "redis://",
        "k8s:///",
        "env:///",
    ] {
        assert!(message.contains(scheme), "{message}");
    }
}

/// A coordinator that answers its grant only after the lease it grants has run out (a cold
/// server, a stalled network): `FileCoordinator`'s lock with a 200 ms TTL, granted 300 ms
/// after it was asked for.
struct LateGrant(FileCoordinator);

impl Coordinator for LateGrant {
    fn redacted_uri(&self) -> String {
        self.0.redacted_uri()
    }
    fn acquire(&mut self, layout: &Layout, now_ms: u64) -> Result<Grant, LeaseError> {
        let grant = self.0.acquire(layout, now_ms)?;
        std::thread::sleep(Duration::from_millis(300));
        Ok(Grant {
            ttl: Some(Duration::from_millis(200)),
            ..grant
        })
    }
    fn renew(&mut self, state: &State) -> Result<(), LeaseError> {
        self.0.renew(state)
    }
    fn release(&mut self, state: Option<&State>) -> Result<(), LeaseError> {
        self.0.release(state)
    }
    fn read_state(&mut self, worker_id: u64) -> Result<Option<State>, LeaseError> {
        self.0.read_state(worker_id)
    }
}

/// A grant that comes back after its lease's deadline is refused by `open` itself, with a
/// retryable `COORDINATOR_UNAVAILABLE` that says so, and the worker id is given back: `open`
/// returned a generator that refused every id with `LEASE_LOST` (seen on a cold ZooKeeper).
#[test]
fn a_grant_answered_after_its_deadline_is_refused_by_open() {
    let dir = TempDir::new("late-grant");
    let late = LateGrant(FileCoordinator::new(&*dir, "late").unwrap());
    let error = LeasedGenerator::start(
        Box::new(late),
        Layout::CLOCKSEQ,
        LeaseOptions::default(),
        Duration::from_secs(1),
    )
    .map(|gen| gen.next_id())
    .expect_err("open returned a lease past its deadline");
    assert_eq!(error.code(), "COORDINATOR_UNAVAILABLE", "{error}");
    assert!(error.to_string().contains("deadline"), "{error}");
    // The worker id was given back: the next holder gets worker 0.
    let next = open(
        &uri(&dir, "late"),
        Layout::CLOCKSEQ,
        LeaseOptions::default(),
    )
    .unwrap();
    assert_eq!(next.worker_id(), 0);
}
