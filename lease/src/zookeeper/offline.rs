//! `takeover=off` and `offline=cache`: worker ids bound to their server identity for good,
//! and the start from the cache file when ZooKeeper cannot be reached ([`ZooKeeperCoordinator`]'s
//! docs, "Offline start").

use std::collections::HashSet;

use clockflake::{Layout, State};
use zookeeper_client as zk;

use super::session::{open_options, Fault};
use super::ZooKeeperCoordinator;
use crate::coordinator::Grant;
use crate::LeaseError;

/// Raises `acc`'s high-water marks to `other`'s (records of one worker id and layout).
pub(super) fn merge_marks(acc: &mut State, other: &State) {
    for (slot, mark) in acc.high_water_ms.iter_mut().zip(other.high_water_ms) {
        *slot = (*slot).max(mark);
    }
}

impl ZooKeeperCoordinator {
    fn bound_dir(&self) -> String {
        format!("{}/bound", self.root)
    }

    /// `takeover=off`: marks this identity's worker ids as bound to it for good
    /// (`bound/<identity>`, persistent), so that no process of the application takes them
    /// over at its start-up step 3, whatever its own `takeover` says.
    pub(super) fn mark_bound(&self) -> Result<(), LeaseError> {
        let path = format!("{}/{}", self.bound_dir(), self.identity);
        self.call(|client| async move { client.mkdir(&path, &open_options()).await })
            .map_err(|fault| self.unavailable(format!("mark {} bound: {fault}", self.identity)))
    }

    /// The identities whose worker ids are bound to them (`bound/*`).
    pub(super) fn bound_identities(&self) -> Result<HashSet<String>, LeaseError> {
        let dir = self.bound_dir();
        match self.call(|client| async move { client.list_children(&dir).await }) {
            Ok(names) => Ok(names.into_iter().collect()),
            Err(Fault::Zk(zk::Error::NoNode)) => Ok(HashSet::new()),
            Err(fault) => Err(self.unavailable(format!("list {}: {fault}", self.bound_dir()))),
        }
    }

    /// `offline=cache`, online: the adopted record with the cache's marks of the same worker
    /// id raised into it. Holders of this identity write the cache before ZooKeeper, and one
    /// started offline writes the cache only, so the cache may be ahead of ZooKeeper.
    pub(super) fn with_cached_marks(
        &self,
        worker: u64,
        state: Option<State>,
    ) -> Result<Option<State>, LeaseError> {
        if !self.offline {
            return Ok(state);
        }
        let cached = match self.read_cached()? {
            Some(cached) if cached.worker == worker => cached.state,
            _ => None,
        };
        Ok(match (state, cached) {
            (None, cached) => cached,
            (Some(mut state), Some(cached))
                if cached.layout_fingerprint == state.layout_fingerprint =>
            {
                merge_marks(&mut state, &cached);
                Some(state)
            }
            (state, _) => state,
        })
    }

    /// `offline=cache`, ZooKeeper unreachable (`error`): the worker id and record the cache
    /// holds, under the cache lock (taken by the caller), without a deadline. Refused, the
    /// lock is released and `error` is returned with the reason the cache cannot serve.
    pub(super) fn acquire_offline(
        &mut self,
        layout: &Layout,
        error: LeaseError,
    ) -> Result<Grant, LeaseError> {
        let unreachable = match &error {
            LeaseError::CoordinatorUnavailable { reason, .. } => reason.clone(),
            other => other.to_string(),
        };
        let refuse = |this: &mut Self, why: &str| {
            this.unlock_cache();
            Err(this.unavailable(format!(
                "{unreachable}; offline=cache cannot start without ZooKeeper: {why}"
            )))
        };
        let cached = match self.read_cached() {
            Ok(cached) => cached,
            Err(error) => {
                self.unlock_cache();
                return Err(error);
            }
        };
        let Some(cached) = cached else {
            return refuse(
                self,
                "the cache file names no worker id of this root and server identity \
                 (start once with ZooKeeper up)",
            );
        };
        let Some(state) = cached.state.filter(|_| cached.bound) else {
            return refuse(
                self,
                "the cache file holds no state record written with offline=cache \
                 (start once with ZooKeeper up)",
            );
        };
        let in_range = self
            .workers
            .is_none_or(|range| range.contains(cached.worker));
        if cached.worker > layout.max_worker_id() || state.worker_id != cached.worker || !in_range {
            return refuse(
                self,
                "the cached worker id does not fit this layout, its record or the workers range",
            );
        }
        self.offline_worker = Some(cached.worker);
        Ok(Grant {
            worker_id: cached.worker,
            state: Some(state),
            ttl: None,
        })
    }
}
