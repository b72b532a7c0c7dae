//! Writes of one node to one partition take turns. Every compare-and-set is a
//! Paxos round; when many requests of one node race on one row (a hot handle
//! taking values, clients creating the same names), they mostly defeat each
//! other's proposals and time out (RC 7) instead of committing. Queued behind a
//! lock per partition, at most one proposal per node is in flight, so the
//! contention left is between nodes. Striped: memory stays fixed, and unrelated
//! keys rarely share a stripe.

use std::hash::BuildHasher;
use tokio::sync::{Mutex, MutexGuard};

/// Enough stripes that the writes in flight on one node (bounded by admission,
/// 64 by default) seldom meet on one by chance.
const STRIPES: usize = 1024;

pub(super) struct KeyLocks {
    stripes: Vec<Mutex<()>>,
    hasher: std::collections::hash_map::RandomState,
}

impl KeyLocks {
    pub(super) fn new() -> Self {
        KeyLocks { stripes: (0..STRIPES).map(|_| Mutex::new(())).collect(), hasher: Default::default() }
    }

    /// Wait for partition `id`'s turn; it ends when the guard is dropped.
    pub(super) async fn turn(&self, id: &[u8]) -> MutexGuard<'_, ()> {
        self.stripes[self.stripe(id)].lock().await
    }

    fn stripe(&self, id: &[u8]) -> usize {
        (self.hasher.hash_one(id) as usize) % STRIPES
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    #[tokio::test]
    async fn one_key_takes_turns_other_keys_do_not_wait() {
        let locks = Arc::new(KeyLocks::new());
        let held = locks.turn(b"hot").await;
        let waiting = {
            let locks = locks.clone();
            tokio::spawn(async move {
                let _t = locks.turn(b"hot").await;
            })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiting.is_finished(), "a second writer of the same key waits");
        let other = (0..64u32).map(u32::to_be_bytes).find(|k| locks.stripe(k) != locks.stripe(b"hot")).unwrap();
        let go = tokio::time::timeout(Duration::from_millis(100), locks.turn(&other)).await;
        assert!(go.is_ok(), "a writer of another key does not wait");
        drop(held);
        tokio::time::timeout(Duration::from_secs(1), waiting).await.unwrap().unwrap();
    }
}
