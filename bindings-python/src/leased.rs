//! The leased half of `Generator`: `Generator.open(uri)` holds a worker id leased from a
//! coordinator (`clockflake_lease`), renewed on the lease crate's background thread.
//!
//! Forks: a child process must never issue ids under the parent's lease. Every fork, from
//! Python or from C, moves the process's fork generation (`clockflake_lease::fork`, a
//! `pthread_atfork` child handler); every call compares it with the generation its lease was
//! taken in, and in a child the first call invalidates the inherited lease (without touching
//! the parent's lock file, connection or state) and leases a new worker id for the same URI.
//! The inherited lease is never dropped in the child, only forgotten: its lock file descriptor
//! and database socket are shared with the parent, and its mutexes may have been held by
//! parent threads at the fork. Invalidation is done at that first call rather than in the
//! child handler, which may only touch atomics; nothing reaches the inherited lease before it.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Duration;

use clockflake::{Layout, Options, Policy, State};
use clockflake_lease::fork::{self, generation as fork_generation};
use clockflake_lease::{LeaseError, LeaseOptions, LeasedGenerator};
use pyo3::prelude::*;

use crate::errors::Refusal;

/// The lease in use and the fork generation it was taken in.
struct Slot {
    generation: u64,
    lease: Arc<LeasedGenerator>,
}

/// A generator on a leased worker id.
pub struct Leased {
    uri: String,
    layout: Layout,
    options: LeaseOptions,
    policy: Policy,
    /// The lease `Generator.open` took, used in the process that took it (`None` only while
    /// being dropped). The fast path reads it without a lock.
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

/// After `try_next_id` refused: the lease crate's `next_id`, without the GIL. The lease crate
/// decides whether the refusal clears by waiting (a full tick, a short rollback wait, a
/// handover, a renewal the renewal thread has not persisted yet) and otherwise refuses again
/// at once, the refusal being final.
#[cold]
#[inline(never)]
fn after_refusal(py: Python<'_>, lease: Arc<LeasedGenerator>) -> PyResult<u64> {
    Ok(py.detach(move || lease.next_id()).map_err(Refusal::from)?)
}

impl Leased {
    /// Leases a worker id (with the GIL released: it opens files or connects).
    pub fn open(
        py: Python<'_>,
        uri: String,
        layout: Layout,
        generator: Options,
        max_handover_wait: Duration,
    ) -> PyResult<Leased> {
        let options = LeaseOptions {
            generator,
            clock: None,
            max_handover_wait,
        };
        let generation = fork::watch();
        let lease = {
            let options = options.clone();
            let uri = uri.as_str();
            py.detach(move || clockflake_lease::open(uri, layout, options))
                .map_err(Refusal::from)?
        };
        Ok(Leased {
            policy: generator
                .on_rollback
                .unwrap_or(Policy::default_for(&layout)),
            uri,
            layout,
            options,
            original: Some(Arc::new(lease)),
            generation,
            relet: RwLock::new(None),
            claim: AtomicU64::new(0),
            closed: AtomicBool::new(false),
        })
    }

    /// The next id: `try_next_id` with the GIL held (no I/O, no waiting), and after a refusal
    /// the lease crate's waiting `next_id` without the GIL.
    #[inline]
    pub fn next_id(&self, py: Python<'_>) -> PyResult<u64> {
        match &self.original {
            Some(lease) if fork_generation() == self.generation => match lease.try_next_id() {
                Ok(id) => Ok(id),
                Err(_) => after_refusal(py, Arc::clone(lease)),
            },
            _ => self.next_id_slow(py),
        }
    }

    #[cold]
    #[inline(never)]
    fn next_id_slow(&self, py: Python<'_>) -> PyResult<u64> {
        let lease = self.current(py)?;
        match lease.try_next_id() {
            Ok(id) => Ok(id),
            Err(_) => after_refusal(py, lease),
        }
    }

    /// The next id at an explicit Unix-ms time (may persist a reservation: GIL released).
    pub fn next_id_at(&self, py: Python<'_>, now_ms: u64) -> PyResult<u64> {
        let lease = self.current(py)?;
        Ok(py
            .detach(move || lease.next_id_at(now_ms))
            .map_err(Refusal::from)?)
    }

    /// `n` ids, generated with the GIL released, a tick's worth at a time: the lease crate's
    /// `next_block` applies the deadline (with its block margin), the reservation and the
    /// clock-sequence checks to each block, and waits like `next_id` when a tick is full.
    pub fn fill(&self, py: Python<'_>, out: &mut [u64]) -> PyResult<()> {
        let lease = self.current(py)?;
        py.detach(|| {
            let mut filled = 0;
            while filled < out.len() {
                let wanted = u64::try_from(out.len() - filled).unwrap_or(u64::MAX);
                for (slot, id) in out[filled..].iter_mut().zip(lease.next_block(wanted)?) {
                    *slot = id;
                    filled += 1;
                }
            }
            Ok::<(), LeaseError>(())
        })
        .map_err(Refusal::from)?;
        Ok(())
    }

    pub fn state(&self, py: Python<'_>) -> PyResult<State> {
        Ok(self.current(py)?.state())
    }

    pub fn worker_id(&self, py: Python<'_>) -> PyResult<u64> {
        Ok(self.current(py)?.worker_id())
    }

    /// The worker id for `repr()`: never leases; `None` in a child that has not leased yet.
    pub fn worker_id_if_current(&self) -> Option<u64> {
        self.lease_if_current().map(|lease| lease.worker_id())
    }

    /// The lease this process holds, if any: never leases (in a forked child that has not
    /// leased yet, `None`).
    pub fn lease_if_current(&self) -> Option<Arc<LeasedGenerator>> {
        self.lease_in(fork_generation())
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

    pub fn coordinator(&self) -> String {
        self.original
            .as_ref()
            .map_or_else(String::new, |lease| lease.coordinator().to_owned())
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    pub fn policy(&self) -> Policy {
        self.policy
    }

    pub fn options(&self) -> Options {
        self.options.generator
    }

    /// Stops, stores the state and releases the worker id (GIL released). In a forked child
    /// that has not leased its own worker id, only marks the generator closed: the inherited
    /// lease is the parent's.
    pub fn close(&self, py: Python<'_>) -> PyResult<()> {
        self.closed.store(true, Ordering::SeqCst);
        let generation = fork_generation();
        if generation != self.generation {
            self.invalidate_inherited(generation);
        }
        match self.lease_in(generation) {
            Some(lease) => Ok(py.detach(move || lease.close()).map_err(Refusal::from)?),
            None => Ok(()),
        }
    }

    /// The lease of this process: the one held, or in a forked child a new one.
    fn current(&self, py: Python<'_>) -> PyResult<Arc<LeasedGenerator>> {
        let generation = fork_generation();
        match self.lease_in(generation) {
            Some(lease) => Ok(lease),
            None => self.lease_after_fork(py, generation),
        }
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
    /// same URI. One thread leases; the others wait for it without the GIL.
    #[cold]
    fn lease_after_fork(&self, py: Python<'_>, generation: u64) -> PyResult<Arc<LeasedGenerator>> {
        loop {
            if let Some(slot) = &*read(&self.relet) {
                if slot.generation == generation {
                    return Ok(Arc::clone(&slot.lease));
                }
            }
            self.invalidate_inherited(generation);
            if self.closed.load(Ordering::SeqCst) {
                return Err(Refusal::from(LeaseError::Closed).into());
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
            py.detach(|| std::thread::sleep(Duration::from_millis(1)));
            py.check_signals()?;
        }
        let opened = {
            let options = self.options.clone();
            let (uri, layout) = (self.uri.as_str(), self.layout);
            py.detach(move || clockflake_lease::open(uri, layout, options))
        };
        let fresh = match opened {
            Ok(lease) => Arc::new(lease),
            Err(error) => {
                self.claim.store(0, Ordering::SeqCst);
                return Err(Refusal::from(error).into());
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
            py.detach(move || lease.close()).map_err(Refusal::from)?;
            return Err(Refusal::from(LeaseError::Closed).into());
        }
        Ok(fresh)
    }
}

impl Drop for Leased {
    fn drop(&mut self) {
        let generation = fork_generation();
        let relet = self
            .relet
            .get_mut()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take();
        let mine = [
            self.original.take().map(|lease| (self.generation, lease)),
            relet.map(|slot| (slot.generation, slot.lease)),
        ];
        let mut pending = Vec::new();
        for (taken_in, lease) in mine.into_iter().flatten() {
            if taken_in == generation {
                pending.push(lease);
            } else {
                // An ancestor's lease, inherited by this process: leave it alone.
                std::mem::forget(lease);
            }
        }
        if pending.is_empty() {
            return;
        }
        // Dropping the last reference stops the renewal thread and stores the state: a join
        // and some I/O, done without the GIL when this thread holds it.
        let mut pending = Some(pending);
        let _ = Python::try_attach(|py| {
            if let Some(leases) = pending.take() {
                py.detach(move || drop(leases));
            }
        });
        drop(pending);
    }
}

/// The error for a bad `uri` argument.
pub fn invalid_uri(found: String) -> PyErr {
    Refusal::from(LeaseError::InvalidUri {
        uri: found,
        reason: "expected the coordinator URI as a str".to_owned(),
    })
    .into()
}
