//! Searches by value (`find_by_value`, what `/hrls` reads on SQL) on every
//! database and in both layouts: exact and prefix matches through an index
//! on `handles.data`, in (data, handle) order, paged; declined, naming
//! `value_index`, where there is no such index, and found once it is made.

use handled_proto::HandleValue;
use handled_store::sql::SqlLayout;
use handled_store::{
    HandleRecord, IndexHit, IndexMatch, RecordStore, SqlOptions, SqlStore, StoreError, MAX_SEARCHED_LEN,
};

use crate::{options, run_sql, DROP_DATA_INDEX};

/// A store on a fresh database with an index on data (made where there is none).
async fn indexed_store(name: &str, layout: SqlLayout) -> Option<SqlStore> {
    let o = options(name).await?;
    let o = SqlOptions { value_index: true, layout, ..o };
    Some(SqlStore::connect(&o).await.expect("open the sql store"))
}

fn hit(data: &str, id: &str) -> IndexHit {
    IndexHit { key: data.as_bytes().to_vec(), id: id.as_bytes().to_vec() }
}

async fn found_by_value(name: &str, layout: SqlLayout) {
    let Some(s) = indexed_store(name, layout).await else { return };
    let url = |i: usize| format!("https://example.org/{:02}", i % 20);
    // T/0..T/24: T/20..T/24 share their URL with T/0..T/4; T/Q has the URL
    // of T/7 as an EMAIL, T/C it in capitals.
    let mut records: Vec<(Vec<u8>, HandleRecord)> = (0..25)
        .map(|i| {
            let values = vec![HandleValue::new(1, "URL", url(i)), HandleValue::new(2, "EMAIL", "x@example.org")];
            (format!("T/{i}").into_bytes(), HandleRecord::new(values))
        })
        .collect();
    records.push((b"T/Q".to_vec(), HandleRecord::new(vec![HandleValue::new(1, "EMAIL", url(7))])));
    records.push((b"T/C".to_vec(), HandleRecord::new(vec![HandleValue::new(1, "URL", "HTTPS://EXAMPLE.ORG/07")])));
    // Longer than any search finds (MAX_SEARCHED_LEN), under the prefix below.
    let long = format!("https://example.org/{}", "l".repeat(MAX_SEARCHED_LEN));
    records.push((b"T/L".to_vec(), HandleRecord::new(vec![HandleValue::new(1, "URL", long.clone())])));
    s.put_many(records).await.unwrap();

    let u07 = url(7);
    let exact = s.find_by_value(b"URL", IndexMatch::Exact(u07.as_bytes()), None, 10).await.unwrap();
    assert_eq!(exact, vec![hit(&u07, "T/7")], "the type and the bytes, case included");
    let email = s.find_by_value(b"EMAIL", IndexMatch::Exact(u07.as_bytes()), None, 10).await.unwrap();
    assert_eq!(email, vec![hit(&u07, "T/Q")]);
    let u03 = url(3);
    let shared = s.find_by_value(b"URL", IndexMatch::Exact(u03.as_bytes()), None, 10).await.unwrap();
    assert_eq!(shared, vec![hit(&u03, "T/23"), hit(&u03, "T/3")], "equal data in handle order");

    // A prefix, in pages of 7 from the last hit of each: every URL under it once, in order.
    let mut all = Vec::new();
    let mut after: Option<IndexHit> = None;
    loop {
        let page = s.find_by_value(b"URL", IndexMatch::Prefix(b"https://example.org/"), after.as_ref(), 7).await;
        let page = page.unwrap();
        all.extend(page.iter().cloned());
        if page.len() < 7 {
            break;
        }
        after = page.last().cloned();
    }
    let mut expected: Vec<IndexHit> = (0..25).map(|i| hit(&url(i), &format!("T/{i}"))).collect();
    expected.sort();
    assert_eq!(all, expected, "every URL under the prefix once, in order; the long one never");
    assert!(s.find_by_value(b"URL", IndexMatch::Exact(long.as_bytes()), None, 10).await.unwrap().is_empty());
    let none = s.find_by_value(b"URL", IndexMatch::Prefix(b"https://example.net/"), None, 10).await.unwrap();
    assert!(none.is_empty());
    // An empty prefix: every value of the type, capitals first in byte order.
    let every = s.find_by_value(b"URL", IndexMatch::Prefix(b""), None, 100).await.unwrap();
    assert_eq!((every.len(), every[0].clone()), (26, hit("HTTPS://EXAMPLE.ORG/07", "T/C")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn values_are_found_by_their_data() {
    found_by_value("search", SqlLayout::default()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn values_are_found_by_their_data_in_the_text_layout() {
    found_by_value("search_text", crate::sql_common::TEXT_LAYOUT).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn without_an_index_on_data_searches_are_declined() {
    let Some(o) = options("search_declined").await else { return };
    // The tables (PostgreSQL's with §8.2's dataindex), then no index on data.
    drop(SqlStore::connect(&o).await.unwrap());
    run_sql(&o.url, DROP_DATA_INDEX).await;
    let s = SqlStore::connect(&o).await.unwrap();
    s.put_many(vec![(b"T/1".to_vec(), HandleRecord::new(vec![HandleValue::new(1, "URL", "u")]))]).await.unwrap();
    let e = s.find_by_value(b"URL", IndexMatch::Exact(b"u"), None, 10).await.unwrap_err();
    assert!(matches!(&e, StoreError::Unsupported(m) if m.contains("value_index")), "{e:?}");
    // value_index makes one; the rows already there are found.
    let s = SqlStore::connect(&SqlOptions { value_index: true, ..o.clone() }).await.unwrap();
    assert_eq!(s.find_by_value(b"URL", IndexMatch::Exact(b"u"), None, 10).await.unwrap(), vec![hit("u", "T/1")]);
    let refused =
        SqlStore::connect(&SqlOptions { value_index: true, read_only: true, create_schema: false, ..o }).await;
    assert!(refused.is_err(), "an index is a write");
}
