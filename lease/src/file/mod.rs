//! The embedded coordinator for one host: `file://DIR?app=NAME`.
//!
//! `DIR/NAME/worker-N.lock` is locked (an `flock`-style exclusive lock, which the kernel drops
//! when the process dies) by the holder of worker id `N`; `DIR/NAME/worker-N.state` is its
//! state record, replaced atomically (write a temporary file `worker-N.state.tmp.PID.SEQ` of
//! its own, fsync, rename, fsync the directory).
//!
//! The lock belongs to the file, not to the path: if `worker-N.lock` is removed or replaced
//! while held (by hand, by a clean-up job), a newcomer can lock a new file at the same path.
//! So the holder checks, before every state write and after it, that the file at the path is
//! still the one it locked (same device and inode); when it is not, the lease is lost
//! (`LEASE_LOST`) and it writes nothing more. The newcomer starts above every reservation
//! persisted so far: the lost holder's ids stay inside the reservation it last wrote (and
//! checked afterwards), which the state file carries over.
//!
//! Permissions: `DIR` and `DIR/NAME` are created (at most these two levels: a missing parent
//! of `DIR` is an error that names it) with mode `0700`, files with `0600`. `mode=group` in the
//! URI shares a pool with the directory's group: `0770` and `0660`, and group-writable pool
//! directories are then accepted. Like `ssh`, the coordinator refuses a pool it cannot trust:
//! `DIR/NAME` must be owned by this user and not writable by others (nor by the group without
//! `mode=group`); `DIR` must be owned by this user or root and not writable by others unless
//! it has the sticky bit (like `/tmp`). With `mode=group`, a directory owned by another user
//! is accepted when its group is one of ours. Refusals are `COORDINATOR_UNAVAILABLE`, saying
//! which directory and what to run (`chmod 700 DIR`).

use std::fs::{self, File};
use std::io::{ErrorKind, Write};
#[cfg(unix)]
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use clockflake::{Error, Layout, State};

use crate::coordinator::{
    check_ranges, exhausted, pool, ready_at_ms, Coordinator, Grant, WorkerRange,
};
use crate::fixed::Assigned;
use crate::private_fs::{self, is_at_path};
use crate::{record, LeaseError};

pub(crate) mod uri;

/// What the operating system gives us that `std` does not: who we are, on Unix.
#[cfg(any(target_os = "linux", target_os = "android"))]
pub(crate) mod sys {
    pub fn euid() -> u32 {
        rustix::process::geteuid().as_raw()
    }

    /// Whether `gid` is our effective group or one of our supplementary groups.
    pub fn in_group(gid: u32) -> bool {
        rustix::process::getegid().as_raw() == gid
            || rustix::process::getgroups()
                .is_ok_and(|groups| groups.iter().any(|group| group.as_raw() == gid))
    }
}

/// Other Unixes (no `rustix` dependency): the owner of a file we create is our effective uid;
/// symlinks are not refused and groups are not checked.
#[cfg(all(unix, not(any(target_os = "linux", target_os = "android"))))]
pub(crate) mod sys {
    pub fn euid() -> u32 {
        use std::os::unix::fs::MetadataExt;
        static EUID: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
        *EUID.get_or_init(|| {
            let probe =
                std::env::temp_dir().join(format!(".clockflake-euid-{}", std::process::id()));
            let uid = std::fs::File::create(&probe)
                .and_then(|file| file.metadata())
                .map_or(u32::MAX, |meta| meta.uid());
            let _ = std::fs::remove_file(probe);
            uid
        })
    }

    pub fn in_group(_gid: u32) -> bool {
        false
    }
}

/// Who may use a pool: its owner only (the default), or its group too (`mode=group`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Sharing {
    Private,
    Group,
}

impl Sharing {
    fn dir_mode(self) -> u32 {
        match self {
            Sharing::Private => 0o700,
            Sharing::Group => 0o770,
        }
    }

    fn file_mode(self) -> u32 {
        match self {
            Sharing::Private => 0o600,
            Sharing::Group => 0o660,
        }
    }
}

/// Worker ids from lock files in a directory. See the module docs for the files.
#[derive(Debug)]
pub struct FileCoordinator {
    dir: PathBuf,
    app: String,
    sharing: Sharing,
    /// `k8s://` and `env://`: the one worker id this coordinator may take (and its scheme);
    /// `None`: the lowest free one of the pool (`file://`).
    assigned: Option<(Assigned, &'static str)>,
    held: Option<(u64, File)>,
    /// The URI's `workers` range: the worker ids this pool may take; `None`: all of the
    /// layout's.
    workers: Option<WorkerRange>,
    /// Test hook: a pause between writing the temporary file and renaming it.
    write_delay: Option<Duration>,
}

/// The first missing directory on the way to `path` (whose parent exists), if any above it.
fn first_missing_ancestor(path: &Path) -> Option<PathBuf> {
    let mut missing = None;
    for ancestor in path.ancestors().skip(1) {
        if ancestor.as_os_str().is_empty() || ancestor.exists() {
            break;
        }
        missing = Some(ancestor.to_path_buf());
    }
    missing
}

impl FileCoordinator {
    /// A coordinator for the application namespace `app` under `dir`, private to this user:
    /// `dir` (if its parent exists) and `dir/app` are created if missing, and refused if
    /// another user could change them (see the module docs).
    pub fn new(dir: impl Into<PathBuf>, app: &str) -> Result<FileCoordinator, LeaseError> {
        FileCoordinator::with_sharing(dir.into(), app, Sharing::Private)
    }

    pub(crate) fn with_sharing(
        root: PathBuf,
        app: &str,
        sharing: Sharing,
    ) -> Result<FileCoordinator, LeaseError> {
        let coordinator = FileCoordinator {
            dir: root.join(app),
            app: app.to_owned(),
            sharing,
            assigned: None,
            held: None,
            workers: None,
            write_delay: None,
        };
        coordinator.prepare(&root)?;
        Ok(coordinator)
    }

    /// A coordinator that takes only the worker id `assigned` from outside (`k8s://`,
    /// `env://`; see [`crate::fixed`]), with `file://`'s lock and state files.
    pub(crate) fn with_assigned(
        root: PathBuf,
        app: &str,
        sharing: Sharing,
        assigned: Assigned,
        scheme: &'static str,
    ) -> Result<FileCoordinator, LeaseError> {
        let mut coordinator = FileCoordinator::with_sharing(root, app, sharing)?;
        coordinator.assigned = Some((assigned, scheme));
        Ok(coordinator)
    }

    /// `acquire` of an assigned worker id: that one or nothing.
    fn acquire_assigned(
        &mut self,
        layout: &Layout,
        assigned: Assigned,
    ) -> Result<Grant, LeaseError> {
        let max = layout.max_worker_id();
        pool(&self.redacted_uri(), layout, self.workers.as_ref())?;
        if assigned.worker_id > max {
            return Err(LeaseError::Core(Error::WorkerIdOutOfRange {
                worker_id: assigned.worker_id,
                max,
            }));
        }
        if let Some(range) = self
            .workers
            .filter(|range| !range.contains(assigned.worker_id))
        {
            return Err(LeaseError::AssignedOutOfRange {
                worker_id: assigned.worker_id,
                source: assigned.source,
                range: range.to_string(),
            });
        }
        let Some(file) = self.try_lock(assigned.worker_id)? else {
            return Err(self.refuse(format!(
                "worker id {} (from {}) is held by another process using {}: two pods or \
                 processes were given the same worker id",
                assigned.worker_id,
                assigned.source,
                self.dir.display()
            )));
        };
        let state = self.read_state(assigned.worker_id)?;
        self.grant(assigned.worker_id, file, state)
    }

    /// Creates (at most) `root` and `root/app`, then checks that both can be trusted.
    fn prepare(&self, root: &Path) -> Result<(), LeaseError> {
        if let Some(missing) = first_missing_ancestor(root) {
            return Err(self.refuse(format!(
                "cannot create {}: {} does not exist (create it first; only DIR and DIR/APP are \
                 created)",
                root.display(),
                missing.display()
            )));
        }
        self.create_dir(root)?;
        self.check_dir(root, false)?;
        self.create_dir(&self.dir)?;
        self.check_dir(&self.dir, true)
    }

    fn create_dir(&self, path: &Path) -> Result<(), LeaseError> {
        match fs::create_dir(path) {
            // The exact mode, whatever the umask.
            Ok(()) => private_fs::set_dir_mode(path, self.sharing.dir_mode()).map_err(|error| {
                self.io_error(&format!("cannot set the mode of {}", path.display()), error)
            }),
            Err(error) if error.kind() == ErrorKind::AlreadyExists => Ok(()),
            Err(error) => Err(self.io_error(
                &format!("cannot create the directory {}", path.display()),
                error,
            )),
        }
    }

    /// Refuses a directory another user could change: `namespace` is `DIR/APP` (the lock
    /// files), else `DIR` (which may be root's, and others' with the sticky bit).
    fn check_dir(&self, path: &Path, namespace: bool) -> Result<(), LeaseError> {
        let meta = if namespace {
            // A symlink here could be swapped under a sticky DIR by whoever planted it.
            fs::symlink_metadata(path)
        } else {
            fs::metadata(path)
        }
        .map_err(|error| self.io_error(&format!("cannot inspect {}", path.display()), error))?;
        if !meta.is_dir() {
            return Err(self.refuse(format!("refusing {}: not a directory", path.display())));
        }
        #[cfg(unix)]
        self.check_owner_and_mode(path, &meta, namespace)?;
        Ok(())
    }

    /// Refuses a directory another user owns or could write to (Unix; Windows keeps the ACL
    /// the pool directory has, unchecked: see `private_fs`).
    #[cfg(unix)]
    fn check_owner_and_mode(
        &self,
        path: &Path,
        meta: &fs::Metadata,
        namespace: bool,
    ) -> Result<(), LeaseError> {
        let group = self.sharing == Sharing::Group;
        let mode = private_fs::mode_of(meta);
        let fix = format!("chmod {} {}", if group { 770 } else { 700 }, path.display());
        let (uid, me) = (meta.uid(), sys::euid());
        let owner_ok =
            uid == me || (!namespace && uid == 0) || (group && sys::in_group(meta.gid()));
        if !owner_ok {
            return Err(self.refuse(format!(
                "refusing {}: it is owned by uid {uid}, not by this user (uid {me}){}; whoever \
                 owns it can hand this pool's worker ids to anyone",
                path.display(),
                if group {
                    " nor shared with one of our groups"
                } else {
                    " (mode=group accepts a directory of one of our groups)"
                }
            )));
        }
        let sticky = mode & 0o1000 != 0 && !namespace;
        let writable_by_others = mode & 0o002 != 0 && !sticky;
        let writable_by_group = mode & 0o020 != 0 && !sticky && !group;
        if writable_by_others || writable_by_group {
            return Err(self.refuse(format!(
                "refusing {}: it is writable by {} (mode {mode:04o}), who could remove or \
                 replace the lock files and take worker ids in use; run `{fix}`{}",
                path.display(),
                if writable_by_others {
                    "others"
                } else {
                    "its group"
                },
                if writable_by_others {
                    ""
                } else {
                    ", or add mode=group to the URI to share the pool with the group"
                }
            )));
        }
        Ok(())
    }

    /// Leases only worker ids in `workers` (the URI's `workers=LO-HI`); `None`: any of the
    /// layout's. With a range, the holder records it in its lock file, and a newcomer whose
    /// range overlaps a live holder's different range is refused (`WORKER_RANGE_CONFLICT`).
    pub fn set_workers(&mut self, workers: Option<WorkerRange>) {
        self.workers = workers;
    }

    /// The range a live holder of `worker_id` recorded in its lock file (empty when none).
    fn declared_range(&self, worker_id: u64) -> String {
        fs::read_to_string(self.lock_path(worker_id)).unwrap_or_default()
    }

    /// The overlap check for the worker ids outside this pool's range (those inside it are
    /// checked as they are tried): a lock file that declares a range overlapping ours and
    /// different from it is refused if it is held. A holder clears its declaration when it
    /// gives the worker id back, so such a file is tried (locked and let go at once) only
    /// after a holder died or when the plans really disagree.
    fn check_ranges_outside(
        &self,
        uri: &str,
        layout: &Layout,
        workers: &std::ops::RangeInclusive<u64>,
    ) -> Result<(), LeaseError> {
        // The lock files there are (one directory listing), not every worker id of the layout.
        let Ok(entries) = fs::read_dir(&self.dir) else {
            return Ok(());
        };
        let mut outside: Vec<u64> = entries
            .flatten()
            .filter_map(|entry| {
                let name = entry.file_name();
                let name = name.to_str()?;
                name.strip_prefix("worker-")?
                    .strip_suffix(".lock")?
                    .parse()
                    .ok()
            })
            .filter(|w| *w <= layout.max_worker_id() && !workers.contains(w))
            .collect();
        outside.sort_unstable();
        for worker_id in outside {
            let declared = self.declared_range(worker_id);
            let declared = declared.trim();
            if declared.is_empty()
                || check_ranges(uri, self.workers.as_ref(), workers, [(worker_id, declared)])
                    .is_ok()
            {
                continue;
            }
            match self.try_lock(worker_id)? {
                Some(file) => drop(file), // not held: a declaration left by a holder that died
                None => {
                    check_ranges(uri, self.workers.as_ref(), workers, [(worker_id, declared)])?;
                }
            }
        }
        Ok(())
    }

    /// Records this pool's range in the lock file just locked (truncated first: a lock file
    /// keeps what its last holder wrote).
    fn record_range(&self, worker_id: u64, file: &File) -> Result<(), LeaseError> {
        let range = self
            .workers
            .map(|range| range.to_string())
            .unwrap_or_default();
        let fail = |error| {
            self.io_error(
                &format!("cannot write {}", self.lock_path(worker_id).display()),
                error,
            )
        };
        let mut writer = file;
        file.set_len(0).map_err(fail)?;
        std::io::Seek::rewind(&mut writer).map_err(fail)?;
        writer.write_all(range.as_bytes()).map_err(fail)
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

    fn temp_prefix(worker_id: u64) -> String {
        format!("worker-{worker_id}.state.tmp.")
    }

    fn io_error(&self, what: &str, error: std::io::Error) -> LeaseError {
        LeaseError::unavailable(&self.redacted_uri(), format!("{what}: {error}"))
    }

    fn refuse(&self, reason: String) -> LeaseError {
        LeaseError::unavailable(&self.redacted_uri(), reason)
    }

    /// `LEASE_LOST` unless `file` is still the lock file of `worker_id`.
    fn verify(&self, worker_id: u64, file: &File) -> Result<(), LeaseError> {
        let path = self.lock_path(worker_id);
        match is_at_path(file, &path) {
            Ok(true) => Ok(()),
            Ok(false) => Err(LeaseError::lost(format!(
                "{} was removed or replaced while held: worker id {worker_id} may be someone \
                 else's now",
                path.display()
            ))),
            Err(error) => Err(self.io_error(&format!("cannot check {}", path.display()), error)),
        }
    }

    /// Opens and locks the lock file of `worker_id`: `None` when someone else holds it.
    fn try_lock(&self, worker_id: u64) -> Result<Option<File>, LeaseError> {
        let path = self.lock_path(worker_id);
        // A few tries: each retry means the file was removed between our open and our lock.
        for _ in 0..8 {
            let file = match private_fs::open_lock_file(&path, self.sharing.file_mode()) {
                Ok(Some(file)) => file,
                Ok(None) => return Ok(None),
                Err(failed) => {
                    let what = format!("cannot {} {}", failed.step, path.display());
                    return Err(self.io_error(&what, failed.error));
                }
            };
            // Another process may have removed the file between our open and our lock, and
            // a third one locked a new file at the path: then ours locks nothing.
            match is_at_path(&file, &path) {
                Ok(true) => {}
                Ok(false) => continue,
                Err(error) => {
                    return Err(self.io_error(&format!("cannot check {}", path.display()), error))
                }
            }
            self.set_file_mode(&file, &path)?;
            return Ok(Some(file));
        }
        Err(self.refuse(format!(
            "{} keeps being removed while we lock it",
            path.display()
        )))
    }

    /// The exact mode on a file of ours, whatever the umask (another user's, in a group pool,
    /// stays as it is).
    fn set_file_mode(&self, file: &File, path: &Path) -> Result<(), LeaseError> {
        #[cfg(unix)]
        {
            let meta = file.metadata().map_err(|error| {
                self.io_error(&format!("cannot inspect {}", path.display()), error)
            })?;
            let wanted = self.sharing.file_mode();
            if meta.uid() == sys::euid() && private_fs::mode_of(&meta) != wanted {
                private_fs::set_file_mode(file, wanted).map_err(|error| {
                    self.io_error(&format!("cannot set the mode of {}", path.display()), error)
                })?;
            }
        }
        #[cfg(not(unix))]
        let _ = (file, path);
        Ok(())
    }

    /// Removes temporary files of `worker_id` left by holders that died mid-write. Called
    /// holding its lock; a lost holder still writing one only fails its rename.
    fn remove_stale_temps(&self, worker_id: u64) {
        let prefix = Self::temp_prefix(worker_id);
        let Ok(entries) = fs::read_dir(&self.dir) else {
            return;
        };
        for entry in entries.flatten() {
            if entry.file_name().to_string_lossy().starts_with(&prefix) {
                let _ = fs::remove_file(entry.path());
            }
        }
    }

    /// Replaces the state record of the held `worker_id`, checking that the lock is still
    /// ours before (never write once lost) and after (a reservation is used only if the lock
    /// was still ours once the record was in place, so any newcomer read it).
    fn write_state(&self, worker_id: u64, lock: &File, state: &State) -> Result<(), LeaseError> {
        static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);
        self.verify(worker_id, lock)?;
        let path = self.state_path(worker_id);
        let temp = self.dir.join(format!(
            "{}{}.{}",
            Self::temp_prefix(worker_id),
            std::process::id(),
            TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let fail = |error| self.io_error(&format!("cannot write {}", path.display()), error);
        let written = (|| {
            let mut file = private_fs::create_new(&temp, self.sharing.file_mode()).map_err(fail)?;
            private_fs::set_file_mode(&file, self.sharing.file_mode()).map_err(fail)?;
            file.write_all(record::encode(state).as_bytes())
                .map_err(fail)?;
            if let Some(delay) = self.write_delay {
                std::thread::sleep(delay);
            }
            file.sync_all().map_err(fail)?;
            drop(file);
            // Checked again just before the rename: the state of a lost holder stays out.
            self.verify(worker_id, lock)?;
            fs::rename(&temp, &path).map_err(fail)
        })();
        if let Err(error) = written {
            let _ = fs::remove_file(&temp);
            return Err(error);
        }
        // The rename itself must survive a power cut before ids rely on it.
        private_fs::sync_dir(&self.dir).map_err(fail)?;
        self.verify(worker_id, lock)
    }

    fn grant(
        &mut self,
        worker_id: u64,
        file: File,
        state: Option<State>,
    ) -> Result<Grant, LeaseError> {
        self.record_range(worker_id, &file)?;
        self.remove_stale_temps(worker_id);
        self.held = Some((worker_id, file));
        Ok(Grant {
            worker_id,
            state,
            ttl: None,
        })
    }
}

impl Coordinator for FileCoordinator {
    fn redacted_uri(&self) -> String {
        let mode = match self.sharing {
            Sharing::Private => "",
            Sharing::Group => "&mode=group",
        };
        let scheme = self.assigned.as_ref().map_or("file", |(_, scheme)| *scheme);
        let workers = self
            .workers
            .map(|range| format!("&workers={range}"))
            .unwrap_or_default();
        format!(
            "{scheme}://{}?app={}{mode}{workers}",
            self.dir.parent().unwrap_or(&self.dir).display(),
            self.app
        )
    }

    /// The lowest free worker id whose record can be used at `now_ms`; if there is none, the
    /// free one whose record becomes usable first. While looking further, the first free one
    /// found stays locked, so the answer is never "none" because of a race.
    fn acquire(&mut self, layout: &Layout, now_ms: u64) -> Result<Grant, LeaseError> {
        if self.held.is_some() {
            return Err(LeaseError::unavailable(
                &self.redacted_uri(),
                "this coordinator already holds a lease",
            ));
        }
        if let Some((assigned, _)) = self.assigned.clone() {
            return self.acquire_assigned(layout, assigned);
        }
        let uri = self.redacted_uri();
        let workers = pool(&uri, layout, self.workers.as_ref())?;
        self.check_ranges_outside(&uri, layout, &workers)?;
        // (ready at, worker id, its locked file, its record): dropping the file unlocks it.
        let mut fallback: Option<(u64, u64, File, Option<State>)> = None;
        for worker_id in workers.clone() {
            let Some(file) = self.try_lock(worker_id)? else {
                // Held: by a pool of a range that overlaps ours, since it is in ours.
                let declared = self.declared_range(worker_id);
                check_ranges(
                    &uri,
                    self.workers.as_ref(),
                    &workers,
                    [(worker_id, declared.trim())],
                )?;
                continue;
            };
            // The lock is held (dropping `file` releases it if reading the state fails).
            let state = self.read_state(worker_id)?;
            let ready_at = ready_at_ms(layout, state.as_ref(), now_ms);
            if ready_at == 0 {
                drop(fallback); // unlocks the one kept so far
                return self.grant(worker_id, file, state);
            }
            if fallback.as_ref().is_none_or(|(best, ..)| ready_at < *best) {
                fallback = Some((ready_at, worker_id, file, state));
            }
        }
        match fallback {
            Some((_, worker_id, file, state)) => self.grant(worker_id, file, state),
            None => Err(exhausted(&uri, layout, self.workers.as_ref())),
        }
    }

    fn renew(&mut self, state: &State) -> Result<(), LeaseError> {
        match &self.held {
            Some((worker_id, file)) => self.write_state(*worker_id, file, state),
            None => Err(LeaseError::lost("this coordinator holds no lease")),
        }
    }

    fn check(&mut self) -> Result<(), LeaseError> {
        match &self.held {
            Some((worker_id, file)) => self.verify(*worker_id, file),
            None => Err(LeaseError::lost("this coordinator holds no lease")),
        }
    }

    fn release(&mut self, state: Option<&State>) -> Result<(), LeaseError> {
        let Some((worker_id, file)) = self.held.take() else {
            return Ok(());
        };
        let written = match state {
            Some(state) => self.write_state(worker_id, &file, state),
            None => Ok(()),
        };
        // The range declaration goes with the lease (a lock file not held declares nothing).
        let _ = file.set_len(0);
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
