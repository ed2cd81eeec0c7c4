//! A child made by `fork()` from C (here `libc::fork`, which no language hook sees) never
//! issues ids under its parent's lease, while the parent goes on generating.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![allow(unsafe_code)] // fork, pipe, _exit, waitpid

mod common;

use std::io::Read;
use std::os::fd::FromRawFd;
use std::sync::Arc;

use clockflake::Layout;
use clockflake_lease::{open, LeaseOptions};
use common::*;

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
