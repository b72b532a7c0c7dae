//! The memory of the key directory's hash (issue 45): the slots of
//! `embedded_keydir_table.rs` in an anonymous mapping of their own (memmap2),
//! advised to use transparent huge pages once it is 4 MiB or more.
//!
//! Why: at 30M handles the hash is ~1 GB probed at random, so on 4 KiB pages
//! nearly every probe also misses the TLB and walks the page tables (measured
//! at 30M, the store alone: 1.37–1.63 µs a get against 1.67–1.81 with huge
//! pages refused, BENCHMARKS.md). Where THP is `madvise`-only,
//! as on many distributions, nothing but this advice gets them: the server's
//! allocator does not give it. The advice is a request; where the kernel
//! declines it the table works as before. Anonymous pages come zeroed, and a
//! zero slot is an empty one, so a new table is not written before use.

use std::ops::{Deref, DerefMut};

use memmap2::MmapMut;

/// Tables this large, or larger, are advised to use huge pages (smaller ones
/// could not fill one).
const HUGE_PAGE_ADVICE: usize = 4 << 20;

/// A slot: (stored hash, location); all zero is empty.
pub(super) type Slot = [u64; 2];

/// Slots in a mapping of their own.
pub(super) struct Slots {
    map: MmapMut,
}

impl Slots {
    /// `count` (at least one) empty slots.
    pub(super) fn empty(count: usize) -> Slots {
        let layout = std::alloc::Layout::array::<Slot>(count.max(1)).expect("a table that fits in memory");
        let map = MmapMut::map_anon(layout.size()).unwrap_or_else(|e| {
            // Out of memory or address space, where a Vec's allocation would abort too.
            tracing::error!("key directory: no memory for a hash of {} bytes: {e}", layout.size());
            std::alloc::handle_alloc_error(layout)
        });
        #[cfg(any(target_os = "linux", target_os = "android"))]
        if layout.size() >= HUGE_PAGE_ADVICE {
            // A refusal (no THP in this kernel) leaves ordinary pages: nothing to undo.
            let _ = map.advise(memmap2::Advice::HugePage);
        }
        Slots { map }
    }
}

impl Deref for Slots {
    type Target = [Slot];

    fn deref(&self) -> &[Slot] {
        bytemuck::cast_slice(&self.map)
    }
}

impl DerefMut for Slots {
    fn deref_mut(&mut self) -> &mut [Slot] {
        bytemuck::cast_slice_mut(&mut self.map)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_start_empty_and_hold_what_is_written() {
        for count in [8, HUGE_PAGE_ADVICE / 16 + 1] {
            let mut s = Slots::empty(count);
            assert_eq!(s.len(), count);
            assert!(s.iter().all(|slot| *slot == [0, 0]));
            s[count - 1] = [7, 9];
            s[0][1] = 3;
            assert_eq!((s[0], s[count - 1]), ([0, 3], [7, 9]));
        }
    }
}
