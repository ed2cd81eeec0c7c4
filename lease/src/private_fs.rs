//! Files and directories of the embedded coordinators (`file://`, `k8s://`, `env://`, the
//! ZooKeeper cache) as each operating system allows them to be kept private and checked.
//!
//! - Unix: modes set exactly (0700 and 0600, or 0770 and 0660 shared with a group), whatever
//!   the umask; `O_NOFOLLOW` where `rustix` gives it (Linux); a file's identity is its device
//!   and inode; a rename is made durable by an fsync of its directory.
//! - Windows: files and directories inherit the pool directory's ACL, which is not checked
//!   (the equivalent of 0700 is an ACL only its owner's SID may use; documented, not
//!   enforced); a file's identity is its volume serial number and file index; directories
//!   cannot be opened to fsync them (NTFS journals the rename's metadata).

use std::fs::{File, OpenOptions, TryLockError};
use std::io;
use std::path::Path;

#[cfg(unix)]
pub(crate) use unix::*;
#[cfg(windows)]
pub(crate) use windows::*;

#[cfg(unix)]
mod unix {
    use std::fs::{self, File, Metadata, OpenOptions};
    use std::io;
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
    use std::path::Path;

    /// `options` creating a file with exactly `mode` (less the umask; see [`set_file_mode`])
    /// that refuses a symlink planted at its path.
    pub(crate) fn private(options: &mut OpenOptions, mode: u32) -> &mut OpenOptions {
        options.mode(mode).custom_flags(super::nofollow())
    }

    /// Sets exactly `mode` on a directory just created.
    pub(crate) fn set_dir_mode(path: &Path, mode: u32) -> io::Result<()> {
        fs::set_permissions(path, fs::Permissions::from_mode(mode))
    }

    /// Sets exactly `mode` on an open file.
    pub(crate) fn set_file_mode(file: &File, mode: u32) -> io::Result<()> {
        file.set_permissions(fs::Permissions::from_mode(mode))
    }

    /// The permission bits (`0o7777`) of `meta`.
    pub(crate) fn mode_of(meta: &Metadata) -> u32 {
        meta.mode() & 0o7777
    }

    /// Whether `a` and `b` are the same file: device and inode.
    pub(crate) fn same_file(a: &Metadata, b: &Metadata) -> bool {
        a.dev() == b.dev() && a.ino() == b.ino()
    }

    /// Whether `file` (open) is the file at `path` now (`path` itself, not what a symlink
    /// there names).
    pub(crate) fn is_at_path(file: &File, path: &Path) -> io::Result<bool> {
        let held = file.metadata()?;
        match fs::symlink_metadata(path) {
            Ok(now) => Ok(same_file(&now, &held)),
            Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(error) => Err(error),
        }
    }

    /// Makes the renames in directory `dir` durable.
    pub(crate) fn sync_dir(dir: &Path) -> io::Result<()> {
        File::open(dir).and_then(|dir| dir.sync_all())
    }
}

#[cfg(windows)]
#[allow(unsafe_code)] // GetFileInformationByHandle
mod windows {
    use std::fs::{File, OpenOptions};
    use std::io;
    use std::os::windows::io::AsRawHandle;
    use std::path::Path;

    use windows_sys::Win32::Storage::FileSystem::{
        GetFileInformationByHandle, BY_HANDLE_FILE_INFORMATION,
    };

    /// Files inherit the directory's ACL: nothing to add.
    pub(crate) fn private(options: &mut OpenOptions, _mode: u32) -> &mut OpenOptions {
        options
    }

    /// Not enforced on Windows (see the module's docs).
    pub(crate) fn set_dir_mode(_path: &Path, _mode: u32) -> io::Result<()> {
        Ok(())
    }

    /// Not enforced on Windows (see the module's docs).
    pub(crate) fn set_file_mode(_file: &File, _mode: u32) -> io::Result<()> {
        Ok(())
    }

    /// The volume serial number and file index of an open file.
    fn identity(file: &File) -> io::Result<(u32, u64)> {
        // SAFETY: all-zero is a valid BY_HANDLE_FILE_INFORMATION (plain integers).
        let mut info: BY_HANDLE_FILE_INFORMATION = unsafe { std::mem::zeroed() };
        // SAFETY: the handle is open for as long as `file` is borrowed; `info` is a valid
        // out-pointer.
        if unsafe { GetFileInformationByHandle(file.as_raw_handle().cast(), &mut info) } == 0 {
            return Err(io::Error::last_os_error());
        }
        let index = (u64::from(info.nFileIndexHigh) << 32) | u64::from(info.nFileIndexLow);
        Ok((info.dwVolumeSerialNumber, index))
    }

    /// Whether `file` (open) is the file at `path` now: same volume and file index.
    pub(crate) fn is_at_path(file: &File, path: &Path) -> io::Result<bool> {
        let held = identity(file)?;
        match File::open(path) {
            Ok(now) => Ok(identity(&now)? == held),
            Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(error) => Err(error),
        }
    }

    /// NTFS journals a rename's metadata; a directory cannot be opened to fsync it here.
    pub(crate) fn sync_dir(_dir: &Path) -> io::Result<()> {
        Ok(())
    }
}

/// `O_NOFOLLOW` on Linux (a symlink planted at a lock or temporary path is refused, not
/// followed); 0 elsewhere.
#[cfg(unix)]
fn nofollow() -> i32 {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        rustix::fs::OFlags::NOFOLLOW.bits() as i32
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    {
        0
    }
}

/// Creates (or truncates) nothing: opens `path` for writing as a new file private to its
/// owner (`mode`), refusing one that exists.
pub(crate) fn create_new(path: &Path, mode: u32) -> io::Result<File> {
    private(OpenOptions::new().write(true).create_new(true), mode).open(path)
}

/// Opens the lock file at `path` (created if missing, with `mode`) and locks it exclusively
/// without waiting: `None` when it is locked already (by another process, or another open file
/// of this one). The kernel drops the lock when the process dies; the lock belongs to the open
/// file, not to the path.
pub(crate) fn open_lock_file(path: &Path, mode: u32) -> Result<Option<File>, LockFileError> {
    let file = private(
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false),
        mode,
    )
    .open(path)
    .map_err(|error| LockFileError {
        step: "open",
        error,
    })?;
    match file.try_lock() {
        Ok(()) => Ok(Some(file)),
        Err(TryLockError::WouldBlock) => Ok(None),
        Err(TryLockError::Error(error)) => Err(LockFileError {
            step: "lock",
            error,
        }),
    }
}

/// Why [`open_lock_file`] failed: at which `step` (`open` or `lock`), and the error.
pub(crate) struct LockFileError {
    pub(crate) step: &'static str,
    pub(crate) error: io::Error,
}
