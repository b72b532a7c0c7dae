//! Resolutions run where nothing may wait on the network: the UDP receive
//! thread answers a REC request for a remote handle inline only when the
//! resolver's cache holds it (`Resolver::has_fresh`), and runs it inside
//! [`cache_only`], so that the recursive source answers from the cache alone
//! (`Resolver::cached`) even should the entry expire in between. A thread
//! flag rather than a parameter: it is a property of the thread, set by the
//! one loop that needs it, around futures polled on that thread by `block_on`.

use std::cell::Cell;

thread_local! {
    static CACHE_ONLY: Cell<bool> = const { Cell::new(false) };
}

/// Run `f` with resolutions on this thread limited to the resolver's cache.
pub fn cache_only<R>(f: impl FnOnce() -> R) -> R {
    struct Reset(bool);
    impl Drop for Reset {
        fn drop(&mut self) {
            CACHE_ONLY.with(|c| c.set(self.0));
        }
    }
    let _reset = Reset(CACHE_ONLY.with(|c| c.replace(true)));
    f()
}

/// Is this thread inside [`cache_only`]?
pub fn is_cache_only() -> bool {
    CACHE_ONLY.with(Cell::get)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_inside_only_and_reset_after_a_panic() {
        assert!(!is_cache_only());
        assert!(cache_only(is_cache_only));
        assert!(!is_cache_only());
        let caught = std::panic::catch_unwind(|| cache_only(|| panic!("inside")));
        assert!(caught.is_err());
        assert!(!is_cache_only(), "reset on unwind");
        std::thread::spawn(|| assert!(!is_cache_only())).join().unwrap();
    }
}
