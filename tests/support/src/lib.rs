//! Helpers the integration tests of `clockflake-lease` and `clockflake-server` share: fresh
//! temp directories (removed on drop by `TempDir`) and namespaces, unique per test run. A dev-dependency only; never published.
#![allow(clippy::unwrap_used)]

use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// A fresh empty directory under the system temp dir, named after this process and `name`.
pub fn temp_dir(name: &str) -> PathBuf {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let dir = std::env::temp_dir().join(format!(
        "clockflake-test-{}-{}-{name}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A fresh empty directory (see `temp_dir`) that is removed, with all in it, when dropped: at
/// the end of the test, after the generators declared after it have closed.
pub struct TempDir(PathBuf);

impl TempDir {
    /// A fresh empty directory named after this process and `name`.
    pub fn new(name: &str) -> TempDir {
        TempDir(temp_dir(name))
    }
}

impl Deref for TempDir {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A unique application namespace per test run: `name`, this process and the wall clock's ms.
pub fn app(name: &str) -> String {
    let wall_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis();
    format!("{name}-{}-{wall_ms}", std::process::id())
}
