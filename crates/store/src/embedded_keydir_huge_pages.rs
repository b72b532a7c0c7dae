//! The allocator of the key directory's hash (issue 45): a table of 4 MiB or
//! more (`embedded_keydir_table.rs`) gets an anonymous mapping of its own, advised to use transparent huge
//! pages; smaller ones come from the global allocator.
//!
//! Why: at 30M handles the hash is ~1 GB probed at random, so on 4 KiB pages
//! nearly every probe also misses the TLB and walks the page tables (measured
//! at 30M, the store alone: 1.37–1.63 µs a get against 1.67–1.81 with huge
//! pages refused, BENCHMARKS.md). Where THP is `madvise`-only,
//! as on many distributions, nothing but this advice gets them: the server's
//! allocator does not give it. The advice is a request; where the kernel
//! declines it the table works as before.

use std::ptr::NonNull;

use allocator_api2::alloc::{AllocError, Allocator, Global, Layout};

/// Tables this large, or larger, get a mapping of their own.
const OWN_MAPPING: usize = 4 << 20;
/// What `mmap` aligns to at the least (the smallest page size of any host).
const MAP_ALIGN: usize = 4096;

#[derive(Clone, Copy, Debug, Default)]
pub(super) struct HugePages;

fn own_mapping(layout: Layout) -> bool {
    cfg!(unix) && layout.size() >= OWN_MAPPING && layout.align() <= MAP_ALIGN
}

// SAFETY: blocks come from mmap (released by munmap with the same length) or
// from Global (released to it); which one is decided by the layout alone, and
// deallocate is given the layout the block was allocated with.
unsafe impl Allocator for HugePages {
    fn allocate(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocError> {
        if !own_mapping(layout) {
            return Global.allocate(layout);
        }
        map(layout.size())
    }

    unsafe fn deallocate(&self, ptr: NonNull<u8>, layout: Layout) {
        if !own_mapping(layout) {
            // SAFETY: allocated by Global with this layout (the caller's contract).
            return unsafe { Global.deallocate(ptr, layout) };
        }
        unmap(ptr, layout.size());
    }
}

#[cfg(unix)]
fn map(len: usize) -> Result<NonNull<[u8]>, AllocError> {
    let (prot, flags) = (libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS);
    // SAFETY: a fresh anonymous mapping at an address the kernel picks.
    let p = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, flags, -1, 0) };
    if p == libc::MAP_FAILED {
        return Err(AllocError);
    }
    // A failure (no THP in this kernel) leaves ordinary pages: nothing to undo.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    // SAFETY: advice on the mapping just made.
    unsafe {
        libc::madvise(p, len, libc::MADV_HUGEPAGE);
    }
    let p = NonNull::new(p.cast::<u8>()).ok_or(AllocError)?;
    Ok(NonNull::slice_from_raw_parts(p, len))
}

#[cfg(unix)]
fn unmap(ptr: NonNull<u8>, len: usize) {
    // SAFETY: `ptr` is a mapping of `len` bytes made by `map` and no longer used.
    if unsafe { libc::munmap(ptr.as_ptr().cast(), len) } != 0 {
        tracing::warn!("key directory: munmap of {len} bytes failed: {}", std::io::Error::last_os_error());
    }
}

#[cfg(not(unix))]
fn map(_: usize) -> Result<NonNull<[u8]>, AllocError> {
    unreachable!("own_mapping is false off unix")
}

#[cfg(not(unix))]
fn unmap(_: NonNull<u8>, _: usize) {
    unreachable!("own_mapping is false off unix")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_blocks_are_mapped_small_ones_are_not() {
        let large = Layout::from_size_align(OWN_MAPPING, 16).unwrap();
        assert_eq!(own_mapping(large), cfg!(unix));
        assert!(!own_mapping(Layout::from_size_align(OWN_MAPPING - 1, 16).unwrap()));
        assert!(!own_mapping(Layout::from_size_align(OWN_MAPPING, 2 * MAP_ALIGN).unwrap()));
        for layout in [large, Layout::from_size_align(100, 8).unwrap()] {
            let block = HugePages.allocate(layout).unwrap();
            // SAFETY: `block` holds at least layout.size() writable bytes.
            let bytes = unsafe { std::slice::from_raw_parts_mut(block.cast::<u8>().as_ptr(), layout.size()) };
            bytes.fill(0xa5);
            assert!(bytes.iter().all(|b| *b == 0xa5));
            // SAFETY: allocated just above with this layout.
            unsafe { HugePages.deallocate(block.cast(), layout) };
        }
    }
}
