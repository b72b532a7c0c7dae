//! What reads and the writer see: a redb read snapshot with, over it, the
//! batches acknowledged since the last checkpoint, in two in-memory layers
//! (`embedded_committer.rs`): the *frozen* layer, being written into redb by a
//! running checkpoint, and over it the *active* layer, which takes each new
//! batch. A lookup asks the active layer, then the frozen one, then the
//! snapshot; when the writer is idle after a checkpoint both are empty and a
//! read is the snapshot's B-tree lookup alone.
//!
//! A layer maps `table byte ‖ key` to the latest value (`None`: removed) and is
//! persistent (`imbl`): publishing one after each batch is a clone of a root,
//! not of the map. Range reads merge the layers over the snapshot's range.

use std::collections::BTreeMap;
use std::iter::Peekable;
use std::ops::Bound;
use std::sync::Arc;

use redb::{ReadableTable, ReadableTableMetadata};

use super::keydir;
use super::wal::TableId;
use super::{map_redb, Snapshot};
use crate::StoreError;

/// Entries of batches not yet in redb: `table ‖ key` → value (`None`: removed).
pub(super) type Layer = imbl::OrdMap<Arc<[u8]>, Option<Arc<[u8]>>>;

/// One table entry of a range read: key and stored (sealed) value.
pub(super) type Item = Result<(Vec<u8>, Vec<u8>), StoreError>;
pub(super) type Items<'a> = Box<dyn Iterator<Item = Item> + 'a>;

pub(super) fn overlay_key(table: TableId, key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(1 + key.len());
    k.push(table as u8);
    k.extend_from_slice(key);
    k
}

/// The overlay keys of `table` from `from` on.
pub(super) fn overlay_bounds(table: TableId, from: Bound<&[u8]>) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
    let lower = match from {
        Bound::Included(k) => Bound::Included(overlay_key(table, k)),
        Bound::Excluded(k) => Bound::Excluded(overlay_key(table, k)),
        Bound::Unbounded => Bound::Included(vec![table as u8]),
    };
    (lower, Bound::Excluded(vec![table as u8 + 1]))
}

/// The published state: see the module documentation.
pub(super) struct View {
    pub(super) snap: Arc<Snapshot>,
    /// Batches since the running checkpoint began (or since the last one).
    pub(super) active: Layer,
    /// Key and value bytes in `active` (a checkpoint is due beyond a bound).
    pub(super) active_bytes: usize,
    /// Batches the running checkpoint is writing into redb (empty if none runs).
    pub(super) frozen: Layer,
}

impl View {
    pub(super) fn new(snap: Arc<Snapshot>) -> View {
        View { snap, active: Layer::new(), active_bytes: 0, frozen: Layer::new() }
    }

    /// The layers' say on `key`: `Some(None)` if removed there, `None` if they have none.
    pub(super) fn overlaid(&self, table: TableId, key: &[u8]) -> Option<Option<&[u8]>> {
        if self.active.is_empty() && self.frozen.is_empty() {
            return None;
        }
        let k = overlay_key(table, key);
        self.active.get(k.as_slice()).or_else(|| self.frozen.get(k.as_slice())).map(|v| v.as_deref())
    }

    /// The stored (sealed) value of `key` in `table`.
    pub(super) fn get(&self, table: TableId, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        if let Some(v) = self.overlaid(table, key) {
            return Ok(v.map(|v| v.to_vec()));
        }
        let s = &self.snap;
        match table {
            TableId::Handles => s.handle(key),
            TableId::Docs => table_get(&s.docs, key, |v| v.to_vec()),
            TableId::TxnLog => table_get(&s.txn_log, key, |v| v.to_vec()),
            TableId::DocIndex => table_get(&s.doc_index, key, |()| Vec::new()),
            TableId::Meta => text_get(&s.meta, key),
            TableId::TxnState => text_get(&s.txn_state, key),
        }
    }

    /// The entries of `table` from `from` on, in key order.
    pub(super) fn range<'a>(&'a self, table: TableId, from: Bound<&[u8]>) -> Result<Items<'a>, StoreError> {
        let mut items = snapshot_range(&self.snap, table, from)?;
        for layer in [&self.frozen, &self.active] {
            if !layer.is_empty() {
                let over = layer_range(layer, table, from).map(|(k, v)| (k[1..].to_vec(), v.map(|v| v.to_vec())));
                items = merged(items, over);
            }
        }
        Ok(items)
    }

    /// How many handles there are.
    pub(super) fn count_handles(&self) -> Result<u64, StoreError> {
        let e = |e: redb::StorageError| map_redb(e.into());
        let mut n = self.snap.handles.len().map_err(e)? as i64;
        // Each overlaid key once, with its newest value.
        let frozen = layer_range(&self.frozen, TableId::Handles, Bound::Unbounded)
            .filter(|(k, _)| !self.active.contains_key(*k));
        for (k, v) in frozen.chain(layer_range(&self.active, TableId::Handles, Bound::Unbounded)) {
            let below = self.snap.handles.get(&k[1..]).map_err(e)?.is_some();
            n += i64::from(v.is_some()) - i64::from(below);
        }
        Ok(n.max(0) as u64)
    }

    /// This view with `writes` (a batch's, logged) on top.
    pub(super) fn with(&self, writes: &BTreeMap<Vec<u8>, Option<Vec<u8>>>) -> View {
        let mut active = self.active.clone();
        let mut bytes = self.active_bytes;
        for (k, v) in writes {
            bytes += k.len() + v.as_ref().map_or(0, Vec::len);
            active.insert(Arc::from(k.as_slice()), v.as_deref().map(Arc::from));
        }
        View { snap: self.snap.clone(), active, active_bytes: bytes, frozen: self.frozen.clone() }
    }

    /// This view with its active layer frozen, for a checkpoint to write.
    pub(super) fn freeze(&self) -> View {
        View { snap: self.snap.clone(), active: Layer::new(), active_bytes: 0, frozen: self.active.clone() }
    }

    /// This view over `snap`, a snapshot taken after the frozen layer went into redb.
    pub(super) fn thawed(&self, snap: Arc<Snapshot>) -> View {
        View { snap, active: self.active.clone(), active_bytes: self.active_bytes, frozen: Layer::new() }
    }
}

/// The entries of `layer` in `table` from `from` on: `table ‖ key` → value.
fn layer_range<'a>(
    layer: &'a Layer,
    table: TableId,
    from: Bound<&[u8]>,
) -> impl Iterator<Item = (&'a [u8], Option<&'a [u8]>)> + 'a {
    let (lo, hi) = overlay_bounds(table, from);
    let lo = lo.as_ref().map(Vec::as_slice);
    let hi = hi.as_ref().map(Vec::as_slice);
    layer.range::<_, [u8]>((lo, hi)).map(|(k, v)| (&k[..], v.as_deref()))
}

fn snapshot_range<'a>(s: &'a Snapshot, table: TableId, from: Bound<&[u8]>) -> Result<Items<'a>, StoreError> {
    match table {
        TableId::Handles => Ok(resolved(s.resolver.as_ref(), table_range(&s.handles, from, |v| v.to_vec())?)),
        TableId::Docs => table_range(&s.docs, from, |v| v.to_vec()),
        TableId::TxnLog => table_range(&s.txn_log, from, |v| v.to_vec()),
        TableId::DocIndex => table_range(&s.doc_index, from, |()| Vec::new()),
        TableId::Meta => text_range(&s.meta, from),
        TableId::TxnState => text_range(&s.txn_state, from),
    }
}

/// The stored value of `key` in a table keyed by bytes (a snapshot's or a write
/// transaction's), through `value`.
pub(super) fn table_get<V: redb::Value + 'static>(
    t: &impl ReadableTable<&'static [u8], V>,
    key: &[u8],
    value: fn(V::SelfType<'_>) -> Vec<u8>,
) -> Result<Option<Vec<u8>>, StoreError> {
    Ok(t.get(key).map_err(|e| map_redb(e.into()))?.map(|g| value(g.value())))
}

/// [`table_get`] in a table keyed by text (a key that is not UTF-8 is in none).
pub(super) fn text_get(
    t: &impl ReadableTable<&'static str, &'static [u8]>,
    key: &[u8],
) -> Result<Option<Vec<u8>>, StoreError> {
    let Ok(key) = std::str::from_utf8(key) else { return Ok(None) };
    Ok(t.get(key).map_err(|e| map_redb(e.into()))?.map(|g| g.value().to_vec()))
}

/// The entries of a table keyed by bytes from `from` on, values through `value`.
pub(super) fn table_range<'a, V: redb::Value + 'static>(
    t: &'a impl ReadableTable<&'static [u8], V>,
    from: Bound<&[u8]>,
    value: fn(V::SelfType<'_>) -> Vec<u8>,
) -> Result<Items<'a>, StoreError> {
    let e = |e: redb::StorageError| map_redb(e.into());
    let range = t.range::<&[u8]>((from, Bound::Unbounded)).map_err(e)?;
    Ok(Box::new(range.map(move |item| {
        let (k, v) = item.map_err(e)?;
        Ok((k.value().to_vec(), value(v.value())))
    })))
}

/// [`table_range`] of a table keyed by text.
pub(super) fn text_range<'a>(
    t: &'a impl ReadableTable<&'static str, &'static [u8]>,
    from: Bound<&[u8]>,
) -> Result<Items<'a>, StoreError> {
    let e = |e: redb::StorageError| map_redb(e.into());
    // Keys are UTF-8; a bound that is not compares as its lossy form.
    let from = from.map(|k| String::from_utf8_lossy(k).into_owned());
    let range = t.range::<&str>((from.as_ref().map(String::as_str), Bound::Unbounded)).map_err(e)?;
    Ok(Box::new(range.map(move |item| {
        let (k, v) = item.map_err(e)?;
        Ok((k.value().as_bytes().to_vec(), v.value().to_vec()))
    })))
}

/// Handle entries as redb holds them, with the values that are locations
/// read through the key directory (`embedded_keydir_locations.rs`).
pub(super) fn resolved<'a>(resolver: Option<&'a keydir::Resolver>, items: Items<'a>) -> Items<'a> {
    Box::new(items.map(move |item| {
        let (k, v) = item?;
        let v = keydir::resolve(resolver, &k, v)?;
        Ok((k, v))
    }))
}

/// `over` (key order; `None`: removed) merged over `base` (key order).
pub(super) fn merged<'a>(base: Items<'a>, over: impl Iterator<Item = (Vec<u8>, Option<Vec<u8>>)> + 'a) -> Items<'a> {
    Box::new(Merge { base: base.peekable(), over: over.peekable() })
}

/// `over` (key order; `None`: removed) merged over `base` (key order).
struct Merge<B: Iterator<Item = Item>, O: Iterator<Item = (Vec<u8>, Option<Vec<u8>>)>> {
    base: Peekable<B>,
    over: Peekable<O>,
}

impl<B: Iterator<Item = Item>, O: Iterator<Item = (Vec<u8>, Option<Vec<u8>>)>> Iterator for Merge<B, O> {
    type Item = Item;

    fn next(&mut self) -> Option<Item> {
        loop {
            let order = match (self.base.peek(), self.over.peek()) {
                (None, None) => return None,
                (Some(Err(_)), _) | (Some(Ok(_)), None) => return self.base.next(),
                (None, Some(_)) => std::cmp::Ordering::Greater,
                (Some(Ok((b, _))), Some((o, _))) => b.as_slice().cmp(o.as_slice()),
            };
            match order {
                std::cmp::Ordering::Less => return self.base.next(),
                std::cmp::Ordering::Equal => drop(self.base.next()),
                std::cmp::Ordering::Greater => {}
            }
            let (k, v) = self.over.next()?;
            if let Some(v) = v {
                return Some(Ok((k, v)));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(k: &str, v: &str) -> Item {
        Ok((k.as_bytes().to_vec(), v.as_bytes().to_vec()))
    }

    #[test]
    fn merge_puts_the_overlay_over_the_base() {
        let base = vec![item("a", "1"), item("c", "3"), item("e", "5"), item("g", "7")];
        let over = vec![
            (b"b".to_vec(), Some(b"2".to_vec())),
            (b"c".to_vec(), None),
            (b"e".to_vec(), Some(b"55".to_vec())),
            (b"h".to_vec(), None),
            (b"i".to_vec(), Some(b"9".to_vec())),
        ];
        let merged: Vec<(String, String)> =
            Merge { base: base.into_iter().peekable(), over: over.into_iter().peekable() }
                .map(|i| {
                    let (k, v) = i.unwrap();
                    (String::from_utf8(k).unwrap(), String::from_utf8(v).unwrap())
                })
                .collect();
        let want = [("a", "1"), ("b", "2"), ("e", "55"), ("g", "7"), ("i", "9")];
        assert_eq!(merged, want.map(|(k, v)| (k.to_string(), v.to_string())));
    }
}
