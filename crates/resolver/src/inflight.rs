//! In-flight coalescing: one upstream query per handle at a time, however
//! many clients ask for it; they all get its answer. The number of handles
//! being asked upstream at once is bounded.

use std::collections::HashMap;
use std::future::Future;
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use tokio::sync::OnceCell;

pub struct InFlight<K, V> {
    pending: Mutex<HashMap<K, Arc<OnceCell<V>>>>,
    max: usize,
}

/// More handles are being asked upstream than the bound allows.
#[derive(Debug)]
pub struct Busy;

impl<K: Hash + Eq + Clone, V: Clone> InFlight<K, V> {
    pub fn new(max: usize) -> Self {
        InFlight { pending: Mutex::default(), max: max.max(1) }
    }

    fn pending(&self) -> std::sync::MutexGuard<'_, HashMap<K, Arc<OnceCell<V>>>> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queries under way.
    pub fn len(&self) -> usize {
        self.pending().len()
    }

    /// The answer for `key`: from the query already under way (then `true`:
    /// coalesced), else from `fetch`. Should the asker running the query go
    /// away, one of those waiting takes it over with its own `fetch`.
    pub async fn run<F, Fut>(&self, key: K, fetch: F) -> Result<(V, bool), Busy>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = V>,
    {
        let (cell, joined) = {
            let mut pending = self.pending();
            match pending.get(&key) {
                Some(cell) => (cell.clone(), true),
                None if pending.len() >= self.max => return Err(Busy),
                None => {
                    let cell = Arc::new(OnceCell::new());
                    pending.insert(key.clone(), cell.clone());
                    (cell, false)
                }
            }
        };
        // The one who registered the query takes it off when done (or gone).
        let _done = (!joined).then(|| Done { owner: self, key, cell: cell.clone() });
        let value = cell.get_or_init(fetch).await.clone();
        Ok((value, joined))
    }
}

struct Done<'a, K: Hash + Eq, V> {
    owner: &'a InFlight<K, V>,
    key: K,
    cell: Arc<OnceCell<V>>,
}

impl<K: Hash + Eq, V> Drop for Done<'_, K, V> {
    fn drop(&mut self) {
        let mut pending = self.owner.pending.lock().unwrap_or_else(|e| e.into_inner());
        if pending.get(&self.key).is_some_and(|c| Arc::ptr_eq(c, &self.cell)) {
            pending.remove(&self.key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    #[tokio::test]
    async fn many_askers_one_fetch_and_a_bound() {
        let flight = Arc::new(InFlight::<String, u32>::new(2));
        let fetches = Arc::new(AtomicUsize::new(0));
        let mut askers = Vec::new();
        for _ in 0..100 {
            let (flight, fetches) = (flight.clone(), fetches.clone());
            askers.push(tokio::spawn(async move {
                flight
                    .run("a".to_string(), || async {
                        fetches.fetch_add(1, Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        7
                    })
                    .await
                    .unwrap()
            }));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        let other = flight.clone();
        let b = tokio::spawn(async move {
            other
                .run("b".into(), || async {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    1
                })
                .await
                .unwrap()
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(flight.run("c".into(), || async { 3 }).await.is_err(), "a third handle at once is refused");
        let mut joined = 0;
        for a in askers {
            let (value, was_joined) = a.await.unwrap();
            assert_eq!(value, 7);
            joined += usize::from(was_joined);
        }
        assert_eq!(fetches.load(Ordering::SeqCst), 1);
        assert_eq!(joined, 99);
        assert_eq!(b.await.unwrap(), (1, false));
        assert_eq!(flight.len(), 0, "nothing left pending");
    }

    /// The first asker goes away mid-query: a waiting one finishes it.
    #[tokio::test]
    async fn a_waiter_takes_over_from_a_cancelled_asker() {
        let flight = Arc::new(InFlight::<&str, u32>::new(4));
        let first = {
            let flight = flight.clone();
            tokio::spawn(async move {
                flight
                    .run("a", || async {
                        tokio::time::sleep(Duration::from_secs(60)).await;
                        1
                    })
                    .await
                    .unwrap()
            })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        let second = {
            let flight = flight.clone();
            tokio::spawn(async move { flight.run("a", || async { 2 }).await.unwrap() })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        first.abort();
        let (value, joined) = tokio::time::timeout(Duration::from_secs(5), second).await.unwrap().unwrap();
        assert_eq!((value, joined), (2, true));
        assert_eq!(flight.len(), 0);
    }
}
