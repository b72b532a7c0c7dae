//! Documents on the durable backend: persistence with their index entries,
//! group commit together with handle writes, and stores created before documents.

use std::sync::Arc;

use handled_store::conformance::url_record;
use handled_store::{
    DocExpect, Document, DocumentStore, EmbeddedOptions, EmbeddedStore, Expect, IndexEntry, IndexMatch, RecordStore,
    Store, HANDLES_TABLE, META_TABLE, STORE_FILE_NAME,
};

fn doc(n: u32) -> Document {
    Document::new(format!("body{n}").into_bytes(), vec![IndexEntry::new("user", format!("u{}", n % 3).into_bytes())])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn documents_and_index_survive_reopen() {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = EmbeddedStore::open_dir(dir.path(), EmbeddedOptions::default()).unwrap();
        for n in 0..30 {
            s.doc_swap("h", format!("d{n:02}").as_bytes(), DocExpect::Absent, Some(doc(n))).await.unwrap();
        }
        // Move d00 from u0 to u1 and delete d03 (u0).
        s.doc_swap("h", b"d00", DocExpect::Present(doc(0)), Some(doc(1))).await.unwrap();
        s.doc_swap("h", b"d03", DocExpect::Any, None).await.unwrap();
    }
    let s = EmbeddedStore::open_dir(dir.path(), EmbeddedOptions::default()).unwrap();
    assert!(!s.was_repaired());
    assert_eq!(s.doc_get("h", b"d00").await.unwrap(), Some(doc(1)));
    assert_eq!(s.doc_get("h", b"d03").await.unwrap(), None);
    let u0 = s.doc_lookup("h", "user", IndexMatch::Exact(b"u0"), None, 100).await.unwrap();
    assert_eq!(u0.len(), 8, "10 minus the moved and the deleted one");
    assert!(u0.iter().all(|h| h.id != b"d00" && h.id != b"d03"));
    assert_eq!(s.doc_lookup("h", "user", IndexMatch::Exact(b"u1"), None, 100).await.unwrap().len(), 11);
    assert_eq!(s.doc_scan("h", b"", None, 100).await.unwrap().len(), 29);
}

/// Document writes share group commits with handle writes: many concurrent writers,
/// fewer fsyncs than writes, every acknowledged write readable.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn document_writes_are_group_committed() {
    let dir = tempfile::tempdir().unwrap();
    let s: Arc<dyn Store> = Arc::new(EmbeddedStore::open_dir(dir.path(), EmbeddedOptions::default()).unwrap());
    let mut joins = Vec::new();
    for t in 0..32u32 {
        let s = s.clone();
        joins.push(tokio::spawn(async move {
            for i in 0..10u32 {
                let n = t * 10 + i;
                s.doc_swap("h", format!("d{n}").as_bytes(), DocExpect::Absent, Some(doc(n))).await.unwrap();
                assert_eq!(s.doc_get("h", format!("d{n}").as_bytes()).await.unwrap(), Some(doc(n)));
                s.swap(format!("20.5000/{n}").as_bytes(), Expect::Absent, Some(url_record("x"))).await.unwrap();
            }
        }));
    }
    for j in joins {
        j.await.unwrap();
    }
    let st = s.stats();
    assert_eq!(st.write_ops, 640);
    assert!(st.fsyncs < 640, "expected batching, got {} fsyncs", st.fsyncs);
    assert!(st.max_batch > 1);
    let mut total = 0;
    for u in [&b"u0"[..], b"u1", b"u2"] {
        total += s.doc_lookup("h", "user", IndexMatch::Exact(u), None, 1000).await.unwrap().len();
    }
    assert_eq!(total, 320);
}

/// A data directory written before documents existed opens and gains the tables.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn store_without_document_tables_is_upgraded() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(STORE_FILE_NAME);
    {
        let db = redb::Database::create(&path).unwrap();
        let txn = db.begin_write().unwrap();
        {
            let mut h = txn.open_table(redb::TableDefinition::<&[u8], &[u8]>::new(HANDLES_TABLE)).unwrap();
            h.insert(&b"20.5000/old"[..], url_record("old").encode_wire().as_slice()).unwrap();
            txn.open_table(redb::TableDefinition::<&str, &[u8]>::new(META_TABLE)).unwrap();
        }
        txn.commit().unwrap();
    }
    let s = EmbeddedStore::open(&path, EmbeddedOptions::default()).unwrap();
    assert_eq!(s.get(b"20.5000/old").await.unwrap(), Some(url_record("old")));
    assert_eq!(s.doc_get("h", b"x").await.unwrap(), None);
    s.doc_swap("h", b"x", DocExpect::Absent, Some(doc(1))).await.unwrap();
    assert_eq!(s.doc_lookup("h", "user", IndexMatch::Exact(b"u1"), None, 10).await.unwrap().len(), 1);
}
