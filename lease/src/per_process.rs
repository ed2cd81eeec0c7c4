//! A leased generator per process: after a fork, the child leases a worker id of its own.
//!
//! Every fork, from a language hook or from C, moves the process's fork generation
//! ([`crate::fork`]). [`PerProcess`] compares it with the generation its lease was taken in,
//! and in a child the first call invalidates the inherited lease (without touching the
//! parent's lock file, connection or state) and leases a new worker id for the same URI.
//! The inherited lease is never dropped in the child, only forgotten: its lock file
//! descriptor and database socket are shared with the parent, and its mutexes may have been
//! held by parent threads at the fork. Invalidation is done at that first call rather than in
//! the child handler, which may only touch atomics; nothing reaches the inherited lease
//! before it.
//!
//! ```
//! use clockflake::Layout;
//! use clockflake_lease::{Direct, LeaseOptions, PerProcess};
//! let dir = std::env::temp_dir().join(format!("clockflake-doc-per-process-{}", std::process::id()));
//! let uri = format!("file://{}?app=orders", dir.display());
//! let gen = PerProcess::open(&Direct, &uri, Layout::CLOCKSEQ, LeaseOptions::default())?;
//! let id = gen.current(&Direct)?.next_id()?; // in a forked child: a new worker id first
//! assert!(id > 0);
//! gen.close(&Direct)?;
//! # std::fs::remove_dir_all(&dir).ok();
//! # Ok::<(), clockflake_lease::LeaseError>(())
//! ```

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Duration;

use clockflake::Layout;

use crate::fork::{self, generation as fork_generation};
use crate::{LeaseError, LeaseOptions, LeasedGenerator};

/// How the caller runs blocking work and waits for another thread: a binding may release an
/// interpreter lock around the work and check for signals while it waits.
pub trait Host {
    /// What the caller's calls fail with (a lease's refusal, or an interruption).
    type Error: From<LeaseError>;
    /// Runs `work`, which may open files or connect.
    fn blocking<R: Send>(&self, work: impl FnOnce() -> R + Send) -> R;
    /// Pauses for `duration` while another thread leases for this process.
    fn pause(&self, duration: Duration) -> Result<(), Self::Error>;
}

/// The host of plain Rust callers: work runs on the calling thread, a pause sleeps.
pub struct Direct;

impl Host for Direct {
    type Error = LeaseError;

    fn blocking<R: Send>(&self, work: impl FnOnce() -> R + Send) -> R {
        work()
    }

    fn pause(&self, duration: Duration) -> Result<(), LeaseError> {
        std::thread::sleep(duration);
        Ok(())
    }
}

/// A lease and the fork generation it was taken in.
struct Slot {
    generation: u64,
    lease: Arc<LeasedGenerator>,
}

/// A generator on a leased worker id that never issues ids under its parent's worker id in a
/// forked child: the child's first call leases a worker id for it from the same URI.
pub struct PerProcess {
    uri: String,
    layout: Layout,
    options: LeaseOptions,
    /// The lease `open` took, used in the process that took it (`None` once taken out by
    /// `take_leases`). The fast path reads it without a lock.
    original: Option<Arc<LeasedGenerator>>,
    /// The fork generation of the process that took `original`.
    generation: u64,
    /// In a forked child: the child's own lease.
    relet: RwLock<Option<Slot>>,
    /// The fork generation a thread is leasing a new worker id for (0: none). A claim left
    /// by a thread of the parent process carries an older generation and is taken over.
    claim: AtomicU64,
    closed: AtomicBool,
}

fn read<T>(lock: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn write<T>(lock: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    lock.write()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Leases a worker id on `host` (it opens files or connects).
fn lease<H: Host>(
    host: &H,
    uri: &str,
    layout: Layout,
    options: &LeaseOptions,
) -> Result<LeasedGenerator, LeaseError> {
    let options = options.clone();
    host.blocking(move || crate::open(uri, layout, options))
}

impl PerProcess {
    /// Leases a worker id for this process from the coordinator `uri` names.
    pub fn open<H: Host>(
        host: &H,
        uri: &str,
        layout: Layout,
        options: LeaseOptions,
    ) -> Result<PerProcess, H::Error> {
        let generation = fork::watch();
        let original = lease(host, uri, layout, &options)?;
        Ok(PerProcess {
            uri: uri.to_owned(),
            layout,
            options,
            original: Some(Arc::new(original)),
            generation,
            relet: RwLock::new(None),
            claim: AtomicU64::new(0),
            closed: AtomicBool::new(false),
        })
    }

    /// The lease `open` took, when this is the process that took it: one atomic load, for a
    /// caller's fast path.
    #[inline(always)]
    pub fn original_if_current(&self) -> Option<&Arc<LeasedGenerator>> {
        self.original
            .as_ref()
            .filter(|_| fork_generation() == self.generation)
    }

    /// The lease of this process: the one held, or in a forked child a new one.
    pub fn current<H: Host>(&self, host: &H) -> Result<Arc<LeasedGenerator>, H::Error> {
        let generation = fork_generation();
        match self.lease_in(generation) {
            Some(lease) => Ok(lease),
            None => self.lease_after_fork(host, generation),
        }
    }

    /// The lease this process holds, if any: never leases (in a forked child that has not
    /// leased yet, `None`).
    pub fn lease_if_current(&self) -> Option<Arc<LeasedGenerator>> {
        self.lease_in(fork_generation())
    }

    /// The coordinator as `LeasedGenerator::coordinator` describes it (no secret).
    pub fn coordinator(&self) -> &str {
        self.original
            .as_ref()
            .map_or("", |lease| lease.coordinator())
    }

    /// The layout every lease of this generator issues ids in.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The options every lease of this generator is taken with.
    pub fn options(&self) -> &LeaseOptions {
        &self.options
    }

    /// Stops, stores the state and releases this process's worker id. In a forked child that
    /// has not leased its own worker id, only marks the generator closed: the inherited lease
    /// is the parent's.
    pub fn close<H: Host>(&self, host: &H) -> Result<(), H::Error> {
        self.closed.store(true, Ordering::SeqCst);
        let generation = fork_generation();
        if generation != self.generation {
            self.invalidate_inherited(generation);
        }
        match self.lease_in(generation) {
            Some(lease) => Ok(host.blocking(move || lease.close())?),
            None => Ok(()),
        }
    }

    /// The lease taken in the process of fork generation `generation`, if any.
    fn lease_in(&self, generation: u64) -> Option<Arc<LeasedGenerator>> {
        if generation == self.generation {
            return self.original.clone();
        }
        read(&self.relet)
            .as_ref()
            .filter(|slot| slot.generation == generation)
            .map(|slot| Arc::clone(&slot.lease))
    }

    /// Marks every lease taken in an ancestor process as the parent's (idempotent).
    fn invalidate_inherited(&self, generation: u64) {
        if generation != self.generation {
            if let Some(lease) = &self.original {
                lease.invalidate_after_fork();
            }
        }
        if let Some(slot) = &*read(&self.relet) {
            if slot.generation != generation {
                slot.lease.invalidate_after_fork();
            }
        }
    }

    /// In a forked child: invalidate the parent's lease here and lease a new worker id for the
    /// same URI. One thread leases; the others pause until it has.
    #[cold]
    fn lease_after_fork<H: Host>(
        &self,
        host: &H,
        generation: u64,
    ) -> Result<Arc<LeasedGenerator>, H::Error> {
        loop {
            if let Some(slot) = &*read(&self.relet) {
                if slot.generation == generation {
                    return Ok(Arc::clone(&slot.lease));
                }
            }
            self.invalidate_inherited(generation);
            if self.closed.load(Ordering::SeqCst) {
                return Err(LeaseError::Closed.into());
            }
            let seen = self.claim.load(Ordering::SeqCst);
            if seen != generation
                && self
                    .claim
                    .compare_exchange(seen, generation, Ordering::SeqCst, Ordering::SeqCst)
                    .is_ok()
            {
                break;
            }
            host.pause(Duration::from_millis(1))?;
        }
        let fresh = match lease(host, &self.uri, self.layout, &self.options) {
            Ok(lease) => Arc::new(lease),
            Err(error) => {
                self.claim.store(0, Ordering::SeqCst);
                return Err(error.into());
            }
        };
        let previous = write(&self.relet).replace(Slot {
            generation,
            lease: Arc::clone(&fresh),
        });
        if let Some(previous) = previous {
            // An ancestor's lease: never dropped here (see the module docs).
            std::mem::forget(previous.lease);
        }
        self.claim.store(0, Ordering::SeqCst);
        if self.closed.load(Ordering::SeqCst) {
            // close() ran while the new lease was being taken: give it back.
            let lease = Arc::clone(&fresh);
            host.blocking(move || lease.close())?;
            return Err(LeaseError::Closed.into());
        }
        Ok(fresh)
    }
}

impl PerProcess {
    /// Takes this process's leases out, for the caller to drop where it chooses (dropping the
    /// last reference to one stops its renewal thread and stores its state: a join and some
    /// I/O), and forgets any inherited one. The generator refuses every call afterwards, as
    /// after [`PerProcess::close`].
    pub fn take_leases(&mut self) -> Vec<Arc<LeasedGenerator>> {
        self.closed.store(true, Ordering::SeqCst);
        let generation = fork_generation();
        let relet = self
            .relet
            .get_mut()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take();
        let held = [
            self.original.take().map(|lease| (self.generation, lease)),
            relet.map(|slot| (slot.generation, slot.lease)),
        ];
        let mut mine = Vec::new();
        for (taken_in, lease) in held.into_iter().flatten() {
            if taken_in == generation {
                mine.push(lease);
            } else {
                // An ancestor's lease, inherited by this process: leave it alone.
                std::mem::forget(lease);
            }
        }
        mine
    }
}

impl Drop for PerProcess {
    /// Drops this process's lease (stopping its renewal thread and storing its state) and
    /// forgets any inherited one.
    fn drop(&mut self) {
        drop(self.take_leases());
    }
}
