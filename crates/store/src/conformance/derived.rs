//! Conformance tests of derived documents (re-exported by [`super`]): the
//! documents of a contributor that are a function of the handle's record,
//! which a store may keep as index entries only. Whatever it keeps, lookups
//! must find a handle under exactly the values of its current record.

use std::sync::Arc;

use super::fixtures::url_record;
use crate::{
    DocContributor, DocWrite, Document, Expect, HandleRecord, IndexEntry, IndexMatch, Observed, ReplicatedChange,
    Store, TxnAction, TxnEntry,
};
use handled_proto::HandleValue;

/// The collection of [`indexed_by_url`]'s documents (index "url").
pub const URL_INDEX: &str = "by-url";

/// Indexes every URL value of a handle, as the server's reverse lookup does.
struct UrlIndex;

impl DocContributor for UrlIndex {
    fn contribute(&self, key: &[u8], record: Option<&HandleRecord>, out: &mut Vec<DocWrite>) {
        let urls = record.iter().flat_map(|r| &r.values).filter(|v| v.value_type == b"URL");
        let index: Vec<IndexEntry> = urls.map(|v| IndexEntry::new("url", v.data.as_slice())).collect();
        let doc = (!index.is_empty()).then(|| Document::new(Vec::new(), index));
        out.push(DocWrite::new(URL_INDEX, key, doc));
    }

    fn derived(&self) -> bool {
        true
    }
}

/// `s` under a layer that adds a derived document to every handle write:
/// the handle's URL values, under index "url" of [`URL_INDEX`].
pub fn indexed_by_url(s: Arc<dyn Store>) -> Arc<dyn Store> {
    let s: Arc<dyn Store> = Arc::new(Observed::new(s));
    s.hooks().expect("an observed store has hooks").contribute(Arc::new(UrlIndex));
    s
}

fn urls(values: &[&str]) -> HandleRecord {
    HandleRecord::new(values.iter().zip(1..).map(|(u, i)| HandleValue::new(i, "URL", *u)).collect())
}

/// The handles found under each of `values` (`-` where none is).
pub(crate) async fn found(s: &Arc<dyn Store>, values: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    for v in values {
        let hits = s.doc_lookup(URL_INDEX, "url", IndexMatch::Exact(v.as_bytes()), None, 10).await.unwrap();
        let ids: Vec<String> = hits.into_iter().map(|h| String::from_utf8(h.id).unwrap()).collect();
        out.push(if ids.is_empty() { "-".to_owned() } else { ids.join(",") });
    }
    out
}

/// Creates, conflicts, replacements, deletes and bulk loads (one handle twice
/// in a load, and a load over existing handles) keep the index to the records.
pub async fn derived_documents_follow_the_handle(s: Arc<dyn Store>) {
    let s = indexed_by_url(s);
    assert!(s.swap(b"T/1", Expect::Absent, Some(url_record("a"))).await.unwrap().is_done());
    assert_eq!(found(&s, &["a"]).await, ["T/1"]);
    // A conflict leaves the handle and its entries alone.
    assert!(!s.swap(b"T/1", Expect::Absent, Some(url_record("x"))).await.unwrap().is_done());
    assert_eq!(found(&s, &["a", "x"]).await, ["T/1", "-"]);
    // A replacement takes the old entries away.
    assert!(s.swap(b"T/1", Expect::Any, Some(urls(&["b", "c"]))).await.unwrap().is_done());
    assert_eq!(found(&s, &["a", "b", "c"]).await, ["-", "T/1", "T/1"]);
    let expected = Expect::Present(urls(&["b", "c"]));
    assert!(s.swap(b"T/1", expected, Some(urls(&["c", "d"]))).await.unwrap().is_done());
    assert_eq!(found(&s, &["b", "c", "d"]).await, ["-", "T/1", "T/1"]);
    // A record with no URL has no entries; a delete takes them all away.
    assert!(s.swap(b"T/2", Expect::Absent, Some(urls(&["d"]))).await.unwrap().is_done());
    assert_eq!(found(&s, &["d"]).await, ["T/1,T/2"]);
    let no_url = HandleRecord::new(vec![HandleValue::new(1, "EMAIL", "d")]);
    assert!(s.swap(b"T/2", Expect::Any, Some(no_url)).await.unwrap().is_done());
    assert!(s.swap(b"T/1", Expect::Any, None).await.unwrap().is_done());
    assert_eq!(found(&s, &["c", "d"]).await, ["-", "-"]);
    // A bulk load: the later of two records of one handle wins, entries too.
    let load = vec![(b"T/3".to_vec(), url_record("e")), (b"T/4".to_vec(), url_record("f"))];
    s.put_many(load.into_iter().chain([(b"T/3".to_vec(), url_record("g"))]).collect()).await.unwrap();
    assert_eq!(s.get(b"T/3").await.unwrap(), Some(url_record("g")));
    assert_eq!(found(&s, &["e", "f", "g"]).await, ["-", "T/4", "T/3"]);
    // And over handles that exist.
    s.put_many(vec![(b"T/4".to_vec(), url_record("h")), (b"T/1".to_vec(), url_record("i"))]).await.unwrap();
    assert_eq!(found(&s, &["f", "h", "i"]).await, ["-", "T/4", "T/1"]);
}

fn change(
    id: u64,
    action: TxnAction,
    handle: &str,
    record: Option<HandleRecord>,
    priority: Option<i32>,
) -> ReplicatedChange {
    let entry = TxnEntry { id, date_ms: 1_000 + id, action, handle: handle.as_bytes().to_vec() };
    ReplicatedChange { entry, record, priority }
}

/// Pulled changes keep the index to the records, a handle changed twice in a
/// batch included (of the documents suite, on stores with a transaction log:
/// all that keep documents do).
pub async fn derived_documents_follow_pulled_changes(s: Arc<dyn Store>) {
    let s = indexed_by_url(s);
    let batch = vec![
        change(1, TxnAction::Create, "T/1", Some(url_record("a")), None),
        change(2, TxnAction::Create, "T/2", Some(url_record("b")), None),
        change(3, TxnAction::Update, "T/1", Some(url_record("c")), None),
    ];
    s.apply_replicated(batch, Vec::new()).await.unwrap();
    assert_eq!(found(&s, &["a", "b", "c"]).await, ["-", "T/2", "T/1"]);
    s.apply_replicated(vec![change(4, TxnAction::Delete, "T/2", None, None)], Vec::new()).await.unwrap();
    assert_eq!(found(&s, &["b"]).await, ["-"]);
}

/// Another primary's change that loses to a newer one leaves the index as
/// the winner made it, in whichever order the two come in one batch.
pub async fn derived_documents_of_a_losing_change_are_dropped(s: Arc<dyn Store>) {
    let s = indexed_by_url(s);
    let newer = change(9, TxnAction::Update, "T/1", Some(url_record("new")), Some(1));
    let older = change(8, TxnAction::Update, "T/1", Some(url_record("old")), Some(1));
    s.apply_replicated(vec![newer, older], Vec::new()).await.unwrap();
    assert_eq!(s.get(b"T/1").await.unwrap(), Some(url_record("new")));
    assert_eq!(found(&s, &["new", "old"]).await, ["T/1", "-"]);
    // A losing change before a winning one of the same handle, in one batch.
    let older = change(7, TxnAction::Update, "T/1", Some(url_record("older")), Some(1));
    let newest = change(11, TxnAction::Update, "T/1", Some(url_record("newest")), Some(1));
    s.apply_replicated(vec![older, newest], Vec::new()).await.unwrap();
    assert_eq!(found(&s, &["new", "older", "newest"]).await, ["-", "-", "T/1"]);
}
