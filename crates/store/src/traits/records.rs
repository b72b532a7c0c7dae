//! [`RecordStore`]: handles and small server metadata, the part every backend has.

use crate::txn_log::{homed_meta_key, HOMED_META_PREFIX};
use crate::{DocWrite, Expect, HandleRecord, IndexHit, IndexMatch, StoreError, SwapOutcome};

/// Longest value data (and type) a search by value finds: longer values are
/// not searchable, whichever way the search runs.
pub const MAX_SEARCHED_LEN: usize = 2048;

/// Handle records by storage key, and server metadata. Keys are opaque bytes
/// (the server passes normalized handles) and sort bytewise.
///
/// Atomicity is per handle only (compare-and-set through [`RecordStore::swap`],
/// which maps onto a lightweight transaction on a partitioned backend);
/// documents derived from a handle may ride along in the same step. Listing is
/// a key-prefix scan with paging.
#[async_trait::async_trait]
pub trait RecordStore: Send + Sync + 'static {
    /// Point read by storage key (the server passes the normalized handle bytes).
    async fn get(&self, key: &[u8]) -> Result<Option<HandleRecord>, StoreError>;

    /// Atomic compare-and-set of one handle: write `new` (`None` = delete) if the
    /// current state matches `expect`. Durable before it returns `Ok` on durable
    /// backends. Deleting an absent handle with `Expect::Any` is `Done { previous: None }`.
    async fn swap(&self, key: &[u8], expect: Expect, new: Option<HandleRecord>) -> Result<SwapOutcome, StoreError> {
        self.swap_with_docs(key, expect, new, Vec::new()).await
    }

    /// [`RecordStore::swap`], and if it is done, the document writes `docs` in
    /// the same atomic step (one commit: a crash keeps both or neither). For
    /// documents derived from the handle's state, such as index entries, so
    /// they never disagree with it. Wrappers override this method, not `swap`,
    /// so every handle write goes through one path. A backend without
    /// documents refuses a non-empty `docs` with [`StoreError::Unsupported`].
    async fn swap_with_docs(
        &self,
        key: &[u8],
        expect: Expect,
        new: Option<HandleRecord>,
        docs: Vec<DocWrite>,
    ) -> Result<SwapOutcome, StoreError>;

    /// Keys starting with `prefix`, in key order, strictly after `start_after`, at
    /// most `limit`. Page by passing the last key of a page as the next
    /// `start_after`. (The server scans `<PREFIX>/`-style prefixes; a partitioned
    /// backend can map the part before `/` to its partition and keep the rest
    /// sorted within it.)
    async fn scan_keys(
        &self,
        prefix: &[u8],
        start_after: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<Vec<u8>>, StoreError>;

    /// Handles having a value of type `value_type` whose data matches `data`
    /// (exactly, or starting with a prefix), as hits of (data, key) in that
    /// order, strictly after `start_after`, at most `limit`: the reverse lookup
    /// (`/hrls`) of a backend that searches its own rows through an index of
    /// its own (Handle.Net's SQL tables and their `dataindex`). Compared as the
    /// backend compares bytes: exactly, case included. Data longer than
    /// [`MAX_SEARCHED_LEN`] is never found (nor indexed by the server: one
    /// bound for both ways of searching, and for what a batch may hold). The
    /// others keep this default, which refuses: the server keeps its own index
    /// in documents.
    async fn find_by_value(
        &self,
        value_type: &[u8],
        data: IndexMatch<'_>,
        start_after: Option<&IndexHit>,
        limit: usize,
    ) -> Result<Vec<IndexHit>, StoreError> {
        let _ = (value_type, data, start_after, limit);
        Err(StoreError::Unsupported("this store backend has no search by value of its own".into()))
    }

    /// Bulk load (import): overwrite these records, no CAS; durable on return. If a
    /// key appears twice the later record wins. Callers should pass sorted chunks of
    /// some thousands of records.
    async fn put_many(&self, records: Vec<(Vec<u8>, HandleRecord)>) -> Result<(), StoreError> {
        self.put_many_with_docs(records, Vec::new()).await
    }

    /// [`RecordStore::put_many`] plus document writes, all in the same atomic
    /// step (documents after records). Wrappers override this one, not `put_many`.
    async fn put_many_with_docs(
        &self,
        records: Vec<(Vec<u8>, HandleRecord)>,
        docs: Vec<DocWrite>,
    ) -> Result<(), StoreError>;

    /// Small server metadata (site serial, replication progress).
    async fn meta_get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError>;
    /// Set (`Some`) or delete (`None`) a metadata entry; durable on return.
    async fn meta_put(&self, key: &str, value: Option<Vec<u8>>) -> Result<(), StoreError>;
    /// Metadata entries whose key starts with `prefix`, in key order.
    async fn meta_scan(&self, prefix: &str) -> Result<Vec<(String, Vec<u8>)>, StoreError>;

    /// Approximate number of handles.
    async fn count(&self) -> Result<u64, StoreError>;

    /// Home (`true`) or unhome (`false`) the prefix handle `prefix_handle`
    /// (normalized `0.NA/X`); durable on return, logged as HOME_NA / UNHOME_NA
    /// by a backend with a transaction log. By default a meta entry under
    /// [`HOMED_META_PREFIX`] (which the built-in backends log); a backend that
    /// keeps homed prefixes elsewhere (Handle.Net's `nas` table) overrides
    /// this and [`RecordStore::homed_prefixes`] together. Wrappers forward both.
    async fn home(&self, prefix_handle: &[u8], homed: bool) -> Result<(), StoreError> {
        self.meta_put(&homed_meta_key(prefix_handle), homed.then(Vec::new)).await
    }

    /// The homed prefix handles, in byte order.
    async fn homed_prefixes(&self) -> Result<Vec<Vec<u8>>, StoreError> {
        let entries = self.meta_scan(HOMED_META_PREFIX).await?;
        Ok(entries.into_iter().map(|(k, _)| k.as_bytes()[HOMED_META_PREFIX.len()..].to_vec()).collect())
    }
}
