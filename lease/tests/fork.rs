//! A child made by `fork()` from C (here `libc::fork`, which no language hook sees), or by the
//! raw `clone` system call (which runs no at-fork handler either), never issues ids under its
//! parent's lease, while the parent goes on generating; through `PerProcess`, a forked child
//! leases a worker id of its own.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![allow(unsafe_code)] // fork, clone, pipe, _exit, waitpid

mod common;

use std::io::Read;
use std::os::fd::FromRawFd;
use std::sync::{Arc, Mutex};

use clockflake::Layout;
use clockflake_lease::{open, Direct, LeaseOptions, PerProcess};
use common::*;

/// Held by each test for its whole run: a child forked while another test's thread holds a
/// lock of the process (the environment's, an allocator's arena) could wait for it forever.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// How a test copies the process.
#[derive(Clone, Copy, Debug)]
enum Copied {
    /// libc's `fork()`: its at-fork handlers run (ours among them).
    Fork,
    /// The `clone` system call with `SIGCHLD` and nothing else: no handler runs, only the
    /// kernel's wipe-on-fork page tells the child.
    RawClone,
}

/// Copies the process `how`; in the child runs `child` and writes what it returns to a pipe,
/// then `_exit`s.
fn in_copied_child<R: AsRef<[u8]>>(how: Copied, child: impl FnOnce() -> R) -> Vec<u8> {
    let mut fds = [0; 2];
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    let pid = match how {
        Copied::Fork => unsafe { libc::fork() },
        Copied::RawClone => unsafe {
            libc::syscall(
                libc::SYS_clone,
                libc::c_long::from(libc::SIGCHLD),
                0,
                0,
                0,
                0,
            ) as libc::pid_t
        },
    };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        // The child: only async-signal-safe work besides the generator call under test, and
        // no allocation (after a raw clone, another thread's malloc lock may be held).
        let report = child();
        let report = report.as_ref();
        unsafe {
            libc::write(fds[1], report.as_ptr().cast(), report.len());
            libc::_exit(0);
        }
    }
    unsafe { libc::close(fds[1]) };
    let mut report = Vec::new();
    unsafe { std::fs::File::from_raw_fd(fds[0]) }
        .read_to_end(&mut report)
        .unwrap();
    let mut status = 0;
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
    report
}

#[test]
fn a_child_forked_from_c_refuses_while_the_parent_keeps_generating() {
    a_copy_refuses_while_the_parent_keeps_generating(Copied::Fork);
}

#[test]
fn a_child_made_by_a_raw_clone_refuses_while_the_parent_keeps_generating() {
    a_copy_refuses_while_the_parent_keeps_generating(Copied::RawClone);
}

fn a_copy_refuses_while_the_parent_keeps_generating(how: Copied) {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = temp_dir("fork-c");
    let uri = format!("file://{}?app=fork", dir.display());
    let gen = Arc::new(open(&uri, Layout::CLOCKSEQ, LeaseOptions::default()).unwrap());
    let parent = {
        let gen = Arc::clone(&gen);
        Repeating::start(move || gen.next_id().unwrap())
    };
    std::thread::sleep(std::time::Duration::from_millis(50));
    for _round in 0..5 {
        let report = in_copied_child(how, || {
            // Every way of asking for ids, right after the copy (inside the reservation the
            // parent persisted, where only the fork check can stop them): R for a refusal
            // with WORKER_ID_INVALIDATED, I for an id, E for another error.
            let codes = [
                gen.try_next_id().map_err(|e| e.code()),
                gen.next_id().map_err(|e| e.code()),
                gen.next_id_at(clockflake_lease::wall_ms())
                    .map_err(|e| e.code()),
                gen.try_next_block(64)
                    .map(|mut block| block.next().unwrap_or(0))
                    .map_err(|e| e.code()),
            ];
            codes.map(|result| match result {
                Ok(_) => b'I',
                Err("WORKER_ID_INVALIDATED") => b'R',
                Err(_) => b'E',
            })
        });
        assert_eq!(
            String::from_utf8(report).unwrap(),
            "RRRR",
            "{how:?}: the child must issue no id under the parent's lease"
        );
    }
    let ids = parent.stop();
    assert!(ids.len() > 1000, "the parent went on: {} ids", ids.len());
    assert!(
        gen.is_active(),
        "the parent's lease is untouched by its children"
    );
    assert_unique("the parent's ids", ids);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn per_process_leases_a_worker_id_of_its_own_in_a_forked_child() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = temp_dir("fork-per-process");
    let uri = format!("file://{}?app=fork", dir.display());
    let gen = PerProcess::open(&Direct, &uri, Layout::CLOCKSEQ, LeaseOptions::default()).unwrap();
    let parent = gen.current(&Direct).unwrap();
    let before_fork = parent.next_id().unwrap();
    let report = in_copied_child(Copied::Fork, || {
        // No unwrap here: a panic would unwind into the test harness of the child.
        let ids = (0..3).map(|_| gen.current(&Direct).and_then(|lease| lease.next_id()));
        let mut report: Vec<String> = ids
            .map(|id| id.map_or_else(|e| e.code().to_owned(), |id| id.to_string()))
            .collect();
        report.push(
            gen.close(&Direct)
                .map_or_else(|e| e.code().to_owned(), |()| "closed".into()),
        );
        report.join(" ").into_bytes()
    });
    let report = String::from_utf8(report).unwrap();
    let words: Vec<&str> = report.split(' ').collect();
    assert_eq!(words.len(), 4, "{report}");
    assert_eq!(words[3], "closed", "{report}");
    let layout = Layout::CLOCKSEQ;
    let child_workers: Vec<u64> = words[..3]
        .iter()
        .map(|id| layout.decode(id.parse().unwrap()).unwrap().worker_id)
        .collect();
    assert_eq!(
        child_workers, [child_workers[0]; 3],
        "one lease in the child: {report}"
    );
    assert_ne!(
        child_workers[0],
        parent.worker_id(),
        "the child issues ids under a worker id of its own"
    );
    let after_fork = gen.current(&Direct).unwrap().next_id().unwrap();
    assert!(
        after_fork > before_fork,
        "the parent goes on under its lease"
    );
    assert!(Arc::ptr_eq(&parent, &gen.current(&Direct).unwrap()));
    gen.close(&Direct).unwrap();
    let _ = std::fs::remove_dir_all(dir);
}

/// After a restore from a snapshot (which no page or handler sees), `fork::restored()` makes
/// every generator of the process refuse as in a copy, and `PerProcess` lease a new worker id.
#[test]
fn restored_invalidates_every_generator_made_before() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = temp_dir("fork-restored");
    let uri = format!("file://{}?app=fork", dir.display());
    let gen = open(&uri, Layout::CLOCKSEQ, LeaseOptions::default()).unwrap();
    let per_process =
        PerProcess::open(&Direct, &uri, Layout::CLOCKSEQ, LeaseOptions::default()).unwrap();
    let before = per_process.current(&Direct).unwrap();
    gen.next_id().unwrap();
    clockflake_lease::fork::restored();
    assert_eq!(gen.next_id().unwrap_err().code(), "WORKER_ID_INVALIDATED");
    let after = per_process.current(&Direct).unwrap();
    assert_ne!(
        after.worker_id(),
        before.worker_id(),
        "a new lease after the restore"
    );
    after.next_id().unwrap();
    per_process.close(&Direct).unwrap();
    let _ = gen.close();
}
