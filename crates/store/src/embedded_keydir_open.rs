//! Opening the key directory: as the last checkpoint left it (from the hint
//! file, or by reading its segments), or written afresh from redb.

use std::path::Path;
use std::sync::atomic::AtomicU64;

use parking_lot::{Mutex, RwLock};
use redb::{Database, Durability, ReadableDatabase, ReadableTable};

use super::super::format;
use super::super::map_redb;
use super::super::wal::WAL_STATE;
use super::segments::{self, Body, Tail};
use super::{hint, record, seg_key, Inner, KeyDir, GEN_KEY, KEYDIR, REBUILD_CHUNK, RECORDS_KEY, WAL_GEN_KEY};
use crate::StoreError;

/// (segment id, committed length), by id.
type Segs = Vec<(u32, u64)>;

/// The checkpoint generation redb holds (0 before the first).
fn generation(db: &Database) -> Result<u64, StoreError> {
    let txn = db.begin_read().map_err(|e| map_redb(e.into()))?;
    let table = txn.open_table(WAL_STATE).map_err(|e| map_redb(e.into()))?;
    let gen = table.get(WAL_GEN_KEY).map_err(|e| map_redb(e.into()))?.map(|g| g.value());
    Ok(gen.unwrap_or(0))
}

/// What the directory's table says.
pub(super) struct Committed {
    pub(super) gen: u64,
    /// The segments' record form (1 where none is written).
    pub(super) records: u64,
    pub(super) segs: Segs,
}

/// The directory's table (None if there is no table yet).
pub(super) fn committed(db: &Database) -> Result<Option<Committed>, StoreError> {
    let r = |e: redb::Error| map_redb(e);
    let txn = db.begin_read().map_err(|e| r(e.into()))?;
    let t = match txn.open_table(KEYDIR) {
        Ok(t) => t,
        Err(redb::TableError::TableDoesNotExist(_)) => return Ok(None),
        Err(e) => return Err(r(e.into())),
    };
    let (mut gen, mut records) = (None, 1);
    let mut segs = Vec::new();
    for item in t.iter().map_err(|e| r(e.into()))? {
        let (k, v) = item.map_err(|e| r(e.into()))?;
        match k.value() {
            GEN_KEY => gen = Some(v.value()),
            RECORDS_KEY => records = v.value(),
            k => match k.strip_prefix("seg:").and_then(|id| id.parse::<u32>().ok()) {
                Some(id) if id > 0 && id <= segments::MAX_SEGMENTS => segs.push((id, v.value())),
                _ => return Err(StoreError::Corrupt(format!("key directory table: unknown entry {k:?}"))),
            },
        }
    }
    segs.sort_unstable();
    Ok(gen.map(|gen| Committed { gen, records, segs }))
}

/// Open the directory of the store at `store`, as redb's table describes it
/// (before the log's replay: see `open_file`). `Err(reason)` inside `Ok`: it
/// must be rebuilt from redb ([`rebuild`]); never once redb holds locations in
/// it (`embedded_keydir_locations.rs`): its segments are then the records' only
/// copy, and what would have it rebuilt is an error. `segment_bytes` is at least
/// `MIN_SEGMENT_BYTES` (the caller's options, checked).
pub(in super::super) fn open(
    db: &Database,
    store: &Path,
    segment_bytes: u64,
) -> Result<Result<KeyDir, String>, StoreError> {
    let located = format::holds_locations(db)?;
    match open_as_committed(db, store, segment_bytes, located)? {
        Err(why) if located => Err(StoreError::Corrupt(format!(
            "key directory {}: {why}; it holds the store's handle records, so it cannot be written \
             afresh from the store file (if the store was last opened without the key directory, \
             open it so once more: that moves the records back into the store file)",
            segments::dir_for(store).display()
        ))),
        opened => Ok(opened),
    }
}

fn open_as_committed(
    db: &Database,
    store: &Path,
    segment_bytes: u64,
    located: bool,
) -> Result<Result<KeyDir, String>, StoreError> {
    let Some(Committed { gen, records, segs }) = committed(db)? else {
        return Ok(Err("no key directory yet".into()));
    };
    if records != segments::RECORDS_FORM {
        return Ok(Err(format!("its records are in form {records}; this version writes {}", segments::RECORDS_FORM)));
    }
    let current = generation(db)?;
    if gen != current {
        return Ok(Err(format!("the store was checkpointed without it (generation {gen}, store {current})")));
    }
    let dir = segments::dir_for(store);
    let Some(&(tail_id, tail_len)) = segs.last() else { return Ok(Err("no segments".into())) };
    for &(id, len) in &segs {
        let on_disk = std::fs::metadata(segments::seg_path(&dir, id)).map_or(None, |m| Some(m.len()));
        if on_disk.is_none_or(|l| l < len) {
            return Ok(Err(format!("segment {id} is missing or shorter than its committed {len} bytes")));
        }
    }
    // Segments a checkpoint created but never committed.
    for id in segments::list(&dir)? {
        if !segs.iter().any(|s| s.0 == id) {
            std::fs::remove_file(segments::seg_path(&dir, id))?;
        }
    }
    let tail = Tail::open(&dir, tail_id, tail_len, segment_bytes)?;
    let mut inner = Inner::default();
    for &(id, len) in &segs {
        inner.maps.set(id, segments::map(&dir, id, len, 0)?);
    }
    match hint::read(&dir, gen, &inner.maps.lengths()) {
        Ok(d) => inner.dir = d,
        Err(why) => {
            tracing::debug!(dir = %dir.display(), "key directory read from its segments: {why}");
            for &(id, len) in &segs {
                // One sequential read of each segment, which also warms it.
                if let Err(e) = inner.apply_range(id, 0, len) {
                    return Ok(Err(e));
                }
            }
        }
    }
    let (total, live) = (inner.dir.total, inner.dir.live);
    // The merge keeps up with writes; this is for a directory last run without
    // it (with locations the merge alone can shrink it).
    if !located && total >= segment_bytes / 8 && live < total / 2 {
        return Ok(Err(format!("{} of its {total} record bytes are dead", total - live)));
    }
    Ok(Ok(KeyDir {
        dir,
        inner: RwLock::new(inner),
        tail: Mutex::new(tail),
        installing: Mutex::new(()),
        gen: AtomicU64::new(gen),
        segment_bytes,
        merge: Mutex::default(),
    }))
}

/// Write the directory afresh from redb's handles (in key order), commit it
/// at the store's current generation, then open it.
pub(in super::super) fn rebuild(db: &Database, store: &Path, segment_bytes: u64) -> Result<KeyDir, StoreError> {
    let dir = segments::dir_for(store);
    if dir.exists() {
        for id in segments::list(&dir)? {
            std::fs::remove_file(segments::seg_path(&dir, id))?;
        }
        let _ = std::fs::remove_file(dir.join(hint::NAME));
    }
    std::fs::create_dir_all(&dir)?;
    let mut tail = Tail::open(&dir, 1, 0, segment_bytes)?;
    let mut lengths: Vec<(u32, u64)> = Vec::new();
    let mut flush = |tail: &mut Tail, buf: &mut Vec<u8>| -> Result<(), StoreError> {
        if !buf.is_empty() {
            tail.append(buf)?;
            tail.committed_to(tail.written());
            match lengths.last_mut() {
                Some(l) if l.0 == tail.id => l.1 = tail.written(),
                _ => lengths.push((tail.id, tail.written())),
            }
            buf.clear();
        }
        Ok(())
    };
    let (mut buf, mut n) = (Vec::with_capacity(REBUILD_CHUNK + 4096), 0u64);
    {
        let r = |e: redb::Error| map_redb(e);
        let txn = db.begin_read().map_err(|e| r(e.into()))?;
        let handles = txn.open_table(super::super::HANDLES).map_err(|e| r(e.into()))?;
        for item in handles.iter().map_err(|e| r(e.into()))? {
            let (k, v) = item.map_err(|e| r(e.into()))?;
            let key = k.value();
            let body = format::unseal("handle", key, v.value()).map_or(Body::Damaged, Body::Value);
            segments::encode(&mut buf, key, body);
            n += 1;
            if buf.len() >= REBUILD_CHUNK {
                flush(&mut tail, &mut buf)?;
            }
        }
    }
    flush(&mut tail, &mut buf)?;
    if lengths.is_empty() {
        lengths.push((1, 0));
    }
    segments::sync_dir(&dir)?;
    let mut txn = db.begin_write().map_err(|e| map_redb(e.into()))?;
    txn.set_durability(Durability::Immediate).map_err(|e| StoreError::Backend(e.to_string()))?;
    txn.set_two_phase_commit(true);
    {
        let mut t = txn.open_table(KEYDIR).map_err(|e| map_redb(e.into()))?;
        t.retain(|_, _| false).map_err(|e| map_redb(e.into()))?;
        for (id, len) in &lengths {
            t.insert(seg_key(*id).as_str(), *len).map_err(|e| map_redb(e.into()))?;
        }
    }
    let gen = {
        let w = txn.open_table(WAL_STATE).map_err(|e| map_redb(e.into()))?;
        let g = w.get(WAL_GEN_KEY).map_err(|e| map_redb(e.into()))?.map(|g| g.value());
        g.unwrap_or(0)
    };
    record(&txn, None, gen)?;
    txn.commit().map_err(|e| map_redb(e.into()))?;
    tracing::info!(handles = n, dir = %dir.display(), "key directory written from the store file");
    match open(db, store, segment_bytes)? {
        Ok(k) => Ok(k),
        Err(why) => Err(StoreError::Corrupt(format!(
            "key directory {}: just written, it reads back wrong: {why}",
            dir.display()
        ))),
    }
}
