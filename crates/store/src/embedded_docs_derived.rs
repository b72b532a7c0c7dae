//! Derived documents on the embedded store ([`crate::DocContributor::derived`]):
//! only their index entries are kept. The document a write replaces is made
//! again from the record its handle's write replaces, so the store holds no
//! copy of it (the reverse-lookup index's documents took ~115 B a handle,
//! issue 45). A document kept by an earlier version is still found, and
//! removed, at its handle's next write.

use std::collections::HashMap;
use std::ops::Bound;

use super::super::tx::Tx;
use super::super::wal::TableId;
use super::{format, BatchNames, DocOp};
use crate::documents::doc_key;
use crate::{Document, HandleRecord, StoreError};

/// Apply `op`, riding with a write of its handle that replaces `replaced` (the
/// record's bytes, unsealed; `None`: absent).
pub(in crate::embedded) fn apply(
    tx: &mut Tx,
    op: &DocOp,
    replaced: Option<&[u8]>,
    names: &mut BatchNames,
) -> Result<(), StoreError> {
    apply_with(tx, op, replaced, true, names)
}

/// [`apply`], where `stored` says whether the documents table may hold a
/// document of `op`'s collection (one stored by an earlier version).
fn apply_with(
    tx: &mut Tx,
    op: &DocOp,
    replaced: Option<&[u8]>,
    stored: bool,
    names: &mut BatchNames,
) -> Result<(), StoreError> {
    let Some(from) = &op.derived else {
        return super::apply(tx, op, names).map(drop);
    };
    let kept = if stored { tx.get(TableId::Docs, &op.key)? } else { None };
    let old = match kept {
        Some(kept) => {
            tx.put(TableId::Docs, &op.key, None)?;
            let kept = format::unseal("document", &op.key, &kept).and_then(Document::decode);
            op.index_keys_of(tx, names, kept)?
        }
        None => {
            let record = replaced.map(|b| HandleRecord::decode_stored(&from.handle, b)).transpose();
            let made = record.map(|r| from.document(&op.collection, &op.id, r.as_ref()).unwrap_or_default());
            op.index_keys_of(tx, names, made)?
        }
    };
    for k in old {
        tx.put(TableId::DocIndex, &k, None)?;
    }
    for k in op.new_keys(tx, names)? {
        tx.put(TableId::DocIndex, &k, Some(&[]))?;
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
pub(in crate::embedded) struct Riding<'a> {
    docs: crate::riding::Riding<&'a DocOp>,
    /// Per collection: may the documents table hold one of its documents?
    /// Asked once a batch rather than once a write (an import's writes would
    /// each look one up, in a table that mostly holds none).
    stored: HashMap<&'a str, bool>,
    names: BatchNames,
}

impl<'a> Riding<'a> {
    pub(in crate::embedded) fn new(ops: &'a [DocOp]) -> Self {
        Riding { docs: crate::riding::Riding::new(ops), stored: HashMap::new(), names: BatchNames::default() }
    }

    /// Does the documents table hold any document of `collection` (the
    /// batch's writes so far included)? Only the batch's derived documents
    /// write there before [`Self::finish`], and they only remove.
    fn has_stored(&mut self, tx: &mut Tx, collection: &'a str) -> Result<bool, StoreError> {
        if let Some(&stored) = self.stored.get(collection) {
            return Ok(stored);
        }
        let prefix = doc_key(collection, b"");
        let first = tx.range(TableId::Docs, Bound::Included(&prefix))?.next().transpose()?;
        let stored = first.is_some_and(|(k, _)| k.starts_with(&prefix));
        self.stored.insert(collection, stored);
        Ok(stored)
    }

    /// Does a write of `handle` carry derived documents (so that the record it
    /// replaces must be read)?
    pub(in crate::embedded) fn waits_for(&self, handle: &[u8]) -> bool {
        self.docs.waits_for(handle)
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
        for op in self.docs.take(handle) {
            let stored = self.has_stored(tx, &op.collection)?;
            apply_with(tx, op, replaced, stored, &mut self.names)?;
        }
        Ok(())
    }

    /// A write of `handle` did not happen: its derived documents go with it.
    pub(in crate::embedded) fn skipped(&mut self, handle: &[u8]) {
        self.docs.take(handle);
    }

    /// Apply the documents that are not derived, after the writes.
    pub(in crate::embedded) fn finish(mut self, tx: &mut Tx) -> Result<(), StoreError> {
        for op in self.docs.kept() {
            super::apply(tx, op, &mut self.names)?;
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
        for (handle, url) in [("T/1", "a"), ("T/3", "d")] {
            let kept = Document::new(Vec::new(), vec![IndexEntry::new("url", url)]);
            let ride = DocWrite::new(URL_INDEX, handle.as_bytes().to_vec(), Some(kept));
            plain.swap_with_docs(handle.as_bytes(), Expect::Absent, Some(url_record(url)), vec![ride]).await.unwrap();
        }
        assert!(plain.doc_get(URL_INDEX, b"T/1").await.unwrap().is_some());
        let s = indexed_by_url(plain);
        assert_eq!(found(&s, &["a", "d"]).await, ["T/1", "T/3"]);
        assert!(s.swap(b"T/1", Expect::Any, Some(url_record("b"))).await.unwrap().is_done());
        assert!(s.swap(b"T/2", Expect::Absent, Some(url_record("c"))).await.unwrap().is_done());
        assert_eq!(found(&s, &["a", "b", "c"]).await, ["-", "T/1", "T/2"]);
        // An import finds a kept document too (the table is asked once a batch).
        s.put_many(vec![(b"T/3".to_vec(), url_record("e")), (b"T/5".to_vec(), url_record("f"))]).await.unwrap();
        assert_eq!(found(&s, &["d", "e", "f"]).await, ["-", "T/3", "T/5"]);
        assert_eq!(s.doc_scan(URL_INDEX, b"", None, 10).await.unwrap(), Vec::new(), "no document is stored");
        s.close();
        drop(s);
        let s = indexed_by_url(open());
        assert_eq!(found(&s, &["a", "b", "c", "d", "e", "f"]).await, ["-", "T/1", "T/2", "-", "T/3", "T/5"]);
        assert!(s.swap(b"T/1", Expect::Any, None).await.unwrap().is_done());
        assert_eq!(found(&s, &["b", "c"]).await, ["-", "T/2"]);
    }
}
