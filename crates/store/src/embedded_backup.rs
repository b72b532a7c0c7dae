//! Backups of the embedded store. An export is one published view (a redb read
//! transaction and the layers of writes logged since the last checkpoint: every
//! acknowledged write) walked table by table in steps
//! of bounded size; between steps nothing is held but that transaction, which
//! blocks neither the writer nor readers (redb keeps the pages it sees until it
//! ends, so the file may grow while a backup runs). Each value's checksum is
//! checked on the way out. A restore writes a new store file from a backup's
//! entries, sealing them again (and giving the index's names codes where the
//! backup spelled them out: `embedded_docs_names.rs`).

use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;

use redb::{Database, Durability};

use super::docs::Recoder;
use super::view::View;
use super::wal::TableId;
use super::{ensure_tables, format, map_redb, DOCS, DOC_INDEX, HANDLES, META, TXN_LOG, TXN_STATE};
use crate::backup::{BackupTable, ExportEntry, StoreExport};
use crate::StoreError;

/// Entries written per transaction by a restore (bounds its memory).
const RESTORE_CHUNK_BYTES: usize = 8 << 20;

pub(super) struct EmbeddedExport {
    view: Arc<View>,
    /// Index into [`BackupTable::ALL`] of the table being read.
    table: usize,
    /// Last key exported from that table.
    after: Option<Vec<u8>>,
}

impl EmbeddedExport {
    pub(super) fn new(view: Arc<View>) -> Self {
        EmbeddedExport { view, table: 0, after: None }
    }
}

impl StoreExport for EmbeddedExport {
    fn next_entries(&mut self, max_bytes: usize) -> Result<Vec<ExportEntry>, StoreError> {
        let mut out = Vec::new();
        let mut used = 0;
        while let Some(&table) = BackupTable::ALL.get(self.table) {
            if used >= max_bytes {
                break;
            }
            let budget = max_bytes - used;
            let before = out.len();
            let (id, what) = match table {
                BackupTable::Handles => (TableId::Handles, "handle"),
                BackupTable::Docs => (TableId::Docs, "document"),
                BackupTable::Meta => (TableId::Meta, "metadata"),
                BackupTable::DocIndex => (TableId::DocIndex, ""),
                BackupTable::TxnLog => (TableId::TxnLog, "transaction log entry"),
                BackupTable::TxnState => (TableId::TxnState, "transaction log state"),
            };
            let from = self.after.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
            let items = self.view.range(id, from)?.map(|item| {
                let (key, stored) = item?;
                // Index entries are keys alone; every other value is sealed.
                let payload =
                    if id == TableId::DocIndex { stored } else { format::unseal(what, &key, &stored)?.to_vec() };
                Ok((key, payload))
            });
            let finished = take_within(items, table, budget, &mut out)?;
            used += out[before..].iter().map(|e| e.key.len() + e.payload.len()).sum::<usize>();
            if let Some(last) = out[before..].last() {
                self.after = Some(last.key.clone());
            }
            if finished {
                self.table += 1;
                self.after = None;
            }
        }
        Ok(out)
    }
}

/// Push `(key, payload)` items to `out` until about `budget` bytes; true when
/// `items` ran out (the table is done).
fn take_within(
    items: impl Iterator<Item = Result<(Vec<u8>, Vec<u8>), StoreError>>,
    table: BackupTable,
    budget: usize,
    out: &mut Vec<ExportEntry>,
) -> Result<bool, StoreError> {
    let mut used = 0;
    for item in items {
        if used >= budget {
            return Ok(false);
        }
        let (key, payload) = item?;
        used += key.len() + payload.len();
        out.push(ExportEntry { table, key, payload });
    }
    Ok(true)
}

fn storage(e: redb::StorageError) -> StoreError {
    map_redb(e.into())
}

/// A new store file being filled from a backup: [`EmbeddedRestore::add`] each
/// entry, then [`EmbeddedRestore::finish`] (one durable commit; before it the
/// file is not a complete store and must be thrown away on failure).
pub struct EmbeddedRestore {
    db: Database,
    pending: Vec<ExportEntry>,
    pending_bytes: usize,
    entries: u64,
    index: Recoder,
}

impl EmbeddedRestore {
    /// Create the store file `path`, which must not exist.
    pub fn create(path: &Path) -> Result<Self, StoreError> {
        if path.exists() {
            return Err(StoreError::Io(std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                format!("{} exists: a restore writes a new store file", path.display()),
            )));
        }
        let db = Database::create(path).map_err(|e| map_redb(e.into()))?;
        ensure_tables(&db)?;
        Ok(EmbeddedRestore { db, pending: Vec::new(), pending_bytes: 0, entries: 0, index: Recoder::default() })
    }

    pub fn add(&mut self, entry: ExportEntry) -> Result<(), StoreError> {
        self.pending_bytes += entry.key.len() + entry.payload.len();
        self.pending.push(entry);
        if self.pending_bytes >= RESTORE_CHUNK_BYTES {
            self.flush(false)?;
        }
        Ok(())
    }

    /// Write what is left and make the store durable; returns the entries written.
    pub fn finish(mut self) -> Result<u64, StoreError> {
        self.flush(true)?;
        Ok(self.entries)
    }

    fn flush(&mut self, last: bool) -> Result<(), StoreError> {
        let mut txn = self.db.begin_write().map_err(|e| map_redb(e.into()))?;
        let durability = if last { Durability::Immediate } else { Durability::None };
        txn.set_durability(durability).map_err(|e| StoreError::Backend(e.to_string()))?;
        txn.set_two_phase_commit(last);
        {
            let t = |e: redb::TableError| map_redb(e.into());
            let (mut handles, mut meta) = (txn.open_table(HANDLES).map_err(t)?, txn.open_table(META).map_err(t)?);
            let (mut docs, mut index) = (txn.open_table(DOCS).map_err(t)?, txn.open_table(DOC_INDEX).map_err(t)?);
            let (mut log, mut log_state) = (txn.open_table(TXN_LOG).map_err(t)?, txn.open_table(TXN_STATE).map_err(t)?);
            for e in self.pending.drain(..) {
                let sealed = format::seal(&e.key, &e.payload);
                match e.table {
                    BackupTable::Handles => drop(handles.insert(e.key.as_slice(), sealed.as_slice()).map_err(storage)?),
                    BackupTable::Docs => drop(docs.insert(e.key.as_slice(), sealed.as_slice()).map_err(storage)?),
                    BackupTable::DocIndex => {
                        for row in self.index.rows(e.key)? {
                            index.insert(row.as_slice(), ()).map_err(storage)?;
                        }
                    }
                    BackupTable::TxnLog => drop(log.insert(e.key.as_slice(), sealed.as_slice()).map_err(storage)?),
                    BackupTable::Meta | BackupTable::TxnState => {
                        let key = std::str::from_utf8(&e.key)
                            .map_err(|_| StoreError::Corrupt("backup: a metadata key is not UTF-8".into()))?;
                        let table = if e.table == BackupTable::Meta { &mut meta } else { &mut log_state };
                        drop(table.insert(key, sealed.as_slice()).map_err(storage)?)
                    }
                }
                self.entries += 1;
            }
            if let Some(row) = self.index.last_row().filter(|_| last) {
                index.insert(row.as_slice(), ()).map_err(storage)?;
            }
        }
        if last {
            format::mark_current(&txn)?;
        }
        self.pending_bytes = 0;
        txn.commit().map_err(|e| map_redb(e.into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DocExpect, Document, EmbeddedOptions, EmbeddedStore, Expect, HandleRecord, IndexEntry, IndexMatch};
    use crate::{DocumentStore, RecordStore, StoreAdmin, TxnLogStore};

    fn record(url: &str) -> HandleRecord {
        HandleRecord::new(vec![handled_proto::HandleValue::new(1, "URL", url)])
    }

    /// Export in small steps, restore into a new file: the new store has every
    /// handle, metadata entry, document and index entry, and nothing written
    /// after the export began.
    #[tokio::test]
    async fn export_then_restore_is_the_same_store() {
        let dir = tempfile::tempdir().unwrap();
        let store = EmbeddedStore::open_dir(&dir.path().join("a"), EmbeddedOptions::default()).unwrap();
        for i in 0..300 {
            store.swap(format!("T/{i}").as_bytes(), Expect::Absent, Some(record(&format!("u{i}")))).await.unwrap();
        }
        store.meta_put("site/serial", Some(vec![0, 1])).await.unwrap();
        let doc = Document::new(b"body".to_vec(), vec![IndexEntry::new("by-url", b"u1".to_vec())]);
        store.doc_swap("c", b"d1", DocExpect::Absent, Some(doc.clone())).await.unwrap();

        let log = store.txn_log_bounds().await.unwrap();
        assert!(log.last >= 300, "{log:?}");
        let mut export = store.export().unwrap();
        // Written after the export began: not in it.
        store.swap(b"T/late", Expect::Absent, Some(record("late"))).await.unwrap();
        let path = dir.path().join("b.redb");
        let mut restore = EmbeddedRestore::create(&path).unwrap();
        let mut steps = 0;
        loop {
            let chunk = export.next_entries(512).unwrap();
            if chunk.is_empty() {
                break;
            }
            steps += 1;
            for e in chunk {
                restore.add(e).unwrap();
            }
        }
        assert!(steps > 10, "small budgets give many steps ({steps})");
        assert!(restore.finish().unwrap() >= 302);
        assert!(EmbeddedRestore::create(&path).is_err(), "never over an existing file");

        let restored = EmbeddedStore::open(&path, EmbeddedOptions::default()).unwrap();
        assert_eq!(restored.count().await.unwrap(), 300);
        assert_eq!(restored.get(b"T/7").await.unwrap(), Some(record("u7")));
        assert_eq!(restored.get(b"T/late").await.unwrap(), None);
        assert_eq!(restored.meta_get("site/serial").await.unwrap(), Some(vec![0, 1]));
        assert_eq!(restored.doc_get("c", b"d1").await.unwrap(), Some(doc));
        let hits = restored.doc_lookup("c", "by-url", IndexMatch::Exact(b"u1"), None, 10).await.unwrap();
        assert_eq!(hits.len(), 1);
        // The transaction log came along: the same entries, and ids go on from there.
        assert_eq!(restored.txn_log_bounds().await.unwrap(), log);
        assert_eq!(
            restored.txn_log_read(0, 1000).await.unwrap(),
            store.txn_log_read(0, log.last as usize).await.unwrap()
        );
    }
}
