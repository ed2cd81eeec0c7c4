//! The cache file (`cache=PATH`): the last worker id of this identity, which saves the
//! listings at the next start; with `offline=cache` also the worker's state record, written
//! before every reservation ZooKeeper gets, so that a start without ZooKeeper continues above
//! every id issued under it ([`ZooKeeperCoordinator`]'s docs, "Offline start").
//!
//! ```text
//! /snowflake/orders 10.0.0.1:8080
//! worker 5
//! bound
//! clockflake-state 1
//! ...
//! ```
//! The first two lines name the root, the identity and the worker id; `bound` and the record
//! (the text of `crate::record`, with its checksum) are there with `offline=cache` only.
//! The file is replaced as `file://` replaces its state files: a temporary file of its own
//! (`O_EXCL`, `O_NOFOLLOW`, mode 0600), fsync, rename, fsync of the directory. With
//! `offline=cache`, `PATH.lock` beside it is locked (exclusive, released by the kernel when
//! the process dies) for as long as a worker id is held, online or offline: a second process
//! of the same identity with the same cache is refused instead of issuing under the same
//! worker id.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use clockflake::State;

use super::ZooKeeperCoordinator;
use crate::private_fs;
use crate::{record, LeaseError};

/// What the cache file says, once its first line matched this root and identity.
pub(super) struct Cached {
    pub(super) worker: u64,
    /// Written by a holder with `offline=cache` (so `takeover=off`, its worker id bound).
    pub(super) bound: bool,
    pub(super) state: Option<State>,
}

fn lock_path(cache: &Path) -> PathBuf {
    let mut name = cache.file_name().unwrap_or_default().to_os_string();
    name.push(".lock");
    cache.with_file_name(name)
}

/// Replaces `path` with `text`: a temporary file of this writer's own, mode 0600, fsync,
/// rename, fsync of the directory.
fn replace_file(path: &Path, text: &str) -> std::io::Result<()> {
    static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(
        ".tmp.{}.{}",
        std::process::id(),
        TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let temp = path.with_file_name(name);
    let written = (|| {
        let mut file = private_fs::create_new(&temp, 0o600)?;
        private_fs::set_file_mode(&file, 0o600)?;
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
        drop(file);
        std::fs::rename(&temp, path)
    })();
    if let Err(error) = written {
        let _ = std::fs::remove_file(&temp);
        return Err(error);
    }
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty());
    private_fs::sync_dir(dir.unwrap_or(Path::new("/")))
}

impl ZooKeeperCoordinator {
    fn cache_header(&self) -> String {
        format!("{} {}", self.root, self.identity)
    }

    /// The cache, if it exists and names this root and identity. `Err` only for a record
    /// that cannot be read (`INVALID_STATE`); anything else wrong is `Ok(None)`.
    pub(super) fn read_cached(&self) -> Result<Option<Cached>, LeaseError> {
        let Some(path) = &self.cache else {
            return Ok(None);
        };
        let Ok(text) = std::fs::read_to_string(path) else {
            return Ok(None);
        };
        let mut rest = text.as_str();
        let mut line = || {
            let (line, after) = rest.split_once('\n')?;
            rest = after;
            Some(line)
        };
        if line() != Some(self.cache_header().as_str()) {
            return Ok(None);
        }
        let Some(worker) = line()
            .and_then(|l| l.strip_prefix("worker "))
            .and_then(|w| w.parse().ok())
        else {
            return Ok(None);
        };
        let bound = rest.starts_with("bound\n");
        if bound {
            rest = &rest["bound\n".len()..];
        }
        let state = if rest.is_empty() {
            None
        } else {
            let state = record::decode(rest.as_bytes()).map_err(|reason| {
                LeaseError::corrupt(format!("the cache file {}", path.display()), reason)
            })?;
            Some(state)
        };
        Ok(Some(Cached {
            worker,
            bound,
            state,
        }))
    }

    /// The worker id the cache names, if below `workers` (a speed-up only: a cache that
    /// cannot be read costs a listing).
    pub(super) fn read_cache(&self, workers: u64) -> Option<u64> {
        let cached = self.read_cached().ok()??;
        (cached.worker < workers).then_some(cached.worker)
    }

    /// Replaces the cache: the worker id, and with `offline=cache` the `bound` mark and
    /// `state`.
    pub(super) fn write_cache(&self, worker: u64, state: Option<&State>) -> std::io::Result<()> {
        let Some(path) = &self.cache else {
            return Ok(());
        };
        let mut text = format!("{}\nworker {worker}\n", self.cache_header());
        if self.offline {
            text.push_str("bound\n");
            if let Some(state) = state {
                text.push_str(&record::encode(state));
            }
        }
        replace_file(path, &text)
    }

    /// `offline=cache`: locks `PATH.lock` (kept until [`ZooKeeperCoordinator::unlock_cache`]).
    pub(super) fn lock_cache(&mut self) -> Result<(), LeaseError> {
        if self.cache_lock.is_some() {
            return Ok(());
        }
        let Some(path) = &self.cache else {
            return Ok(());
        };
        let path = lock_path(path);
        let file = match private_fs::open_lock_file(&path, 0o600) {
            Ok(Some(file)) => file,
            Ok(None) => {
                return Err(self.unavailable(format!(
                    "the cache lock {} is held by another process: server identity {} is \
                     already running with this cache (one process per identity)",
                    path.display(),
                    self.identity
                )))
            }
            Err(failed) => {
                let error = failed.error;
                return Err(self.unavailable(format!("cache lock {}: {error}", path.display())));
            }
        };
        self.cache_lock = Some(file);
        Ok(())
    }

    pub(super) fn unlock_cache(&mut self) {
        self.cache_lock = None;
    }
}
