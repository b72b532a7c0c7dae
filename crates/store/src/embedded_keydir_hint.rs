//! The key directory's hint file (`<store file>.keydir/hint`): the hash as it
//! stood when the store was closed, so that a clean restart reads 16 bytes a
//! handle instead of every record (and hashing every key) of the segments.
//!
//! `"HKDHINT1" ‖ gen ‖ segments (count, then id ‖ length each) ‖ total ‖ live
//! ‖ index (count, then hash ‖ location each) ‖ colliding keys (count, then
//! key length ‖ key ‖ location each) ‖ crc32 of all before`, little-endian.
//!
//! It is used only if it names the checkpoint generation and the committed
//! segment lengths that redb holds (any checkpoint since makes it stale, and the
//! segments are then read instead), and its crc holds. Written at shutdown
//! only: a checkpoint every few seconds would rewrite it (16 B/handle) each time.

use std::io::Write;
use std::path::Path;

use super::{Dir, HashIndex};
use crate::StoreError;

const MAGIC: &[u8; 8] = b"HKDHINT1";
pub(super) const NAME: &str = "hint";

/// Write the hint for `dir` (the hash), valid at generation `gen` with
/// segments `segs` (id, committed length; empty ones left out).
pub(super) fn write(seg_dir: &Path, gen: u64, segs: &[(u32, u64)], dir: &Dir) -> Result<(), StoreError> {
    let tmp = seg_dir.join("hint.tmp");
    let mut out = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(&tmp)?);
    let mut crc = crc32fast::Hasher::new();
    let mut put = |b: &[u8]| -> std::io::Result<()> {
        crc.update(b);
        out.write_all(b)
    };
    put(MAGIC)?;
    put(&gen.to_le_bytes())?;
    put(&(segs.len() as u64).to_le_bytes())?;
    for (id, len) in segs {
        put(&u64::from(*id).to_le_bytes())?;
        put(&len.to_le_bytes())?;
    }
    put(&dir.total.to_le_bytes())?;
    put(&dir.live.to_le_bytes())?;
    put(&(dir.index.len() as u64).to_le_bytes())?;
    for (h, loc) in dir.index.iter() {
        put(&h.to_le_bytes())?;
        put(&loc.to_le_bytes())?;
    }
    put(&(dir.collisions.len() as u64).to_le_bytes())?;
    for (k, loc) in &dir.collisions {
        put(&(k.len() as u64).to_le_bytes())?;
        put(k)?;
        put(&loc.to_le_bytes())?;
    }
    let sum = crc.finalize();
    out.write_all(&sum.to_le_bytes())?;
    out.into_inner().map_err(|e| e.into_error())?.sync_data()?;
    std::fs::rename(&tmp, seg_dir.join(NAME))?;
    Ok(())
}

/// Little-endian words off the front of a slice.
struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn u64(&mut self) -> Option<u64> {
        let (head, rest) = self.0.split_first_chunk::<8>()?;
        self.0 = rest;
        Some(u64::from_le_bytes(*head))
    }

    fn bytes(&mut self, n: u64) -> Option<&[u8]> {
        let n = usize::try_from(n).ok()?;
        (n <= self.0.len()).then(|| {
            let (head, rest) = self.0.split_at(n);
            self.0 = rest;
            head
        })
    }
}

/// The hash from the hint, if there is one for generation `gen` and these
/// committed segments (`Err` says why not, for the log).
pub(super) fn read(seg_dir: &Path, gen: u64, segs: &[(u32, u64)]) -> Result<Dir, String> {
    let file = std::fs::File::open(seg_dir.join(NAME)).map_err(|e| format!("no hint ({e})"))?;
    // Mapped, not read into a buffer: at 30M handles the hint is 480 MB, and
    // fresh memory that large cost a start seconds of page zeroing on a VM
    // (BENCHMARKS.md, issue 45); the file's pages are in the page cache already.
    // SAFETY: the hint is only ever replaced (written beside, then renamed
    // over), never changed in place, so the mapped file does not change.
    let bytes = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| format!("hint not mapped ({e})"))?;
    #[cfg(unix)]
    let _ = bytes.advise(memmap2::Advice::Sequential);
    let (body, sum) = bytes.split_last_chunk::<4>().ok_or("hint too short")?;
    if crc32fast::hash(body) != u32::from_le_bytes(*sum) || !body.starts_with(MAGIC) {
        return Err("hint fails its checksum".into());
    }
    parse(&body[MAGIC.len()..], gen, segs).ok_or_else(|| "hint is stale or malformed".into())
}

fn parse(body: &[u8], gen: u64, segs: &[(u32, u64)]) -> Option<Dir> {
    let mut r = Reader(body);
    if r.u64()? != gen {
        return None;
    }
    let n = r.u64()?;
    if n != segs.len() as u64 {
        return None;
    }
    for (id, len) in segs {
        if r.u64()? != u64::from(*id) || r.u64()? != *len {
            return None;
        }
    }
    let (total, live) = (r.u64()?, r.u64()?);
    let n = r.u64()?;
    // Never trust a count for an allocation beyond what the file can hold.
    let mut index = HashIndex::with_capacity(usize::try_from(n).ok()?.min(r.0.len() / 16));
    for _ in 0..n {
        let (h, loc) = (r.u64()?, r.u64()?);
        index.insert(h, loc);
    }
    let mut collisions = std::collections::HashMap::new();
    for _ in 0..r.u64()? {
        let len = r.u64()?;
        let key: Box<[u8]> = r.bytes(len)?.into();
        collisions.insert(key, r.u64()?);
    }
    r.0.is_empty().then_some(Dir { index, collisions, total, live })
}
