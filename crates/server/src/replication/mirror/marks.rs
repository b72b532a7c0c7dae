//! What a redump has seen, kept in the store (a document per handle or homed
//! prefix, written in the same commit as the record it marks), not in memory:
//! a redump of 100M handles held ~7 GB of keys before, and one interrupted by
//! a crash had to start again. Now memory is one page, and a crash resumes
//! the redump where it stopped with its marks.

use crate::replication::ReplicationContext;
use handled_store::{DocWrite, Document, StoreError};

/// The marks' collection.
const SEEN: &str = "replication-mirror-redump-seen";
/// Marks read or removed per page.
const PAGE: usize = 1000;

/// What a mark stands for: a handle's storage key, or a homed prefix's key.
#[derive(Clone, Copy)]
pub enum Kind {
    Handle = b'h' as isize,
    Prefix = b'p' as isize,
}

fn id(kind: Kind, key: &[u8]) -> Vec<u8> {
    let mut id = Vec::with_capacity(key.len() + 1);
    id.push(kind as u8);
    id.extend_from_slice(key);
    id
}

/// The write that marks `key` as seen (for [`super::apply::Batch::mark`]).
pub fn mark(kind: Kind, key: &[u8]) -> DocWrite {
    DocWrite::new(SEEN, id(kind, key), Some(Document::new(Vec::new(), Vec::new())))
}

/// Was `key` seen by the redump under way?
pub async fn seen(state: &ReplicationContext, kind: Kind, key: &[u8]) -> Result<bool, StoreError> {
    Ok(state.uncached_documents().doc_get(SEEN, &id(kind, key)).await?.is_some())
}

/// Remove every mark (before a redump starts afresh, and after its sweep).
pub async fn clear(state: &ReplicationContext) -> Result<u64, StoreError> {
    let mut removed = 0u64;
    loop {
        let page = state.uncached_documents().doc_scan(SEEN, b"", None, PAGE).await?;
        if page.is_empty() {
            return Ok(removed);
        }
        removed += page.len() as u64;
        let deletes = page.into_iter().map(|(id, _)| DocWrite::new(SEEN, id, None)).collect();
        state.txn_log().apply_replicated_with_docs(Vec::new(), Vec::new(), deletes).await?;
    }
}
