//! The wall clock jumps an hour ahead for 1.5 s and comes back (libfaketime, Debian's `faketime`
//! package), while a child process issues ids with `Generator::next_id` on the process's
//! `MonotonicClock`: within 2 s of the return its ids carry the real time again, and no id
//! repeats over the whole run. The test binary is its own child: `excursion_child` does the
//! work only when the parent starts it with `CLOCKFLAKE_EXCURSION_DIR` set.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clockflake::{Generator, Layout, Options};

const LIBFAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";
const CHILD_ENV: &str = "CLOCKFLAKE_EXCURSION_DIR";
const HOUR_MS: u64 = 3_600_000;

fn real_now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// The child: ids in batches of 64 with a short sleep between, a sample id on stdout every
/// 5 ms, every id written to `ids.bin` at the end; stops when the parent creates `stop`.
#[test]
fn excursion_child() {
    let Some(dir) = std::env::var_os(CHILD_ENV) else {
        return; // run by the parent only
    };
    let dir = PathBuf::from(dir);
    let gen = Generator::new(Layout::CLOCKSEQ, 5, Options::default()).unwrap();
    let mut ids: Vec<u64> = Vec::with_capacity(1 << 20);
    let started = Instant::now();
    let mut last_sample = Instant::now() - Duration::from_secs(1);
    let stdout = std::io::stdout();
    while started.elapsed() < Duration::from_secs(10) && !dir.join("stop").exists() {
        for _ in 0..64 {
            ids.push(gen.next_id().unwrap());
        }
        if last_sample.elapsed() >= Duration::from_millis(5) {
            last_sample = Instant::now();
            writeln!(stdout.lock(), "id {}", ids[ids.len() - 1]).unwrap();
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    let bytes: Vec<u8> = ids.iter().flat_map(|id| id.to_le_bytes()).collect();
    std::fs::write(dir.join("ids.bin"), bytes).unwrap();
    writeln!(stdout.lock(), "done {}", ids.len()).unwrap();
}

fn set_offset(file: &Path, offset: &str) {
    // Written whole then renamed, so the child never reads a half-written file.
    let part = file.with_extension("part");
    std::fs::write(&part, format!("{offset}\n")).unwrap();
    std::fs::rename(&part, file).unwrap();
}

#[test]
fn ids_follow_the_wall_clock_back_after_an_excursion_to_the_future() {
    if std::env::var_os(CHILD_ENV).is_some() {
        return;
    }
    assert!(
        Path::new(LIBFAKETIME).exists(),
        "{LIBFAKETIME} is missing: install Debian's faketime (apt-get install -y faketime; make test-core does)"
    );
    let dir = std::env::temp_dir().join(format!(
        "clockflake-excursion-{}-{}",
        std::process::id(),
        real_now_ms()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let offset = dir.join("faketime.rc");
    set_offset(&offset, "+0s");

    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "excursion_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, &dir)
        .env("LD_PRELOAD", LIBFAKETIME)
        .env("FAKETIME_TIMESTAMP_FILE", &offset)
        .env("FAKETIME_NO_CACHE", "1")
        .env("FAKETIME_DONT_FAKE_MONOTONIC", "1")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();

    // Every sample id, stamped with the real time it arrived at (the parent is not faked).
    let (tx, rx) = mpsc::channel::<(u64, String)>();
    let stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let line = line.unwrap();
            if tx.send((real_now_ms(), line)).is_err() {
                break;
            }
        }
    });
    let first = rx.recv_timeout(Duration::from_secs(20));
    assert!(first.is_ok(), "the child printed nothing");

    std::thread::sleep(Duration::from_millis(300));
    set_offset(&offset, "+3600s");
    let away = real_now_ms();
    std::thread::sleep(Duration::from_millis(1500));
    set_offset(&offset, "+0s");
    let back = real_now_ms();
    std::thread::sleep(Duration::from_millis(2400));
    std::fs::write(dir.join("stop"), b"").unwrap();
    let status = child.wait().unwrap();
    reader.join().unwrap();
    assert!(status.success(), "the child failed: {status}");

    let layout = Layout::CLOCKSEQ;
    let mut samples = Vec::new();
    for (received_ms, line) in rx.try_iter() {
        if let Some(id) = line.strip_prefix("id ") {
            let id: u64 = id.parse().unwrap();
            samples.push((received_ms, layout.decode(id).unwrap()));
        }
    }
    // The excursion happened: the clock followed the wall clock forward.
    let ahead = samples
        .iter()
        .filter(|(at, parts)| *at > away && *at < back && parts.timestamp_ms > at + HOUR_MS - 5000)
        .count();
    assert!(
        ahead > 0,
        "no id carried the excursion's time: did libfaketime load?"
    );
    // Within 2 s of the return, ids carry the real time again.
    let late: Vec<_> = samples
        .iter()
        .filter(|(at, _)| *at >= back + 2000)
        .collect();
    assert!(
        late.len() >= 20,
        "only {} samples after the return",
        late.len()
    );
    for (at, parts) in &late {
        assert!(
            parts.timestamp_ms.abs_diff(*at) < 1000,
            "{} ms after the return an id carries {} Unix ms, {} ms from the real time",
            at - back,
            parts.timestamp_ms,
            parts.timestamp_ms as i64 - *at as i64
        );
    }
    // No id twice over the whole run.
    let bytes = std::fs::read(dir.join("ids.bin")).unwrap();
    let mut ids: Vec<u64> = bytes
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert!(ids.len() > 10_000, "only {} ids", ids.len());
    ids.sort_unstable();
    let repeats = ids.windows(2).filter(|w| w[0] == w[1]).count();
    assert_eq!(repeats, 0, "{repeats} ids repeated among {}", ids.len());
    std::fs::remove_dir_all(&dir).unwrap();
}
