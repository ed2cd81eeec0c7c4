//! The cache file (`cache=PATH`): the last worker id of this identity, which saves the
//! listings at the next start.

use super::ZooKeeperCoordinator;

impl ZooKeeperCoordinator {
    pub(super) fn read_cache(&self, workers: u64) -> Option<u64> {
        let text = std::fs::read_to_string(self.cache.as_ref()?).ok()?;
        let mut lines = text.lines();
        let expected = format!("{} {}", self.root, self.identity);
        if lines.next()? != expected {
            return None;
        }
        let worker: u64 = lines.next()?.strip_prefix("worker ")?.parse().ok()?;
        (worker < workers).then_some(worker)
    }

    pub(super) fn write_cache(&self, worker: u64) {
        let Some(path) = &self.cache else { return };
        let text = format!("{} {}\nworker {worker}\n", self.root, self.identity);
        let temp = path.with_extension("tmp");
        // A speed-up only: a failed write costs a listing at the next start.
        if std::fs::write(&temp, text).is_ok() {
            let _ = std::fs::rename(&temp, path);
        }
    }
}
