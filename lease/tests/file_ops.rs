//! The `file://` coordinator against what people and other programs do to its directory: lock
//! files removed while held, permissions, missing parents, planted symlinks.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::time::{Duration, Instant};

use clockflake::Layout;
use clockflake_lease::{open, LeaseError, LeaseOptions};
use common::*;

fn uri(dir: &Path, app: &str) -> String {
    format!("file://{}?app={app}", dir.display())
}

fn mode(path: &Path) -> u32 {
    fs::symlink_metadata(path).unwrap().mode() & 0o7777
}

/// Opens `uri` (the pool `dir`, namespace `app`), takes an id and closes: the modes of DIR,
/// DIR/APP, and worker 0's lock and state files.
fn pool_modes_after_one_id(uri: &str, dir: &Path, app: &str) -> [u32; 4] {
    one_id_and_close(uri, Layout::CLOCKSEQ, LeaseOptions::default());
    let app_dir = dir.join(app);
    [
        mode(dir),
        mode(&app_dir),
        mode(&app_dir.join("worker-0.lock")),
        mode(&app_dir.join("worker-0.state")),
    ]
}

fn chmod(path: &Path, mode: u32) {
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
}

fn open_error(uri: &str) -> LeaseError {
    open(uri, Layout::CLOCKSEQ, LeaseOptions::default()).unwrap_err()
}

/// The worker id a probe printed first (`worker N`), once it has issued its first id; a probe
/// that exits first fails the test with what it wrote to `stderr_path`.
fn worker_of(holder: &mut Watched, stderr_path: &Path) -> u64 {
    let started = Instant::now();
    while holder.count_ids() == 0 {
        if let Some(status) = holder.child.try_wait().unwrap() {
            std::thread::sleep(Duration::from_millis(50)); // the reader's last lines
            panic!(
                "a holder exited ({status}) before its first id: {:?}, stderr {:?}",
                holder.lines.lock().unwrap(),
                fs::read_to_string(stderr_path).unwrap_or_default()
            );
        }
        assert!(started.elapsed() < Duration::from_secs(20), "no id in 20 s");
        std::thread::sleep(Duration::from_millis(2));
    }
    let lines = holder.lines.lock().unwrap();
    lines
        .iter()
        .find_map(|(_, line)| line.strip_prefix("worker "))
        .unwrap()
        .parse()
        .unwrap()
}

/// A probe that is killed if the test panics first (no orphan left holding the pool).
struct Holder(Option<Watched>);

impl Holder {
    fn get(&mut self) -> &mut Watched {
        self.0.as_mut().unwrap()
    }

    fn finish(mut self) -> Vec<(u64, String)> {
        self.0.take().unwrap().finish()
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        if let Some(watched) = self.0.take() {
            watched.finish();
        }
    }
}

/// Ten holders on one pool; thirty times, the lock file of one of them is removed and a new
/// holder started, which takes that worker id (its lock file is gone, so nothing stops it).
/// The displaced holder must notice at its next renewal (or at close) that the file at the
/// path is no longer the one it locked, stop with `LEASE_LOST` and never write the state
/// again; meanwhile the newcomer starts above the reservation the displaced holder persisted.
/// Every holder issues an id a millisecond: no id may repeat across all of them.
#[test]
fn a_lock_file_removed_while_held_never_gives_its_worker_id_to_two_live_holders() {
    let dir = temp_dir("removed");
    let app = "removed";
    let uri = uri(&dir, app);
    let lock = |worker: u64| dir.join(app).join(format!("worker-{worker}.lock"));
    // --count 0: each holder runs until it is refused (or killed at the end).
    let stderr_path = dir.join("holder.err");
    let spawn = || {
        let mut command = probe(&["--uri", &uri, "--every-ms", "1", "--count", "0"]);
        command.stderr(fs::File::create(&stderr_path).unwrap());
        Holder(Some(Watched::spawn(command)))
    };
    let mut live: Vec<(u64, Holder)> = Vec::new();
    for expected in 0..10 {
        let mut holder = spawn();
        assert_eq!(worker_of(holder.get(), &stderr_path), expected);
        live.push((expected, holder));
    }
    let mut displaced = Vec::new();
    for round in 0..30u64 {
        let target = round % 10;
        fs::remove_file(lock(target)).unwrap();
        let mut newcomer = spawn();
        assert_eq!(
            worker_of(newcomer.get(), &stderr_path),
            target,
            "round {round}: the newcomer takes the worker id whose lock file was removed"
        );
        let at = live.iter().position(|(w, _)| *w == target).unwrap();
        displaced.push(live.remove(at).1);
        live.push((target, newcomer));
        std::thread::sleep(Duration::from_millis(60));
    }
    // The displaced holders stop by themselves (a renewal is due every reserve / 2 = 500 ms);
    // give them 5 s, then stop them anyway so that the ids are compared in every case.
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut exits = Vec::new();
    for mut holder in displaced {
        let status = loop {
            if let Some(status) = holder.get().child.try_wait().unwrap() {
                break Some(status);
            }
            if Instant::now() > deadline {
                break None;
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        exits.push((status, holder.finish()));
    }
    let still_running: Vec<_> = live.into_iter().map(|(_, h)| h.finish()).collect();
    let ids = exits
        .iter()
        .map(|(_, lines)| lines)
        .chain(&still_running)
        .flat_map(|lines| {
            let text: Vec<String> = lines.iter().map(|(_, l)| l.clone()).collect();
            text_ids(&text.join("\n"))
        });
    let total = assert_unique("40 holders, 30 lock files removed", ids);
    assert!(total > 10_000, "only {total} ids");
    for (i, (status, lines)) in exits.iter().enumerate() {
        let last = lines.last().map(|(_, l)| l.as_str()).unwrap_or("");
        assert!(
            status.is_some_and(|s| s.code() == Some(3)) && last.starts_with("error LEASE_LOST"),
            "displaced holder {i} should stop with LEASE_LOST: exit {status:?}, last line {last:?}"
        );
    }
    let _ = fs::remove_dir_all(dir);
}

#[test]
fn new_pool_directories_are_private_and_files_owner_only() {
    let base = temp_dir("private");
    let dir = base.join("ids");
    assert_eq!(
        pool_modes_after_one_id(&uri(&dir, "a"), &dir, "a"),
        [0o700, 0o700, 0o600, 0o600]
    );
    let _ = fs::remove_dir_all(base);
}

#[test]
fn mode_group_shares_the_pool_with_the_group() {
    let base = temp_dir("group");
    let dir = base.join("ids");
    let shared = format!("{}&mode=group", uri(&dir, "g"));
    assert_eq!(
        pool_modes_after_one_id(&shared, &dir, "g"),
        [0o770, 0o770, 0o660, 0o660]
    );
    // A group-writable pool is accepted with mode=group only.
    let error = open_error(&uri(&dir, "g"));
    assert_eq!(error.code(), "COORDINATOR_UNAVAILABLE", "{error}");
    let message = error.to_string();
    assert!(message.contains("mode=group"), "{message}");
    let again = open(&shared, Layout::CLOCKSEQ, LeaseOptions::default()).unwrap();
    assert_eq!(again.worker_id(), 0);
    drop(again);
    // Unknown values are refused.
    assert_eq!(
        open_error(&format!("{}&mode=world", uri(&dir, "g"))).code(),
        "INVALID_URI"
    );
    let _ = fs::remove_dir_all(base);
}

#[test]
fn a_pool_directory_writable_by_others_is_refused() {
    let base = temp_dir("writable");
    // DIR writable by everyone, no sticky bit: anyone could replace DIR/APP.
    chmod(&base, 0o777);
    let error = open_error(&uri(&base, "w"));
    assert_eq!(error.code(), "COORDINATOR_UNAVAILABLE", "{error}");
    let message = error.to_string();
    for part in [
        base.display().to_string(),
        "0777".to_owned(),
        format!("chmod 700 {}", base.display()),
    ] {
        assert!(message.contains(&part), "{part:?} not in {message}");
    }
    assert!(!base.join("w").exists(), "nothing created in a refused DIR");
    // Group-writable DIR: refused too, unless mode=group.
    chmod(&base, 0o770);
    assert_eq!(
        open_error(&uri(&base, "w")).code(),
        "COORDINATOR_UNAVAILABLE"
    );
    // With the sticky bit (like /tmp), others cannot remove or rename what is ours: accepted.
    chmod(&base, 0o1777);
    let gen = open(&uri(&base, "w"), Layout::CLOCKSEQ, LeaseOptions::default()).unwrap();
    gen.close().unwrap();
    // DIR/APP holds the lock files: never writable by others, sticky or not.
    let app = base.join("w");
    for bad in [0o777, 0o1777, 0o707] {
        chmod(&app, bad);
        let error = open_error(&uri(&base, "w"));
        assert_eq!(error.code(), "COORDINATOR_UNAVAILABLE", "{bad:o}: {error}");
        let message = error.to_string();
        assert!(message.contains(&app.display().to_string()), "{message}");
        assert!(
            message.contains(&format!("chmod 700 {}", app.display())),
            "{message}"
        );
        assert_eq!(
            open_error(&format!("{}&mode=group", uri(&base, "w"))).code(),
            "COORDINATOR_UNAVAILABLE",
            "{bad:o} with mode=group"
        );
    }
    chmod(&app, 0o700);
    chmod(&base, 0o755);
    open(&uri(&base, "w"), Layout::CLOCKSEQ, LeaseOptions::default()).unwrap();
    let _ = fs::remove_dir_all(base);
}

#[test]
fn a_pool_directory_owned_by_another_user_is_refused() {
    // What a directory we create gets as its owner is our effective uid.
    let whoami = temp_dir("whoami");
    let euid = fs::metadata(&whoami).unwrap().uid();
    fs::remove_dir(whoami).unwrap();
    if euid == 0 {
        // As root: hand DIR/APP, then DIR, to nobody.
        let base = temp_dir("owner");
        let app = base.join("o");
        fs::create_dir(&app).unwrap();
        chmod(&app, 0o700);
        std::os::unix::fs::chown(&app, Some(65534), Some(65534)).unwrap();
        let error = open_error(&uri(&base, "o"));
        assert_eq!(error.code(), "COORDINATOR_UNAVAILABLE", "{error}");
        let message = error.to_string();
        assert!(message.contains(&app.display().to_string()), "{message}");
        assert!(message.contains("owned by uid 65534"), "{message}");
        assert_eq!(fs::read_dir(&app).unwrap().count(), 0, "nothing created");
        std::os::unix::fs::chown(&app, Some(0), Some(0)).unwrap();
        std::os::unix::fs::chown(&base, Some(65534), Some(65534)).unwrap();
        let error = open_error(&uri(&base, "o"));
        assert_eq!(error.code(), "COORDINATOR_UNAVAILABLE", "{error}");
        assert!(error.to_string().contains("owned by uid 65534"), "{error}");
        std::os::unix::fs::chown(&base, Some(0), Some(0)).unwrap();
        open(&uri(&base, "o"), Layout::CLOCKSEQ, LeaseOptions::default()).unwrap();
        let _ = fs::remove_dir_all(base);
    } else {
        // Not root: `/usr` is root's, so as DIR/APP (DIR `/`, root's, is acceptable) it is
        // refused before anything is created in it.
        let error = open_error("file:///?app=usr");
        assert_eq!(error.code(), "COORDINATOR_UNAVAILABLE", "{error}");
        assert!(error.to_string().contains("owned by uid 0"), "{error}");
    }
}

#[test]
fn missing_parents_are_named_never_created() {
    let base = temp_dir("parents");
    let error = open_error(&uri(&base.join("no/such/parent"), "app"));
    assert_eq!(error.code(), "COORDINATOR_UNAVAILABLE", "{error}");
    let message = error.to_string();
    let missing = base.join("no");
    assert!(
        message.contains(&format!("{} does not exist", missing.display())),
        "{message}"
    );
    assert!(!missing.exists(), "no parent was created");
    // DIR itself (its parent exists) and DIR/APP are created.
    open(
        &uri(&base.join("no"), "app"),
        Layout::CLOCKSEQ,
        LeaseOptions::default(),
    )
    .unwrap();
    assert!(base.join("no/app").is_dir());
    let _ = fs::remove_dir_all(base);
}

#[test]
fn a_symlink_planted_as_a_lock_file_is_refused_not_followed() {
    let base = temp_dir("symlink");
    fs::create_dir_all(base.join("s")).unwrap();
    chmod(&base.join("s"), 0o700);
    let victim = base.join("victim");
    std::os::unix::fs::symlink(&victim, base.join("s").join("worker-0.lock")).unwrap();
    let error = open_error(&uri(&base, "s"));
    assert_eq!(error.code(), "COORDINATOR_UNAVAILABLE", "{error}");
    assert!(error.to_string().contains("worker-0.lock"), "{error}");
    assert!(!victim.exists(), "the symlink's target was not created");
    let _ = fs::remove_dir_all(base);
}
