//! The reverse-lookup index behind `/hrls`: for every handle, a document in
//! collection [`COLLECTION`] (id = storage key) whose index entries are its
//! publicly readable values — index name = value type (upper case), key = the
//! data (ASCII lower case, searches are case-insensitive).
//!
//! [`ValueIndex`] is a document contributor of the store
//! ([`handled_store::observe`]), so that *every* handle write keeps the index:
//! the handle's index document rides along with the handle write
//! ([`handled_store::RecordStore::swap_with_docs`]), so the two commit
//! together and always agree — one commit per write, no locks, nothing to
//! repair after a crash.

use handled_proto::value::{is_secret_type, HandleValue};
use handled_store::{DocContributor, DocWrite, Document, HandleRecord, IndexEntry, Observed, Store};
use std::collections::BTreeSet;
use std::sync::Arc;

pub const COLLECTION: &str = "hrls";
/// Longer values are not searchable (keeps index keys small); the same
/// bound as a store's own search by value.
const MAX_INDEXED_LEN: usize = handled_store::MAX_SEARCHED_LEN;

/// Is `v` searchable: publicly readable, not a secret (even a publicly
/// readable one, F12), not too long? The index's documents are derived
/// ([`ValueIndex::derived`]): a store finds the entries to remove by asking
/// this of the replaced record: a change to this rule must come with a way
/// to rebuild the index of existing stores (there is none yet).
pub fn indexed(v: &HandleValue) -> bool {
    v.permissions.public_read()
        && !is_secret_type(&v.value_type)
        && v.data.len() <= MAX_INDEXED_LEN
        && !v.value_type.is_empty()
        && v.value_type.len() <= MAX_INDEXED_LEN
}

pub fn type_name(t: &[u8]) -> String {
    String::from_utf8_lossy(t).to_ascii_uppercase()
}

/// The index entries of a handle state.
pub fn entries(record: Option<&HandleRecord>) -> BTreeSet<IndexEntry> {
    record
        .map(|r| {
            r.values
                .iter()
                .filter(|v| indexed(v))
                .map(|v| IndexEntry::new(type_name(&v.value_type), v.data.to_ascii_lowercase()))
                .collect()
        })
        .unwrap_or_default()
}

/// The index document of a handle state (`None`: nothing searchable).
fn index_doc(key: &[u8], record: Option<&HandleRecord>) -> DocWrite {
    let index = entries(record);
    let doc = (!index.is_empty()).then(|| Document::new(Vec::new(), index.into_iter().collect()));
    DocWrite::new(COLLECTION, key, doc)
}

/// Keeps the index: its document of a handle rides along with every write of the handle.
pub struct ValueIndex;

impl ValueIndex {
    /// `store`, with every handle write through it keeping the index (put
    /// under a layer that calls contributors when it has none).
    pub fn keep(store: Arc<dyn Store>) -> Arc<dyn Store> {
        let store = Observed::ensure(store);
        if let Some(hooks) = store.hooks() {
            hooks.contribute(Arc::new(ValueIndex));
        }
        store
    }
}

impl DocContributor for ValueIndex {
    fn contribute(&self, key: &[u8], record: Option<&HandleRecord>, out: &mut Vec<DocWrite>) {
        out.push(index_doc(key, record));
    }

    /// Its documents are the record's searchable values, found only through the index.
    fn derived(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use handled_proto::value::ValuePermissions;
    use handled_store::{Expect, IndexMatch, MemoryStore};

    fn record(values: Vec<HandleValue>) -> HandleRecord {
        HandleRecord::new(values)
    }

    async fn hits(s: &dyn Store, t: &str, key: &[u8]) -> Vec<Vec<u8>> {
        s.doc_lookup(COLLECTION, t, IndexMatch::Exact(key), None, 100)
            .await
            .unwrap()
            .into_iter()
            .map(|h| h.id)
            .collect()
    }

    /// Handles a mirror pulls are indexed (and unindexed) like local writes.
    #[tokio::test]
    async fn replicated_changes_keep_the_index() {
        use handled_store::{ReplicatedChange, TxnAction, TxnEntry};
        let change = |id: u64, action: TxnAction, r: Option<HandleRecord>| ReplicatedChange {
            entry: TxnEntry { id, date_ms: 1, action, handle: b"T/1".to_vec() },
            record: r,
            priority: None,
        };
        let s = ValueIndex::keep(Arc::new(MemoryStore::new()));
        let r = record(vec![HandleValue::new(1, "URL", "https://a.example")]);
        s.apply_replicated(vec![change(5, TxnAction::Create, Some(r))], vec![]).await.unwrap();
        assert_eq!(hits(&*s, "URL", b"https://a.example").await, vec![b"T/1".to_vec()]);
        s.apply_replicated(vec![change(6, TxnAction::Delete, None)], vec![]).await.unwrap();
        assert!(hits(&*s, "URL", b"https://a.example").await.is_empty());
        assert_eq!(s.txn_log_bounds().await.unwrap().last, 6);
    }

    #[tokio::test]
    async fn every_write_keeps_the_index() {
        let s = ValueIndex::keep(Arc::new(MemoryStore::new()));
        let mut private = HandleValue::new(2, "EMAIL", "me@example");
        private.permissions = ValuePermissions(0x0c);
        // F12: a secret is never searchable, even when made publicly readable.
        let mut secret = HandleValue::new(300, "HS_SECKEY", "pw");
        secret.permissions = ValuePermissions(0x0e);
        let r1 = record(vec![HandleValue::new(1, "URL", "https://A.example"), private, secret]);
        assert!(s.swap(b"T/1", Expect::Absent, Some(r1.clone())).await.unwrap().is_done());
        assert_eq!(hits(&*s, "URL", b"https://a.example").await, vec![b"T/1".to_vec()]);
        assert!(hits(&*s, "EMAIL", b"me@example").await.is_empty(), "non-public values are not indexed");
        assert!(hits(&*s, "HS_SECKEY", b"pw").await.is_empty(), "secrets are not indexed");
        let r2 = record(vec![HandleValue::new(1, "url", "https://b.example")]);
        s.swap(b"T/1", Expect::Present(r1), Some(r2.clone())).await.unwrap();
        assert!(hits(&*s, "URL", b"https://a.example").await.is_empty());
        assert_eq!(hits(&*s, "URL", b"https://b.example").await, vec![b"T/1".to_vec()]);
        // A failed compare-and-set leaves the entries of what is stored.
        let outcome =
            s.swap(b"T/1", Expect::Absent, Some(record(vec![HandleValue::new(1, "URL", "c")]))).await.unwrap();
        assert!(!outcome.is_done());
        assert!(hits(&*s, "URL", b"c").await.is_empty());
        s.swap(b"T/1", Expect::Any, None).await.unwrap();
        assert!(hits(&*s, "URL", b"https://b.example").await.is_empty());
        assert!(s.doc_get(COLLECTION, b"T/1").await.unwrap().is_none());
        s.put_many(vec![(b"T/2".to_vec(), record(vec![HandleValue::new(2, "EMAIL", "x@y")]))]).await.unwrap();
        assert_eq!(hits(&*s, "EMAIL", b"x@y").await, vec![b"T/2".to_vec()]);
    }
}
