//! Noticing a fork, however it was made.
//!
//! A child process must not go on issuing ids under its parent's worker id. Language hooks
//! (Python's `os.register_at_fork`) miss a `fork()` called from C (uWSGI prefork, C
//! extensions, `ctypes`), so the process notices by itself: [`watch`] registers, once per
//! process, a `pthread_atfork` child handler that bumps a process-wide fork generation.
//! A generator records [`watch`]'s value when it is made and compares it with [`generation`]
//! (one relaxed load) before every id; a different value means it was made in an ancestor
//! process, whose worker id it carries.
//!
//! ```
//! use clockflake_lease::fork;
//! let mine = fork::watch(); // when the generator is made
//! // ... before each id:
//! assert_eq!(fork::generation(), mine, "made in this process: may issue ids");
//! ```
//!
//! What the handler does not see: a child made by a raw `clone` system call or glibc's
//! `_Fork` (neither runs at-fork handlers; `vfork` and `posix_spawn` children run nothing of
//! ours before `exec`). On targets other than Unix there is no `fork()` and the generation
//! never changes.
#![allow(unsafe_code)] // pthread_atfork, and fork/waitpid/_exit in the tests

use std::sync::atomic::{AtomicU64, Ordering};

/// How many forks separate this process from the first one that called [`watch`] (0 there,
/// 1 in its children, 2 in their children, ...). Bumped by the child handler only.
static GENERATION: AtomicU64 = AtomicU64::new(0);

/// The fork generation of this process: compare it with the value [`watch`] returned when a
/// generator was made; any difference means this is a child process (made by a `fork()` from
/// any language, once any generator has called [`watch`]). One relaxed atomic load: the
/// child handler runs on the one thread a child starts with, before `fork()` returns there,
/// and later threads of the child start after it.
#[inline(always)]
pub fn generation() -> u64 {
    GENERATION.load(Ordering::Relaxed)
}

/// Registers the child handler (the first call in a process; later calls only read a flag)
/// and returns the current [`generation`], to be kept by a generator made now.
///
/// `pthread_atfork` fails only for lack of memory; then the next call tries again, and
/// forks in between go unnoticed.
#[inline]
pub fn watch() -> u64 {
    #[cfg(unix)]
    if handler::STATE.load(Ordering::Acquire) != handler::REGISTERED {
        handler::register();
    }
    generation()
}

#[cfg(unix)]
mod handler {
    use std::sync::atomic::{AtomicU64, Ordering};

    use super::GENERATION;

    /// `UNREGISTERED`, `REGISTERED`, or `1 + the process id` of a thread registering now.
    /// (Not a `std::sync::Once`: a child forked while a parent thread was registering must
    /// not wait for that thread, which it does not have; and a failed registration is tried
    /// again.)
    pub(super) static STATE: AtomicU64 = AtomicU64::new(UNREGISTERED);
    const UNREGISTERED: u64 = 0;
    pub(super) const REGISTERED: u64 = u64::MAX;

    /// Runs in the child of every `fork()` once registered, before `fork()` returns there.
    /// Async-signal-safe: lock-free atomic operations only.
    extern "C" fn in_child() {
        GENERATION.fetch_add(1, Ordering::Relaxed);
        // The registration is inherited even if the parent's registering thread had not yet
        // marked it done; the child has no such thread to do so.
        STATE.store(REGISTERED, Ordering::Relaxed);
    }

    #[cold]
    #[inline(never)]
    pub(super) fn register() {
        let me = 1 + u64::from(std::process::id());
        loop {
            let seen = STATE.load(Ordering::Acquire);
            if seen == REGISTERED {
                return;
            }
            if seen == me {
                // Another thread of this process is registering: it takes a moment.
                std::thread::yield_now();
                continue;
            }
            // Free, or claimed by a thread of an ancestor process that forked this one before
            // it registered (its registration is not inherited: the handler did not run here).
            if STATE
                .compare_exchange(seen, me, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
            {
                continue;
            }
            // SAFETY: `in_child` is an `extern "C" fn()` that lives as long as the process and
            // only touches atomics; pthread_atfork keeps the pointer and has no other
            // requirement.
            let failed = unsafe { libc::pthread_atfork(None, None, Some(in_child)) } != 0;
            STATE.store(
                if failed { UNREGISTERED } else { REGISTERED },
                Ordering::Release,
            );
            return;
        }
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::{generation, watch};

    /// Forks; the child runs `child` (async-signal-safe work only: the test harness has other
    /// threads) and exits with its value. Returns that exit status.
    fn exit_status_of_child(child: impl FnOnce() -> i32) -> i32 {
        // SAFETY: the child calls only async-signal-safe functions (atomic loads, fork,
        // waitpid, _exit) and never returns into the test harness.
        match unsafe { libc::fork() } {
            -1 => -1,
            0 => {
                let code = child();
                unsafe { libc::_exit(code) }
            }
            pid => wait(pid),
        }
    }

    /// The exit status of child `pid`, or -1 if it did not exit normally.
    fn wait(pid: libc::pid_t) -> i32 {
        let mut status = 0;
        loop {
            // SAFETY: `status` is a valid out-pointer; `pid` is our child.
            let rc = unsafe { libc::waitpid(pid, &mut status, 0) };
            if rc == pid {
                break;
            }
            if rc == -1 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted
            {
                return -1;
            }
        }
        if libc::WIFEXITED(status) {
            libc::WEXITSTATUS(status)
        } else {
            -1
        }
    }

    #[test]
    fn a_fork_bumps_the_generation_in_the_child_only_once_per_fork() {
        let mine = watch();
        // Watching again registers nothing more: one fork, one step.
        assert_eq!(watch(), mine);
        assert_eq!(watch(), mine);
        let status = exit_status_of_child(|| {
            if generation() != mine + 1 {
                return 10 + generation().wrapping_sub(mine).min(50) as i32;
            }
            // A grandchild is one step further (the registration is inherited).
            match exit_status_of_child(|| if generation() == mine + 2 { 0 } else { 1 }) {
                0 => 0,
                1 => 1,
                _ => 2,
            }
        });
        assert_eq!(
            status, 0,
            "1: the grandchild did not see a second step; 2: it failed otherwise; \
             10 + n: the child saw the generation moved by n instead of 1"
        );
        assert_eq!(generation(), mine, "the parent's generation never moves");
    }
}
