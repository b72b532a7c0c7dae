//! The key directory's record files (`embedded_keydir.rs`): append-only
//! segments `seg-NNNNNN` in `<store file>.keydir/`, each a run of records
//!
//! `crc32(rest): u32 LE ‖ key length ‖ value code ‖ key ‖ value`
//!
//! where the value is a handle record's stored payload (without the redb
//! table's own seal: the record's crc covers key and value). Lengths and codes
//! are one byte below 255, else 255 and a u32 (the compact records' numbers); the
//! value code is its length plus 2, or [`TOMBSTONE`] (the handle was removed) or
//! [`DAMAGED`] (its value in redb failed its checksum when the directory was
//! rebuilt; a get answers `Corrupt`, as the redb path would). Records were
//! `crc ‖ u32 ‖ u32 ‖ key ‖ value` until 2026-12-05 (issue 45: 6 bytes a handle
//! more); segments in that form are written afresh at open ([`RECORDS_FORM`]).
//!
//! Only checkpoints append, to the newest segment, and sync before the redb
//! commit that records the segment's new committed length; a full segment
//! (past its size, [`DEFAULT_SEGMENT_BYTES`] unless the store's options say
//! otherwise) is never written again, so its `mmap` never moves.
//! Every read is bounds-checked: a damaged file gives an error, never a panic.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use handled_proto::{DecodeError, Reader};

use crate::record_compact::{put_small, read_small};
use crate::StoreError;

/// A segment takes no more appends once it is this long (by default).
pub const DEFAULT_SEGMENT_BYTES: u64 = 512 << 20;
/// The smallest segment size taken (smaller ones are for tests).
pub(super) const MIN_SEGMENT_BYTES: u64 = 16 << 10;
/// Value code of a removed handle's record.
const TOMBSTONE: u32 = 0;
/// Value code of a handle whose redb value was damaged at the rebuild.
const DAMAGED: u32 = 1;
/// The record form this code writes, recorded in the directory's table.
pub(super) const RECORDS_FORM: u64 = 2;
const CRC: usize = 4;
/// Offsets are 48 bits of a packed location, segment ids the other 16.
const OFFSET_BITS: u32 = 48;
pub(super) const MAX_SEGMENTS: u32 = (1 << 16) - 1;

/// A record's place: segment id (high 16 bits) and offset.
pub(super) fn pack(seg: u32, offset: u64) -> u64 {
    (u64::from(seg) << OFFSET_BITS) | offset
}

pub(super) fn unpack(loc: u64) -> (u32, u64) {
    ((loc >> OFFSET_BITS) as u32, loc & ((1 << OFFSET_BITS) - 1))
}

/// What a record holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Body<'a> {
    Value(&'a [u8]),
    Removed,
    Damaged,
}

/// One record read from a segment.
pub(super) struct Record<'a> {
    pub(super) key: &'a [u8],
    pub(super) body: Body<'a>,
    /// Bytes the record takes in its segment.
    pub(super) len: usize,
}

/// The record at `at` in `bytes`, its crc checked. `Err` says what is wrong
/// (the caller names the file).
pub(super) fn record_at(bytes: &[u8], at: usize) -> Result<Record<'_>, &'static str> {
    let start = at.checked_add(CRC).filter(|&s| s <= bytes.len()).ok_or("truncated record header")?;
    let crc = u32::from_le_bytes(bytes[at..start].try_into().expect("4 bytes"));
    let mut r = Reader::new(&bytes[start..]);
    let short = |e| match e {
        DecodeError::Invalid { .. } => "record has a length written wide that fits in a byte",
        _ => "record runs past the end of its segment",
    };
    let klen = read_small(&mut r, "key length").map_err(short)?;
    let code = read_small(&mut r, "value code").map_err(short)?;
    let key = r.take(klen as usize, "key").map_err(short)?;
    let body = match code {
        TOMBSTONE => Body::Removed,
        DAMAGED => Body::Damaged,
        n => Body::Value(r.take((n - 2) as usize, "value").map_err(short)?),
    };
    let end = start + r.position();
    if crc32fast::hash(&bytes[start..end]) != crc {
        return Err("record fails its checksum");
    }
    Ok(Record { key, body, len: end - at })
}

/// Append the encoded record to `out`.
pub(super) fn encode(out: &mut Vec<u8>, key: &[u8], body: Body<'_>) {
    let (code, value): (u32, &[u8]) = match body {
        Body::Value(v) => (v.len() as u32 + 2, v),
        Body::Removed => (TOMBSTONE, &[]),
        Body::Damaged => (DAMAGED, &[]),
    };
    let start = out.len();
    out.extend_from_slice(&[0; CRC]);
    put_small(out, key.len() as u32);
    put_small(out, code);
    out.extend_from_slice(key);
    out.extend_from_slice(value);
    let crc = crc32fast::hash(&out[start + CRC..]);
    out[start..start + CRC].copy_from_slice(&crc.to_le_bytes());
}

/// The segments' directory beside the store file.
pub(super) fn dir_for(store: &Path) -> PathBuf {
    let mut p = store.as_os_str().to_owned();
    p.push(".keydir");
    PathBuf::from(p)
}

pub(super) fn seg_path(dir: &Path, id: u32) -> PathBuf {
    dir.join(format!("seg-{id:06}"))
}

/// Segment ids present in `dir` (files named otherwise are left alone).
pub(super) fn list(dir: &Path) -> Result<Vec<u32>, StoreError> {
    let mut ids = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let name = entry?.file_name();
        if let Some(id) = name.to_str().and_then(|n| n.strip_prefix("seg-")).and_then(|n| n.parse::<u32>().ok()) {
            ids.push(id);
        }
    }
    ids.sort_unstable();
    Ok(ids)
}

/// Map `len` bytes of segment `id` (None for an empty one: a zero-length map
/// is refused by the OS).
pub(super) fn map(dir: &Path, id: u32, len: u64, reserve: u64) -> Result<Option<Mapped>, StoreError> {
    if len == 0 {
        return Ok(None);
    }
    let file = File::open(seg_path(dir, id))?;
    // SAFETY: segments are only appended to (past `len`) by this process, and
    // cut back only at open, before any map exists; only the first `len`
    // bytes (synced before they were committed, inside the file) are ever
    // read (`Mapped::bytes`), however far past the file's end the map runs.
    let map = unsafe { memmap2::MmapOptions::new().len(len.max(reserve) as usize).map(&file)? };
    Ok(Some(Mapped { map, len: AtomicUsize::new(len as usize) }))
}

/// A segment's map, of which the first `len` bytes are committed records. A
/// tail segment is mapped past its end ([`map`]'s `reserve`), so that the
/// records each checkpoint appends are reached through the same map: a new
/// map would cost the next lookups a page fault for every page they touch
/// again, and its teardown the checkpoint a while. Shared (`Arc`) between the
/// directory and the snapshots that may read records through it, so its
/// length grows in place.
pub(super) struct Mapped {
    map: memmap2::Mmap,
    len: AtomicUsize,
}

impl Mapped {
    /// The committed records: the only bytes read.
    pub(super) fn bytes(&self) -> &[u8] {
        &self.map[..self.len.load(Ordering::Acquire)]
    }

    pub(super) fn len(&self) -> u64 {
        self.len.load(Ordering::Acquire) as u64
    }

    /// Whether records up to `len` (committed since) can be taken in.
    pub(super) fn reaches(&self, len: u64) -> bool {
        usize::try_from(len).is_ok_and(|len| self.len.load(Ordering::Acquire) <= len && len <= self.map.len())
    }

    /// Take records up to `len` in (the caller saw that the map [`reaches`](Self::reaches) them).
    pub(super) fn extend_to(&self, len: u64) {
        debug_assert!(self.reaches(len));
        if self.reaches(len) {
            self.len.store(len as usize, Ordering::Release);
        }
    }
}

/// fsync a directory, so that a created or removed segment's name is durable.
pub(super) fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    File::open(dir)?.sync_all()?;
    Ok(())
}

/// The newest segment, taking appends.
pub(super) struct Tail {
    dir: PathBuf,
    pub(super) id: u32,
    file: File,
    /// Bytes a redb commit records (everything before is synced).
    pub(super) committed: u64,
    /// Bytes written (past `committed` only between an append and its commit).
    written: u64,
    /// Past this length a segment takes no more appends.
    limit: u64,
}

impl Tail {
    /// Open segment `id` for appends, cut back to its `committed` length (what
    /// lies past it is from a checkpoint that never committed; the log still
    /// holds those writes).
    pub(super) fn open(dir: &Path, id: u32, committed: u64, limit: u64) -> Result<Tail, StoreError> {
        let path = seg_path(dir, id);
        let file = OpenOptions::new().create(true).truncate(false).read(true).write(true).open(&path)?;
        if file.metadata()?.len() != committed {
            file.set_len(committed)?;
            file.sync_all()?;
        }
        Ok(Tail { dir: dir.to_path_buf(), id, file, committed, written: committed, limit })
    }

    /// Append `bytes` (whole records) and sync; returns the offset they start
    /// at, which may be in a new segment: see [`Tail::id`] after the call.
    pub(super) fn append(&mut self, bytes: &[u8]) -> Result<u64, StoreError> {
        if self.written != self.committed {
            // An append whose commit failed: drop it.
            self.file.set_len(self.committed)?;
            self.written = self.committed;
        }
        if self.committed > 0 && self.committed + bytes.len() as u64 > self.limit {
            self.roll()?;
        }
        let at = self.written;
        let mut w = &self.file;
        use std::io::Seek;
        w.seek(std::io::SeekFrom::Start(at))?;
        w.write_all(bytes)?;
        self.file.sync_data()?;
        self.written += bytes.len() as u64;
        Ok(at)
    }

    /// The appended bytes are committed (redb recorded `self.written`).
    pub(super) fn committed_to(&mut self, len: u64) {
        self.committed = len;
        self.written = len;
    }

    pub(super) fn written(&self) -> u64 {
        self.written
    }

    /// Start the next segment; the full one is never written again.
    fn roll(&mut self) -> Result<(), StoreError> {
        if self.id >= MAX_SEGMENTS {
            return Err(StoreError::Backend(format!(
                "the key directory has {MAX_SEGMENTS} segments; compact the store (handled compact)"
            )));
        }
        let next = Tail::open(&self.dir, self.id + 1, 0, self.limit)?;
        sync_dir(&self.dir)?;
        *self = next;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_damage_is_an_error() {
        let mut b = Vec::new();
        encode(&mut b, b"20.5000/a", Body::Value(b"value"));
        encode(&mut b, b"20.5000/b", Body::Removed);
        encode(&mut b, b"20.5000/c", Body::Damaged);
        let r = record_at(&b, 0).unwrap();
        assert_eq!((r.key, r.body), (&b"20.5000/a"[..], Body::Value(b"value")));
        let r2 = record_at(&b, r.len).unwrap();
        assert_eq!((r2.key, r2.body), (&b"20.5000/b"[..], Body::Removed));
        let r3 = record_at(&b, r.len + r2.len).unwrap();
        assert_eq!(r3.body, Body::Damaged);
        assert_eq!(r.len + r2.len + r3.len, b.len());
        // Any flipped byte, any cut, any absurd length: an error, not a panic.
        for i in 0..r.len {
            let mut d = b.clone();
            d[i] ^= 0x40;
            assert!(record_at(&d, 0).is_err(), "byte {i}");
        }
        for cut in 0..r.len {
            assert!(record_at(&b[..cut], 0).is_err());
        }
        let mut d = b.clone();
        d[4..9].copy_from_slice(&[0xff, 0xff, 0xff, 0xff, 0xff]);
        assert!(record_at(&d, 0).is_err());
        assert!(record_at(&b, usize::MAX - 3).is_err());
        // Six bytes before the key where they fit in one, the wide form past them.
        assert_eq!(r.len, 4 + 1 + 1 + 9 + 5);
        let (long_key, long_value) = (vec![b'k'; 300], vec![b'v'; 70_000]);
        let mut w = Vec::new();
        encode(&mut w, &long_key, Body::Value(&long_value));
        assert_eq!(w.len(), 4 + 5 + 5 + 300 + 70_000);
        let r = record_at(&w, 0).unwrap();
        assert_eq!((r.key, r.body, r.len), (&long_key[..], Body::Value(&long_value[..]), w.len()));
        for cut in [0, 3, 4, 5, 8, 9, 13, 14, 313, w.len() - 1] {
            assert!(record_at(&w[..cut], 0).is_err(), "cut at {cut}");
        }
        // A short key length written wide is said to be so, not taken for a cut.
        let mut wide = vec![0; CRC];
        wide.extend_from_slice(&[0xff, 0, 0, 0, 9]);
        wide.extend_from_slice(&b[CRC + 1..record_at(&b, 0).unwrap().len]);
        assert_eq!(record_at(&wide, 0).err(), Some("record has a length written wide that fits in a byte"));
    }

    #[test]
    fn locations_pack() {
        assert_eq!(unpack(pack(7, 123_456_789)), (7, 123_456_789));
        assert_eq!(unpack(pack(MAX_SEGMENTS, (1 << 48) - 1)), (MAX_SEGMENTS, (1 << 48) - 1));
    }
}
