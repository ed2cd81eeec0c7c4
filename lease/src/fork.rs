//! Noticing a fork, however it was made.
//!
//! A child process must not go on issuing ids under its parent's worker id. Language hooks
//! (Python's `os.register_at_fork`) miss a `fork()` called from C (uWSGI prefork, C
//! extensions, `ctypes`), and `pthread_atfork` handlers miss a copy made by the raw `clone`
//! system call or glibc's `_Fork`, so the process notices by itself, twice over:
//!
//! - on Linux, [`watch`] maps one page with `madvise(MADV_WIPEONFORK)`: the kernel hands any
//!   child that copies the address space that page zeroed, however the copy was made. The
//!   page holds the fork generation plus one; [`generation`] reads it, and a zero means a
//!   copy that nothing told: it takes the next generation there and then;
//! - everywhere `pthread_atfork` exists, a child handler bumps the generation (the one
//!   mechanism where the wipe-on-fork page is missing: other Unixes, Linux before 4.14).
//!
//! A generator records [`watch`]'s value when it is made and compares it with [`generation`]
//! (two relaxed loads: the page's address, then the page) before every id; a different value
//! means it was made in an ancestor process, whose worker id it carries.
//!
//! ```
//! use clockflake_lease::fork;
//! let mine = fork::watch(); // when the generator is made
//! // ... before each id:
//! assert_eq!(fork::generation(), mine, "made in this process: may issue ids");
//! ```
//!
//! What neither sees: a copy of a whole process or machine made from outside (CRIU, VM
//! snapshots, serverless snapshot-restore), which keeps the page; after such a restore call
//! [`restored`]. `vfork` and `posix_spawn` children run nothing of ours before `exec`. On
//! targets other than Unix there is no `fork()` and the generation changes only by
//! [`restored`].
#![allow(unsafe_code)] // mmap/madvise, pthread_atfork, and fork/clone/waitpid/_exit in the tests

use std::sync::atomic::{AtomicU64, Ordering};

/// The last fork generation taken in this process (0 in the first one that called [`watch`],
/// more in its copies). The wipe-on-fork page, once mapped, is what [`generation`] reads;
/// this counter (which every copy keeps) gives the next value.
static GENERATION: AtomicU64 = AtomicU64::new(0);

/// The fork generation of this process: compare it with the value [`watch`] returned when a
/// generator was made; any difference means this is a copy of the process that made it (a
/// `fork()` from any language, a raw `clone`, `_Fork`, once any generator has called
/// [`watch`]), or that [`restored`] was called. The child handler runs on the one thread a
/// child starts with, before `fork()` returns there; a copy without handlers takes its
/// generation at the first call, all of its threads agreeing on one.
#[inline(always)]
pub fn generation() -> u64 {
    #[cfg(target_os = "linux")]
    {
        // Acquire: pairs with the publishing compare-and-swap in `wipe::map`, so a thread that
        // sees the page also sees the generation stored in it before (read as zero, it would
        // take this process for a copy). A plain load on x86-64.
        let page = wipe::PAGE.load(Ordering::Acquire);
        if !page.is_null() {
            // SAFETY: once set, the page stays mapped for the life of the process (and of its
            // copies, which inherit the mapping, zeroed).
            let seen = unsafe { &*page }.load(Ordering::Relaxed);
            return if seen != 0 {
                seen - 1
            } else {
                wipe::copied(page)
            };
        }
    }
    GENERATION.load(Ordering::Relaxed)
}

/// Starts a new fork generation in this process: every generator made before refuses (a
/// static one) or leases again (a leased one), as in a forked child. Call it after this
/// process was restored from a snapshot (CRIU, a VM snapshot, serverless snapshot-restore:
/// copies made from outside that no page or handler can see), or in any process that may be
/// one of several copies of one image. Returns the new generation.
pub fn restored() -> u64 {
    let next = GENERATION.fetch_add(1, Ordering::Relaxed) + 1;
    #[cfg(target_os = "linux")]
    {
        let page = wipe::PAGE.load(Ordering::Relaxed);
        if !page.is_null() {
            // SAFETY: as in `generation`.
            unsafe { &*page }.store(next + 1, Ordering::Relaxed);
        }
    }
    next
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
    #[cfg(target_os = "linux")]
    if wipe::PAGE.load(Ordering::Acquire).is_null() {
        wipe::map();
    }
    generation()
}

#[cfg(target_os = "linux")]
mod wipe {
    use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

    use super::GENERATION;

    /// The wipe-on-fork page (its first word: the generation plus one), or null: not mapped
    /// yet, or the kernel has no `MADV_WIPEONFORK` (before Linux 4.14).
    pub(super) static PAGE: AtomicPtr<AtomicU64> = AtomicPtr::new(std::ptr::null_mut());

    /// Maps the page (once; a thread that loses the race unmaps its own).
    #[cold]
    pub(super) fn map() {
        const SIZE: usize = 4096;
        // SAFETY: a fresh private anonymous mapping, no address hint; every result is checked.
        let page = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                SIZE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if page == libc::MAP_FAILED {
            return;
        }
        // SAFETY: `page` is the mapping just made, SIZE bytes, page-aligned.
        if unsafe { libc::madvise(page, SIZE, libc::MADV_WIPEONFORK) } != 0 {
            // SAFETY: as above; nothing else has seen it.
            unsafe { libc::munmap(page, SIZE) };
            return;
        }
        let word = page.cast::<AtomicU64>();
        // SAFETY: page-aligned, zeroed memory is a valid AtomicU64.
        unsafe { &*word }.store(GENERATION.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        if PAGE
            .compare_exchange(
                std::ptr::null_mut(),
                word,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_err()
        {
            // SAFETY: ours, unpublished.
            unsafe { libc::munmap(page, SIZE) };
        }
    }

    /// The page read zero: a copy of the process that no handler told. Takes the next
    /// generation; threads racing here agree on the first one written.
    #[cold]
    #[inline(never)]
    pub(super) fn copied(page: *mut AtomicU64) -> u64 {
        let next = GENERATION.fetch_add(1, Ordering::Relaxed) + 1;
        // SAFETY: as in `generation`.
        match unsafe { &*page }.compare_exchange(0, next + 1, Ordering::Relaxed, Ordering::Relaxed)
        {
            Ok(_) => next,
            Err(seen) => seen - 1,
        }
    }

    /// Re-arms the page in a child the handler saw (async-signal-safe: one atomic store).
    pub(super) fn forked(generation: u64) {
        let page = PAGE.load(Ordering::Relaxed);
        if !page.is_null() {
            // SAFETY: as in `generation`.
            unsafe { &*page }.store(generation + 1, Ordering::Relaxed);
        }
    }
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
        let _generation = GENERATION.fetch_add(1, Ordering::Relaxed) + 1;
        #[cfg(target_os = "linux")]
        super::wipe::forked(_generation);
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

    /// The `clone` system call with `SIGCHLD` only: a copy of the process that runs no
    /// at-fork handler. Returns the child's exit status.
    fn exit_status_of_raw_clone(child: impl FnOnce() -> i32) -> i32 {
        // SAFETY: as `exit_status_of_child`; the child allocates nothing.
        let pid = unsafe {
            libc::syscall(
                libc::SYS_clone,
                libc::c_long::from(libc::SIGCHLD),
                0,
                0,
                0,
                0,
            )
        };
        match pid {
            -1 => -1,
            0 => {
                let code = child();
                unsafe { libc::_exit(code) }
            }
            pid => wait(pid as libc::pid_t),
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_raw_clone_takes_a_new_generation_in_the_copy() {
        let mine = watch();
        let status = exit_status_of_raw_clone(|| {
            // (No fork from here: glibc's fork takes locks the parent's other threads may
            // have held at the clone.)
            let seen = generation();
            if seen == mine {
                return 1;
            }
            if generation() != seen {
                return 2;
            }
            0
        });
        assert_eq!(
            status, 0,
            "1: the copy kept the parent's generation; 2: it changed between reads"
        );
        assert_eq!(generation(), mine, "the parent's generation never moves");
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
