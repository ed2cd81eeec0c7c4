//! The embedded coordinator for one host: `file://DIR?app=NAME`.
//!
//! `DIR/NAME/worker-N.lock` is locked (an `flock`-style exclusive lock, which the kernel drops
//! when the process dies) by the holder of worker id `N`; `DIR/NAME/worker-N.state` is its
//! state record, replaced atomically (write `worker-N.state.tmp`, fsync, rename, fsync the
//! directory).

use std::fs::{self, File, OpenOptions, TryLockError};
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use clockflake::{Error, Layout, State};

use crate::coordinator::{Coordinator, Grant};
use crate::{record, LeaseError};

/// Worker ids from lock files in a directory. See the module docs for the files.
#[derive(Debug)]
pub struct FileCoordinator {
    dir: PathBuf,
    app: String,
    held: Option<(u64, File)>,
    /// Test hook: a pause between writing the temporary file and renaming it.
    write_delay: Option<Duration>,
}

impl FileCoordinator {
    /// A coordinator for the application namespace `app` under `dir` (created if missing).
    pub fn new(dir: impl Into<PathBuf>, app: &str) -> Result<FileCoordinator, LeaseError> {
        let root: PathBuf = dir.into();
        let coordinator = FileCoordinator {
            dir: root.join(app),
            app: app.to_owned(),
            held: None,
            write_delay: None,
        };
        fs::create_dir_all(&coordinator.dir)
            .map_err(|error| coordinator.io_error("cannot create the directory", error))?;
        Ok(coordinator)
    }

    #[doc(hidden)]
    pub fn set_write_delay(&mut self, delay: Option<Duration>) {
        self.write_delay = delay;
    }

    /// The directory holding this namespace's lock and state files.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn lock_path(&self, worker_id: u64) -> PathBuf {
        self.dir.join(format!("worker-{worker_id}.lock"))
    }

    /// Where the state record of `worker_id` lives.
    pub fn state_path(&self, worker_id: u64) -> PathBuf {
        self.dir.join(format!("worker-{worker_id}.state"))
    }

    fn io_error(&self, what: &str, error: std::io::Error) -> LeaseError {
        LeaseError::unavailable(&self.describe(), format!("{what}: {error}"))
    }

    fn write_state(&self, worker_id: u64, state: &State) -> Result<(), LeaseError> {
        let path = self.state_path(worker_id);
        let temp = self.dir.join(format!("worker-{worker_id}.state.tmp"));
        let fail = |error| self.io_error(&format!("cannot write {}", path.display()), error);
        let mut file = File::create(&temp).map_err(fail)?;
        file.write_all(record::encode(state).as_bytes())
            .map_err(fail)?;
        if let Some(delay) = self.write_delay {
            std::thread::sleep(delay);
        }
        file.sync_all().map_err(fail)?;
        drop(file);
        fs::rename(&temp, &path).map_err(fail)?;
        // The rename itself must survive a power cut before ids rely on it.
        File::open(&self.dir)
            .and_then(|dir| dir.sync_all())
            .map_err(fail)
    }
}

impl Coordinator for FileCoordinator {
    fn describe(&self) -> String {
        format!(
            "file://{}?app={}",
            self.dir.parent().unwrap_or(&self.dir).display(),
            self.app
        )
    }

    fn acquire(&mut self, layout: &Layout, _now_ms: u64) -> Result<Grant, LeaseError> {
        if self.held.is_some() {
            return Err(LeaseError::unavailable(
                &self.describe(),
                "this coordinator already holds a lease",
            ));
        }
        let max = layout.max_worker_id();
        for worker_id in 0..=max {
            let path = self.lock_path(worker_id);
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&path)
                .map_err(|error| {
                    self.io_error(&format!("cannot open {}", path.display()), error)
                })?;
            match file.try_lock() {
                Ok(()) => {}
                Err(TryLockError::WouldBlock) => continue,
                Err(TryLockError::Error(error)) => {
                    return Err(self.io_error(&format!("cannot lock {}", path.display()), error))
                }
            }
            // The lock is held (dropping `file` releases it if reading the state fails).
            let state = self.read_state(worker_id)?;
            self.held = Some((worker_id, file));
            return Ok(Grant {
                worker_id,
                state,
                ttl: None,
            });
        }
        Err(LeaseError::Core(Error::WorkerPoolExhausted {
            workers: max + 1,
        }))
    }

    fn renew(&mut self, state: &State) -> Result<(), LeaseError> {
        match &self.held {
            Some((worker_id, _)) => self.write_state(*worker_id, state),
            None => Err(LeaseError::lost("this coordinator holds no lease")),
        }
    }

    fn release(&mut self, state: Option<&State>) -> Result<(), LeaseError> {
        let Some((worker_id, file)) = self.held.take() else {
            return Ok(());
        };
        let written = match state {
            Some(state) => self.write_state(worker_id, state),
            None => Ok(()),
        };
        // Unlock even when the write failed: the last written reservation still covers
        // every id issued.
        let _ = file.unlock();
        written
    }

    fn read_state(&mut self, worker_id: u64) -> Result<Option<State>, LeaseError> {
        let path = self.state_path(worker_id);
        match fs::read(&path) {
            Ok(bytes) => record::decode(&bytes)
                .map(Some)
                .map_err(|reason| LeaseError::corrupt(path.display().to_string(), reason)),
            Err(error) if error.kind() == ErrorKind::NotFound => Ok(None),
            Err(error) => Err(self.io_error(&format!("cannot read {}", path.display()), error)),
        }
    }
}
