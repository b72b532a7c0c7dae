//! The server's own metadata (site serial and fingerprint) without the table
//! `handled_meta`: a small JSON file in the data directory, so that a writable
//! server starts on Handle.Net's untouched schema. Handle.Net keeps the same
//! state in its server directory (`siteinfo.json`), not in the database; with
//! a key of its own per node (the SQL store shares no documents) the site
//! record, and so its serial, is each node's own too.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use parking_lot::Mutex;

use crate::StoreError;

/// The file's name in the data directory.
pub const SQL_META_FILE_NAME: &str = "server-meta.json";

/// Keys are the server's own (a handful, written at start); a file larger
/// than this is not one it wrote.
const MAX_FILE_BYTES: u64 = 1 << 20;

pub(super) struct LocalMeta {
    path: PathBuf,
    /// Writes hold the lock across the file's replacement, so they land in order.
    entries: Mutex<BTreeMap<String, Vec<u8>>>,
}

fn failed(path: &Path, what: &str, e: impl std::fmt::Display) -> StoreError {
    StoreError::Backend(format!("sql: server metadata file {}: {what}: {e}", path.display()))
}

impl LocalMeta {
    /// The file's entries, or none when it does not exist yet.
    pub(super) fn open(path: PathBuf) -> Result<LocalMeta, StoreError> {
        let entries = match std::fs::metadata(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
            Err(e) => return Err(failed(&path, "cannot read", e)),
            Ok(m) if m.len() > MAX_FILE_BYTES => {
                return Err(failed(&path, "cannot read", format!("{} bytes, more than it ever writes", m.len())))
            }
            Ok(_) => {
                let text = std::fs::read_to_string(&path).map_err(|e| failed(&path, "cannot read", e))?;
                let hex: BTreeMap<String, String> =
                    serde_json::from_str(&text).map_err(|e| failed(&path, "not a JSON object of hex strings", e))?;
                let mut entries = BTreeMap::new();
                for (k, v) in hex {
                    let v = hex::decode(&v).map_err(|e| failed(&path, &format!("key {k:?}"), e))?;
                    entries.insert(k, v);
                }
                entries
            }
        };
        Ok(LocalMeta { path, entries: Mutex::new(entries) })
    }

    pub(super) fn get(&self, key: &str) -> Option<Vec<u8>> {
        self.entries.lock().get(key).cloned()
    }

    /// Entries whose key starts with `prefix`, in key order.
    pub(super) fn list(&self, prefix: &str) -> Vec<(String, Vec<u8>)> {
        let entries = self.entries.lock();
        entries
            .range(prefix.to_owned()..)
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// Sets (or with `None` removes) a key, durably before it returns: the file
    /// is replaced whole (written beside, synced, renamed, directory synced), so
    /// a crash leaves the old file or the new one.
    pub(super) fn put(&self, key: &str, value: Option<Vec<u8>>) -> Result<(), StoreError> {
        let mut entries = self.entries.lock();
        let mut next = entries.clone();
        match value {
            Some(v) => next.insert(key.to_owned(), v),
            None => next.remove(key),
        };
        let hex: BTreeMap<&str, String> = next.iter().map(|(k, v)| (k.as_str(), hex::encode(v))).collect();
        let text = serde_json::to_string_pretty(&hex).map_err(|e| failed(&self.path, "cannot encode", e))?;
        let partial = self.path.with_extension("json.partial");
        let write = || -> std::io::Result<()> {
            let mut f = std::fs::File::create(&partial)?;
            f.write_all(text.as_bytes())?;
            f.write_all(b"\n")?;
            f.sync_all()?;
            std::fs::rename(&partial, &self.path)?;
            if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::File::open(dir)?.sync_all()?;
            }
            Ok(())
        };
        write().map_err(|e| failed(&self.path, "cannot write", e))?;
        *entries = next;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_survive_a_reopen_and_a_removal() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("server-meta.json");
        let meta = LocalMeta::open(path.clone()).unwrap();
        assert_eq!(meta.get("site/serial"), None);
        meta.put("site/serial", Some(vec![0, 2])).unwrap();
        meta.put("site/fingerprint", Some(vec![0xab; 32])).unwrap();
        meta.put("other", Some(Vec::new())).unwrap();
        meta.put("other", None).unwrap();
        let again = LocalMeta::open(path.clone()).unwrap();
        assert_eq!(again.get("site/serial"), Some(vec![0, 2]));
        assert_eq!(again.get("other"), None);
        let keys: Vec<String> = again.list("site/").into_iter().map(|(k, _)| k).collect();
        assert_eq!(keys, ["site/fingerprint", "site/serial"]);
        assert!(!path.with_extension("json.partial").exists());
    }

    #[test]
    fn a_file_not_written_by_the_server_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("server-meta.json");
        std::fs::write(&path, "{\"site/serial\": \"zz\"}").unwrap();
        let e = LocalMeta::open(path.clone()).err().unwrap().to_string();
        assert!(e.contains("server-meta.json") && e.contains("site/serial"), "{e}");
        std::fs::write(&path, "[1, 2]").unwrap();
        assert!(LocalMeta::open(path).is_err());
    }
}
