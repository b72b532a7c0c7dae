//! The index's keys with a byte for their collection and index
//! (`embedded_docs_names.rs`): what a new store writes, what a store whose index
//! was written spelled out (format 4 and before) keeps, and names past the last
//! code.

use std::path::Path;
use std::sync::Arc;

use handled_store::conformance::{indexed_by_url, url_record, URL_INDEX};
use handled_store::{
    DocExpect, Document, EmbeddedOptions, EmbeddedStore, Expect, IndexEntry, IndexMatch, Store, DOC_INDEX_TABLE,
    STORE_FILE_NAME,
};
use redb::{ReadableDatabase, ReadableTable};

const INDEX: redb::TableDefinition<&[u8], ()> = redb::TableDefinition::new(DOC_INDEX_TABLE);

fn open(dir: &Path) -> Arc<dyn Store> {
    Arc::new(EmbeddedStore::open_dir(dir, EmbeddedOptions::default()).unwrap())
}

fn close(s: Arc<dyn Store>) {
    s.close();
    drop(s);
}

/// Every key of the index table, in order (the store closed).
fn index_rows(dir: &Path) -> Vec<Vec<u8>> {
    let db = redb::Database::open(dir.join(STORE_FILE_NAME)).unwrap();
    let txn = db.begin_read().unwrap();
    let rows = txn.open_table(INDEX).unwrap().iter().unwrap().map(|e| e.unwrap().0.value().to_vec()).collect();
    rows
}

/// `comp(x)`: `x`, then 0 1 (the names here have no NUL).
fn comp(x: &str) -> Vec<u8> {
    [x.as_bytes(), &[0, 1]].concat()
}

async fn found(s: &Arc<dyn Store>, url: &str) -> Vec<String> {
    let hits = s.doc_lookup(URL_INDEX, "url", IndexMatch::Exact(url.as_bytes()), None, 100).await.unwrap();
    hits.into_iter().map(|h| String::from_utf8(h.id).unwrap()).collect()
}

/// Handles `T/0`..`T/n` with the URLs `u{i % 10}`, imported and then swapped.
async fn fill(s: &Arc<dyn Store>, n: usize) {
    let records = (0..n / 2).map(|i| (format!("T/{i}").into_bytes(), url_record(&format!("u{}", i % 10))));
    s.put_many(records.collect()).await.unwrap();
    for i in n / 2..n {
        let k = format!("T/{i}");
        s.swap(k.as_bytes(), Expect::Absent, Some(url_record(&format!("u{}", i % 10)))).await.unwrap();
    }
}

/// A new store writes a byte for the collection and index of each entry, and
/// the name's code as a row of its own; the entries are found, moved and
/// removed by it, before and after a reopen.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_store_names_collection_and_index_with_a_byte() {
    let dir = tempfile::tempdir().unwrap();
    let s = indexed_by_url(open(dir.path()));
    fill(&s, 200).await;
    assert_eq!(found(&s, "u3").await.len(), 20);
    close(s);
    let rows = index_rows(dir.path());
    let code_row = [&[0, 1][..], &comp(URL_INDEX), &comp("url"), &[1]].concat();
    assert_eq!(rows[..2], [vec![0, 0, 1], code_row], "one code given, for the one pair");
    assert_eq!(rows.len(), 2 + 200);
    for (i, row) in rows[2..].iter().enumerate() {
        assert_eq!(row[0], 1, "entry {i}: {row:?}");
        let handle = &row[1 + 2 + 2..];
        assert_eq!(row[1..], [&comp(&format!("u{}", row[2] - b'0'))[..], handle].concat());
    }

    let s = indexed_by_url(open(dir.path()));
    assert_eq!(found(&s, "u3").await.len(), 20);
    s.swap(b"T/3", Expect::Any, Some(url_record("u4"))).await.unwrap();
    s.swap(b"T/13", Expect::Any, None).await.unwrap();
    s.put_many(vec![(b"T/23".to_vec(), url_record("new"))]).await.unwrap();
    assert_eq!(found(&s, "u3").await.len(), 17);
    assert_eq!(found(&s, "u4").await.len(), 21);
    assert_eq!(found(&s, "new").await, ["T/23"]);
    close(s);
    assert_eq!(index_rows(dir.path()).len(), 2 + 199, "the moved, removed and replaced entries are gone");
}

/// Rewrite a closed store's index as a server of format 4 wrote it: each
/// entry's code replaced by its spelled names, no rows of names.
fn spell_out(dir: &Path) {
    let rows = index_rows(dir);
    let spelled = [comp(URL_INDEX), comp("url")].concat();
    let db = redb::Database::open(dir.join(STORE_FILE_NAME)).unwrap();
    let txn = db.begin_write().unwrap();
    {
        let mut t = txn.open_table(INDEX).unwrap();
        for row in &rows {
            t.remove(row.as_slice()).unwrap();
        }
        for row in rows.iter().filter(|r| r[0] != 0) {
            assert_eq!(row[0], 1);
            t.insert([&spelled[..], &row[1..]].concat().as_slice(), ()).unwrap();
        }
        let format: redb::TableDefinition<&str, u64> = redb::TableDefinition::new("format");
        txn.open_table(format).unwrap().insert("version", 4).unwrap();
    }
    txn.commit().unwrap();
}

/// A store whose index was written spelled out (format 4) keeps spelling it
/// out: its entries are found and removed, and new ones are written as they are.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_with_spelled_out_keys_keeps_them() {
    let dir = tempfile::tempdir().unwrap();
    let s = indexed_by_url(open(dir.path()));
    fill(&s, 100).await;
    close(s);
    spell_out(dir.path());

    let s = indexed_by_url(open(dir.path()));
    assert_eq!(found(&s, "u3").await.len(), 10);
    s.swap(b"T/3", Expect::Any, Some(url_record("u4"))).await.unwrap();
    s.put_many(vec![(b"T/13".to_vec(), url_record("new"))]).await.unwrap();
    s.swap(b"T/100", Expect::Absent, Some(url_record("u3"))).await.unwrap();
    assert_eq!(found(&s, "u3").await, ["T/100", "T/23", "T/33", "T/43", "T/53", "T/63", "T/73", "T/83", "T/93"]);
    assert_eq!(found(&s, "new").await, ["T/13"]);
    close(s);
    let rows = index_rows(dir.path());
    assert_eq!(rows.len(), 101);
    let spelled = [comp(URL_INDEX), comp("url")].concat();
    assert!(rows.iter().all(|r| r.starts_with(&spelled)), "no coded key, no row of names");
}

/// Index names are data (a value type per index of the reverse lookup): past
/// the 254th pair, names are spelled out after a byte of their own, and both
/// kinds are found and removed alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_past_the_last_code_are_spelled_out() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let names = 300;
    let doc = |n: usize, key: &str| Document::new(Vec::new(), vec![IndexEntry::new(format!("n{n}"), key)]);
    for n in 0..names {
        s.doc_swap("c", format!("d{n}").as_bytes(), DocExpect::Absent, Some(doc(n, "a"))).await.unwrap();
    }
    close(s);
    let rows = index_rows(dir.path());
    let (named, entries): (Vec<_>, Vec<_>) = rows.iter().partition(|r| r[0] == 0);
    assert_eq!(named.len(), 1 + 254);
    assert!(named.contains(&&vec![0, 0, 254]));
    assert_eq!(entries.iter().filter(|r| r[0] == 0xff).count(), names - 254);

    let s = open(dir.path());
    for n in 0..names {
        let hits = s.doc_lookup("c", &format!("n{n}"), IndexMatch::Prefix(b""), None, 10).await.unwrap();
        assert_eq!(hits.len(), 1, "n{n}");
        assert_eq!(hits[0].id, format!("d{n}").into_bytes());
        let id = format!("d{n}");
        s.doc_swap("c", id.as_bytes(), DocExpect::Present(doc(n, "a")), Some(doc(n, "b"))).await.unwrap();
    }
    assert!(s.doc_lookup("c", "n0", IndexMatch::Exact(b"a"), None, 10).await.unwrap().is_empty());
    assert!(s.doc_lookup("c", "n299", IndexMatch::Exact(b"a"), None, 10).await.unwrap().is_empty());
    assert!(s.doc_lookup("c", "never", IndexMatch::Prefix(b""), None, 10).await.unwrap().is_empty());
    for n in 0..names {
        s.doc_swap("c", format!("d{n}").as_bytes(), DocExpect::Any, None).await.unwrap();
    }
    close(s);
    assert!(index_rows(dir.path()).iter().all(|r| r[0] == 0), "every entry removed, the names kept");
}

/// A backup of a store with spelled-out keys, restored, is a store with coded
/// keys (how a store made before them is converted); a backup of that one
/// restores as it is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restore_gives_spelled_out_names_codes() {
    let dir = tempfile::tempdir().unwrap();
    let spelled_dir = dir.path().join("spelled");
    let s = indexed_by_url(open(&spelled_dir));
    fill(&s, 100).await;
    close(s);
    spell_out(&spelled_dir);

    let restore = |from: &Path, to: &Path| {
        let s = open(from);
        let mut export = s.export().unwrap();
        std::fs::create_dir_all(to).unwrap();
        let mut restore = handled_store::EmbeddedRestore::create(&to.join(STORE_FILE_NAME)).unwrap();
        loop {
            let chunk = export.next_entries(300).unwrap();
            if chunk.is_empty() {
                break;
            }
            chunk.into_iter().for_each(|e| restore.add(e).unwrap());
        }
        restore.finish().unwrap();
        close(s);
    };
    let coded_dir = dir.path().join("coded");
    restore(&spelled_dir, &coded_dir);
    let rows = index_rows(&coded_dir);
    let code_row = [&[0, 1][..], &comp(URL_INDEX), &comp("url"), &[1]].concat();
    assert_eq!(rows[..2], [vec![0, 0, 1], code_row]);
    assert_eq!(rows.len(), 2 + 100);
    assert!(rows[2..].iter().all(|r| r[0] == 1));

    let again_dir = dir.path().join("again");
    restore(&coded_dir, &again_dir);
    assert_eq!(index_rows(&again_dir), rows, "a coded backup restores as it is");

    let s = indexed_by_url(open(&again_dir));
    assert_eq!(found(&s, "u3").await.len(), 10);
    s.swap(b"T/3", Expect::Any, Some(url_record("u4"))).await.unwrap();
    assert_eq!(found(&s, "u3").await.len(), 9);
    assert_eq!(found(&s, "u4").await.len(), 11);
    close(s);
}

/// Collection and index names of any bytes, empty ones and ones that begin
/// with NUL among them, get codes of their own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_of_any_bytes_get_codes() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let pairs = [("", ""), ("", "\0"), ("\0", ""), ("\0\0", "x"), ("c", ""), ("c", "\0")];
    for (n, (c, i)) in pairs.iter().enumerate() {
        let doc = Document::new(Vec::new(), vec![IndexEntry::new(*i, vec![0u8, n as u8])]);
        let done = s.doc_swap(c, format!("d{n}").as_bytes(), DocExpect::Absent, Some(doc)).await.unwrap();
        assert!(done.is_done());
    }
    close(s);
    let rows = index_rows(dir.path());
    assert_eq!(rows[0], [0, 0, pairs.len() as u8]);
    let s = open(dir.path());
    for (n, (c, i)) in pairs.iter().enumerate() {
        let hits = s.doc_lookup(c, i, IndexMatch::Prefix(b""), None, 10).await.unwrap();
        assert_eq!(hits.len(), 1, "{c:?} {i:?}");
        assert_eq!((hits[0].key.as_slice(), hits[0].id.clone()), (&[0u8, n as u8][..], format!("d{n}").into_bytes()));
    }
    close(s);
}
