//! Handle values kept as locations (issue 45): with the key directory on, redb's
//! handle table holds for each checkpointed record the place of its record in
//! the segments (`LOCATION_TAG ‖ segment ‖ offset`, sealed as every value is)
//! instead of a second copy of the value: ~10 bytes of value a handle in place
//! of ~75. The segments become the records' only copy.
//!
//! - *Written* by the commit that records the segments' new lengths, after the
//!   records were appended and synced ([`write_locations`]): a committed location
//!   names durable bytes. The merge's copies get their new locations in the commit
//!   that drops the segment they came from.
//! - *Read* ([`resolve`]) wherever redb's handle values are read: snapshots
//!   (ranges, listings, backups, mirrors' dumps, the compare-and-set's reads) and
//!   direct batches. A snapshot holds the maps of the segments there were when it
//!   was taken ([`Resolver`]), so a merge that deletes a segment after its commit
//!   does not pull the bytes from under it; a segment newer than its maps is found
//!   in the directory's, or (a commit seen before it was installed) mapped afresh.
//! - *Inline values* stay readable as they are (stores written before, restores,
//!   a log replayed without the directory), and the merge turns those it copies
//!   into locations. A store opened without the directory gets its values back
//!   into redb first ([`inline_values`]).
//! - *What it costs*: a damaged segment is lost data, no longer rewritten from
//!   redb: the directory is never written afresh once a location exists.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use redb::{Database, Durability, ReadableDatabase, WriteTransaction};

use super::super::{format, map_redb, HANDLES};
use super::segments::{self, pack, record_at, unpack, Body, Mapped};
use super::{committed, KeyDir, Staged, KEYDIR};
use crate::record::show_key;
use crate::StoreError;

/// First byte of a location's payload (the wire form of a record begins with
/// 0, the compact form with `record_compact::TAG`, 0xC5).
const LOCATION_TAG: u8 = 0xC6;
/// Entries rewritten per commit when values go back into redb.
const INLINE_CHUNK: usize = 4096;

/// The payload naming the record at `loc`: the tag, the segment id, then the
/// offset's bytes little-endian without its high zero bytes.
fn encode(loc: u64) -> Vec<u8> {
    let (seg, off) = unpack(loc);
    let mut out = Vec::with_capacity(9);
    out.push(LOCATION_TAG);
    out.extend_from_slice(&(seg as u16).to_le_bytes());
    let bytes = off.to_le_bytes();
    let used = 8 - (off.leading_zeros() / 8) as usize;
    out.extend_from_slice(&bytes[..used]);
    out
}

fn decode(payload: &[u8]) -> Option<u64> {
    let (&tag, rest) = payload.split_first()?;
    if tag != LOCATION_TAG || rest.len() < 2 || rest.len() > 2 + 6 {
        return None;
    }
    let seg = u16::from_le_bytes([rest[0], rest[1]]) as u32;
    let mut off = [0u8; 8];
    off[..rest.len() - 2].copy_from_slice(&rest[2..]);
    (seg > 0).then(|| pack(seg, u64::from_le_bytes(off)))
}

/// Whether a stored (sealed) handle value is a location.
fn is_location(stored: &[u8]) -> bool {
    stored.get(format::SEAL) == Some(&LOCATION_TAG)
}

/// What a snapshot needs to read the values that are locations: see the module
/// documentation.
pub(in super::super) struct Resolver {
    dir: PathBuf,
    /// The directory, whose maps are newer than `held`.
    live: Option<Arc<KeyDir>>,
    held: Vec<Option<Arc<Mapped>>>,
}

impl KeyDir {
    /// A resolver holding the segments mapped now (take it before the snapshot).
    pub(in super::super) fn resolver(self: &Arc<Self>) -> Resolver {
        let held = self.inner.read().maps.0.clone();
        Resolver { dir: self.dir.clone(), live: Some(self.clone()), held }
    }
}

impl Resolver {
    /// One with no segments (for tests of what holds one).
    #[cfg(test)]
    pub(in super::super) fn without_segments() -> Resolver {
        Resolver { dir: PathBuf::new(), live: None, held: Vec::new() }
    }

    /// The value of `key`'s record at `loc`.
    fn value_at(&self, key: &[u8], loc: u64) -> Result<Vec<u8>, StoreError> {
        let (seg, off) = unpack(loc);
        let damaged = |why: &str| {
            StoreError::Corrupt(format!(
                "handle {}: its record in the key directory (segment {seg} at {off}) {why}; \
                 restore the store from a backup",
                show_key(key)
            ))
        };
        let read = |map: &Mapped| -> Option<Result<Vec<u8>, StoreError>> {
            if off >= map.len() {
                return None;
            }
            Some(match record_at(map.bytes(), off as usize) {
                Err(e) => Err(damaged(e)),
                Ok(r) if r.key != key => Err(damaged("belongs to another handle")),
                Ok(r) => match r.body {
                    Body::Value(v) => Ok(v.to_vec()),
                    Body::Removed => Err(damaged("is a removal")),
                    Body::Damaged => Err(damaged("was damaged when the directory was written")),
                },
            })
        };
        if let Some(v) = self.live.as_ref().and_then(|k| k.inner.read().maps.get(seg).and_then(read)) {
            return v;
        }
        if let Some(v) = self.held.get(seg as usize).and_then(Option::as_deref).and_then(read) {
            return v;
        }
        // Committed, not yet installed: the bytes are on disk.
        let len = std::fs::metadata(segments::seg_path(&self.dir, seg)).map_err(|_| damaged("is missing"))?.len();
        let map = segments::map(&self.dir, seg, len, 0)?.ok_or_else(|| damaged("is missing"))?;
        read(&map).unwrap_or_else(|| Err(damaged("lies past its segment's end")))
    }
}

/// The stored (sealed) value of handle `key`, `stored` as redb holds it, with a
/// location read through the segments.
pub(in super::super) fn resolve(
    resolver: Option<&Resolver>,
    key: &[u8],
    stored: Vec<u8>,
) -> Result<Vec<u8>, StoreError> {
    if !is_location(&stored) {
        return Ok(stored);
    }
    let payload = format::unseal("handle", key, &stored)?;
    let loc = decode(payload)
        .ok_or_else(|| StoreError::Corrupt(format!("handle {}: its stored location is malformed", show_key(key))))?;
    let Some(r) = resolver else {
        return Err(StoreError::Corrupt(format!(
            "handle {}: its record is in the key directory, which this store was opened without",
            show_key(key)
        )));
    };
    let value = r.value_at(key, loc)?;
    Ok(format::seal(key, &value))
}

/// Write the locations of `staged`'s records into `txn`'s handle table (the
/// merge's copies first, then the commit's own records, so that a key in both
/// ends on its own; a removal removes).
pub(in super::super) fn write_locations(txn: &WriteTransaction, staged: Option<&Staged>) -> Result<(), StoreError> {
    let Some(s) = staged.filter(|s| !s.handles.is_empty()) else { return Ok(()) };
    let r = |e: redb::Error| map_redb(e);
    let mut t = txn.open_table(HANDLES).map_err(|e| r(e.into()))?;
    for (key, at) in &s.handles {
        match at {
            Some(off) => {
                let value = format::seal(key, &encode(pack(s.seg, *off)));
                t.insert(key.as_slice(), value.as_slice()).map_err(|e| r(e.into()))?;
            }
            None => drop(t.remove(key.as_slice()).map_err(|e| r(e.into()))?),
        }
    }
    drop(t);
    format::set_locations(txn, true)
}

/// A store opened without its key directory: every value that is a location is
/// written back into redb (a chunk a durable commit), then the directory's
/// table is emptied, so that the next open with the directory writes it afresh.
pub(in super::super) fn inline_values(db: &Database, store: &Path) -> Result<u64, StoreError> {
    if !format::holds_locations(db)? {
        return Ok(0);
    }
    let r = |e: redb::Error| map_redb(e);
    let dir = segments::dir_for(store);
    let mut maps = Vec::new();
    for (id, len) in committed(db)?.map(|c| c.segs).unwrap_or_default() {
        let map = segments::map(&dir, id, len, 0)
            .map_err(|e| StoreError::Corrupt(format!("key directory segment {id}, which holds handle records: {e}")))?;
        if maps.len() <= id as usize {
            maps.resize_with(id as usize + 1, || None);
        }
        maps[id as usize] = map.map(Arc::new);
    }
    let resolver = Resolver { dir, live: None, held: maps };
    let (mut after, mut total) = (None::<Vec<u8>>, 0u64);
    loop {
        let mut chunk = Vec::new();
        {
            let txn = db.begin_read().map_err(|e| r(e.into()))?;
            let t = txn.open_table(HANDLES).map_err(|e| r(e.into()))?;
            let start = after.as_deref().map_or(std::ops::Bound::Unbounded, std::ops::Bound::Excluded);
            let range = t.range::<&[u8]>((start, std::ops::Bound::Unbounded)).map_err(|e| r(e.into()))?;
            let mut scanned = 0;
            for item in range {
                let (k, v) = item.map_err(|e| r(e.into()))?;
                after = Some(k.value().to_vec());
                if is_location(v.value()) {
                    chunk.push((k.value().to_vec(), resolve(Some(&resolver), k.value(), v.value().to_vec())?));
                }
                scanned += 1;
                if chunk.len() >= INLINE_CHUNK || scanned >= 16 * INLINE_CHUNK {
                    break;
                }
            }
            if scanned == 0 {
                break;
            }
        }
        if chunk.is_empty() {
            continue;
        }
        let mut txn = db.begin_write().map_err(|e| r(e.into()))?;
        txn.set_durability(Durability::Immediate).map_err(|e| StoreError::Backend(e.to_string()))?;
        {
            let mut t = txn.open_table(HANDLES).map_err(|e| r(e.into()))?;
            for (k, v) in &chunk {
                t.insert(k.as_slice(), v.as_slice()).map_err(|e| r(e.into()))?;
            }
        }
        txn.commit().map_err(|e| r(e.into()))?;
        total += chunk.len() as u64;
    }
    let mut txn = db.begin_write().map_err(|e| r(e.into()))?;
    txn.set_durability(Durability::Immediate).map_err(|e| StoreError::Backend(e.to_string()))?;
    txn.set_two_phase_commit(true);
    txn.open_table(KEYDIR).map_err(|e| r(e.into()))?.retain(|_, _| false).map_err(|e| r(e.into()))?;
    format::set_locations(&txn, false)?;
    txn.commit().map_err(|e| r(e.into()))?;
    tracing::info!(handles = total, "handle records moved from the key directory back into the store file");
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_round_trip_and_malformed_ones_are_none() {
        for (seg, off) in [(1, 0), (1, 1), (7, 300), (65_535, (1 << 48) - 1), (2, 512 << 20)] {
            let p = encode(pack(seg, off));
            assert_eq!(decode(&p), Some(pack(seg, off)), "{seg} {off}");
        }
        assert_eq!(encode(pack(1, 123_456_789)).len(), 1 + 2 + 4);
        assert_eq!(decode(&[LOCATION_TAG]), None);
        assert_eq!(decode(&[LOCATION_TAG, 0, 0, 1]), None, "segment 0 is never used");
        assert_eq!(decode(&[LOCATION_TAG, 1, 0, 1, 2, 3, 4, 5, 6, 7]), None, "past 48 bits");
        assert_eq!(decode(&[0xC5, 1, 0]), None);
    }

    #[test]
    fn only_a_sealed_location_is_taken_for_one() {
        let loc = format::seal(b"k", &encode(pack(1, 5)));
        assert!(is_location(&loc));
        assert!(!is_location(&format::seal(b"k", &[0, 0, 0, 1])));
        assert!(!is_location(&format::seal(b"k", &[crate::record_compact::TAG, 0])));
        // A location with no directory to read it is an error, not a value.
        assert!(matches!(resolve(None, b"k", loc.clone()), Err(StoreError::Corrupt(_))));
        // Its checksum is checked before it is followed.
        let mut bad = loc;
        *bad.last_mut().unwrap() ^= 1;
        assert!(matches!(resolve(None, b"k", bad), Err(StoreError::Corrupt(m)) if m.contains("checksum")));
    }
}
