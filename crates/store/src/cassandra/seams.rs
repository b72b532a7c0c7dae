//! [`CassandraStore`]'s seams: each call checked open, counted, and mapped
//! onto the rows, entries and transaction-log tables of the other files.

use super::*;

#[async_trait::async_trait]
impl RecordStore for CassandraStore {
    async fn get(&self, key: &[u8]) -> Result<Option<HandleRecord>, StoreError> {
        self.check_open()?;
        let row = self.rows.read_row(&self.session, &pk(key), HANDLE_COLL).await?;
        row.body().map(|b| HandleRecord::decode_stored(key, b)).transpose()
    }

    async fn swap_with_docs(
        &self,
        key: &[u8],
        expect: Expect,
        new: Option<HandleRecord>,
        docs: Vec<DocWrite>,
    ) -> Result<SwapOutcome, StoreError> {
        self.counted(self.swap_uncounted(key, expect, new, docs, true)).await
    }

    async fn scan_keys(
        &self,
        prefix: &[u8],
        start_after: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<Vec<u8>>, StoreError> {
        let after = start_after.map(|k| IndexHit { key: k.to_vec(), id: k.to_vec() });
        let hits =
            self.lookup_checked(HANDLE_COLL, LISTING_IDX, IndexMatch::Prefix(prefix), after.as_ref(), limit).await?;
        Ok(hits.into_iter().map(|(h, _)| h.id).collect())
    }

    async fn put_many_with_docs(
        &self,
        records: Vec<(Vec<u8>, HandleRecord)>,
        docs: Vec<DocWrite>,
    ) -> Result<(), StoreError> {
        self.check_open()?;
        for (_, r) in &records {
            r.validate()?;
        }
        let n = records.len() as u64;
        // Later duplicates win, as in a sequential load; each record is its own
        // transaction, together with the documents that share its key.
        let mut by_key: std::collections::BTreeMap<Vec<u8>, (Option<HandleRecord>, Vec<DocWrite>)> = Default::default();
        for (k, r) in records {
            by_key.entry(k).or_default().0 = Some(r);
        }
        let mut rest = Vec::new();
        for d in docs {
            match by_key.get_mut(&d.id) {
                Some((_, ds)) => ds.push(d),
                None => rest.push(d),
            }
        }
        stream::iter(by_key)
            .map(|(k, (r, ds))| async move { self.swap_uncounted(&k, Expect::Any, r, ds, true).await.map(|_| ()) })
            .buffer_unordered(32)
            .try_collect::<Vec<()>>()
            .await?;
        self.write_foreign_docs(rest).await?;
        self.stats.committed(0, n, true, 0);
        Ok(())
    }

    async fn meta_get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        self.check_open()?;
        self.rows.meta_get(&self.session, key).await
    }

    async fn meta_put(&self, key: &str, value: Option<Vec<u8>>) -> Result<(), StoreError> {
        self.check_open()?;
        let started = Instant::now();
        let result = match &self.txn {
            Some(txn) if key.starts_with(HOMED_META_PREFIX) => txn.homed_put(key, value, true).await,
            _ => self.rows.meta_put(&self.session, key, value).await,
        };
        match &result {
            Ok(()) => self.stats.committed(1, 0, true, started.elapsed().as_micros() as u64),
            Err(_) => self.stats.failed(1),
        }
        result
    }

    async fn meta_scan(&self, prefix: &str) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        self.check_open()?;
        self.rows.meta_scan(&self.session, prefix).await
    }

    async fn count(&self) -> Result<u64, StoreError> {
        self.check_open()?;
        self.rows.count(&self.session).await
    }
}

#[async_trait::async_trait]
impl DocumentStore for CassandraStore {
    async fn doc_get(&self, collection: &str, id: &[u8]) -> Result<Option<Document>, StoreError> {
        self.check_open()?;
        let row = self.rows.read_row(&self.session, &pk(id), collection).await?;
        row.body().map(Document::decode).transpose()
    }

    async fn doc_swap(
        &self,
        collection: &str,
        id: &[u8],
        expect: DocExpect,
        new: Option<Document>,
    ) -> Result<DocOutcome, StoreError> {
        self.counted(self.doc_write(collection, id, expect, new)).await
    }

    async fn doc_lookup(
        &self,
        collection: &str,
        index: &str,
        key: IndexMatch<'_>,
        start_after: Option<&IndexHit>,
        limit: usize,
    ) -> Result<Vec<IndexHit>, StoreError> {
        if index.starts_with('\0') {
            return Ok(Vec::new());
        }
        let hits = self.lookup_checked(collection, index, key, start_after, limit).await?;
        Ok(hits.into_iter().map(|(h, _)| h).collect())
    }

    async fn doc_scan(
        &self,
        collection: &str,
        prefix: &[u8],
        start_after: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Document)>, StoreError> {
        let after = start_after.map(|k| IndexHit { key: k.to_vec(), id: k.to_vec() });
        let hits =
            self.lookup_checked(collection, LISTING_IDX, IndexMatch::Prefix(prefix), after.as_ref(), limit).await?;
        hits.into_iter().map(|(h, body)| Ok((h.id, Document::decode(&body)?))).collect()
    }
}

#[async_trait::async_trait]
impl TxnLogStore for CassandraStore {
    async fn txn_log_read(&self, after: u64, limit: usize) -> Result<Vec<TxnEntry>, StoreError> {
        self.txn()?.read(after, limit).await
    }

    async fn txn_log_bounds(&self) -> Result<TxnLogBounds, StoreError> {
        self.txn()?.bounds().await
    }

    async fn txn_log_prune(&self, before_ms: u64) -> Result<u64, StoreError> {
        self.txn()?.prune(before_ms).await
    }

    fn txn_log_subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        match &self.txn {
            Some(txn) => txn.notifier.subscribe(),
            None => crate::traits::never_moves(),
        }
    }

    async fn apply_replicated_with_docs(
        &self,
        changes: Vec<ReplicatedChange>,
        progress: Vec<(String, Option<Vec<u8>>)>,
        docs: Vec<DocWrite>,
    ) -> Result<(), StoreError> {
        if changes.iter().any(|c| c.priority.is_some()) {
            return Err(crate::traits::no_multi_primary());
        }
        let txn = self.txn()?;
        self.apply_pulled(txn, changes, progress, docs).await
    }

    async fn txn_log_reset(&self, id: u64) -> Result<(), StoreError> {
        self.txn()?.reset(id).await
    }
}

#[async_trait::async_trait]
impl StoreAdmin for CassandraStore {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            shared: true,
            durable: true,
            documents: true,
            txn_log: self.txn.is_some(),
            backup: Backup::Refused(
                "this server's store is Apache Cassandra: back it up with Cassandra's own tools \
                 (`nodetool snapshot KEYSPACE` on every node, then copy the snapshot directories); \
                 the site key is kept in the store",
            ),
            read_only: false,
            remote: true,
        }
    }

    fn stats(&self) -> StoreStats {
        self.stats.snapshot()
    }

    fn writable(&self) -> Result<(), StoreError> {
        Ok(())
    }

    fn close(&self) {
        self.closed.store(true, Ordering::Release);
        if let Some(txn) = &self.txn {
            txn.close();
        }
    }

    async fn checkpoint(&self) -> Result<(), StoreError> {
        // Every acknowledged write is already in the cluster at the consistency it
        // was written with; there is no local file to checkpoint.
        self.check_open()
    }
}
