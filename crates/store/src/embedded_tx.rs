//! A batch being applied by the writer ([`Tx`]): its reads see its own
//! earlier writes. A logged batch keeps its writes in an overlay over the
//! published view (they become the active layer, and a redo record for the
//! log). A batch committed to the store file at once (an import, a log
//! checkpoint) writes straight into the redb write transaction of that commit:
//! sorting an import's entries into an overlay and then copying them into the
//! file took about a fifth of the writer's time (issue 45). A direct batch
//! holds its reverse-lookup index entries back and inserts them in key order
//! at its end: an import's records come in handle order, their index keys in
//! no order at all, and inserted as they came each one walked to a different
//! leaf of the tree. With the key directory a direct batch also holds its
//! handle entries back (its reads see them): the commit appends them to the
//! directory's segments and writes their locations in redb, not the values.

use std::collections::BTreeMap;
use std::ops::Bound;

use redb::WriteTransaction;

use super::keydir::{resolve, Resolver};
use super::txnlog::{TXN_LOG, TXN_STATE};
use super::view::{
    merged, overlay_bounds, overlay_key, resolved, table_get, table_range, text_get, text_range, Items, View,
};
use super::wal::{Redo, TableId};
use super::{map_redb, DOCS, DOC_INDEX, HANDLES, META};
use crate::StoreError;

/// Handle entries (key → value, `None`: removed), in the order written.
pub(super) type HandleEntries = Vec<(Vec<u8>, Option<Vec<u8>>)>;

/// A direct batch's handle entries, held for the key directory (`None`: removed).
type Held = BTreeMap<Vec<u8>, Option<Vec<u8>>>;

/// One batch being applied: see the module documentation.
pub(super) struct Tx<'v>(Base<'v>);

enum Base<'v> {
    Overlay {
        view: &'v View,
        writes: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
        redo: Redo,
    },
    /// `keyed`: a key directory takes the handle entries, which are held
    /// here (key → value, `None`: removed) and not written to redb, whose
    /// handle values are then their records' locations
    /// (`embedded_keydir_locations.rs`).
    /// `index`: the index entries not yet inserted (key, present), in order.
    /// The tables are boxed: six redb table handles, once a batch.
    Direct {
        tables: Box<RawTables<'v>>,
        keyed: Option<(Resolver, Held)>,
        index: Vec<(Vec<u8>, bool)>,
    },
}

impl<'v> Tx<'v> {
    /// A logged batch over `view`.
    pub(super) fn logged(view: &'v View) -> Self {
        Tx(Base::Overlay { view, writes: BTreeMap::new(), redo: Redo::default() })
    }

    /// A batch written straight into `txn`, which holds everything the
    /// published view does; `keyed` (the key directory's resolver): its handle
    /// entries are kept for [`Tx::into_handles`]. It must end with
    /// [`Tx::into_handles`], which inserts its held-back index entries.
    pub(super) fn direct(txn: &'v WriteTransaction, keyed: Option<Resolver>) -> Result<Self, StoreError> {
        let tables = Box::new(RawTables::open(txn)?);
        let keyed = keyed.map(|r| (r, BTreeMap::new()));
        Ok(Tx(Base::Direct { tables, keyed, index: Vec::new() }))
    }

    /// The stored (sealed) value of `key` in `table`.
    pub(super) fn get(&mut self, table: TableId, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        self.insert_held_index_before(table)?;
        match &self.0 {
            Base::Overlay { view, writes, .. } => match writes.get(&overlay_key(table, key)) {
                Some(v) => Ok(v.clone()),
                None => view.get(table, key),
            },
            Base::Direct { tables, keyed: Some((resolver, held)), .. } if table == TableId::Handles => {
                match held.get(key) {
                    Some(v) => Ok(v.clone()),
                    None => match tables.get(table, key)? {
                        Some(v) => resolve(Some(resolver), key, v).map(Some),
                        None => Ok(None),
                    },
                }
            }
            Base::Direct { tables, .. } => tables.get(table, key),
        }
    }

    /// Set `key` to `value` (`None`: remove it) in `table`.
    pub(super) fn put(&mut self, table: TableId, key: &[u8], value: Option<&[u8]>) -> Result<(), StoreError> {
        match &mut self.0 {
            Base::Overlay { writes, redo, .. } => {
                redo.record(table, key, value);
                writes.insert(overlay_key(table, key), value.map(|v| v.to_vec()));
            }
            Base::Direct { index, .. } if table == TableId::DocIndex => index.push((key.to_vec(), value.is_some())),
            Base::Direct { keyed: Some((_, held)), .. } if table == TableId::Handles => {
                held.insert(key.to_vec(), value.map(|v| v.to_vec()));
            }
            Base::Direct { tables, .. } => tables.put(table, key, value).map_err(StoreError::Backend)?,
        }
        Ok(())
    }

    /// The entries of `table` from `from` on, this batch's writes included.
    pub(super) fn range(&mut self, table: TableId, from: Bound<&[u8]>) -> Result<Items<'_>, StoreError> {
        self.insert_held_index_before(table)?;
        match &self.0 {
            Base::Overlay { view, writes, .. } => {
                let (lo, hi) = overlay_bounds(table, from);
                let over = writes.range((lo, hi)).map(|(k, v)| (k[1..].to_vec(), v.clone()));
                Ok(merged(view.range(table, from)?, over))
            }
            Base::Direct { tables, keyed: Some((resolver, held)), .. } if table == TableId::Handles => {
                let over = held.range::<[u8], _>((from, Bound::Unbounded)).map(|(k, v)| (k.clone(), v.clone()));
                Ok(merged(resolved(Some(resolver), tables.range(table, from)?), over))
            }
            Base::Direct { tables, .. } => tables.range(table, from),
        }
    }

    /// A logged batch's writes (`table ‖ key` → value) and redo record
    /// (none for a direct batch: it is in its transaction).
    pub(super) fn into_logged(self) -> (BTreeMap<Vec<u8>, Option<Vec<u8>>>, Redo) {
        match self.0 {
            Base::Overlay { writes, redo, .. } => (writes, redo),
            Base::Direct { .. } => (BTreeMap::new(), Redo::default()),
        }
    }

    /// End a direct batch: its held-back index entries inserted; the handle
    /// entries it kept for a key directory, in key order (a key's last value).
    pub(super) fn into_handles(mut self) -> Result<HandleEntries, StoreError> {
        self.insert_held_index_before(TableId::DocIndex)?;
        match self.0 {
            Base::Direct { keyed: Some((_, held)), .. } => Ok(held.into_iter().collect()),
            _ => Ok(Vec::new()),
        }
    }

    /// Before the index is read (nothing does so today) or the batch ends, a
    /// direct batch's held-back index entries are inserted, in key order; the
    /// sort is stable, so a key's later entry still wins.
    fn insert_held_index_before(&mut self, read: TableId) -> Result<(), StoreError> {
        let Base::Direct { tables, index, .. } = &mut self.0 else { return Ok(()) };
        if read != TableId::DocIndex {
            return Ok(());
        }
        index.sort_by(|a, b| a.0.cmp(&b.0));
        for (key, present) in index.drain(..) {
            tables.put(TableId::DocIndex, &key, present.then_some(&[][..])).map_err(StoreError::Backend)?;
        }
        Ok(())
    }
}

/// Every table of a write transaction, entry by entry (replay, the
/// checkpoints of the writer's layers, and direct batches).
pub(super) struct RawTables<'txn> {
    handles: redb::Table<'txn, &'static [u8], &'static [u8]>,
    meta: redb::Table<'txn, &'static str, &'static [u8]>,
    docs: redb::Table<'txn, &'static [u8], &'static [u8]>,
    index: redb::Table<'txn, &'static [u8], ()>,
    txn_log: redb::Table<'txn, &'static [u8], &'static [u8]>,
    txn_state: redb::Table<'txn, &'static str, &'static [u8]>,
}

impl<'txn> RawTables<'txn> {
    pub(super) fn open(txn: &'txn WriteTransaction) -> Result<Self, StoreError> {
        let e = |e: redb::TableError| map_redb(e.into());
        Ok(RawTables {
            handles: txn.open_table(HANDLES).map_err(e)?,
            meta: txn.open_table(META).map_err(e)?,
            docs: txn.open_table(DOCS).map_err(e)?,
            index: txn.open_table(DOC_INDEX).map_err(e)?,
            txn_log: txn.open_table(TXN_LOG).map_err(e)?,
            txn_state: txn.open_table(TXN_STATE).map_err(e)?,
        })
    }

    /// Set `key` to `value` (`None`: remove it) in `table`.
    pub(super) fn put(&mut self, table: TableId, key: &[u8], value: Option<&[u8]>) -> Result<(), String> {
        let e = |e: redb::StorageError| e.to_string();
        match (table, value) {
            (TableId::Handles, Some(v)) => drop(self.handles.insert(key, v).map_err(e)?),
            (TableId::Handles, None) => drop(self.handles.remove(key).map_err(e)?),
            (TableId::Docs, Some(v)) => drop(self.docs.insert(key, v).map_err(e)?),
            (TableId::Docs, None) => drop(self.docs.remove(key).map_err(e)?),
            (TableId::DocIndex, Some(_)) => drop(self.index.insert(key, ()).map_err(e)?),
            (TableId::DocIndex, None) => drop(self.index.remove(key).map_err(e)?),
            (TableId::TxnLog, Some(v)) => drop(self.txn_log.insert(key, v).map_err(e)?),
            (TableId::TxnLog, None) => drop(self.txn_log.remove(key).map_err(e)?),
            (TableId::Meta, v) => {
                let key = std::str::from_utf8(key).map_err(|_| "meta key is not UTF-8")?;
                match v {
                    Some(v) => drop(self.meta.insert(key, v).map_err(e)?),
                    None => drop(self.meta.remove(key).map_err(e)?),
                }
            }
            (TableId::TxnState, v) => {
                let key = std::str::from_utf8(key).map_err(|_| "log state key is not UTF-8")?;
                match v {
                    Some(v) => drop(self.txn_state.insert(key, v).map_err(e)?),
                    None => drop(self.txn_state.remove(key).map_err(e)?),
                }
            }
        }
        Ok(())
    }

    /// The stored value of `key` in `table`.
    fn get(&self, table: TableId, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        match table {
            TableId::Handles => table_get(&self.handles, key, |v| v.to_vec()),
            TableId::Docs => table_get(&self.docs, key, |v| v.to_vec()),
            TableId::TxnLog => table_get(&self.txn_log, key, |v| v.to_vec()),
            TableId::DocIndex => table_get(&self.index, key, |()| Vec::new()),
            TableId::Meta => text_get(&self.meta, key),
            TableId::TxnState => text_get(&self.txn_state, key),
        }
    }

    fn range(&self, table: TableId, from: Bound<&[u8]>) -> Result<Items<'_>, StoreError> {
        match table {
            TableId::Handles => table_range(&self.handles, from, |v| v.to_vec()),
            TableId::Docs => table_range(&self.docs, from, |v| v.to_vec()),
            TableId::TxnLog => table_range(&self.txn_log, from, |v| v.to_vec()),
            TableId::DocIndex => table_range(&self.index, from, |()| Vec::new()),
            TableId::Meta => text_range(&self.meta, from),
            TableId::TxnState => text_range(&self.txn_state, from),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::ensure_tables;
    use super::*;
    use redb::{Database, ReadableDatabase, ReadableTable};

    /// A direct batch's index entries, held back and inserted in key order,
    /// end as written in order: a key's later entry wins, and the batch's own
    /// reads see them before they are inserted.
    #[test]
    fn held_back_index_entries_keep_their_order_of_writing() {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::create(dir.path().join("t.redb")).unwrap();
        ensure_tables(&db).unwrap();
        let txn = db.begin_write().unwrap();
        {
            let mut tx = Tx::direct(&txn, None).unwrap();
            for key in [&b"c"[..], b"gone", b"a"] {
                tx.put(TableId::DocIndex, key, Some(&[])).unwrap();
            }
            tx.into_handles().unwrap();
        }
        txn.commit().unwrap();

        let txn = db.begin_write().unwrap();
        {
            let mut tx = Tx::direct(&txn, Some(Resolver::without_segments())).unwrap();
            tx.put(TableId::DocIndex, b"b", Some(&[])).unwrap();
            tx.put(TableId::DocIndex, b"gone", None).unwrap();
            tx.put(TableId::DocIndex, b"a", None).unwrap();
            tx.put(TableId::DocIndex, b"a", Some(&[])).unwrap();
            tx.put(TableId::DocIndex, b"d", Some(&[])).unwrap();
            tx.put(TableId::DocIndex, b"d", None).unwrap();
            tx.put(TableId::Handles, b"h", Some(b"v")).unwrap();
            assert_eq!(tx.get(TableId::DocIndex, b"gone").unwrap(), None);
            assert_eq!(tx.get(TableId::DocIndex, b"a").unwrap(), Some(Vec::new()));
            assert_eq!(tx.get(TableId::DocIndex, b"c").unwrap(), Some(Vec::new()));
            let seen: Vec<Vec<u8>> =
                tx.range(TableId::DocIndex, Bound::Included(&b"b"[..])).unwrap().map(|i| i.unwrap().0).collect();
            assert_eq!(seen, [b"b".to_vec(), b"c".to_vec()]);
            assert_eq!(tx.into_handles().unwrap(), [(b"h".to_vec(), Some(b"v".to_vec()))]);
        }
        txn.commit().unwrap();

        let read = db.begin_read().unwrap();
        let index = read.open_table(DOC_INDEX).unwrap();
        let keys: Vec<Vec<u8>> = index.iter().unwrap().map(|e| e.unwrap().0.value().to_vec()).collect();
        assert_eq!(keys, [b"a".to_vec(), b"b".to_vec(), b"c".to_vec()]);
    }
}
