//! A child made by `fork()` from C (here `libc::fork`, which no language hook sees) never
//! issues ids under its parent's lease, while the parent goes on generating; through
//! `PerProcess`, it leases a worker id of its own.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![allow(unsafe_code)] // fork, pipe, _exit, waitpid

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

/// Forks; in the child runs `child` and writes what it returns to a pipe, then `_exit`s.
fn in_forked_child(child: impl FnOnce() -> Vec<u8>) -> Vec<u8> {
    let mut fds = [0; 2];
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        // The child: only async-signal-safe work besides the generator call under test.
        let report = child();
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
        let report = in_forked_child(|| {
            // Every way of asking for ids, right after the fork (inside the reservation the
            // parent persisted, where only the fork check can stop them).
            let codes = [
                gen.try_next_id().map_err(|e| e.code()),
                gen.next_id().map_err(|e| e.code()),
                gen.next_id_at(clockflake_lease::wall_ms())
                    .map_err(|e| e.code()),
                gen.try_next_block(64)
                    .map(|mut block| block.next().unwrap_or(0))
                    .map_err(|e| e.code()),
            ];
            codes
                .iter()
                .map(|result| match result {
                    Ok(id) => format!("id {id}\n"),
                    Err(code) => format!("error {code}\n"),
                })
                .collect::<String>()
                .into_bytes()
        });
        let report = String::from_utf8(report).unwrap();
        assert_eq!(
            report,
            "error WORKER_ID_INVALIDATED\n".repeat(4),
            "the child must issue no id under the parent's lease"
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
    let report = in_forked_child(|| {
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
