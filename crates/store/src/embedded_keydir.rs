//! The key directory (issue 45; `EmbeddedOptions::key_directory`): handle
//! records also written, at each checkpoint, to append-only segments
//! (`embedded_segments.rs`) read through `mmap`, with in memory a hash of every
//! key (64-bit SipHash) → its record's segment and offset. A get that no layer
//! answers is one hash probe and one read of the record (its key compared, its
//! crc checked: a failure is `StoreError::Corrupt`), not a walk of redb's tree.
//!
//! redb keeps the records too, and stays the source of truth: ranges, counts,
//! backups, mirrors' dumps and the writer's compare-and-set reads go on reading
//! it. The directory is derived data, so whatever is wrong with it at open (no
//! table yet, a store checkpointed without it, a short or damaged segment, most
//! of it dead) is answered by rebuilding it from redb in one ordered pass.
//!
//! Ordering, as for the layers: a checkpoint appends the frozen layer's handle
//! entries (tombstones for removals) and syncs them, then its redb commit
//! records each segment's committed length and the checkpoint generation the
//! directory matches; only then is the directory updated, and the writer
//! publishes the view without the frozen layer after that. A reader finds a
//! record in a layer or through the directory, never in neither. At open the
//! newest segment is cut back to its committed length (the log still holds
//! what lay past it, and replay writes it again, through the directory).
//!
//! Memory: the hash is `u64 → u64` in a SwissTable, 17 bytes a bucket at a load
//! of 7/8 or less (19.4–39 B/handle), plus keys that collide in 64 bits (kept in
//! a small exact map; none expected below billions of handles).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::{Mutex, RwLock};
use redb::{Database, Durability, ReadableDatabase, ReadableTable, TableDefinition, WriteTransaction};

use super::format;
use super::map_redb;
use super::segments::{self, pack, record_at, unpack, Body, Mapped, Tail};
use super::wal::WAL_STATE;
use crate::record::show_key;
use crate::{HandleRecord, StoreError};

/// redb table of the directory: "gen" → the checkpoint generation the
/// segments match; "seg:NNNNNN" → a segment's committed length.
pub(super) const KEYDIR: TableDefinition<&str, u64> = TableDefinition::new("keydir.v1");
const GEN_KEY: &str = "gen";
/// The checkpoint generation, in the log's table: every durable commit that
/// records a checkpoint (`wal::set_checkpoint`) counts it up.
pub(super) const WAL_GEN_KEY: &str = "gen";
/// Below this a directory is not rewritten for its dead records.
const REWRITE_MIN_BYTES: u64 = 64 << 20;
/// Encoded bytes written per append when rebuilding.
const REBUILD_CHUNK: usize = 8 << 20;
/// How far past its end the segment taking appends is mapped: past the
/// length at which it takes no more, with room for a large last append.
const TAIL_RESERVE: u64 = 2 * segments::SEGMENT_BYTES;

fn seg_key(id: u32) -> String {
    format!("seg:{id:06}")
}

/// The hash keys are hashes already.
#[derive(Default)]
struct Identity(u64);

impl Hasher for Identity {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, _: &[u8]) {
        unreachable!("only u64 keys")
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

type Index = HashMap<u64, u64, BuildHasherDefault<Identity>>;

fn hash(key: &[u8]) -> u64 {
    // SipHash-1-3 with fixed keys: the same on every run (the index is rebuilt
    // from the segments, never stored).
    let mut h = std::hash::DefaultHasher::new();
    h.write(key);
    h.finish()
}

/// The segments' maps, by segment id (0 unused; None: empty).
#[derive(Default)]
struct Maps(Vec<Option<Mapped>>);

/// The hash and its accounts.
#[derive(Default)]
struct Dir {
    index: Index,
    /// Keys whose 64-bit hash another key holds in `index`.
    collisions: HashMap<Box<[u8]>, u64>,
    /// Record bytes in the segments, and those still pointed at.
    total: u64,
    live: u64,
}

#[derive(Default)]
struct Inner {
    maps: Maps,
    dir: Dir,
}

/// What a checkpoint appended, to record in its commit and install after it.
pub(super) struct Staged {
    seg: u32,
    start: u64,
    end: u64,
    /// Records appended: at most this many new keys.
    records: usize,
}

#[path = "embedded_keydir_hint.rs"]
mod hint;

/// The key directory: see the module documentation.
pub(super) struct KeyDir {
    dir: PathBuf,
    inner: RwLock<Inner>,
    tail: Mutex<Tail>,
    /// Held through an install: the hash grown beside the live one must not
    /// miss another install's keys.
    installing: Mutex<()>,
    /// The checkpoint generation of the last commit it took part in.
    gen: AtomicU64,
}

/// Figures for benchmarks and logs.
#[derive(Debug, Clone, Copy, Default)]
pub struct KeyDirStats {
    /// Keys in the directory.
    pub keys: u64,
    /// Memory its hash takes (buckets × 17 bytes, plus colliding keys).
    pub memory_bytes: u64,
    /// Record bytes in the segments, and those still pointed at.
    pub segment_bytes: u64,
    pub live_bytes: u64,
}

impl Maps {
    fn record(&self, loc: u64) -> Result<segments::Record<'_>, String> {
        let (seg, off) = unpack(loc);
        let map = self.get(seg).ok_or("segment not mapped")?;
        record_at(map.bytes(), off as usize).map_err(|e| format!("segment {seg} at {off}: {e}"))
    }

    fn get(&self, seg: u32) -> Option<&Mapped> {
        self.0.get(seg as usize).and_then(Option::as_ref)
    }

    /// (id, length) of every segment with records.
    fn lengths(&self) -> Vec<(u32, u64)> {
        let maps = self.0.iter().enumerate();
        maps.filter_map(|(id, m)| Some((id as u32, m.as_ref()?.len()))).collect()
    }

    /// Map segment `seg` anew; returns the map it replaces.
    fn set(&mut self, seg: u32, map: Option<Mapped>) -> Option<Mapped> {
        let seg = seg as usize;
        if self.0.len() <= seg {
            self.0.resize_with(seg + 1, || None);
        }
        std::mem::replace(&mut self.0[seg], map)
    }

    fn key_at(&self, loc: u64) -> Option<&[u8]> {
        self.record(loc).ok().map(|r| r.key)
    }

    fn size_at(&self, loc: u64) -> u64 {
        self.record(loc).map_or(0, |r| r.len as u64)
    }
}

impl Dir {
    /// Take the record at `loc` (already checked) into the directory.
    fn apply(&mut self, maps: &Maps, key: &[u8], removed: bool, len: usize, loc: u64) {
        self.total += len as u64;
        let h = hash(key);
        let old = if let Some(slot) = self.collisions.get_mut(key) {
            let old = *slot;
            if removed {
                self.collisions.remove(key);
            } else {
                *slot = loc;
            }
            Some(old)
        } else {
            match self.index.get(&h).copied() {
                // An unreadable record is kept apart rather than overwritten.
                Some(o) if maps.key_at(o) == Some(key) => {
                    if removed {
                        self.index.remove(&h);
                    } else {
                        self.index.insert(h, loc);
                    }
                    Some(o)
                }
                Some(_) => {
                    if !removed {
                        self.collisions.insert(key.into(), loc);
                    }
                    None
                }
                None => {
                    if !removed {
                        self.index.insert(h, loc);
                    }
                    None
                }
            }
        };
        if let Some(o) = old {
            self.live = self.live.saturating_sub(maps.size_at(o));
        }
        if !removed {
            self.live += len as u64;
        }
    }
}

impl Inner {
    /// Apply every record of segment `seg` in `from..to` (mapped already).
    fn apply_range(&mut self, seg: u32, from: u64, to: u64) -> Result<(), String> {
        let mut at = from;
        while at < to {
            let loc = pack(seg, at);
            let r = self.maps.record(loc)?;
            self.dir.apply(&self.maps, r.key, r.body == Body::Removed, r.len, loc);
            at += r.len as u64;
        }
        Ok(())
    }
}

impl KeyDir {
    /// The record of `key`: `Ok(None)` if the directory has none.
    pub(super) fn get(&self, key: &[u8]) -> Result<Option<HandleRecord>, StoreError> {
        let inner = self.inner.read();
        let dir = &inner.dir;
        let loc = match dir.collisions.is_empty() {
            false if dir.collisions.contains_key(key) => dir.collisions[key],
            _ => match dir.index.get(&hash(key)) {
                Some(l) => *l,
                None => return Ok(None),
            },
        };
        let damaged = |why: &str| {
            StoreError::Corrupt(format!(
                "handle {}: its record in the key directory is damaged ({why}); \
                 overwrite or delete it, or restore the store from a backup",
                show_key(key)
            ))
        };
        let r = inner.maps.record(loc).map_err(|e| damaged(&e))?;
        if r.key != key {
            return Ok(None);
        }
        match r.body {
            Body::Value(v) => HandleRecord::decode_stored(key, v).map(Some),
            Body::Removed => Ok(None),
            Body::Damaged => Err(damaged("its value failed its checksum when the directory was built")),
        }
    }

    /// Append the handle entries of a checkpoint (`key` → sealed value, `None`:
    /// removed) to the newest segment and sync them. Nothing changes for
    /// readers until [`KeyDir::install`].
    pub(super) fn stage<'a>(
        &self,
        entries: impl Iterator<Item = (&'a [u8], Option<&'a [u8]>)>,
    ) -> Result<Option<Staged>, StoreError> {
        let mut buf = Vec::new();
        let mut records = 0;
        for (key, value) in entries {
            records += 1;
            let body = match value {
                None => Body::Removed,
                Some(sealed) => match format::unseal("handle", key, sealed) {
                    Ok(v) => Body::Value(v),
                    Err(_) => Body::Damaged,
                },
            };
            segments::encode(&mut buf, key, body);
        }
        if buf.is_empty() {
            return Ok(None);
        }
        let mut tail = self.tail.lock();
        let start = tail.append(&buf).map_err(|e| self.io(e))?;
        Ok(Some(Staged { seg: tail.id, start, end: tail.written(), records }))
    }

    /// Make the staged records visible: map them, point the hash at them.
    pub(super) fn install(&self, staged: Staged) -> Result<(), StoreError> {
        let _one = self.installing.lock();
        self.tail.lock().committed_to(staged.end);
        // Installs alone change the maps (one at a time), so a tail map that
        // reaches the new records under the read lock still does under the write lock.
        let reaches = self.inner.read().maps.get(staged.seg).is_some_and(|m| m.reaches(staged.end));
        let fresh = match reaches {
            true => None,
            false => segments::map(&self.dir, staged.seg, staged.end, TAIL_RESERVE).map_err(|e| self.io(e))?,
        };
        self.make_room(staged.records);
        let mut inner = self.inner.write();
        let old = match fresh {
            Some(map) => inner.maps.set(staged.seg, Some(map)),
            None => {
                if let Some(m) = inner.maps.0.get_mut(staged.seg as usize).and_then(Option::as_mut) {
                    m.extend_to(staged.end);
                }
                None
            }
        };
        let applied = inner.apply_range(staged.seg, staged.start, staged.end);
        drop(inner);
        // Unmapped outside the lock (tearing down a large mapping takes a while).
        drop(old);
        applied.map_err(|e| {
            StoreError::Corrupt(format!(
                "key directory {}: a record just written reads back damaged: {e}",
                self.dir.display()
            ))
        })
    }

    /// Grow the hash if `more` keys might not fit: a copy made under the read
    /// lock (lookups go on), swapped in under the write lock. Grown in place,
    /// under the write lock, every lookup would wait for the copy of every
    /// entry (a doubling at 10M keys copies 16M buckets).
    fn make_room(&self, more: usize) {
        let grown = {
            let inner = self.inner.read();
            let index = &inner.dir.index;
            if index.capacity() - index.len() >= more {
                return;
            }
            // Doubled at least, as the table grows itself.
            let want = (index.len() + more).max(index.capacity() + 1);
            let mut grown = Index::with_capacity_and_hasher(want, Default::default());
            grown.extend(index.iter().map(|(h, l)| (*h, *l)));
            grown
        };
        let old = std::mem::replace(&mut self.inner.write().dir.index, grown);
        // Freed outside the lock.
        drop(old);
    }

    /// A durable commit recorded the directory at generation `gen`.
    pub(super) fn set_generation(&self, gen: u64) {
        self.gen.store(gen, Ordering::Release);
    }

    /// The segment files, oldest first (for the warm-up).
    pub(super) fn segment_paths(&self) -> Vec<PathBuf> {
        let inner = self.inner.read();
        let ids = inner.maps.0.iter().enumerate().filter(|(_, m)| m.is_some()).map(|(id, _)| id as u32);
        ids.map(|id| segments::seg_path(&self.dir, id)).collect()
    }

    /// Write the hint file for a fast restart (at shutdown, after the last
    /// checkpoint). A failure only costs the next start a read of the segments.
    pub(super) fn write_hint(&self) {
        let inner = self.inner.read();
        let segs = inner.maps.lengths();
        if let Err(e) = hint::write(&self.dir, self.gen.load(Ordering::Acquire), &segs, &inner.dir) {
            tracing::warn!(dir = %self.dir.display(), "key directory hint not written: {e}");
        }
    }

    fn io(&self, e: StoreError) -> StoreError {
        match e {
            StoreError::Io(io) => {
                StoreError::Io(std::io::Error::new(io.kind(), format!("key directory {}: {io}", self.dir.display())))
            }
            e => e,
        }
    }

    pub(super) fn stats(&self) -> KeyDirStats {
        let inner = self.inner.read();
        let dir = &inner.dir;
        let buckets = (dir.index.capacity() as u64 * 8).div_ceil(7);
        let colliding: u64 = dir.collisions.keys().map(|k| k.len() as u64 + 40).sum();
        KeyDirStats {
            keys: (dir.index.len() + dir.collisions.len()) as u64,
            memory_bytes: buckets * 17 + colliding,
            segment_bytes: dir.total,
            live_bytes: dir.live,
        }
    }
}

/// Record a staged append in the checkpoint's commit, at generation `gen`.
pub(super) fn record(txn: &WriteTransaction, staged: Option<&Staged>, gen: u64) -> Result<(), StoreError> {
    let r = |e: redb::Error| map_redb(e);
    let mut t = txn.open_table(KEYDIR).map_err(|e| r(e.into()))?;
    if let Some(s) = staged {
        t.insert(seg_key(s.seg).as_str(), s.end).map_err(|e| r(e.into()))?;
    }
    t.insert(GEN_KEY, gen).map_err(|e| r(e.into()))?;
    Ok(())
}

/// (segment id, committed length), by id.
type Segs = Vec<(u32, u64)>;

/// The checkpoint generation redb holds (0 before the first).
fn generation(db: &Database) -> Result<u64, StoreError> {
    let txn = db.begin_read().map_err(|e| map_redb(e.into()))?;
    let table = txn.open_table(WAL_STATE).map_err(|e| map_redb(e.into()))?;
    let gen = table.get(WAL_GEN_KEY).map_err(|e| map_redb(e.into()))?.map(|g| g.value());
    Ok(gen.unwrap_or(0))
}

/// The directory's table: generation and committed segment lengths (None if
/// there is no table yet).
fn committed(db: &Database) -> Result<Option<(u64, Segs)>, StoreError> {
    let r = |e: redb::Error| map_redb(e);
    let txn = db.begin_read().map_err(|e| r(e.into()))?;
    let t = match txn.open_table(KEYDIR) {
        Ok(t) => t,
        Err(redb::TableError::TableDoesNotExist(_)) => return Ok(None),
        Err(e) => return Err(r(e.into())),
    };
    let mut gen = None;
    let mut segs = Vec::new();
    for item in t.iter().map_err(|e| r(e.into()))? {
        let (k, v) = item.map_err(|e| r(e.into()))?;
        match k.value() {
            GEN_KEY => gen = Some(v.value()),
            k => match k.strip_prefix("seg:").and_then(|id| id.parse::<u32>().ok()) {
                Some(id) if id > 0 && id <= segments::MAX_SEGMENTS => segs.push((id, v.value())),
                _ => return Err(StoreError::Corrupt(format!("key directory table: unknown entry {k:?}"))),
            },
        }
    }
    segs.sort_unstable();
    Ok(gen.map(|g| (g, segs)))
}

/// Open the directory of the store at `store`, as redb's table describes it
/// (before the log's replay: see `open_file`). `Err(reason)` inside `Ok`: it
/// must be rebuilt from redb ([`rebuild`]).
pub(super) fn open(db: &Database, store: &Path) -> Result<Result<KeyDir, String>, StoreError> {
    let Some((gen, segs)) = committed(db)? else { return Ok(Err("no key directory yet".into())) };
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
    let tail = Tail::open(&dir, tail_id, tail_len)?;
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
    if total >= REWRITE_MIN_BYTES && live < total / 2 {
        return Ok(Err(format!("{} of its {total} record bytes are dead", total - live)));
    }
    Ok(Ok(KeyDir {
        dir,
        inner: RwLock::new(inner),
        tail: Mutex::new(tail),
        installing: Mutex::new(()),
        gen: AtomicU64::new(gen),
    }))
}

/// Write the directory afresh from redb's handles (in key order), commit it
/// at the store's current generation, then open it.
pub(super) fn rebuild(db: &Database, store: &Path) -> Result<KeyDir, StoreError> {
    let dir = segments::dir_for(store);
    if dir.exists() {
        for id in segments::list(&dir)? {
            std::fs::remove_file(segments::seg_path(&dir, id))?;
        }
        let _ = std::fs::remove_file(dir.join(hint::NAME));
    }
    std::fs::create_dir_all(&dir)?;
    let mut tail = Tail::open(&dir, 1, 0)?;
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
        let handles = txn.open_table(super::HANDLES).map_err(|e| r(e.into()))?;
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
    match open(db, store)? {
        Ok(k) => Ok(k),
        Err(why) => Err(StoreError::Corrupt(format!(
            "key directory {}: just written, it reads back wrong: {why}",
            dir.display()
        ))),
    }
}

#[cfg(test)]
#[path = "embedded_keydir_tests.rs"]
mod tests;
