//! The stored form of values in the embedded store: every value of the handle,
//! metadata and document tables is `crc32(key ‖ payload): u32 LE ‖ payload`, and
//! every read checks it. redb checks its page checksums only when it repairs a file
//! after an unclean shutdown, so without this a damaged byte in a cleanly closed
//! store would be served as valid data. The key is in the checksum so that a value
//! that ends up under another key is caught too. (Index entries have no values;
//! their keys are derived from the documents and rebuilt when those are written.)
//!
//! Format versions (in the `format` table): none = version 1, values stored bare;
//! 2 = checksummed; 3 = handle records written in the compact form (`record.rs`),
//! those written before it still read as they are; 4 = an import's changes logged
//! in runs (`embedded_txnlog_entry.rs`); 5 = index keys with a code for their
//! collection and index (`embedded_docs_names.rs`), in a store whose index was
//! empty; 6 = handle values that name their record in the key directory's
//! segments (`embedded_keydir_locations.rs`; the table's `locations` entry says
//! whether any may). Opening a version-1 store seals every value once, in one durable
//! transaction; a version-2 to 5 store just records 6, so that an earlier server,
//! which cannot read what came after its version, refuses the file instead of
//! answering its new records, log or index as damaged (or missing).

use std::ops::Bound;

use redb::{Database, Durability, ReadableDatabase, ReadableTable, TableDefinition, WriteTransaction};

use super::{map_redb, DOCS, HANDLES, META};
use crate::record::show_key;
use crate::StoreError;

const FORMAT: TableDefinition<&str, u64> = TableDefinition::new("format");
const VERSION_KEY: &str = "version";
/// The format this code writes.
pub(super) const VERSION: u64 = 6;
/// Bytes of the checksum before a stored value's payload.
pub(super) const SEAL: usize = 4;
/// Present (1) once a commit wrote a handle value as a location.
const LOCATIONS_KEY: &str = "locations";
/// Entries rewritten per step of the upgrade (bounds the memory it takes).
const UPGRADE_CHUNK: usize = 4096;

fn checksum(key: &[u8], payload: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(key);
    h.update(payload);
    h.finalize()
}

/// The stored form of `payload` under `key`.
pub(super) fn seal(key: &[u8], payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(SEAL + payload.len());
    out.extend_from_slice(&checksum(key, payload).to_le_bytes());
    out.extend_from_slice(payload);
    out
}

/// The payload of a stored value, if its checksum holds; `what` names the table
/// ("handle", "metadata", "document") in the error.
pub(super) fn unseal<'a>(what: &str, key: &[u8], stored: &'a [u8]) -> Result<&'a [u8], StoreError> {
    if stored.len() >= SEAL {
        let (sum, payload) = stored.split_at(SEAL);
        if u32::from_le_bytes(sum.try_into().expect("4 bytes")) == checksum(key, payload) {
            return Ok(payload);
        }
    }
    Err(StoreError::Corrupt(format!(
        "{what} {}: its stored value fails its checksum (the store file is damaged); \
         overwrite or delete it, or restore the store from a backup",
        show_key(key)
    )))
}

/// Bring the store file to [`VERSION`] (a new store just records it).
pub(super) fn upgrade(db: &Database) -> Result<(), StoreError> {
    let r = |e: redb::Error| map_redb(e);
    let version = {
        let txn = db.begin_read().map_err(|e| r(e.into()))?;
        match txn.open_table(FORMAT) {
            Ok(t) => t.get(VERSION_KEY).map_err(|e| r(e.into()))?.map_or(1, |g| g.value()),
            Err(redb::TableError::TableDoesNotExist(_)) => 1,
            Err(e) => return Err(r(e.into())),
        }
    };
    if version == VERSION {
        return Ok(());
    }
    if version > VERSION {
        return Err(StoreError::Corrupt(format!(
            "the store has format version {version}; this server reads up to version {VERSION} (a newer handled wrote it)"
        )));
    }
    let mut txn = db.begin_write().map_err(|e| r(e.into()))?;
    txn.set_durability(Durability::Immediate).map_err(|e| StoreError::Backend(e.to_string()))?;
    txn.set_two_phase_commit(true);
    let sealed = if version < 2 { seal_all(&txn, HANDLES)? + seal_all(&txn, DOCS)? + seal_meta(&txn)? } else { 0 };
    txn.open_table(FORMAT).map_err(|e| r(e.into()))?.insert(VERSION_KEY, VERSION).map_err(|e| r(e.into()))?;
    txn.commit().map_err(|e| r(e.into()))?;
    if sealed > 0 {
        tracing::info!(values = sealed, "store upgraded to format version {VERSION} (checksummed values)");
    } else {
        tracing::info!("store upgraded to format version {VERSION} (from {version}: nothing rewritten)");
    }
    Ok(())
}

/// Record in `txn` that the store is in the current format (a store written
/// sealed from the start: a restore).
pub(super) fn mark_current(txn: &WriteTransaction) -> Result<(), StoreError> {
    let r = |e: redb::Error| map_redb(e);
    txn.open_table(FORMAT).map_err(|e| r(e.into()))?.insert(VERSION_KEY, VERSION).map_err(|e| r(e.into()))?;
    Ok(())
}

/// Replace every value of a byte-keyed table by its sealed form, a chunk at a
/// time (keys are unchanged, so the walk goes on after the last one rewritten).
fn seal_all(txn: &WriteTransaction, def: TableDefinition<&[u8], &[u8]>) -> Result<u64, StoreError> {
    let r = |e: redb::StorageError| map_redb(e.into());
    let mut table = txn.open_table(def).map_err(|e| map_redb(e.into()))?;
    let mut after: Option<Vec<u8>> = None;
    let mut total = 0u64;
    loop {
        let start = after.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
        let mut chunk = Vec::new();
        for item in table.range::<&[u8]>((start, Bound::Unbounded)).map_err(r)?.take(UPGRADE_CHUNK) {
            let (k, v) = item.map_err(r)?;
            chunk.push((k.value().to_vec(), v.value().to_vec()));
        }
        let Some((last, _)) = chunk.last() else { break };
        after = Some(last.clone());
        for (k, v) in &chunk {
            table.insert(k.as_slice(), seal(k, v).as_slice()).map_err(r)?;
        }
        total += chunk.len() as u64;
    }
    Ok(total)
}

/// The metadata table (small: a few entries per prefix) in one go.
fn seal_meta(txn: &WriteTransaction) -> Result<u64, StoreError> {
    let r = |e: redb::StorageError| map_redb(e.into());
    let mut table = txn.open_table(META).map_err(|e| map_redb(e.into()))?;
    let mut all = Vec::new();
    for item in table.iter().map_err(r)? {
        let (k, v) = item.map_err(r)?;
        all.push((k.value().to_owned(), v.value().to_vec()));
    }
    for (k, v) in &all {
        table.insert(k.as_str(), seal(k.as_bytes(), v).as_slice()).map_err(r)?;
    }
    Ok(all.len() as u64)
}

/// Record in `txn` whether handle values may be locations in the key directory.
pub(super) fn set_locations(txn: &WriteTransaction, on: bool) -> Result<(), StoreError> {
    let r = |e: redb::Error| map_redb(e);
    let mut t = txn.open_table(FORMAT).map_err(|e| r(e.into()))?;
    match on {
        true => drop(t.insert(LOCATIONS_KEY, 1).map_err(|e| r(e.into()))?),
        false => drop(t.remove(LOCATIONS_KEY).map_err(|e| r(e.into()))?),
    }
    Ok(())
}

/// Whether a commit wrote handle values as locations in the key directory.
pub(super) fn holds_locations(db: &Database) -> Result<bool, StoreError> {
    let r = |e: redb::Error| map_redb(e);
    let txn = db.begin_read().map_err(|e| r(e.into()))?;
    match txn.open_table(FORMAT) {
        Ok(t) => Ok(t.get(LOCATIONS_KEY).map_err(|e| r(e.into()))?.is_some_and(|v| v.value() == 1)),
        Err(redb::TableError::TableDoesNotExist(_)) => Ok(false),
        Err(e) => Err(r(e.into())),
    }
}
