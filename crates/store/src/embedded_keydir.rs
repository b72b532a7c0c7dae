//! The key directory (issue 45; `EmbeddedOptions::key_directory`): handle
//! records also written, at each checkpoint, to append-only segments
//! (`embedded_segments.rs`) read through `mmap`, with in memory a hash of every
//! key (64-bit SipHash) → its record's segment and offset. A get that no layer
//! answers is one hash probe and one read of the record (its key compared, its
//! crc checked: a failure is `StoreError::Corrupt`), not a walk of redb's tree.
//!
//! redb keeps every key, and for each record it checkpointed with the
//! directory the record's location in the segments rather than a copy
//! (`embedded_keydir_locations.rs`): ranges, counts, backups, mirrors' dumps
//! and the writer's compare-and-set read redb and follow the locations. Values
//! redb holds inline (written without the directory, or before locations) are
//! copied into the segments too; while every value is inline, whatever is wrong
//! with the directory at open (no table yet, a store checkpointed without it, a
//! short or damaged segment, most of it dead) is answered by rebuilding it from
//! redb in one ordered pass. Once a location exists the segments are the only
//! copy of those records, and such damage is an error at open.
//!
//! Ordering, as for the layers: a checkpoint appends the frozen layer's handle
//! entries (tombstones for removals) and syncs them, then its redb commit
//! writes their locations and records each segment's committed length and the
//! checkpoint generation the directory matches; only then is the directory
//! updated, and the writer publishes the view without the frozen layer after
//! that. A reader finds a record in a layer or through the directory, never in
//! neither. At open the newest segment is cut back to its committed length (the
//! log still holds what lay past it, and replay writes it again, through the
//! directory).
//!
//! Replaced records are merged away a slice per checkpoint
//! (`embedded_keydir_merge.rs`).
//!
//! Memory: the hash is `u64 → u64` in 16-byte slots at a load of 3/4 or less
//! (21.3–43 B/handle; `embedded_keydir_table.rs`, on huge pages), plus keys
//! that collide in 64 bits (kept in a small exact map; none expected below
//! billions of handles).

use std::collections::HashMap;
use std::hash::Hasher;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use redb::{TableDefinition, WriteTransaction};

use super::format;
use super::map_redb;
use super::segments::{self, pack, record_at, unpack, Body, Mapped, Tail};
use crate::record::show_key;
use crate::{HandleRecord, StoreError};

/// redb table of the directory: "gen" → the checkpoint generation the
/// segments match; "seg:NNNNNN" → a segment's committed length.
pub(super) const KEYDIR: TableDefinition<&str, u64> = TableDefinition::new("keydir.v1");
const GEN_KEY: &str = "gen";
/// The form of the segments' records ([`segments::RECORDS_FORM`]; none: the first).
const RECORDS_KEY: &str = "records";
/// The checkpoint generation, in the log's table: every durable commit that
/// records a checkpoint (`wal::set_checkpoint`) counts it up.
pub(super) const WAL_GEN_KEY: &str = "gen";
pub use segments::DEFAULT_SEGMENT_BYTES;
/// Encoded bytes written per append when rebuilding.
const REBUILD_CHUNK: usize = 8 << 20;

fn seg_key(id: u32) -> String {
    format!("seg:{id:06}")
}

fn hash(key: &[u8]) -> u64 {
    // SipHash-1-3 with fixed keys: the same on every run (the hint file
    // stores these hashes).
    let mut h = std::hash::DefaultHasher::new();
    h.write(key);
    h.finish()
}

/// The segments' maps, by segment id (0 unused; None: empty).
#[derive(Default)]
struct Maps(Vec<Option<Arc<Mapped>>>);

/// The hash and its accounts.
#[derive(Default)]
struct Dir {
    index: HashIndex,
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
    /// A segment the merge emptied: dropped by the same commit.
    emptied: Option<merge::Emptied>,
    /// The handles appended, in order (the merge's copies, then the commit's
    /// own), with their records' offsets in `seg` (`None`: removed), for the
    /// commit to write as their values (`embedded_keydir_locations.rs`); at
    /// most this many new keys.
    handles: Vec<(Vec<u8>, Option<u64>)>,
}

#[path = "embedded_keydir_hint.rs"]
mod hint;
#[path = "embedded_keydir_huge_pages.rs"]
mod huge_pages;
#[path = "embedded_keydir_table.rs"]
mod table;
use table::HashIndex;
#[path = "embedded_keydir_merge.rs"]
mod merge;
#[path = "embedded_keydir_open.rs"]
mod opening;
use opening::committed;
pub(super) use opening::{open, rebuild};
#[path = "embedded_keydir_locations.rs"]
mod locations;
pub(super) use locations::{inline_values, resolve, write_locations, Resolver};

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
    /// Past this length a segment takes no more appends.
    segment_bytes: u64,
    merge: Mutex<merge::Cursor>,
}

/// Figures for benchmarks and logs.
#[derive(Debug, Clone, Copy, Default)]
pub struct KeyDirStats {
    /// Keys in the directory.
    pub keys: u64,
    /// Memory its hash takes (slots × 16 bytes, plus colliding keys).
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
        self.0.get(seg as usize).and_then(Option::as_deref)
    }

    /// (id, length) of every segment with records.
    fn lengths(&self) -> Vec<(u32, u64)> {
        let maps = self.0.iter().enumerate();
        maps.filter_map(|(id, m)| Some((id as u32, m.as_ref()?.len()))).collect()
    }

    /// Map segment `seg` anew; returns the map it replaces.
    fn set(&mut self, seg: u32, map: Option<Mapped>) -> Option<Arc<Mapped>> {
        let seg = seg as usize;
        if self.0.len() <= seg {
            self.0.resize_with(seg + 1, || None);
        }
        std::mem::replace(&mut self.0[seg], map.map(Arc::new))
    }

    fn key_at(&self, loc: u64) -> Option<&[u8]> {
        self.record(loc).ok().map(|r| r.key)
    }

    fn size_at(&self, loc: u64) -> u64 {
        self.record(loc).map_or(0, |r| r.len as u64)
    }
}

impl Dir {
    /// Is `key`'s record the one at `loc`?
    fn points_at(&self, key: &[u8], loc: u64) -> bool {
        match self.collisions.get(key) {
            Some(l) => *l == loc,
            None => self.index.get(hash(key)) == Some(loc),
        }
    }

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
            match self.index.get(h) {
                // An unreadable record is kept apart rather than overwritten.
                Some(o) if maps.key_at(o) == Some(key) => {
                    if removed {
                        self.index.remove(h);
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
            _ => match dir.index.get(hash(key)) {
                Some(l) => l,
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
    /// removed) to the newest segment, after the merge's copies if it is
    /// merging, and sync them. Nothing changes for readers until [`KeyDir::install`].
    pub(super) fn stage<'a>(
        &self,
        entries: impl Iterator<Item = (&'a [u8], Option<&'a [u8]>)>,
    ) -> Result<Option<Staged>, StoreError> {
        let mut own = Vec::new();
        let mut own_handles = Vec::new();
        for (key, value) in entries {
            let body = match value {
                None => Body::Removed,
                Some(sealed) => match format::unseal("handle", key, sealed) {
                    Ok(v) => Body::Value(v),
                    Err(_) => Body::Damaged,
                },
            };
            own_handles.push((key.to_vec(), value.map(|_| own.len() as u64)));
            segments::encode(&mut own, key, body);
        }
        let mut tail = self.tail.lock();
        // The copies first: a key the checkpoint writes ends on its own record.
        let (mut buf, mut handles) = (Vec::new(), Vec::new());
        let budget = merge::budget(self.segment_bytes, own.len());
        let emptied = self.merge_slice(&mut buf, &mut handles, tail.id, budget);
        let copies_len = buf.len() as u64;
        if buf.is_empty() {
            buf = own;
        } else {
            buf.extend_from_slice(&own);
        }
        if buf.is_empty() {
            let end = tail.written();
            return Ok(emptied.map(|e| Staged {
                seg: tail.id,
                start: end,
                end,
                emptied: Some(e),
                handles: Vec::new(),
            }));
        }
        let start = tail.append(&buf).map_err(|e| self.io(e))?;
        handles.extend(own_handles.into_iter().map(|(k, at)| (k, at.map(|at| at + copies_len))));
        for (_, at) in &mut handles {
            if let Some(at) = at {
                *at += start;
            }
        }
        Ok(Some(Staged { seg: tail.id, start, end: tail.written(), emptied, handles }))
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
            // Past the length at which it takes no more, with room for a large last append.
            false => {
                segments::map(&self.dir, staged.seg, staged.end, 2 * self.segment_bytes).map_err(|e| self.io(e))?
            }
        };
        self.make_room(staged.handles.len());
        let mut inner = self.inner.write();
        let old = match fresh {
            Some(map) => inner.maps.set(staged.seg, Some(map)),
            None => {
                if let Some(m) = inner.maps.get(staged.seg) {
                    m.extend_to(staged.end);
                }
                None
            }
        };
        let applied = inner.apply_range(staged.seg, staged.start, staged.end);
        // Nothing points into an emptied segment any more: its copies were just applied.
        let emptied = staged.emptied.map(|(seg, len)| {
            inner.dir.total = inner.dir.total.saturating_sub(len);
            inner.maps.set(seg, None)
        });
        drop(inner);
        // Unmapped outside the lock (tearing down a large mapping takes a while).
        drop(old);
        if let Some((seg, _)) = staged.emptied {
            drop(emptied);
            // A file left behind is deleted at the next open: the commit no longer lists it.
            if let Err(e) = std::fs::remove_file(segments::seg_path(&self.dir, seg)) {
                tracing::warn!(dir = %self.dir.display(), "merged key directory segment {seg} not deleted: {e}");
            }
        }
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
            let mut grown = HashIndex::with_capacity(want);
            for (h, l) in index.iter() {
                grown.insert(h, l);
            }
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
        let colliding: u64 = dir.collisions.keys().map(|k| k.len() as u64 + 40).sum();
        KeyDirStats {
            keys: (dir.index.len() + dir.collisions.len()) as u64,
            memory_bytes: dir.index.memory_bytes() + colliding,
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
        if let Some((seg, _)) = s.emptied {
            t.remove(seg_key(seg).as_str()).map_err(|e| r(e.into()))?;
        }
    }
    t.insert(GEN_KEY, gen).map_err(|e| r(e.into()))?;
    t.insert(RECORDS_KEY, segments::RECORDS_FORM).map_err(|e| r(e.into()))?;
    Ok(())
}

#[cfg(test)]
#[path = "embedded_keydir_tests.rs"]
mod tests;
