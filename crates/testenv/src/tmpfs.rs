//! A small filesystem to fill: the tests of what a full disk does (the
//! store's, and the server's readiness) mount one each.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A tmpfs of `mb` MiB at a fresh directory, unmounted on drop.
pub struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    /// Mounting needs root (CAP_SYS_ADMIN): without it, says so
    /// ([`crate::skipped`]) and returns `None`.
    pub fn mount(mb: u32) -> Option<Tmpfs> {
        let dir = tempfile::tempdir().unwrap();
        let out =
            Command::new("mount").args(["-t", "tmpfs", "-o", &format!("size={mb}m"), "tmpfs"]).arg(dir.path()).output();
        match out {
            Ok(o) if o.status.success() => Some(Tmpfs { dir }),
            Ok(o) => {
                crate::skipped(&format!(
                    "cannot mount a tmpfs ({}): run as root to test a full disk",
                    String::from_utf8_lossy(&o.stderr).trim()
                ));
                None
            }
            Err(e) => {
                crate::skipped(&format!("cannot run mount ({e}): run as root to test a full disk"));
                None
            }
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Fill the filesystem with a file until a write fails; returns its path.
    pub fn fill(&self) -> PathBuf {
        use std::io::Write;
        let path = self.path().join("filler");
        let mut f = std::fs::File::create(&path).unwrap();
        let chunk = vec![0x55u8; 64 << 10];
        while f.write_all(&chunk).and_then(|_| f.sync_data()).is_ok() {}
        path
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.dir.path()).status();
    }
}
