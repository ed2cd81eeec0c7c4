//! The healing half of `Generator`: `Generator.open(uri)` (`heal=True`, the default) on the
//! lease crate's [`HealingGenerator`]: a lost lease is leased again in the background while
//! ids raise a retryable `CoordinatorUnavailableError` with `retry_at_ms`.
//!
//! Forks: a child never touches the parent's healing generator (its locks may have been copied
//! held by a parent thread); its first call opens one of its own from the same URI, with the
//! GIL released, as a leased generator's child leases its own worker id.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use clockflake::{Layout, Options, Policy, State};
use clockflake_lease::{
    fork, HealEvent, HealStats, HealingGenerator, LeaseError, LeaseOptions, LeaseStats,
};
use pyo3::prelude::*;

use crate::errors::Refusal;

/// A healing generator whose events become log lines (`clockflake._heal._log_event`).
fn open_logged(
    uri: &str,
    layout: Layout,
    options: &LeaseOptions,
) -> Result<HealingGenerator, LeaseError> {
    let coordinator = clockflake_lease::redact(uri);
    HealingGenerator::open_with_events(uri, layout, options.clone(), move |event| {
        log_event(&coordinator, event);
    })
}

/// Hands `event` to the `clockflake` logger, from the thread where it happened (no lock held;
/// the GIL taken for the call). Skipped while the interpreter shuts down; an exception raised
/// by a log handler is reported as unraisable, never carried further.
fn log_event(coordinator: &str, event: &HealEvent) {
    let (kind, worker_id, detail, retry_in_ms) = match event {
        HealEvent::Lost { worker_id, reason } => ("lost", *worker_id, reason.clone(), None),
        HealEvent::AttemptFailed { error, retry_in } => (
            "attempt_failed",
            None,
            error.to_string(),
            Some(u64::try_from(retry_in.as_millis()).unwrap_or(u64::MAX)),
        ),
        HealEvent::Healed { worker_id } => ("healed", Some(*worker_id), String::new(), None),
        _ => return,
    };
    let _ = Python::try_attach(|py| {
        let logged = py
            .import("clockflake._heal")
            .and_then(|module| module.getattr("_log_event"))
            .and_then(|log| log.call1((kind, coordinator, worker_id, detail, retry_in_ms)));
        if let Err(error) = logged {
            error.write_unraisable(py, None);
        }
    });
}

/// A generator whose lease heals.
pub struct Healed {
    uri: String,
    layout: Layout,
    options: LeaseOptions,
    coordinator: String,
    /// The fork generation `original` was opened in.
    generation: u64,
    /// The process that opened it: its healing generator (`None` only in `Drop`).
    original: Option<Arc<HealingGenerator>>,
    /// In a forked child: the child's own, with the fork generation it was opened in.
    child: Mutex<Option<(u64, Arc<HealingGenerator>)>>,
    /// The fork generation a thread is opening the process's own generator for (0: none): one
    /// thread of a forked child opens it, the others wait for it, so that a child leases one
    /// worker id, not one per thread. A claim copied from an ancestor (a fork while one of its
    /// threads was opening) carries an older generation and is taken over, never waited on.
    claim: AtomicU64,
    /// `close()` was called in this process (or before the fork that made it).
    closed: AtomicBool,
    /// The worker id held when `close()` was first called with one held, for `gen.worker_id`.
    closed_worker_id: OnceLock<u64>,
}

impl Healed {
    /// Leases a worker id (with the GIL released: it connects); a lost lease heals from then on.
    pub fn open(
        py: Python<'_>,
        uri: String,
        layout: Layout,
        options: LeaseOptions,
    ) -> PyResult<Healed> {
        let generation = fork::watch();
        let original = py
            .detach(|| open_logged(&uri, layout, &options))
            .map_err(Refusal::from)?;
        Ok(Healed {
            coordinator: original.coordinator().to_owned(),
            uri,
            layout,
            options,
            generation,
            original: Some(Arc::new(original)),
            child: Mutex::new(None),
            claim: AtomicU64::new(0),
            closed: AtomicBool::new(false),
            closed_worker_id: OnceLock::new(),
        })
    }

    /// This process's healing generator, if it has one (never opens: `None` in a forked child
    /// that has not opened its own yet).
    fn current_if_any(&self) -> Option<Arc<HealingGenerator>> {
        let generation = fork::generation();
        if generation == self.generation {
            return self.original.clone();
        }
        let slot = self.child.lock().unwrap_or_else(PoisonError::into_inner);
        slot.as_ref()
            .filter(|(mine, _)| *mine == generation)
            .map(|(_, gen)| Arc::clone(gen))
    }

    /// This process's healing generator: in a forked child, one opened for it (GIL released).
    fn current(&self, py: Python<'_>) -> PyResult<Arc<HealingGenerator>> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Refusal::from(LeaseError::Closed).into());
        }
        if let Some(gen) = self.current_if_any() {
            return Ok(gen);
        }
        // A forked child: one thread opens its own (the others pause, checking for signals,
        // until it has), without the GIL, and without holding the slot's lock during the I/O.
        let generation = fork::generation();
        loop {
            if let Some(gen) = self.current_if_any() {
                return Ok(gen);
            }
            if self.closed.load(Ordering::Acquire) {
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
        let opened = py.detach(|| open_logged(&self.uri, self.layout, &self.options));
        let opened = match opened {
            Ok(gen) => Arc::new(gen),
            Err(error) => {
                self.claim.store(0, Ordering::SeqCst);
                return Err(Refusal::from(error).into());
            }
        };
        let inherited = self
            .child
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .replace((generation, Arc::clone(&opened)));
        if let Some((_, inherited)) = inherited {
            // An ancestor's (a fork of a child): never touched here, never dropped.
            std::mem::forget(inherited);
        }
        self.claim.store(0, Ordering::SeqCst);
        if self.closed.load(Ordering::Acquire) {
            // close() ran while it was being opened: give it back.
            let gen = Arc::clone(&opened);
            py.detach(move || gen.close()).map_err(Refusal::from)?;
            return Err(Refusal::from(LeaseError::Closed).into());
        }
        Ok(opened)
    }

    /// The next id: the lease crate's `try_next_id` with the GIL held (no I/O, no waiting); a
    /// refusal that may clear by waiting (a full tick, a handover) is retried with `next_id`
    /// without the GIL; a healing generator's refusal is raised at once.
    #[inline]
    pub fn next_id(&self, py: Python<'_>) -> PyResult<u64> {
        match self.original.as_ref() {
            Some(gen)
                if !self.closed.load(Ordering::Relaxed)
                    && fork::generation() == self.generation =>
            {
                self.next_id_on(py, gen)
            }
            _ => {
                let gen = self.current(py)?;
                self.next_id_on(py, &gen)
            }
        }
    }

    #[inline]
    fn next_id_on(&self, py: Python<'_>, gen: &HealingGenerator) -> PyResult<u64> {
        match gen.try_next_id() {
            Ok(id) => Ok(id),
            Err(error) if matches!(error, LeaseError::Healing { .. } | LeaseError::Closed) => {
                Err(Refusal::from(error).into())
            }
            Err(_) => Ok(py.detach(|| gen.next_id()).map_err(Refusal::from)?),
        }
    }

    /// The next id at an explicit Unix-ms time (may persist a reservation: GIL released).
    pub fn next_id_at(&self, py: Python<'_>, now_ms: u64) -> PyResult<u64> {
        let gen = self.current(py)?;
        Ok(py
            .detach(|| gen.next_id_at(now_ms))
            .map_err(Refusal::from)?)
    }

    /// `n` ids, a tick's worth at a time, with the GIL released (see `Leased::fill`).
    pub fn fill(&self, py: Python<'_>, out: &mut [u64]) -> PyResult<()> {
        let gen = self.current(py)?;
        py.detach(|| {
            let mut filled = 0;
            while filled < out.len() {
                let wanted = u64::try_from(out.len() - filled).unwrap_or(u64::MAX);
                for (slot, id) in out[filled..].iter_mut().zip(gen.next_block(wanted)?) {
                    *slot = id;
                    filled += 1;
                }
            }
            Ok::<(), LeaseError>(())
        })
        .map_err(Refusal::from)?;
        Ok(())
    }

    /// The state of the lease held; while healing, the retryable refusal.
    pub fn state(&self, py: Python<'_>) -> PyResult<State> {
        Ok(self.current(py)?.state().map_err(Refusal::from)?)
    }

    /// The worker id held; while healing, the retryable refusal.
    pub fn worker_id(&self, py: Python<'_>) -> PyResult<u64> {
        if let Some(&closed_with) = self.closed_worker_id.get() {
            // As a closed leased generator tells the worker id it released.
            return Ok(closed_with);
        }
        let gen = self.current(py)?;
        Ok(gen.held_worker_id().map_err(Refusal::from)?)
    }

    /// The worker id for `repr()`: never opens; `None` while healing or in a child that has not
    /// opened its own.
    pub fn worker_id_if_current(&self) -> Option<u64> {
        self.current_if_any().and_then(|gen| gen.worker_id())
    }

    /// Whether ids are issued now: a lease held and active in this process, not closed.
    pub fn is_active(&self) -> bool {
        !self.closed.load(Ordering::Acquire)
            && self.current_if_any().is_some_and(|gen| gen.is_active())
    }

    /// The healing figures and the current lease's, if any; `None`: a forked child that has
    /// not opened its own yet. Never opens.
    pub fn stats(&self) -> Option<(HealStats, Option<LeaseStats>)> {
        let gen = self.current_if_any()?;
        let mut heal = gen.stats();
        if self.closed.load(Ordering::Acquire) {
            heal.state = "closed";
        }
        Some((heal, gen.lease_stats()))
    }

    pub fn coordinator(&self) -> String {
        self.coordinator.clone()
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    pub fn policy(&self) -> Policy {
        self.options().policy_for(self.layout())
    }

    pub fn options(&self) -> Options {
        self.options.generator
    }

    /// Stops issuing ids and healing, stores the state and releases the worker id (GIL
    /// released). In a forked child, closes only the child's own; the parent's is untouched.
    pub fn close(&self, py: Python<'_>) -> PyResult<()> {
        let held = self.current_if_any();
        if let Some(worker_id) = held.as_ref().and_then(|gen| gen.worker_id()) {
            // A later close() keeps the first one's.
            let _ = self.closed_worker_id.set(worker_id);
        }
        self.closed.store(true, Ordering::Release);
        match held {
            Some(gen) => Ok(py.detach(|| gen.close()).map_err(Refusal::from)?),
            None => Ok(()),
        }
    }
}

impl Drop for Healed {
    fn drop(&mut self) {
        let generation = fork::generation();
        let original = self.original.take();
        let child = self
            .child
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let mut mine = Vec::new();
        // Another process's healing generator is never touched (its locks may be copied held).
        match original {
            Some(gen) if generation == self.generation => mine.push(gen),
            Some(gen) => std::mem::forget(gen),
            None => {}
        }
        match child {
            Some((opened_in, gen)) if opened_in == generation => mine.push(gen),
            Some((_, gen)) => std::mem::forget(gen),
            None => {}
        }
        // Closing stores the state and releases the worker id: I/O, done without the GIL.
        let mut pending = Some(mine);
        let _ = Python::try_attach(|py| {
            if let Some(gens) = pending.take() {
                py.detach(move || drop(gens));
            }
        });
        drop(pending);
    }
}
