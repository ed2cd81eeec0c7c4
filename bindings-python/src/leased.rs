//! The leased half of `Generator`: `Generator.open(uri)` holds a worker id leased from a
//! coordinator, renewed on the lease crate's background thread. Forks are the lease crate's
//! [`PerProcess`]: in a child, the first call leases a worker id of its own; here it runs
//! its I/O without the GIL and checks for signals while another thread leases.

use std::time::Duration;

use clockflake::{Layout, Options, Policy, State};
use clockflake_lease::{Host, LeaseError, LeaseOptions, LeasedGenerator, PerProcess};
use pyo3::prelude::*;
use std::sync::Arc;

use crate::errors::Refusal;

/// A generator on a leased worker id.
pub struct Leased {
    inner: PerProcess,
}

/// The lease crate's host in Python: blocking work without the GIL, pauses that check for
/// signals (Ctrl-C).
struct Gil<'py>(Python<'py>);

/// A Python exception out of the lease crate's [`Host`]: a refusal, or a signal handler's.
struct HostError(PyErr);

impl From<LeaseError> for HostError {
    fn from(error: LeaseError) -> HostError {
        HostError(Refusal::from(error).into())
    }
}

impl From<HostError> for PyErr {
    fn from(HostError(error): HostError) -> PyErr {
        error
    }
}

impl Host for Gil<'_> {
    type Error = HostError;

    fn blocking<R: Send>(&self, work: impl FnOnce() -> R + Send) -> R {
        self.0.detach(work)
    }

    fn pause(&self, duration: Duration) -> Result<(), HostError> {
        self.0.detach(|| std::thread::sleep(duration));
        self.0.check_signals().map_err(HostError)
    }
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
        Ok(Leased {
            inner: PerProcess::open(&Gil(py), &uri, layout, options)?,
        })
    }

    /// The lease of this process (in a forked child, leased at the first call).
    fn current(&self, py: Python<'_>) -> PyResult<Arc<LeasedGenerator>> {
        Ok(self.inner.current(&Gil(py))?)
    }

    /// The next id: `try_next_id` with the GIL held (no I/O, no waiting), and after a refusal
    /// the lease crate's waiting `next_id` without the GIL.
    #[inline]
    pub fn next_id(&self, py: Python<'_>) -> PyResult<u64> {
        match self.inner.original_if_current() {
            Some(lease) => match lease.try_next_id() {
                Ok(id) => Ok(id),
                Err(_) => after_refusal(py, Arc::clone(lease)),
            },
            None => self.next_id_slow(py),
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
        self.inner.lease_if_current()
    }

    pub fn coordinator(&self) -> String {
        self.inner.coordinator().to_owned()
    }

    pub fn layout(&self) -> &Layout {
        self.inner.layout()
    }

    pub fn policy(&self) -> Policy {
        self.options().policy_for(self.layout())
    }

    pub fn options(&self) -> Options {
        self.inner.options().generator
    }

    /// Stops, stores the state and releases the worker id (GIL released). In a forked child
    /// that has not leased its own worker id, only marks the generator closed.
    pub fn close(&self, py: Python<'_>) -> PyResult<()> {
        Ok(self.inner.close(&Gil(py))?)
    }
}

impl Drop for Leased {
    fn drop(&mut self) {
        // Dropping this process's lease stops its renewal thread and stores the state: a join
        // and some I/O, done without the GIL when this thread holds it.
        let mut pending = Some(self.inner.take_leases());
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
