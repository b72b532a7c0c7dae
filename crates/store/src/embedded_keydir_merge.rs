//! Merging the key directory's segments (Bitcask's merge), a slice per
//! checkpoint. A replaced or removed handle leaves its old record in a segment
//! as dead bytes; without a merge the segments would grow with every write
//! until a restart rewrote them.
//!
//! Once dead bytes are at least a third of all (and at least an eighth of a
//! segment), each checkpoint's append starts with copies of the live records
//! of the next slice of the *oldest* segment (one the directory still points
//! at), then the checkpoint's own records, so a key written by the checkpoint
//! still ends on its newest record. When the scan reaches the oldest segment's
//! end, the same commit drops it from the directory's table, and the file is
//! deleted after that commit. The slice scanned is at least 1/256 of a
//! segment and four times the checkpoint's own bytes, so merging outpaces the
//! dead bytes writes make; what it copies is pointed at under the directory's
//! write lock, as a checkpoint's records are, so a slice stays small.
//!
//! Why only the oldest: its tombstones can be left behind, since no older
//! segment holds a record they would hide from a rebuild that reads the
//! segments in order. A kill at any point is safe: copies are just newer
//! records with the same values, the commit that counts them also writes their
//! locations in redb (`embedded_keydir_locations.rs`), and a segment is gone
//! only once a durable commit says so (a file left behind is deleted at the
//! next open; snapshots taken before hold its map, so they read on).

use super::segments::{self, pack, Body};
use super::{Inner, KeyDir};

/// Where the merge is: scanning segment `seg` (0: none chosen) at offset `at`.
#[derive(Default)]
pub(super) struct Cursor {
    seg: u32,
    at: u64,
    /// A segment that failed to read back: merging stops until the next open
    /// (which finds the damage and rewrites the directory).
    stopped: bool,
}

/// A segment whose every live record has been copied forward: (id, length).
pub(super) type Emptied = (u32, u64);

/// Bytes to scan in a checkpoint that appends `own` bytes of its own.
pub(super) fn budget(segment_bytes: u64, own: usize) -> u64 {
    (segment_bytes / 256).max(4 * own as u64)
}

/// Dead bytes worth merging: a third of all, and an eighth of a segment.
pub(super) fn worth_it(inner: &Inner, segment_bytes: u64) -> bool {
    let (total, live) = (inner.dir.total, inner.dir.live);
    let dead = total.saturating_sub(live);
    dead >= segment_bytes / 8 && dead * 3 >= total
}

impl KeyDir {
    /// Copy the live records of the next slice of the oldest segment (never
    /// `tail`, the one taking appends) into `out`, up to `budget` scanned
    /// bytes, each key with its copy's offset in `out` into `copies`; returns
    /// the segment if the scan reached its end.
    pub(super) fn merge_slice(
        &self,
        out: &mut Vec<u8>,
        copies: &mut Vec<(Vec<u8>, Option<u64>)>,
        tail: u32,
        budget: u64,
    ) -> Option<Emptied> {
        let mut cur = self.merge.lock();
        let inner = self.inner.read();
        if cur.stopped {
            return None;
        }
        if cur.seg == 0 {
            let oldest = inner.maps.0.iter().position(Option::is_some).map(|id| id as u32);
            match oldest {
                Some(id) if id != tail && worth_it(&inner, self.segment_bytes) => {
                    *cur = Cursor { seg: id, at: 0, stopped: false }
                }
                _ => return None,
            }
        }
        let Some(len) = inner.maps.get(cur.seg).map(|m| m.len()) else {
            cur.seg = 0;
            return None;
        };
        let start = cur.at;
        while cur.at < len && cur.at - start < budget {
            let loc = pack(cur.seg, cur.at);
            let r = match inner.maps.record(loc) {
                Ok(r) => r,
                Err(e) => {
                    tracing::warn!(dir = %self.dir.display(), "key directory merge stopped: {e}");
                    cur.stopped = true;
                    return None;
                }
            };
            if r.body != Body::Removed && inner.dir.points_at(r.key, loc) {
                copies.push((r.key.to_vec(), Some(out.len() as u64)));
                segments::encode(out, r.key, r.body);
            }
            cur.at += r.len as u64;
        }
        if cur.at < len {
            return None;
        }
        let emptied = (cur.seg, len);
        *cur = Cursor::default();
        Some(emptied)
    }
}
