//! [`EmbeddedStore`]'s seams: reads from the latest snapshot on the caller,
//! writes through the group-committing writer.

use super::*;

#[async_trait::async_trait]
impl RecordStore for EmbeddedStore {
    async fn get(&self, key: &[u8]) -> Result<Option<HandleRecord>, StoreError> {
        // The hot path: borrow the snapshot without touching its reference count.
        let guard = self.shared.snapshot.load();
        let fallback;
        let view = match guard.as_deref() {
            Some(s) => s,
            None => {
                let keydir = self.shared.keydir.load_full();
                fallback = View::new(Arc::new(Snapshot::open(&*self.database()?, keydir.as_ref())?));
                &fallback
            }
        };
        // Written since the last checkpoint: a layer has it.
        if let Some(v) = view.overlaid(TableId::Handles, key) {
            return match v {
                Some(v) => HandleRecord::decode_stored(key, format::unseal("handle", key, v)?).map(Some),
                None => Ok(None),
            };
        }
        // The key directory holds everything checkpointed (only the fallback
        // view, a fresh snapshot, may be ahead of it).
        if guard.is_some() {
            if let Some(kd) = &*self.shared.keydir.load() {
                match kd.get(key) {
                    // redb holds the same record (no layer has a newer one), or
                    // its location, which gives the same error.
                    Err(StoreError::Corrupt(m)) => tracing::warn!("{m}; read again through the store file"),
                    other => return other,
                }
            }
        }
        match view.snap.handle(key)? {
            Some(v) => HandleRecord::decode_stored(key, format::unseal("handle", key, &v)?).map(Some),
            None => Ok(None),
        }
    }

    async fn swap_with_docs(
        &self,
        key: &[u8],
        expect: Expect,
        new: Option<HandleRecord>,
        doc_writes: Vec<DocWrite>,
    ) -> Result<SwapOutcome, StoreError> {
        if let Some(r) = &new {
            r.validate()?;
        }
        let docs = doc_writes.into_iter().map(docs::write_op).collect::<Result<Vec<_>, _>>()?;
        let (raw_expect, expected) = match expect {
            Expect::Absent => (RawExpect::Absent, None),
            Expect::Any => (RawExpect::Any, None),
            Expect::Present(r) => (RawExpect::Present(r.encode()), Some(r)),
        };
        let op = Op::Swap { key: key.to_vec(), expect: raw_expect, new: new.map(|r| r.encode()), docs };
        let raw = self.submit(op, Reply::Swap).await?;
        Ok(match raw {
            RawOutcome::DoneAsExpected => SwapOutcome::Done { previous: expected },
            RawOutcome::Done { previous: None } => SwapOutcome::Done { previous: None },
            RawOutcome::Done { previous: Some(b) } => {
                // Only `Expect::Any` gets here: the write happened, so a previous
                // record that no longer decodes is reported as unknown, not as an error.
                let previous = match HandleRecord::decode_stored(key, &b) {
                    Ok(r) => Some(r),
                    Err(e) => {
                        tracing::warn!("overwrote undecodable record: {e}");
                        None
                    }
                };
                SwapOutcome::Done { previous }
            }
            RawOutcome::Damaged(e) => return Err(e),
            RawOutcome::Conflict { current: None } => SwapOutcome::Conflict { current: None },
            RawOutcome::Conflict { current: Some(b) } => {
                SwapOutcome::Conflict { current: Some(HandleRecord::decode_stored(key, &b)?) }
            }
        })
    }

    async fn scan_keys(
        &self,
        prefix: &[u8],
        start_after: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<Vec<u8>>, StoreError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let view = self.snapshot()?;
        let mut out = Vec::new();
        for item in view.range(TableId::Handles, scan_start(prefix, start_after))? {
            let (k, _) = item?;
            if !k.starts_with(prefix) {
                break;
            }
            out.push(k);
            if out.len() >= limit {
                break;
            }
        }
        Ok(out)
    }

    async fn put_many_with_docs(
        &self,
        records: Vec<(Vec<u8>, HandleRecord)>,
        doc_writes: Vec<DocWrite>,
    ) -> Result<(), StoreError> {
        for (_, r) in &records {
            r.validate()?;
        }
        let docs = doc_writes.into_iter().map(docs::write_op).collect::<Result<Vec<_>, _>>()?;
        // Encode and sort here, on the caller, to keep the writer thread free. The
        // sort is stable so the later of two equal keys is inserted last and wins.
        let mut encoded: Vec<(Vec<u8>, Vec<u8>)> = records.into_iter().map(|(k, r)| (k, r.encode())).collect();
        if !encoded.is_sorted_by(|a, b| a.0 <= b.0) {
            encoded.sort_by(|a, b| a.0.cmp(&b.0));
        }
        self.submit(Op::Import { records: encoded, docs }, Reply::Unit).await
    }

    async fn meta_get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        match self.snapshot()?.get(TableId::Meta, key.as_bytes())? {
            Some(v) => Ok(Some(format::unseal("metadata", key.as_bytes(), &v)?.to_vec())),
            None => Ok(None),
        }
    }

    async fn meta_put(&self, key: &str, value: Option<Vec<u8>>) -> Result<(), StoreError> {
        self.submit(Op::Meta { key: key.to_owned(), value }, Reply::Unit).await
    }

    async fn meta_scan(&self, prefix: &str) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        let view = self.snapshot()?;
        let mut out = Vec::new();
        for item in view.range(TableId::Meta, Bound::Included(prefix.as_bytes()))? {
            let (k, v) = item?;
            if !k.starts_with(prefix.as_bytes()) {
                break;
            }
            let payload = format::unseal("metadata", &k, &v)?.to_vec();
            let k = String::from_utf8(k).map_err(|_| StoreError::Corrupt("metadata key is not UTF-8".into()))?;
            out.push((k, payload));
        }
        Ok(out)
    }

    async fn count(&self) -> Result<u64, StoreError> {
        self.snapshot()?.count_handles()
    }
}

#[async_trait::async_trait]
impl DocumentStore for EmbeddedStore {
    async fn doc_get(&self, collection: &str, id: &[u8]) -> Result<Option<Document>, StoreError> {
        docs::get(&*self.snapshot()?, collection, id)
    }

    async fn doc_swap(
        &self,
        collection: &str,
        id: &[u8],
        expect: DocExpect,
        new: Option<Document>,
    ) -> Result<DocOutcome, StoreError> {
        let op = docs::swap_op(collection, id, expect, new)?;
        let raw = self.submit(op, Reply::Swap).await?;
        docs::outcome(raw)
    }

    async fn doc_lookup(
        &self,
        collection: &str,
        index: &str,
        key: IndexMatch<'_>,
        start_after: Option<&IndexHit>,
        limit: usize,
    ) -> Result<Vec<IndexHit>, StoreError> {
        docs::lookup(&*self.snapshot()?, collection, index, key, start_after, limit)
    }

    async fn doc_scan(
        &self,
        collection: &str,
        prefix: &[u8],
        start_after: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Document)>, StoreError> {
        docs::scan(&*self.snapshot()?, collection, prefix, start_after, limit)
    }
}

#[async_trait::async_trait]
impl TxnLogStore for EmbeddedStore {
    async fn txn_log_read(&self, after: u64, limit: usize) -> Result<Vec<TxnEntry>, StoreError> {
        txnlog::read(&*self.snapshot()?, after, limit)
    }

    async fn txn_log_bounds(&self) -> Result<TxnLogBounds, StoreError> {
        txnlog::bounds(&*self.snapshot()?)
    }

    async fn txn_log_prune(&self, before_ms: u64) -> Result<u64, StoreError> {
        // A chunk per writer operation, so other writes go on in between.
        let mut total = 0;
        loop {
            let n = self.submit(Op::TxnLog(LogOp::Prune { before_ms }), Reply::Count).await?;
            total += n;
            if n < txnlog::PRUNE_CHUNK as u64 {
                return Ok(total);
            }
        }
    }

    fn txn_log_subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.shared.txn_notifier.subscribe()
    }

    async fn apply_replicated_with_docs(
        &self,
        changes: Vec<ReplicatedChange>,
        progress: Vec<(String, Option<Vec<u8>>)>,
        doc_writes: Vec<DocWrite>,
    ) -> Result<(), StoreError> {
        let docs = doc_writes.into_iter().map(docs::write_op).collect::<Result<Vec<_>, _>>()?;
        let op = LogOp::replicated(changes, docs, progress)?;
        self.submit(Op::TxnLog(op), Reply::Unit).await
    }

    async fn txn_log_reset(&self, id: u64) -> Result<(), StoreError> {
        self.submit(Op::TxnLog(LogOp::Reset { id }), Reply::Unit).await
    }
}

#[async_trait::async_trait]
impl StoreAdmin for EmbeddedStore {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            shared: false,
            durable: true,
            documents: true,
            txn_log: true,
            backup: Backup::Export,
            read_only: false,
            remote: false,
        }
    }

    fn stats(&self) -> StoreStats {
        self.shared.stats.snapshot()
    }

    fn writable(&self) -> Result<(), StoreError> {
        if let Some(m) = &*self.shared.fatal.lock() {
            return Err(StoreError::Backend(m.clone()));
        }
        if self.tx.lock().is_none() {
            return Err(StoreError::Closed);
        }
        self.space.check()
    }

    fn warming(&self) -> Option<crate::Warming> {
        self.warmer.progress()
    }

    fn close(&self) {
        self.shutdown();
    }

    fn export(&self) -> Result<Box<dyn crate::backup::StoreExport>, StoreError> {
        Ok(Box::new(backup::EmbeddedExport::new(self.snapshot()?)))
    }

    async fn checkpoint(&self) -> Result<(), StoreError> {
        self.submit(Op::TxnLog(LogOp::Checkpoint), Reply::Unit).await
    }
}
