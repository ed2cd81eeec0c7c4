//! The coordinator abstraction: who hands out worker ids and keeps their state records.

use std::time::Duration;

use clockflake::{Layout, State};

use crate::LeaseError;

/// A worker id granted by [`Coordinator::acquire`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grant {
    /// The worker id, unique among the live holders of the application namespace.
    pub worker_id: u64,
    /// The worker's stored state record (per-clock-sequence high-water marks), `None` if the
    /// worker id was never used.
    pub state: Option<State>,
    /// How long the lease lasts after the request that granted or last renewed it was
    /// sent; `None` for a lease that lasts until it is released or its process dies
    /// (file locks).
    pub ttl: Option<Duration>,
}

/// Hands out worker ids of one application namespace and keeps each worker's state record.
///
/// One coordinator value holds at most one lease at a time: [`Coordinator::acquire`] takes a
/// free worker id, [`Coordinator::renew`] extends that lease and stores the state record with
/// it, [`Coordinator::release`] gives the worker id back.
///
/// The contract that makes ids unique: a worker id is granted to one holder at a time; a
/// lease with a `ttl` is not granted to anyone else until `ttl` after the holder's last
/// successful renewal was sent; and whoever is granted a worker id receives the state record
/// its previous holder stored last.
pub trait Coordinator: Send {
    /// A short description for messages (`file:///var/lib/ids?app=orders`), never a password.
    fn describe(&self) -> String;

    /// Takes a free worker id of `layout`, or fails with `WORKER_POOL_EXHAUSTED` when all
    /// `layout.max_worker_id() + 1` are held.
    fn acquire(&mut self, layout: &Layout) -> Result<Grant, LeaseError>;

    /// Extends the lease (when it expires at all) and stores `state` with it, in one step.
    /// Fails with `LEASE_LOST` when the lease is gone: the caller must stop at once.
    fn renew(&mut self, state: &State) -> Result<(), LeaseError>;

    /// Stores `state` (if given) and gives the worker id back.
    fn release(&mut self, state: Option<&State>) -> Result<(), LeaseError>;

    /// Reads the stored state record of any worker id, for inspection.
    fn read_state(&mut self, worker_id: u64) -> Result<Option<State>, LeaseError>;
}
