//! Free disk space for the embedded store. A write that meets a full disk inside
//! redb leaves the database unusable until it is reopened (redb latches the I/O
//! error), so the writer refuses writes *before* the disk is full: while the
//! filesystem holding the store has less than [`super::EmbeddedOptions::min_free_bytes`]
//! free, every batch fails with a clear error, and the next batch after space
//! returns goes through as usual. Readiness reports the same condition.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use crate::StoreError;

/// The filesystem of a store directory and the space kept in reserve on it.
#[derive(Debug, Clone)]
pub(super) struct DiskSpace {
    dir: PathBuf,
    reserve: u64,
}

impl DiskSpace {
    pub(super) fn new(store_file: &Path, reserve: u64) -> DiskSpace {
        let dir = store_file.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        DiskSpace { dir: dir.to_path_buf(), reserve }
    }

    /// `Err` (an I/O error of kind `StorageFull`) while less than the reserve is free.
    pub(super) fn check(&self) -> Result<(), StoreError> {
        if self.reserve == 0 {
            return Ok(());
        }
        match free_bytes(&self.dir) {
            Ok(free) if free < self.reserve => Err(StoreError::Io(std::io::Error::new(
                ErrorKind::StorageFull,
                format!(
                    "disk full: {} free on the filesystem of {}, the store keeps {} in reserve; \
                     writes are refused until space is freed",
                    mib(free),
                    self.dir.display(),
                    mib(self.reserve)
                ),
            ))),
            // Unknown space is not a reason to stop writing: the write itself will tell.
            _ => Ok(()),
        }
    }

    /// Whether `bytes` fit besides the reserve (false when space is unknown).
    pub(super) fn has_room_for(&self, bytes: u64) -> bool {
        free_bytes(&self.dir).is_ok_and(|free| free >= self.reserve.saturating_add(bytes))
    }

    /// For error messages: "N MiB free on DIR".
    pub(super) fn describe(&self) -> String {
        match free_bytes(&self.dir) {
            Ok(free) => format!("{} free on the filesystem of {}", mib(free), self.dir.display()),
            Err(e) => format!("free space on {} unknown ({e})", self.dir.display()),
        }
    }
}

pub(super) fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1u64 << 20) as f64)
}

/// Bytes an unprivileged process may still write on the filesystem of `dir`.
fn free_bytes(dir: &Path) -> std::io::Result<u64> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).map_err(std::io::Error::other)?;
    let mut st = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `path` is NUL-terminated and `st` is a valid out-pointer for statvfs.
    let rc = unsafe { libc::statvfs(path.as_ptr(), st.as_mut_ptr()) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: statvfs returned 0, so it filled `st`.
    let st = unsafe { st.assume_init() };
    #[allow(clippy::unnecessary_cast)] // the field types differ between platforms
    Ok(st.f_bavail as u64 * st.f_frsize as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserve_larger_than_the_disk_refuses() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("x.redb");
        assert!(DiskSpace::new(&file, 1).check().is_ok());
        assert!(DiskSpace::new(&file, 0).check().is_ok());
        let e = DiskSpace::new(&file, u64::MAX).check().unwrap_err();
        assert!(matches!(&e, StoreError::Io(io) if io.kind() == ErrorKind::StorageFull), "{e:?}");
        assert!(e.to_string().contains("free") && e.to_string().contains(&dir.path().display().to_string()), "{e}");
    }
}
