//! Documents on the embedded store: reads against the published view, writes
//! as one more operation kind of the group-committing writer (so a document, the
//! removal of its old index entries and the insertion of its new ones commit in
//! the same transaction as everything else of the batch).

#[path = "embedded_docs_derived.rs"]
mod derived;
#[path = "embedded_docs_names.rs"]
mod names;

pub(super) use derived::{apply as apply_riding, Riding};
pub(super) use names::{code_if_empty, BatchNames, Recoder};

use super::format;
use super::tx::Tx;
use super::view::View;
use super::wal::TableId;
use super::{RawExpect, RawOutcome};
use crate::documents::{doc_key, doc_key_prefix_len, index_key_under, LookupRange};
use crate::{
    scan_start, DerivedFrom, DocExpect, DocOutcome, DocWrite, Document, IndexEntry, IndexHit, IndexMatch, StoreError,
};

/// A queued document swap, encoded on the caller so the writer thread only copies bytes.
pub(super) struct DocOp {
    collection: String,
    id: Vec<u8>,
    key: Vec<u8>,
    expect: RawExpect,
    /// Stored form of the new document (empty for a derived one, never stored)
    /// and its index entries (their keys are made by the writer, which knows
    /// the names' codes: `embedded_docs_names.rs`).
    new: Option<(Vec<u8>, Vec<IndexEntry>)>,
    /// Set for a derived document: only its index entries are kept ([`derived`]).
    derived: Option<DerivedFrom>,
}

impl DocOp {
    /// The keys of this document's `entries`; `give`: they are being written
    /// (their names get a code if they have none).
    fn keys(
        &self,
        tx: &mut Tx,
        names: &mut BatchNames,
        entries: &[IndexEntry],
        give: bool,
    ) -> Result<Vec<Vec<u8>>, StoreError> {
        let mut keys = Vec::with_capacity(entries.len());
        for e in entries {
            if let Some(under) = names.names(tx, &self.collection, &e.name, give)? {
                keys.push(index_key_under(&under, &e.key, &self.id));
            }
        }
        Ok(keys)
    }

    /// The index keys of this document.
    fn new_keys(&self, tx: &mut Tx, names: &mut BatchNames) -> Result<Vec<Vec<u8>>, StoreError> {
        match &self.new {
            Some((_, entries)) => self.keys(tx, names, entries, true),
            None => Ok(Vec::new()),
        }
    }

    /// The index keys of the document `old` this one replaces.
    fn index_keys_of(
        &self,
        tx: &mut Tx,
        names: &mut BatchNames,
        old: Result<Document, StoreError>,
    ) -> Result<Vec<Vec<u8>>, StoreError> {
        match old {
            Ok(old) => self.keys(tx, names, &old.index, false),
            // Its entries cannot be found again; overwriting is still the right thing.
            Err(e) => {
                tracing::warn!("replacing an undecodable document: {e}");
                Ok(Vec::new())
            }
        }
    }

    pub(super) fn bytes(&self) -> usize {
        let entry = |e: &IndexEntry| e.name.len() + e.key.len() + self.id.len();
        let new = self.new.as_ref().map_or(0, |(d, es)| d.len() + es.iter().map(entry).sum::<usize>());
        let expect = if let RawExpect::Present(e) = &self.expect { e.len() } else { 0 };
        self.key.len() + new + expect
    }
}

pub(super) fn swap_op(
    collection: &str,
    id: &[u8],
    expect: DocExpect,
    new: Option<Document>,
) -> Result<super::Op, StoreError> {
    doc_op(collection, id, expect, new, true).map(super::Op::DocSwap)
}

/// A document write riding along with a handle write.
pub(super) fn write_op(w: DocWrite) -> Result<DocOp, StoreError> {
    let mut op = doc_op(&w.collection, &w.id, DocExpect::Any, w.doc, w.derived.is_none())?;
    op.derived = w.derived;
    Ok(op)
}

/// `stored`: the document's body is written (false for a derived one: its keys alone).
fn doc_op(
    collection: &str,
    id: &[u8],
    expect: DocExpect,
    new: Option<Document>,
    stored: bool,
) -> Result<DocOp, StoreError> {
    let new = match new.map(Document::normalized) {
        Some(d) => {
            d.validate()?;
            let body = if stored { d.encode() } else { Vec::new() };
            Some((body, d.index))
        }
        None => None,
    };
    let expect = match expect {
        DocExpect::Absent => RawExpect::Absent,
        DocExpect::Any => RawExpect::Any,
        DocExpect::Present(d) => RawExpect::Present(d.normalized().encode()),
    };
    Ok(DocOp {
        collection: collection.to_owned(),
        id: id.to_vec(),
        key: doc_key(collection, id),
        expect,
        new,
        derived: None,
    })
}

/// Apply a document swap to the writer's batch.
pub(super) fn apply(tx: &mut Tx, op: &DocOp, names: &mut BatchNames) -> Result<RawOutcome, StoreError> {
    let current = match tx.get(TableId::Docs, &op.key)? {
        None => None,
        Some(v) => match format::unseal("document", &op.key, &v) {
            Ok(c) => Some(c.to_vec()),
            Err(e) => {
                if !matches!(op.expect, RawExpect::Any) {
                    return Ok(RawOutcome::Damaged(e));
                }
                // Its index entries cannot be found again; overwriting still repairs it.
                tracing::warn!("replacing a damaged document: {e}");
                None
            }
        },
    };
    if !op.expect.holds(current.as_deref()) {
        return Ok(RawOutcome::Conflict { current });
    }
    if let Some(c) = &current {
        for k in op.index_keys_of(tx, names, Document::decode(c))? {
            tx.put(TableId::DocIndex, &k, None)?;
        }
    }
    match &op.new {
        Some((doc, _)) => {
            let sealed = format::seal(&op.key, doc);
            tx.put(TableId::Docs, &op.key, Some(&sealed))?;
            for k in op.new_keys(tx, names)? {
                tx.put(TableId::DocIndex, &k, Some(&[]))?;
            }
        }
        None => tx.put(TableId::Docs, &op.key, None)?,
    }
    Ok(RawOutcome::Done { previous: current })
}

pub(super) fn outcome(raw: RawOutcome) -> Result<DocOutcome, StoreError> {
    let decode = |b: Option<Vec<u8>>| b.map(|b| Document::decode(&b)).transpose();
    Ok(match raw {
        RawOutcome::DoneAsExpected => return Err(StoreError::Backend("internal: unexpected document outcome".into())),
        RawOutcome::Done { previous } => DocOutcome::Done { previous: decode(previous)? },
        RawOutcome::Conflict { current } => DocOutcome::Conflict { current: decode(current)? },
        RawOutcome::Damaged(e) => return Err(e),
    })
}

pub(super) fn get(view: &View, collection: &str, id: &[u8]) -> Result<Option<Document>, StoreError> {
    let key = doc_key(collection, id);
    match view.get(TableId::Docs, &key)? {
        Some(v) => Document::decode(format::unseal("document", &key, &v)?).map(Some),
        None => Ok(None),
    }
}

pub(super) fn lookup(
    view: &View,
    collection: &str,
    index: &str,
    key: IndexMatch<'_>,
    start_after: Option<&IndexHit>,
    limit: usize,
) -> Result<Vec<IndexHit>, StoreError> {
    let mut out = Vec::new();
    if limit == 0 {
        return Ok(out);
    }
    let Some(under) = names::names_in(view, collection, index)? else { return Ok(out) };
    let range = LookupRange::under(under, key, start_after);
    for item in view.range(TableId::DocIndex, range.start())? {
        let (k, _) = item?;
        if !k.starts_with(&range.prefix) {
            break;
        }
        out.push(range.parse(&k)?);
        if out.len() >= limit {
            break;
        }
    }
    Ok(out)
}

pub(super) fn scan(
    view: &View,
    collection: &str,
    prefix: &[u8],
    start_after: Option<&[u8]>,
    limit: usize,
) -> Result<Vec<(Vec<u8>, Document)>, StoreError> {
    let head = doc_key_prefix_len(collection);
    let lower = doc_key(collection, prefix);
    let after = start_after.map(|a| doc_key(collection, a));
    let mut out = Vec::new();
    if limit == 0 {
        return Ok(out);
    }
    for item in view.range(TableId::Docs, scan_start(&lower, after.as_deref()))? {
        let (k, v) = item?;
        if !k.starts_with(&lower) {
            break;
        }
        let doc = Document::decode(format::unseal("document", &k, &v)?)?;
        out.push((k[head..].to_vec(), doc));
        if out.len() >= limit {
            break;
        }
    }
    Ok(out)
}
