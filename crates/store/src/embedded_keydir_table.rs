//! The key directory's hash: 64-bit key hash → record location, open
//! addressing with linear probing over 16-byte slots (hash, location), four to
//! a cache line, in memory advised to use huge pages ([`Slots`]).
//!
//! Why not a SwissTable (`HashMap`): its lookup reads a control group and
//! then, elsewhere in memory, the bucket: two cache misses per get once the
//! table outgrows the CPU caches. Here the hash and its location sit in one
//! slot, and at a load of at most 3/4 a successful probe reads 2.5 slots on
//! average, mostly within one line: one miss. Measured at 30M keys, lookups
//! chained so that misses cannot overlap: 284–286 ns against 455–490 ns for
//! hashbrown on huge pages, 618 ns on 4 KiB pages (BENCHMARKS.md, issue 45).
//!
//! Removal shifts the entries after the hole back (no tombstones), so probe
//! lengths stay those of the live keys however many were removed.

use super::huge_pages::Slots;

/// The hash of an empty slot; a key hashing to it is stored as [`ZERO_AS`]
/// (a collision with a key hashing to that, which the directory resolves by
/// comparing keys like any other).
const EMPTY: u64 = 0;
const _: () = assert!(EMPTY == 0, "a new table's zeroed slots are empty ones (Slots::empty)");
const ZERO_AS: u64 = 1;
/// Bytes a slot takes.
pub(super) const SLOT_BYTES: u64 = 16;

fn stored(h: u64) -> u64 {
    if h == EMPTY {
        ZERO_AS
    } else {
        h
    }
}

pub(super) struct HashIndex {
    /// A power of two of them, never more than 3/4 full (so a probe always
    /// meets an empty slot).
    slots: Slots,
    len: usize,
}

impl Default for HashIndex {
    fn default() -> HashIndex {
        HashIndex::with_capacity(0)
    }
}

impl HashIndex {
    /// Room for `n` keys before it grows.
    pub(super) fn with_capacity(n: usize) -> HashIndex {
        HashIndex::with_slots(n.div_ceil(3).saturating_mul(4).next_power_of_two().max(8))
    }

    fn with_slots(count: usize) -> HashIndex {
        HashIndex { slots: Slots::empty(count), len: 0 }
    }

    /// Keys it holds before it grows.
    pub(super) fn capacity(&self) -> usize {
        self.slots.len() / 4 * 3
    }

    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// Memory its slots take.
    pub(super) fn memory_bytes(&self) -> u64 {
        self.slots.len() as u64 * SLOT_BYTES
    }

    fn mask(&self) -> usize {
        self.slots.len() - 1
    }

    /// `Ok(slot)` holding `h` (stored), or `Err(the empty slot ending its probe)`.
    fn find(&self, h: u64) -> Result<usize, usize> {
        let mask = self.mask();
        let mut i = h as usize & mask;
        loop {
            match self.slots[i][0] {
                s if s == h => return Ok(i),
                EMPTY => return Err(i),
                _ => i = (i + 1) & mask,
            }
        }
    }

    pub(super) fn get(&self, h: u64) -> Option<u64> {
        self.find(stored(h)).ok().map(|i| self.slots[i][1])
    }

    /// Point `h` at `loc`; returns the location it replaces.
    pub(super) fn insert(&mut self, h: u64, loc: u64) -> Option<u64> {
        let h = stored(h);
        match self.find(h) {
            Ok(i) => Some(std::mem::replace(&mut self.slots[i][1], loc)),
            Err(_) if self.len >= self.capacity() => {
                self.grow();
                self.insert(h, loc)
            }
            Err(i) => {
                self.slots[i] = [h, loc];
                self.len += 1;
                None
            }
        }
    }

    pub(super) fn remove(&mut self, h: u64) -> Option<u64> {
        let mut hole = self.find(stored(h)).ok()?;
        let loc = self.slots[hole][1];
        let mask = self.mask();
        // Move back each later entry of the run whose probe passes the hole.
        let mut j = (hole + 1) & mask;
        while self.slots[j][0] != EMPTY {
            let ideal = self.slots[j][0] as usize & mask;
            if j.wrapping_sub(ideal) & mask >= j.wrapping_sub(hole) & mask {
                self.slots[hole] = self.slots[j];
                hole = j;
            }
            j = (j + 1) & mask;
        }
        self.slots[hole] = [EMPTY, 0];
        self.len -= 1;
        Some(loc)
    }

    /// (hash, location) of every key, in slot order.
    pub(super) fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.slots.iter().filter(|s| s[0] != EMPTY).map(|s| (s[0], s[1]))
    }

    fn grow(&mut self) {
        let mut grown = HashIndex::with_slots(self.slots.len() * 2);
        for (h, loc) in self.iter() {
            grown.insert(h, loc);
        }
        *self = grown;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// Against std's map, over a small table so that runs wrap and removals shift.
    #[test]
    fn behaves_as_a_map_through_growth_and_removals() {
        let mut t = HashIndex::default();
        let mut m = HashMap::new();
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for step in 0..60_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // 2,000 keys whose low bits (the slot) take few values, half of
            // them at the table's end (runs wrap around); 0 and ZERO_AS too.
            let k = (x >> 8) % 2_000;
            let low = if k.is_multiple_of(2) { (k % 37) << 2 } else { 0xffff_ffff - k % 37 };
            let h = match x % 11 {
                0 => 0,
                1 => ZERO_AS,
                _ => (k << 40) | low,
            };
            if step.is_multiple_of(3) {
                assert_eq!(t.remove(h), m.remove(&stored(h)), "remove {h} at {step}");
            } else {
                assert_eq!(t.insert(h, step), m.insert(stored(h), step), "insert {h} at {step}");
            }
            assert_eq!(t.len(), m.len());
            if step.is_multiple_of(997) {
                let mut all: Vec<_> = t.iter().collect();
                all.sort_unstable();
                let mut want: Vec<_> = m.iter().map(|(h, l)| (*h, *l)).collect();
                want.sort_unstable();
                assert_eq!(all, want);
                assert!(m.iter().all(|(h, l)| t.get(*h) == Some(*l)));
            }
        }
        assert!(t.len() <= t.capacity() && t.capacity() < t.slots.len());
    }

    #[test]
    fn sized_to_hold_what_was_asked_and_no_more_than_twice() {
        for n in [0, 1, 6, 7, 1_000, 12_288, 12_289] {
            let t = HashIndex::with_capacity(n);
            assert!(t.capacity() >= n && (n < 6 || t.capacity() < 2 * n), "{n}: {}", t.capacity());
        }
        let mut t = HashIndex::with_capacity(6);
        (0..7).for_each(|h| _ = t.insert(h + 1, h));
        assert_eq!(t.slots.len(), 16, "grown by doubling");
    }

    #[test]
    fn a_hash_of_zero_is_kept() {
        let mut t = HashIndex::with_capacity(4);
        assert_eq!(t.insert(0, 7), None);
        assert_eq!(t.get(0), Some(7));
        assert_eq!(t.iter().collect::<Vec<_>>(), [(ZERO_AS, 7)]);
        assert_eq!(t.remove(0), Some(7));
        assert_eq!(t.get(0), None);
    }
}
