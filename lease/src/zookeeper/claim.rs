//! Claiming a worker id at start-up (steps 1 to 5 of [`ZooKeeperCoordinator`]'s docs).

use std::collections::{BTreeMap, HashSet};
use std::time::{Duration, Instant};

use clockflake::{Layout, State};
use zookeeper_client as zk;

use super::offline::merge_marks;
use super::session::{open_options, Fault, Held};
use super::ZooKeeperCoordinator;
use crate::coordinator::{check_ranges, exhausted, pool, ready_at_ms};
use crate::{record, LeaseError};

/// How many times start-up lists the nodes again after losing every candidate to others.
const CLAIM_ROUNDS: u32 = 8;
/// At most this many never-used worker ids are tried per listing.
const FRESH_PER_ROUND: usize = 256;

/// A `servers` child: `<identity>_<worker>`.
pub(super) struct ServerNode {
    pub(super) name: String,
    pub(super) identity: String,
    pub(super) worker: u64,
}

pub(super) fn parse_server(name: &str) -> Option<ServerNode> {
    let (identity, worker) = name.rsplit_once('_')?;
    if identity.is_empty() || worker.is_empty() || !worker.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(ServerNode {
        name: name.to_owned(),
        identity: identity.to_owned(),
        worker: worker.parse().ok()?,
    })
}

/// A small jitter from the clock and the process id, so racing start-ups spread out.
pub(super) fn jitter_ms(max: u64) -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos() as u64);
    (nanos ^ (u64::from(std::process::id()) << 7)) % max.max(1)
}

impl ZooKeeperCoordinator {
    /// Every `servers` node naming a worker id of the layout, and the worker ids in use.
    pub(super) fn list(&self, workers: u64) -> Result<(Vec<ServerNode>, HashSet<u64>), LeaseError> {
        let servers: Vec<ServerNode> = self
            .children(self.servers_dir())?
            .iter()
            .filter_map(|name| parse_server(name))
            .filter(|node| node.worker < workers)
            .collect();
        let instances = self
            .children(self.instances_dir())?
            .iter()
            .filter_map(|name| name.parse::<u64>().ok())
            .collect();
        Ok((servers, instances))
    }

    /// `WORKER_RANGE_CONFLICT` if a live holder (an `instances/<worker>` node, of a worker id
    /// below `workers`) declared a range in its data that overlaps this pool's and differs
    /// from it. One read per live holder, only when this pool declares a range (a pool without
    /// one is not checked here: it would cost every start-up those reads).
    fn check_live_ranges(
        &self,
        workers: u64,
        pool: &std::ops::RangeInclusive<u64>,
    ) -> Result<(), LeaseError> {
        if self.workers.is_none() {
            return Ok(());
        }
        let (_, in_use) = self.list(workers)?;
        let mut in_use: Vec<u64> = in_use.into_iter().filter(|w| *w < workers).collect();
        in_use.sort_unstable();
        for worker in in_use {
            let Some(data) = self.instance_data(worker)? else {
                continue;
            };
            let text = String::from_utf8_lossy(&data);
            let declared = text
                .split(' ')
                .find_map(|word| word.strip_prefix("workers="))
                .unwrap_or("");
            check_ranges(
                &self.redacted_uri,
                self.workers.as_ref(),
                pool,
                [(worker, declared)],
            )?;
        }
        Ok(())
    }

    /// Tries to make `worker` ours by creating its ephemeral node: `Ok(true)` if created,
    /// `Ok(false)` if it exists (someone else's).
    pub(super) fn try_claim(&self, worker: u64) -> Result<bool, LeaseError> {
        let path = format!("{}/{worker}", self.instances_dir());
        let timeout_ms = self.session.as_ref().map_or(0, |s| s.timeout.as_millis());
        let mut data = format!("{} {timeout_ms}", self.identity);
        if let Some(range) = self.workers {
            data.push_str(&format!(" workers={range}"));
        }
        let data = data.into_bytes();
        let created = self.call(|client| async move {
            let options = zk::CreateMode::Ephemeral.with_acls(zk::Acls::anyone_all());
            client.create(&path, &data, &options).await
        });
        match created {
            Ok(_) => Ok(true),
            Err(Fault::Zk(zk::Error::NodeExists)) => Ok(false),
            Err(fault) => Err(self.unavailable(format!("claim worker id {worker}: {fault}"))),
        }
    }

    /// The data of `instances/<worker>`, `None` if absent.
    pub(super) fn instance_data(&self, worker: u64) -> Result<Option<Vec<u8>>, LeaseError> {
        let path = format!("{}/{worker}", self.instances_dir());
        match self.call(|client| async move { client.get_data(&path).await }) {
            Ok((data, _)) => Ok(Some(data)),
            Err(Fault::Zk(zk::Error::NoNode)) => Ok(None),
            Err(fault) => Err(self.unavailable(fault)),
        }
    }

    /// Waits for `instances/<worker>` to vanish (our own identity's previous process, whose
    /// session has not expired yet), at most the timeout it recorded plus a second.
    pub(super) fn await_predecessor(&self, worker: u64) -> Result<bool, LeaseError> {
        let Some(data) = self.instance_data(worker)? else {
            return Ok(true);
        };
        let text = String::from_utf8_lossy(&data);
        let mut words = text.split(' ');
        if words.next() != Some(self.identity.as_str()) {
            return Ok(false);
        }
        let their_ms: u64 = words.next().and_then(|w| w.parse().ok()).unwrap_or(0);
        let patience = Duration::from_millis(their_ms.min(60_000) + 1000);
        let started = Instant::now();
        while started.elapsed() < patience {
            std::thread::sleep(Duration::from_millis(50));
            if self.instance_data(worker)?.is_none() {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// `servers` nodes of other holders whose worker id is not in use and not bound to an
    /// identity (`takeover=off`), least recently used (oldest data write) first; none when
    /// this coordinator has `takeover=off`. The flag says whether bound worker ids were left
    /// out.
    pub(super) fn takeover_order(
        &self,
        servers: &[ServerNode],
        in_use: &HashSet<u64>,
    ) -> Result<(Vec<u64>, bool), LeaseError> {
        if !self.takeover {
            return Ok((Vec::new(), true));
        }
        let bound_identities = self.bound_identities()?;
        let bound: HashSet<u64> = servers
            .iter()
            .filter(|n| bound_identities.contains(&n.identity))
            .map(|n| n.worker)
            .collect();
        let mut by_worker: BTreeMap<u64, i64> = BTreeMap::new();
        let free = |n: &&ServerNode| !in_use.contains(&n.worker) && !bound.contains(&n.worker);
        for node in servers.iter().filter(free) {
            let path = format!("{}/{}", self.servers_dir(), node.name);
            let mtime = match self.call(|client| async move { client.check_stat(&path).await }) {
                Ok(Some(stat)) => stat.mtime,
                Ok(None) => continue,
                Err(fault) => return Err(self.unavailable(fault)),
            };
            let entry = by_worker.entry(node.worker).or_insert(mtime);
            *entry = (*entry).max(mtime);
        }
        let mut order: Vec<(i64, u64)> = by_worker.into_iter().map(|(w, m)| (m, w)).collect();
        order.sort_unstable();
        let skipped_bound = bound.iter().any(|w| !in_use.contains(w));
        Ok((order.into_iter().map(|(_, w)| w).collect(), skipped_bound))
    }

    /// Before start-up: if every worker id this identity has is held by an instance of the same
    /// identity (a previous process killed without closing, whose session has not expired
    /// yet), waits for one to be released, at most the session timeout that instance recorded
    /// plus a second. Start-up itself never waits (a lease's deadline counts from the start
    /// of [`crate::Coordinator::acquire`]) and takes another worker id instead, so call this first to
    /// keep the id across a crash; [`crate::open`] does. Errors are left to start-up to report.
    pub fn wait_for_predecessor(&mut self) {
        if self.session.is_some() {
            return;
        }
        if let Err(error) = self.connect() {
            if let LeaseError::CoordinatorUnavailable { reason, .. } = error {
                self.unreachable = Some(reason);
            }
            return;
        }
        let _ = (|| -> Result<(), LeaseError> {
            let (servers, in_use) = self.list(u64::MAX)?;
            let own: Vec<u64> = servers
                .iter()
                .filter(|n| n.identity == self.identity)
                .map(|n| n.worker)
                .collect();
            if own.is_empty() || own.iter().any(|w| !in_use.contains(w)) {
                return Ok(());
            }
            for worker in own {
                if self.await_predecessor(worker)? {
                    return Ok(());
                }
            }
            Ok(())
        })();
        self.close_session();
    }

    /// From when (wall ms) a holder starting at `now_ms` could issue ids under the records the
    /// `servers` nodes at `paths` hold (0: at once), for preferring usable worker ids. Read
    /// without holding the worker id, so only a hint: [`ZooKeeperCoordinator::adopt`] reads
    /// them again once it is ours. A record that cannot be read counts as usable, so that
    /// start-up takes it in its turn and refuses it there, as it always did.
    pub(super) fn ready_at(
        &self,
        paths: Vec<String>,
        layout: &Layout,
        now_ms: u64,
    ) -> Result<u64, LeaseError> {
        let mut merged: Option<State> = None;
        for path in paths {
            let data = match self.call(|client| async move { client.get_data(&path).await }) {
                Ok((data, _)) => data,
                Err(Fault::Zk(zk::Error::NoNode)) => continue,
                Err(fault) => return Err(self.unavailable(fault)),
            };
            if data.is_empty() {
                continue;
            }
            let Ok(state) = record::decode(&data) else {
                return Ok(0);
            };
            merged = Some(match merged {
                None => state,
                Some(mut acc) => {
                    merge_marks(&mut acc, &state);
                    acc
                }
            });
        }
        Ok(ready_at_ms(layout, merged.as_ref(), now_ms))
    }

    /// Claims a worker id (its ephemeral node created by our session): the first candidate
    /// (in the order of the type's docs) whose record can be used at `now_ms`; if none can,
    /// the one usable first.
    pub(super) fn claim(&self, layout: &Layout, now_ms: u64) -> Result<u64, LeaseError> {
        let range = pool(&self.redacted_uri, layout, self.workers.as_ref())?;
        let workers = layout.max_worker_id().saturating_add(1);
        self.check_live_ranges(workers, &range)?;
        if let Some(worker) = self
            .read_cache(workers)
            .filter(|worker| range.contains(worker))
        {
            let own = format!("{}/{}_{worker}", self.servers_dir(), self.identity);
            let exists = {
                let own = own.clone();
                self.call(|client| async move { client.check_stat(&own).await })
            };
            if matches!(exists, Ok(Some(_)))
                && self.ready_at(vec![own], layout, now_ms)? == 0
                && self.try_claim(worker)?
            {
                return Ok(worker);
            }
        }
        for round in 0..CLAIM_ROUNDS {
            if round > 0 {
                std::thread::sleep(Duration::from_millis(5 + jitter_ms(40)));
            }
            let (servers, in_use) = self.list(workers)?;
            // 1. This identity's own worker ids.
            let mut own: Vec<u64> = servers
                .iter()
                .filter(|n| n.identity == self.identity)
                .map(|n| n.worker)
                .filter(|w| !in_use.contains(w) && range.contains(w))
                .collect();
            own.sort_unstable();
            own.dedup();
            // 2. The smallest worker ids no `servers` node names (never used: usable at once).
            let named: HashSet<u64> = servers.iter().map(|n| n.worker).collect();
            let fresh: Vec<u64> = range
                .clone()
                .filter(|w| !named.contains(w) && !in_use.contains(w))
                .take(FRESH_PER_ROUND)
                .collect();
            // 3. Every id has a node: take over one not in use, least recently used first.
            let (takeover, skipped_bound) = if fresh.is_empty() {
                let (order, skipped) = self.takeover_order(&servers, &in_use)?;
                let order = order.into_iter().filter(|w| range.contains(w)).collect();
                (order, skipped)
            } else {
                (Vec::new(), false)
            };
            let candidates = own.iter().chain(&fresh).chain(&takeover).copied();
            let mut later: Vec<(u64, u64)> = Vec::new();
            let mut tried = false;
            for worker in candidates {
                tried = true;
                let ready_at = if fresh.contains(&worker) {
                    0
                } else {
                    let paths = servers
                        .iter()
                        .filter(|n| n.worker == worker)
                        .map(|n| format!("{}/{}", self.servers_dir(), n.name))
                        .collect();
                    self.ready_at(paths, layout, now_ms)?
                };
                if ready_at > 0 {
                    later.push((ready_at, worker));
                } else if self.try_claim(worker)? {
                    return Ok(worker);
                }
            }
            // None usable at once: the one usable first.
            later.sort_unstable();
            for (_, worker) in later {
                if self.try_claim(worker)? {
                    return Ok(worker);
                }
            }
            // Every worker id in use, or bound to another identity: listing again is no use.
            if !tried && (skipped_bound || range.clone().all(|w| in_use.contains(&w))) {
                return Err(exhausted(&self.redacted_uri, layout, self.workers.as_ref()));
            }
        }
        Err(self.unavailable(format!(
            "gave up after {CLAIM_ROUNDS} listings: every free worker id was claimed by another \
             server starting at the same time"
        )))
    }

    /// Holding `instances/<worker>`: merges the records of every `servers` node naming the
    /// worker into this identity's node and deletes the others.
    pub(super) fn adopt(&mut self, worker: u64) -> Result<Option<State>, LeaseError> {
        let servers_dir = self.servers_dir();
        let mine_name = format!("{}_{worker}", self.identity);
        let names: Vec<String> = self
            .children(servers_dir.clone())?
            .into_iter()
            .filter(|name| parse_server(name).is_some_and(|n| n.worker == worker))
            .collect();
        let mut merged: Option<(State, i64)> = None;
        let mut mine_version = None;
        for name in &names {
            let path = format!("{servers_dir}/{name}");
            let Some((state, stat)) = self.read_server_node(&path)? else {
                continue;
            };
            if *name == mine_name {
                mine_version = Some(stat.version);
            }
            let Some(state) = state else {
                continue;
            };
            merged = Some(match merged {
                None => (state, stat.mtime),
                Some((mut acc, mtime)) => {
                    if acc.layout_fingerprint != state.layout_fingerprint {
                        return Err(LeaseError::corrupt(
                            format!("{} node {path}", self.redacted_uri),
                            format!(
                                "worker id {worker} has records from two layouts \
                                 (fingerprints {} and {})",
                                acc.layout_fingerprint, state.layout_fingerprint
                            ),
                        ));
                    }
                    merge_marks(&mut acc, &state);
                    if stat.mtime > mtime {
                        acc.clock_seq = state.clock_seq;
                        (acc, stat.mtime)
                    } else {
                        (acc, mtime)
                    }
                }
            });
        }
        let state = merged.map(|(state, _)| state);
        let data = state
            .as_ref()
            .map(record::encode)
            .unwrap_or_default()
            .into_bytes();
        let mine_path = format!("{servers_dir}/{mine_name}");
        let version = match mine_version {
            None => {
                let path = mine_path.clone();
                let created = self.call(|client| async move {
                    client.create(&path, &data, &open_options()).await
                });
                created.map_err(|fault| self.unavailable(fault))?.0.version
            }
            // Written even when unchanged: the new version fences off any earlier holder
            // still writing this node (its next renewal fails with `BadVersion`).
            Some(version) => {
                let path = mine_path.clone();
                let written = self.call(|client| async move {
                    client.set_data(&path, &data, Some(version)).await
                });
                written.map_err(|fault| self.unavailable(fault))?.version
            }
        };
        // Only now, with the merged record safe in our node, drop the others.
        for name in names.iter().filter(|name| **name != mine_name) {
            let path = format!("{servers_dir}/{name}");
            match self.call(|client| async move { client.delete(&path, None).await }) {
                Ok(()) | Err(Fault::Zk(zk::Error::NoNode)) => {}
                Err(fault) => return Err(self.unavailable(fault)),
            }
        }
        self.held = Some(Held {
            worker_id: worker,
            server_path: mine_path,
            instance_path: format!("{}/{worker}", self.instances_dir()),
            version,
        });
        Ok(state)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_node_names() {
        let node = parse_server("10.0.0.1:8080_17").unwrap();
        assert_eq!((node.identity.as_str(), node.worker), ("10.0.0.1:8080", 17));
        let node = parse_server("a_b_3").unwrap();
        assert_eq!((node.identity.as_str(), node.worker), ("a_b", 3));
        assert!(parse_server("nounderscore").is_none());
        assert!(parse_server("_3").is_none());
        assert!(parse_server("x_").is_none());
        assert!(parse_server("x_-1").is_none());
    }
}
