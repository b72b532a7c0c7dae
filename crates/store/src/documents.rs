//! Documents: named collections of opaque bodies that carry their own
//! secondary-index entries (see the `doc_*` methods of [`crate::Store`]).
//!
//! Both built-in backends keep two ordered maps, one of documents and one of
//! index entries, under keys built here:
//!
//! * document: `comp(collection) ‖ id`
//! * index entry: `comp(collection) ‖ comp(index) ‖ comp(key) ‖ id` (no value;
//!   the embedded store may write a byte for `comp(collection) ‖ comp(index)`,
//!   see `embedded_docs_names.rs`)
//!
//! `comp(x)` escapes every `0x00` of `x` as `0x00 0xff` and ends with `0x00 0x01`.
//! That keeps bytewise order of `(key, id)` pairs, lets arbitrary bytes (including
//! NUL) appear anywhere, and makes "index key starts with `p`" a plain prefix
//! range over `comp(collection) ‖ comp(index) ‖ esc(p)`.

use std::ops::Bound;

use crate::StoreError;

/// One secondary-index entry of a document: under index `name`, key `key`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct IndexEntry {
    pub name: String,
    pub key: Vec<u8>,
}

impl IndexEntry {
    pub fn new(name: impl Into<String>, key: impl Into<Vec<u8>>) -> Self {
        IndexEntry { name: name.into(), key: key.into() }
    }
}

/// A stored document: an opaque body plus the index entries it is found under.
/// Entries are a set: the store keeps them sorted and without duplicates, so a
/// document read back compares equal to [`Document::normalized`] of what was written.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Document {
    pub body: Vec<u8>,
    pub index: Vec<IndexEntry>,
}

impl Document {
    pub fn new(body: impl Into<Vec<u8>>, index: Vec<IndexEntry>) -> Self {
        Document { body: body.into(), index }.normalized()
    }

    /// Index entries sorted, duplicates removed.
    pub fn normalized(mut self) -> Self {
        self.index.sort();
        self.index.dedup();
        self
    }

    /// Stored form: `u32 body length ‖ body ‖ u32 count ‖ (u16 name length ‖ name ‖
    /// u32 key length ‖ key)*`, of the normalized document.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(
            8 + self.body.len() + self.index.iter().map(|e| 6 + e.name.len() + e.key.len()).sum::<usize>(),
        );
        out.extend_from_slice(&(self.body.len() as u32).to_be_bytes());
        out.extend_from_slice(&self.body);
        out.extend_from_slice(&(self.index.len() as u32).to_be_bytes());
        for e in &self.index {
            out.extend_from_slice(&(e.name.len() as u16).to_be_bytes());
            out.extend_from_slice(e.name.as_bytes());
            out.extend_from_slice(&(e.key.len() as u32).to_be_bytes());
            out.extend_from_slice(&e.key);
        }
        out
    }

    pub(crate) fn decode(mut b: &[u8]) -> Result<Document, StoreError> {
        fn take<'a>(b: &mut &'a [u8], n: usize) -> Result<&'a [u8], StoreError> {
            if b.len() < n {
                return Err(StoreError::Corrupt("truncated document".into()));
            }
            let (head, tail) = b.split_at(n);
            *b = tail;
            Ok(head)
        }
        let u32_of = |b: &mut &[u8]| take(b, 4).map(|x| u32::from_be_bytes(x.try_into().expect("4 bytes")) as usize);
        let n = u32_of(&mut b)?;
        let body = take(&mut b, n)?.to_vec();
        let count = u32_of(&mut b)?;
        let mut index = Vec::with_capacity(count.min(1024));
        for _ in 0..count {
            let n = take(&mut b, 2).map(|x| u16::from_be_bytes([x[0], x[1]]) as usize)?;
            let name = std::str::from_utf8(take(&mut b, n)?)
                .map_err(|_| StoreError::Corrupt("index name is not UTF-8".into()))?
                .to_owned();
            let n = u32_of(&mut b)?;
            index.push(IndexEntry { name, key: take(&mut b, n)?.to_vec() });
        }
        if !b.is_empty() {
            return Err(StoreError::Corrupt("trailing bytes after a document".into()));
        }
        Ok(Document { body, index })
    }

    /// Refuse what could not be stored or read back.
    pub(crate) fn validate(&self) -> Result<(), StoreError> {
        let bad = |m: String| Err(StoreError::Invalid(crate::InvalidRecord(m)));
        if self.body.len() > u32::MAX as usize >> 1 {
            return bad("document body too large".into());
        }
        for e in &self.index {
            if e.name.len() > u16::MAX as usize || e.key.len() > MAX_INDEX_KEY {
                return bad(format!("index entry {:?} too large", e.name));
            }
        }
        Ok(())
    }
}

/// Longest index key accepted (backends with key-size limits need a bound).
pub const MAX_INDEX_KEY: usize = 64 * 1024;

/// What [`crate::Store::doc_swap`] requires of the current document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DocExpect {
    Absent,
    /// Present and equal (body and index entries) to this document.
    Present(Document),
    Any,
}

/// Result of a [`crate::Store::doc_swap`] that ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DocOutcome {
    /// Written (with its index entries); `previous` is what it replaced.
    Done { previous: Option<Document> },
    /// The expectation did not hold; nothing was written.
    Conflict { current: Option<Document> },
}

impl DocOutcome {
    pub fn is_done(&self) -> bool {
        matches!(self, DocOutcome::Done { .. })
    }
}

/// How [`crate::Store::doc_lookup`] matches index keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndexMatch<'a> {
    Exact(&'a [u8]),
    Prefix(&'a [u8]),
}

/// One index entry found by a lookup: its key and the id of the document.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct IndexHit {
    pub key: Vec<u8>,
    pub id: Vec<u8>,
}

fn push_escaped(out: &mut Vec<u8>, bytes: &[u8]) {
    for &b in bytes {
        out.push(b);
        if b == 0 {
            out.push(0xff);
        }
    }
}

fn push_comp(out: &mut Vec<u8>, bytes: &[u8]) {
    push_escaped(out, bytes);
    out.extend_from_slice(&[0, 1]);
}

/// Key of a document (also the start of a collection scan, with a prefix of ids).
pub(crate) fn doc_key(collection: &str, id: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(collection.len() + 2 + id.len());
    push_comp(&mut k, collection.as_bytes());
    k.extend_from_slice(id);
    k
}

/// Length of the collection part of a document key.
pub(crate) fn doc_key_prefix_len(collection: &str) -> usize {
    doc_key(collection, b"").len()
}

/// `comp(collection) ‖ comp(index)`: the names that begin an index entry's key
/// (the embedded store may replace them by a code, `embedded_docs_names.rs`).
pub(crate) fn spelled_names(collection: &str, index: &str) -> Vec<u8> {
    let mut k = Vec::new();
    push_comp(&mut k, collection.as_bytes());
    push_comp(&mut k, index.as_bytes());
    k
}

/// The length of `comp(x)` at the start of `bytes` (`None`: none is there).
fn comp_len(bytes: &[u8]) -> Option<usize> {
    let mut i = 0;
    loop {
        match bytes.get(i..)? {
            [0, 1, ..] => return Some(i + 2),
            [0, 0xff, ..] => i += 2,
            [b, ..] if *b != 0 => i += 1,
            _ => return None,
        }
    }
}

/// The length of the spelled names that begin the index entry key `key`
/// (`None`: it does not begin with two).
pub(crate) fn spelled_names_len(key: &[u8]) -> Option<usize> {
    let collection = comp_len(key)?;
    Some(collection + comp_len(&key[collection..])?)
}

/// Key of one index entry.
pub(crate) fn index_key(collection: &str, entry: &IndexEntry, id: &[u8]) -> Vec<u8> {
    index_key_under(&spelled_names(collection, &entry.name), &entry.key, id)
}

/// Key of an index entry `key` of document `id`, under `names` (the spelled
/// names of its collection and index, or what stands for them).
pub(crate) fn index_key_under(names: &[u8], key: &[u8], id: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(names.len() + key.len() + 2 + id.len());
    k.extend_from_slice(names);
    push_comp(&mut k, key);
    k.extend_from_slice(id);
    k
}

/// A lookup as a key range: (scan prefix, lower bound key, length of the
/// collection+index part to strip when parsing hits).
pub(crate) struct LookupRange {
    pub prefix: Vec<u8>,
    pub after: Option<Vec<u8>>,
    pub head: usize,
}

impl LookupRange {
    pub fn new(collection: &str, index: &str, m: IndexMatch<'_>, start_after: Option<&IndexHit>) -> Self {
        Self::under(spelled_names(collection, index), m, start_after)
    }

    /// The lookup among the entries whose keys begin with `names`.
    pub fn under(names: Vec<u8>, m: IndexMatch<'_>, start_after: Option<&IndexHit>) -> Self {
        let after = start_after.map(|h| index_key_under(&names, &h.key, &h.id));
        let head = names.len();
        let mut prefix = names;
        match m {
            IndexMatch::Exact(k) => push_comp(&mut prefix, k),
            IndexMatch::Prefix(p) => push_escaped(&mut prefix, p),
        }
        LookupRange { prefix, after, head }
    }

    pub fn start(&self) -> Bound<&[u8]> {
        crate::scan_start(&self.prefix, self.after.as_deref())
    }

    /// Split a stored index key of this range into key and id.
    pub fn parse(&self, stored: &[u8]) -> Result<IndexHit, StoreError> {
        let mut rest = &stored[self.head..];
        let mut key = Vec::new();
        loop {
            match rest {
                [0, 1, tail @ ..] => {
                    return Ok(IndexHit { key, id: tail.to_vec() });
                }
                [0, 0xff, tail @ ..] => {
                    key.push(0);
                    rest = tail;
                }
                [b, tail @ ..] if *b != 0 => {
                    key.push(*b);
                    rest = tail;
                }
                _ => return Err(StoreError::Corrupt("malformed index key".into())),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spelled_names_are_measured_whatever_their_bytes() {
        for (c, i) in [("", ""), ("\0", "a\0"), ("hrls", "URL"), ("\0\0x", "")] {
            let key = index_key(c, &IndexEntry::new(i, vec![0, 1, 0]), b"id");
            assert_eq!(spelled_names_len(&key), Some(spelled_names(c, i).len()), "{c:?} {i:?}");
        }
        for bad in [&b""[..], b"abc", b"a\0\x01b", b"a\0\x02\0\x01"] {
            assert_eq!(spelled_names_len(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn document_round_trip() {
        let d = Document::new(
            vec![0, 1, 2],
            vec![IndexEntry::new("b", "x"), IndexEntry::new("a", vec![0u8, 0xff]), IndexEntry::new("b", "x")],
        );
        assert_eq!(d.index.len(), 2);
        assert_eq!(Document::decode(&d.encode()).unwrap(), d);
        assert!(Document::decode(&d.encode()[..5]).is_err());
        let mut long = d.encode();
        long.push(0);
        assert!(Document::decode(&long).is_err());
    }

    #[test]
    fn index_keys_keep_order_and_parse_back() {
        let keys: Vec<&[u8]> = vec![b"", b"\x00", b"\x00\x00", b"\x00\x01", b"a", b"a\x00", b"a\x00b", b"ab", b"\xff"];
        let ids: Vec<&[u8]> = vec![b"", b"\x00", b"z"];
        let mut pairs = Vec::new();
        for k in &keys {
            for id in &ids {
                pairs.push((k.to_vec(), id.to_vec()));
            }
        }
        let enc: Vec<Vec<u8>> =
            pairs.iter().map(|(k, id)| index_key("c", &IndexEntry::new("i", k.clone()), id)).collect();
        let mut sorted = enc.clone();
        sorted.sort();
        assert_eq!(sorted, enc, "encoding must keep (key, id) order");
        let r = LookupRange::new("c", "i", IndexMatch::Prefix(b""), None);
        for (e, (k, id)) in enc.iter().zip(&pairs) {
            assert_eq!(spelled_names_len(e), Some(spelled_names("c", "i").len()));
            assert_eq!(r.parse(e).unwrap(), IndexHit { key: k.clone(), id: id.clone() });
        }
        // Prefix "a" covers exactly the keys starting with "a".
        let r = LookupRange::new("c", "i", IndexMatch::Prefix(b"a"), None);
        let hits: Vec<_> = enc.iter().filter(|e| e.starts_with(&r.prefix)).map(|e| r.parse(e).unwrap().key).collect();
        assert!(hits.iter().all(|k| k.starts_with(b"a")));
        assert_eq!(hits.len(), 4 * ids.len());
    }
}
