//! In-memory backend: for `--ephemeral` runs and tests. Same semantics as the
//! durable one, nothing survives the process.

use std::collections::BTreeMap;
use std::ops::Bound;

use parking_lot::RwLock;

use crate::{scan_start, Expect, HandleRecord, StatCounters, Store, StoreError, StoreStats, SwapOutcome};

/// A `BTreeMap` of handles and one of metadata, each behind a reader-writer lock.
#[derive(Debug, Default)]
pub struct MemoryStore {
    handles: RwLock<BTreeMap<Vec<u8>, HandleRecord>>,
    meta: RwLock<BTreeMap<String, Vec<u8>>>,
    stats: StatCounters,
    closed: std::sync::atomic::AtomicBool,
}

impl MemoryStore {
    pub fn new() -> Self {
        Self::default()
    }

    fn check_open(&self) -> Result<(), StoreError> {
        if self.closed.load(std::sync::atomic::Ordering::Acquire) {
            return Err(StoreError::Closed);
        }
        Ok(())
    }
}

#[async_trait::async_trait]
impl Store for MemoryStore {
    async fn get(&self, key: &[u8]) -> Result<Option<HandleRecord>, StoreError> {
        self.check_open()?;
        Ok(self.handles.read().get(key).cloned())
    }

    async fn swap(&self, key: &[u8], expect: Expect, new: Option<HandleRecord>) -> Result<SwapOutcome, StoreError> {
        self.check_open()?;
        if let Some(r) = &new {
            r.validate()?;
        }
        let mut map = self.handles.write();
        let current = map.get(key);
        let ok = match &expect {
            Expect::Any => true,
            Expect::Absent => current.is_none(),
            Expect::Present(r) => current == Some(r),
        };
        if !ok {
            let current = current.cloned();
            drop(map);
            self.stats.committed(1, 0, false, 0);
            return Ok(SwapOutcome::Conflict { current });
        }
        let previous = match new {
            Some(r) => map.insert(key.to_vec(), r),
            None => map.remove(key),
        };
        drop(map);
        self.stats.committed(1, 0, false, 0);
        Ok(SwapOutcome::Done { previous })
    }

    async fn scan_keys(&self, prefix: &[u8], start_after: Option<&[u8]>, limit: usize) -> Result<Vec<Vec<u8>>, StoreError> {
        self.check_open()?;
        let map = self.handles.read();
        Ok(map
            .range::<[u8], _>((scan_start(prefix, start_after), Bound::Unbounded))
            .map(|(k, _)| k)
            .take_while(|k| k.starts_with(prefix))
            .take(limit)
            .cloned()
            .collect())
    }

    async fn put_many(&self, records: Vec<(Vec<u8>, HandleRecord)>) -> Result<(), StoreError> {
        self.check_open()?;
        for (_, r) in &records {
            r.validate()?;
        }
        let n = records.len() as u64;
        let mut map = self.handles.write();
        for (k, r) in records {
            map.insert(k, r);
        }
        drop(map);
        self.stats.committed(0, n, false, 0);
        Ok(())
    }

    async fn meta_get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        self.check_open()?;
        Ok(self.meta.read().get(key).cloned())
    }

    async fn meta_put(&self, key: &str, value: Option<Vec<u8>>) -> Result<(), StoreError> {
        self.check_open()?;
        let mut meta = self.meta.write();
        match value {
            Some(v) => meta.insert(key.to_owned(), v),
            None => meta.remove(key),
        };
        drop(meta);
        self.stats.committed(1, 0, false, 0);
        Ok(())
    }

    async fn meta_scan(&self, prefix: &str) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        self.check_open()?;
        let meta = self.meta.read();
        Ok(meta
            .range::<str, _>((Bound::Included(prefix), Bound::Unbounded))
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect())
    }

    async fn count(&self) -> Result<u64, StoreError> {
        self.check_open()?;
        Ok(self.handles.read().len() as u64)
    }

    fn stats(&self) -> StoreStats {
        self.stats.snapshot()
    }

    fn close(&self) {
        self.closed.store(true, std::sync::atomic::Ordering::Release);
    }
}
