//! [`DocumentStore`]: named collections of opaque bodies with secondary indexes.

use crate::{DocExpect, DocOutcome, Document, IndexHit, IndexMatch, StoreError};

/// Documents: a document lives in a `collection` under an `id` (bytes);
/// collections are independent name spaces and need no creation. Each document
/// carries a set of [`crate::IndexEntry`]s (index name, key); the store
/// maintains the indexes itself: a write removes the entries of the document
/// it replaces and adds the new ones in the same atomic step, so a lookup never
/// sees an entry without its document or a document state's entries mixed with
/// another state's. Still no multi-key transactions: a partitioned backend
/// keeps one table of documents and one of index entries (materialized-view
/// style) and writes both in one lightweight transaction per document.
///
/// The domain registry, the reverse-lookup index (`/hrls`), shared sessions and
/// challenges and the cluster's leases are built on them. A backend without
/// documents (one bound to a foreign schema) keeps every default, which refuses
/// with [`StoreError::Unsupported`], and says `documents: false` in its
/// [`crate::Capabilities`].
#[async_trait::async_trait]
pub trait DocumentStore: Send + Sync + 'static {
    /// Read one document (body and index entries, entries sorted).
    async fn doc_get(&self, collection: &str, id: &[u8]) -> Result<Option<Document>, StoreError> {
        let _ = (collection, id);
        Err(no_documents())
    }

    /// Atomic compare-and-set of one document and its index entries: write `new`
    /// (`None` = delete it and its entries) if the current document matches
    /// `expect`. Durable before `Ok` on durable backends (the embedded store
    /// group-commits these with every other write). Same outcomes as
    /// [`crate::RecordStore::swap`].
    async fn doc_swap(
        &self,
        collection: &str,
        id: &[u8],
        expect: DocExpect,
        new: Option<Document>,
    ) -> Result<DocOutcome, StoreError> {
        let _ = (collection, id, expect, new);
        Err(no_documents())
    }

    /// Index entries of `collection` under index `index` whose key matches `key`
    /// (exactly, or starting with a prefix), in (key, id) order, strictly after
    /// `start_after`, at most `limit`. Page with the last hit of a page. Keys sort
    /// bytewise, so big-endian numbers give range scans (e.g. deadlines).
    async fn doc_lookup(
        &self,
        collection: &str,
        index: &str,
        key: IndexMatch<'_>,
        start_after: Option<&IndexHit>,
        limit: usize,
    ) -> Result<Vec<IndexHit>, StoreError> {
        let _ = (collection, index, key, start_after, limit);
        Err(no_documents())
    }

    /// Documents of `collection` whose id starts with `prefix`, in id order,
    /// strictly after `start_after`, at most `limit` (maintenance and start-up
    /// only: request paths use lookups).
    async fn doc_scan(
        &self,
        collection: &str,
        prefix: &[u8],
        start_after: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Document)>, StoreError> {
        let _ = (collection, prefix, start_after, limit);
        Err(no_documents())
    }
}

/// What the defaults of [`DocumentStore`] answer.
pub fn no_documents() -> StoreError {
    StoreError::Unsupported("this store backend keeps no documents".into())
}
