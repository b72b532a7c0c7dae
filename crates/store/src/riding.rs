//! Documents riding with a batch of handle writes (an import, pulled changes),
//! matched to the write each belongs to. A derived document
//! ([`crate::DerivedFrom`]) describes one state of its handle: it is applied
//! with that write (whose replaced record rebuilds the document it replaces)
//! and dropped with a write that does not happen (an older change of another
//! primary). A batch may write one handle twice; its documents then come in
//! the same order as its writes.

use std::collections::HashMap;

use smallvec::SmallVec;

/// The documents of one write (mostly one: allocated only beyond that).
pub(crate) type Docs<T> = SmallVec<[T; 1]>;

/// What [`Riding`] needs to know of a document write.
pub(crate) trait RidingDoc {
    /// The handle whose state it is derived from (`None`: not derived).
    fn derived_from(&self) -> Option<&[u8]>;
    /// Are the two writes of the same document?
    fn same_document(&self, other: &Self) -> bool;
}

impl RidingDoc for crate::DocWrite {
    fn derived_from(&self) -> Option<&[u8]> {
        self.derived.as_ref().map(|d| d.handle.as_slice())
    }

    fn same_document(&self, other: &Self) -> bool {
        self.collection == other.collection && self.id == other.id
    }
}

/// The documents of a batch: derived ones queued by handle, the rest kept
/// for after the writes.
pub(crate) struct Riding<T> {
    derived: HashMap<Vec<u8>, Docs<T>>,
    kept: Vec<T>,
}

impl<T: RidingDoc> Riding<T> {
    pub(crate) fn new(docs: impl IntoIterator<Item = T>) -> Self {
        let docs = docs.into_iter();
        let mut riding = Riding { derived: HashMap::with_capacity(docs.size_hint().0), kept: Vec::new() };
        for d in docs {
            match d.derived_from().map(<[u8]>::to_vec) {
                Some(handle) => riding.derived.entry(handle).or_default().push(d),
                None => riding.kept.push(d),
            }
        }
        riding
    }

    /// Does a write of `handle` carry derived documents?
    pub(crate) fn waits_for(&self, handle: &[u8]) -> bool {
        self.derived.contains_key(handle)
    }

    /// The derived documents of the next write of `handle`: the first queued
    /// of each document.
    pub(crate) fn take(&mut self, handle: &[u8]) -> Docs<T> {
        let Some(queue) = self.derived.get_mut(handle) else { return Docs::new() };
        let mut n = 0;
        while n < queue.len() && !queue[..n].iter().any(|o| o.same_document(&queue[n])) {
            n += 1;
        }
        if n == queue.len() {
            return self.derived.remove(handle).unwrap_or_default();
        }
        queue.drain(..n).collect()
    }

    /// The documents that are not derived. Derived ones whose handle was never
    /// written describe no state of it and are dropped.
    pub(crate) fn kept(self) -> Vec<T> {
        self.kept
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq)]
    struct D(&'static str, Option<&'static str>, u8);

    impl RidingDoc for D {
        fn derived_from(&self) -> Option<&[u8]> {
            self.1.map(str::as_bytes)
        }
        fn same_document(&self, other: &Self) -> bool {
            self.0 == other.0
        }
    }

    #[test]
    fn each_write_takes_its_own_documents() {
        // Handle h written twice (two documents each), g once; one kept document.
        let docs = [
            D("a", Some("h"), 1),
            D("b", Some("h"), 1),
            D("k", None, 0),
            D("a", Some("g"), 1),
            D("a", Some("h"), 2),
            D("b", Some("h"), 2),
        ];
        let mut r = Riding::new(docs);
        assert!(r.waits_for(b"h") && r.waits_for(b"g") && !r.waits_for(b"x"));
        assert_eq!(r.take(b"h")[..], [D("a", Some("h"), 1), D("b", Some("h"), 1)]);
        assert_eq!(r.take(b"h")[..], [D("a", Some("h"), 2), D("b", Some("h"), 2)]);
        assert!(r.take(b"h").is_empty() && !r.waits_for(b"h"));
        assert!(r.waits_for(b"g"), "a write never made keeps its documents queued until dropped");
        assert_eq!(r.kept(), [D("k", None, 0)]);
    }
}
