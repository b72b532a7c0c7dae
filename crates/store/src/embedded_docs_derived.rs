//! Derived documents on the embedded store ([`crate::DocContributor::derived`]):
//! only their index entries are kept. The document a write replaces is made
//! again from the record its handle's write replaces, so the store holds no
//! copy of it (the reverse-lookup index's documents took ~115 B a handle,
//! issue 45). A document kept by an earlier version is still found, and
//! removed, at its handle's next write.

use super::super::view::Tx;
use super::super::wal::TableId;
use super::{format, DocOp};
use crate::{Document, HandleRecord, StoreError};

/// Apply `op`, riding with a write of its handle that replaces `replaced` (the
/// record's bytes, unsealed; `None`: absent).
pub(in crate::embedded) fn apply(tx: &mut Tx, op: &DocOp, replaced: Option<&[u8]>) -> Result<(), StoreError> {
    let Some(from) = &op.derived else {
        return super::apply(tx, op).map(drop);
    };
    let old = match tx.get(TableId::Docs, &op.key)? {
        Some(kept) => {
            tx.put(TableId::Docs, &op.key, None);
            op.index_keys_of(format::unseal("document", &op.key, &kept).and_then(Document::decode))
        }
        None => {
            let record = replaced.map(|b| HandleRecord::decode_stored(&from.handle, b)).transpose();
            op.index_keys_of(record.map(|r| from.document(&op.collection, &op.id, r.as_ref()).unwrap_or_default()))
        }
    };
    for k in old {
        tx.put(TableId::DocIndex, &k, None);
    }
    for k in op.new.iter().flat_map(|(_, keys)| keys) {
        tx.put(TableId::DocIndex, k, Some(&[]));
    }
    Ok(())
}

impl crate::riding::RidingDoc for &DocOp {
    fn derived_from(&self) -> Option<&[u8]> {
        self.derived.as_ref().map(|d| d.handle.as_slice())
    }

    fn same_document(&self, other: &Self) -> bool {
        self.key == other.key
    }
}

/// The documents riding with a batch of handle writes (an import, pulled
/// changes), each derived one applied with the write of its handle.
pub(in crate::embedded) struct Riding<'a>(crate::riding::Riding<&'a DocOp>);

impl<'a> Riding<'a> {
    pub(in crate::embedded) fn new(ops: &'a [DocOp]) -> Self {
        Riding(crate::riding::Riding::new(ops))
    }

    /// Does a write of `handle` carry derived documents (so that the record it
    /// replaces must be read)?
    pub(in crate::embedded) fn waits_for(&self, handle: &[u8]) -> bool {
        self.0.waits_for(handle)
    }

    /// `handle` is being written over `replaced` (its stored bytes, sealed):
    /// apply the derived documents of this write.
    pub(in crate::embedded) fn written(
        &mut self,
        tx: &mut Tx,
        handle: &[u8],
        replaced: Option<&[u8]>,
    ) -> Result<(), StoreError> {
        // A damaged record has no entries to find again; overwriting repairs it.
        let replaced = replaced.and_then(|r| format::unseal("handle", handle, r).ok());
        for op in self.0.take(handle) {
            apply(tx, op, replaced)?;
        }
        Ok(())
    }

    /// A write of `handle` did not happen: its derived documents go with it.
    pub(in crate::embedded) fn skipped(&mut self, handle: &[u8]) {
        self.0.take(handle);
    }

    /// Apply the documents that are not derived, after the writes.
    pub(in crate::embedded) fn finish(self, tx: &mut Tx) -> Result<(), StoreError> {
        for op in self.0.kept() {
            super::apply(tx, op)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::conformance::derived::found;
    use crate::conformance::url_record;
    use crate::conformance::{indexed_by_url, URL_INDEX};
    use crate::{DocWrite, Document, EmbeddedOptions, EmbeddedStore, Expect, IndexEntry, Store};

    /// A derived document leaves no copy in the documents table, and one kept
    /// there by an earlier version is found, with its entries, and removed by
    /// its handle's next write; all of it as the log replays it on reopening.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn only_the_index_is_kept_and_a_kept_document_goes() {
        let dir = tempfile::tempdir().unwrap();
        let open =
            || -> Arc<dyn Store> { Arc::new(EmbeddedStore::open_dir(dir.path(), EmbeddedOptions::default()).unwrap()) };
        let plain = open();
        let kept = Document::new(Vec::new(), vec![IndexEntry::new("url", "a")]);
        let ride = DocWrite::new(URL_INDEX, b"T/1".to_vec(), Some(kept));
        plain.swap_with_docs(b"T/1", Expect::Absent, Some(url_record("a")), vec![ride]).await.unwrap();
        assert!(plain.doc_get(URL_INDEX, b"T/1").await.unwrap().is_some());
        let s = indexed_by_url(plain);
        assert_eq!(found(&s, &["a"]).await, ["T/1"]);
        assert!(s.swap(b"T/1", Expect::Any, Some(url_record("b"))).await.unwrap().is_done());
        assert!(s.swap(b"T/2", Expect::Absent, Some(url_record("c"))).await.unwrap().is_done());
        assert_eq!(found(&s, &["a", "b", "c"]).await, ["-", "T/1", "T/2"]);
        assert_eq!(s.doc_scan(URL_INDEX, b"", None, 10).await.unwrap(), Vec::new(), "no document is stored");
        s.close();
        drop(s);
        let s = indexed_by_url(open());
        assert_eq!(found(&s, &["a", "b", "c"]).await, ["-", "T/1", "T/2"]);
        assert!(s.swap(b"T/1", Expect::Any, None).await.unwrap().is_done());
        assert_eq!(found(&s, &["b", "c"]).await, ["-", "T/2"]);
    }
}
