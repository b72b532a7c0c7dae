//! Conformance tests of documents (re-exported by [`super`]).

use std::collections::BTreeSet;
use std::sync::Arc;

use super::fixtures::url_record;
use super::on_tasks;
use crate::{
    DocExpect, DocOutcome, DocWrite, Document, Expect, IndexEntry, IndexHit, IndexMatch, Store, StoreError, SwapOutcome,
};

fn doc(body: &str, entries: &[(&str, &str)]) -> Document {
    Document::new(body.as_bytes(), entries.iter().map(|(n, k)| IndexEntry::new(*n, k.as_bytes())).collect())
}

async fn ids(s: &Arc<dyn Store>, coll: &str, index: &str, m: IndexMatch<'_>) -> Vec<String> {
    let hits = s.doc_lookup(coll, index, m, None, 1000).await.unwrap();
    hits.into_iter().map(|h| String::from_utf8(h.id).unwrap()).collect()
}

pub async fn doc_swap_basics(s: Arc<dyn Store>) {
    assert_eq!(s.doc_get("c", b"x").await.unwrap(), None);
    let d1 = doc("one", &[("b", "k"), ("a", "k"), ("b", "k")]);
    assert_eq!(d1.index.len(), 2, "normalized: sorted, no duplicates");
    let out = s.doc_swap("c", b"x", DocExpect::Absent, Some(d1.clone())).await.unwrap();
    assert_eq!(out, DocOutcome::Done { previous: None });
    assert_eq!(s.doc_get("c", b"x").await.unwrap(), Some(d1.clone()));
    // Unnormalized input is stored normalized.
    let raw = Document {
        body: b"raw".to_vec(),
        index: vec![IndexEntry::new("z", "1"), IndexEntry::new("a", "1"), IndexEntry::new("z", "1")],
    };
    s.doc_swap("c", b"raw", DocExpect::Any, Some(raw.clone())).await.unwrap();
    assert_eq!(s.doc_get("c", b"raw").await.unwrap(), Some(raw.clone().normalized()));
    // And an unnormalized expectation still matches.
    let out = s.doc_swap("c", b"raw", DocExpect::Present(raw), None).await.unwrap();
    assert!(out.is_done());
    // Create over an existing document: conflict, nothing changes.
    let out = s.doc_swap("c", b"x", DocExpect::Absent, Some(doc("two", &[]))).await.unwrap();
    assert_eq!(out, DocOutcome::Conflict { current: Some(d1.clone()) });
    // Present: the body AND the entries must match.
    let stale = doc("one", &[("a", "k")]);
    let out = s.doc_swap("c", b"x", DocExpect::Present(stale), Some(doc("two", &[]))).await.unwrap();
    assert!(!out.is_done());
    let d2 = doc("two", &[("a", "k2")]);
    let out = s.doc_swap("c", b"x", DocExpect::Present(d1.clone()), Some(d2.clone())).await.unwrap();
    assert_eq!(out, DocOutcome::Done { previous: Some(d1) });
    // Same id in another collection is another document; collections are not handles.
    assert_eq!(s.doc_get("c2", b"x").await.unwrap(), None);
    assert_eq!(s.doc_get("c", b"x\0").await.unwrap(), None);
    assert_eq!(s.count().await.unwrap(), 0);
    assert!(s.scan_keys(b"", None, 10).await.unwrap().is_empty());
    // Present on an absent document conflicts with None; delete with Any of an absent one is fine.
    let out = s.doc_swap("c", b"nope", DocExpect::Present(d2.clone()), None).await.unwrap();
    assert_eq!(out, DocOutcome::Conflict { current: None });
    assert_eq!(s.doc_swap("c", b"nope", DocExpect::Any, None).await.unwrap(), DocOutcome::Done { previous: None });
    let out = s.doc_swap("c", b"x", DocExpect::Any, None).await.unwrap();
    assert_eq!(out, DocOutcome::Done { previous: Some(d2) });
    assert_eq!(s.doc_get("c", b"x").await.unwrap(), None);
}

/// Index entries follow every write of their document, in the same step.
pub async fn doc_index_maintenance(s: Arc<dyn Store>) {
    let exact = |k: &'static str| IndexMatch::Exact(k.as_bytes());
    s.doc_swap("h", b"h1", DocExpect::Absent, Some(doc("1", &[("user", "alice"), ("email", "a@x")]))).await.unwrap();
    s.doc_swap("h", b"h2", DocExpect::Absent, Some(doc("2", &[("user", "alice")]))).await.unwrap();
    s.doc_swap("h", b"h3", DocExpect::Absent, Some(doc("3", &[("user", "bob")]))).await.unwrap();
    // The same index name in another collection is separate.
    s.doc_swap("o", b"h9", DocExpect::Absent, Some(doc("9", &[("user", "alice")]))).await.unwrap();
    assert_eq!(ids(&s, "h", "user", exact("alice")).await, ["h1", "h2"]);
    assert_eq!(ids(&s, "h", "user", exact("bob")).await, ["h3"]);
    assert_eq!(ids(&s, "h", "email", exact("a@x")).await, ["h1"]);
    assert!(ids(&s, "h", "email", exact("alice")).await.is_empty(), "indexes are separate");
    assert!(ids(&s, "h", "user", exact("alic")).await.is_empty(), "exact is exact");
    assert_eq!(ids(&s, "o", "user", exact("alice")).await, ["h9"]);
    // Move h1 to bob: the old entries go, the new one comes, in the same write.
    let cur = s.doc_get("h", b"h1").await.unwrap().unwrap();
    s.doc_swap("h", b"h1", DocExpect::Present(cur), Some(doc("1b", &[("user", "bob")]))).await.unwrap();
    assert_eq!(ids(&s, "h", "user", exact("alice")).await, ["h2"]);
    assert_eq!(ids(&s, "h", "user", exact("bob")).await, ["h1", "h3"]);
    assert!(ids(&s, "h", "email", exact("a@x")).await.is_empty());
    // A failed swap changes no entry.
    let out = s.doc_swap("h", b"h2", DocExpect::Absent, Some(doc("x", &[("user", "carol")]))).await.unwrap();
    assert!(!out.is_done());
    assert!(ids(&s, "h", "user", exact("carol")).await.is_empty());
    assert_eq!(ids(&s, "h", "user", exact("alice")).await, ["h2"]);
    // An unconditional overwrite also replaces the entries.
    s.doc_swap("h", b"h2", DocExpect::Any, Some(doc("2b", &[("user", "alice"), ("tag", "t")]))).await.unwrap();
    assert_eq!(ids(&s, "h", "user", exact("alice")).await, ["h2"]);
    assert_eq!(ids(&s, "h", "tag", exact("t")).await, ["h2"]);
    // Delete removes the document's entries and nobody else's.
    s.doc_swap("h", b"h2", DocExpect::Any, None).await.unwrap();
    assert!(ids(&s, "h", "user", exact("alice")).await.is_empty());
    assert!(ids(&s, "h", "tag", exact("t")).await.is_empty());
    assert_eq!(ids(&s, "o", "user", exact("alice")).await, ["h9"]);
    // One document may carry several keys of one index.
    s.doc_swap("h", b"m", DocExpect::Absent, Some(doc("m", &[("v", "a"), ("v", "b")]))).await.unwrap();
    assert_eq!(ids(&s, "h", "v", exact("a")).await, ["m"]);
    assert_eq!(ids(&s, "h", "v", exact("b")).await, ["m"]);
}

/// Prefix lookups, (key, id) order, binary keys and paging.
pub async fn doc_lookup_prefix_order_paging(s: Arc<dyn Store>) {
    let keys: Vec<Vec<u8>> = vec![
        b"".to_vec(),
        vec![0],
        vec![0, 0],
        b"a".to_vec(),
        vec![b'a', 0],
        b"ab".to_vec(),
        b"b".to_vec(),
        vec![0xff],
    ];
    let mut expected = BTreeSet::new();
    for (n, k) in keys.iter().enumerate() {
        for id in [vec![b'1'], vec![0u8, b'2']] {
            let mut id = id.clone();
            id.push(n as u8);
            let d = Document::new(
                b"x".to_vec(),
                vec![IndexEntry::new("i", k.clone()), IndexEntry::new("other", b"a".to_vec())],
            );
            s.doc_swap("c", &id, DocExpect::Absent, Some(d)).await.unwrap();
            expected.insert(IndexHit { key: k.clone(), id });
        }
    }
    let all = s.doc_lookup("c", "i", IndexMatch::Prefix(b""), None, 1000).await.unwrap();
    assert_eq!(all, expected.iter().cloned().collect::<Vec<_>>(), "sorted by (key, id)");
    let a = s.doc_lookup("c", "i", IndexMatch::Prefix(b"a"), None, 1000).await.unwrap();
    assert_eq!(a.len(), 6);
    assert!(a.iter().all(|h| h.key.starts_with(b"a")));
    let z = s.doc_lookup("c", "i", IndexMatch::Prefix(&[0]), None, 1000).await.unwrap();
    assert_eq!(z.len(), 4);
    let e = s.doc_lookup("c", "i", IndexMatch::Exact(&[0]), None, 1000).await.unwrap();
    assert_eq!(e.len(), 2);
    assert!(e.iter().all(|h| h.key == [0]));
    assert!(s.doc_lookup("c", "i", IndexMatch::Prefix(b"c"), None, 10).await.unwrap().is_empty());
    assert!(s.doc_lookup("c", "i", IndexMatch::Prefix(b""), None, 0).await.unwrap().is_empty());
    // Page through 3 at a time.
    let mut got = Vec::new();
    let mut after: Option<IndexHit> = None;
    loop {
        let page = s.doc_lookup("c", "i", IndexMatch::Prefix(b""), after.as_ref(), 3).await.unwrap();
        assert!(page.len() <= 3);
        let Some(last) = page.last().cloned() else {
            break;
        };
        got.extend(page);
        after = Some(last);
    }
    assert_eq!(got, all);
    // start_after inside an exact match.
    let page = s.doc_lookup("c", "i", IndexMatch::Exact(b"a"), Some(&e[0].clone()), 10).await.unwrap();
    assert_eq!(page.len(), 2, "start_after before the range starts at the range");
    let first_a = &a[0];
    let page = s.doc_lookup("c", "i", IndexMatch::Exact(b"a"), Some(first_a), 10).await.unwrap();
    assert_eq!(page.len(), 1);
    // Big-endian numbers as keys give ordered range walks (deadlines).
    for t in [30u64, 5, 1000, 7] {
        let d = Document::new(b"t".to_vec(), vec![IndexEntry::new("due", t.to_be_bytes().to_vec())]);
        s.doc_swap("t", format!("t{t}").as_bytes(), DocExpect::Any, Some(d)).await.unwrap();
    }
    let due: Vec<u64> = s
        .doc_lookup("t", "due", IndexMatch::Prefix(b""), None, 10)
        .await
        .unwrap()
        .iter()
        .map(|h| u64::from_be_bytes(h.key.as_slice().try_into().unwrap()))
        .collect();
    assert_eq!(due, [5, 7, 30, 1000]);
}

pub async fn doc_scan_collection(s: Arc<dyn Store>) {
    for id in ["b", "a", "a/1", "a/2", "c"] {
        s.doc_swap("col", id.as_bytes(), DocExpect::Absent, Some(doc(id, &[]))).await.unwrap();
    }
    // Neighbouring collection names must not leak into the scan.
    s.doc_swap("co", b"lx", DocExpect::Absent, Some(doc("n", &[]))).await.unwrap();
    s.doc_swap("col2", b"a", DocExpect::Absent, Some(doc("n", &[]))).await.unwrap();
    s.doc_swap("col\0", b"a", DocExpect::Absent, Some(doc("n", &[]))).await.unwrap();
    let all = s.doc_scan("col", b"", None, 100).await.unwrap();
    let names: Vec<&[u8]> = all.iter().map(|(k, _)| k.as_slice()).collect();
    assert_eq!(names, [&b"a"[..], b"a/1", b"a/2", b"b", b"c"]);
    assert_eq!(all[3].1, doc("b", &[]));
    let a = s.doc_scan("col", b"a", None, 100).await.unwrap();
    assert_eq!(a.len(), 3);
    let page = s.doc_scan("col", b"", Some(b"a/1"), 2).await.unwrap();
    let names: Vec<&[u8]> = page.iter().map(|(k, _)| k.as_slice()).collect();
    assert_eq!(names, [&b"a/2"[..], b"b"]);
    assert!(s.doc_scan("col", b"", Some(b"c"), 10).await.unwrap().is_empty());
    assert!(s.doc_scan("col", b"", None, 0).await.unwrap().is_empty());
    assert_eq!(s.doc_scan("col\0", b"", None, 10).await.unwrap().len(), 1);
    assert!(s.doc_scan("nothing", b"", None, 10).await.unwrap().is_empty());
}

/// Compare-and-set increments from many tasks: no lost update, and exactly the
/// final state's index entry remains.
pub async fn doc_concurrent_cas(s: Arc<dyn Store>) {
    let counter =
        |n: u64| Document::new(n.to_string().into_bytes(), vec![IndexEntry::new("n", n.to_be_bytes().to_vec())]);
    s.doc_swap("k", b"ctr", DocExpect::Absent, Some(counter(0))).await.unwrap();
    on_tasks(&s, 8, |s, _| async move {
        for _ in 0..20 {
            let mut cur = s.doc_get("k", b"ctr").await.unwrap().unwrap();
            loop {
                let n: u64 = std::str::from_utf8(&cur.body).unwrap().parse().unwrap();
                match s.doc_swap("k", b"ctr", DocExpect::Present(cur.clone()), Some(counter(n + 1))).await.unwrap() {
                    DocOutcome::Done { .. } => break,
                    DocOutcome::Conflict { current } => cur = current.unwrap(),
                }
            }
        }
    })
    .await;
    assert_eq!(s.doc_get("k", b"ctr").await.unwrap(), Some(counter(160)));
    let hits = s.doc_lookup("k", "n", IndexMatch::Prefix(b""), None, 1000).await.unwrap();
    assert_eq!(hits, vec![IndexHit { key: 160u64.to_be_bytes().to_vec(), id: b"ctr".to_vec() }]);
    assert!(s.stats().write_ops >= 161);
}

pub async fn doc_closed_refuses(s: Arc<dyn Store>) {
    s.doc_swap("c", b"a", DocExpect::Absent, Some(doc("a", &[]))).await.unwrap();
    s.close();
    let r = s.doc_swap("c", b"b", DocExpect::Absent, Some(doc("b", &[]))).await;
    assert!(matches!(r, Err(StoreError::Closed)), "{r:?}");
}

fn riding(id: &[u8], entries: &[(&str, &str)]) -> DocWrite {
    let d = (!entries.is_empty()).then(|| doc("", entries));
    DocWrite::new("derived", id.to_vec(), d)
}

/// Documents riding along with a handle write are written when, and only when,
/// the handle write is done, and replace whatever document was there.
pub async fn swap_with_docs_follows_the_handle(s: Arc<dyn Store>) {
    let exact = |k: &'static str| IndexMatch::Exact(k.as_bytes());
    let r1 = url_record("one");
    let out = s
        .swap_with_docs(b"T/1", Expect::Absent, Some(r1.clone()), vec![riding(b"T/1", &[("url", "one")])])
        .await
        .unwrap();
    assert!(out.is_done());
    assert_eq!(ids(&s, "derived", "url", exact("one")).await, ["T/1"]);
    // A conflicting write leaves the handle AND its document alone.
    let out = s
        .swap_with_docs(b"T/1", Expect::Absent, Some(url_record("x")), vec![riding(b"T/1", &[("url", "x")])])
        .await
        .unwrap();
    assert_eq!(out, SwapOutcome::Conflict { current: Some(r1.clone()) });
    assert!(ids(&s, "derived", "url", exact("x")).await.is_empty());
    assert_eq!(ids(&s, "derived", "url", exact("one")).await, ["T/1"]);
    // Several documents in one step, and old entries go with the replaced document.
    let two = vec![riding(b"T/1", &[("url", "two")]), DocWrite::new("other", b"o".to_vec(), Some(doc("b", &[])))];
    let out = s.swap_with_docs(b"T/1", Expect::Present(r1), Some(url_record("two")), two).await.unwrap();
    assert!(out.is_done());
    assert!(ids(&s, "derived", "url", exact("one")).await.is_empty());
    assert_eq!(ids(&s, "derived", "url", exact("two")).await, ["T/1"]);
    assert_eq!(s.doc_get("other", b"o").await.unwrap(), Some(doc("b", &[])));
    // Deleting the handle with a `None` document deletes both.
    let out = s.swap_with_docs(b"T/1", Expect::Any, None, vec![riding(b"T/1", &[])]).await.unwrap();
    assert!(out.is_done());
    assert_eq!(s.get(b"T/1").await.unwrap(), None);
    assert_eq!(s.doc_get("derived", b"T/1").await.unwrap(), None);
    assert!(ids(&s, "derived", "url", exact("two")).await.is_empty());
    // An invalid document refuses the whole write.
    let bad =
        DocWrite::new("derived", b"T/2".to_vec(), Some(doc("", &[("url", &"k".repeat(crate::MAX_INDEX_KEY + 1))])));
    assert!(s.swap_with_docs(b"T/2", Expect::Absent, Some(url_record("2")), vec![bad]).await.is_err());
    assert_eq!(s.get(b"T/2").await.unwrap(), None);
    // Bulk loads carry documents too.
    let records = vec![(b"T/3".to_vec(), url_record("3")), (b"T/4".to_vec(), url_record("4"))];
    s.put_many_with_docs(records, vec![riding(b"T/3", &[("url", "3")]), riding(b"T/4", &[("url", "4")])])
        .await
        .unwrap();
    assert_eq!(s.get(b"T/4").await.unwrap(), Some(url_record("4")));
    assert_eq!(ids(&s, "derived", "url", exact("3")).await, ["T/3"]);
    assert_eq!(ids(&s, "derived", "url", exact("4")).await, ["T/4"]);
}

/// Concurrent writers of one handle: the document always matches the handle state
/// that won, never a state that lost.
pub async fn swap_with_docs_concurrent(s: Arc<dyn Store>) {
    on_tasks(&s, 8, |s, t| async move {
        for i in 0..25u32 {
            let data = format!("{t}-{i}");
            let docs = vec![DocWrite::new("derived", b"T/c".to_vec(), Some(doc(&data, &[])))];
            s.swap_with_docs(b"T/c", Expect::Any, Some(url_record(&data)), docs).await.unwrap();
        }
    })
    .await;
    let record = s.get(b"T/c").await.unwrap().unwrap();
    let body = s.doc_get("derived", b"T/c").await.unwrap().unwrap().body;
    assert_eq!(record, url_record(std::str::from_utf8(&body).unwrap()));
}
