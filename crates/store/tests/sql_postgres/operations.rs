//! PostgreSQL's own: its limits (dataindex).

use handled_proto::HandleValue;
use handled_store::conformance::{rich_record, url_record};
use handled_store::{Expect, HandleRecord, RecordStore};

use crate::store;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn values_round_trip_in_index_order() {
    let Some(s) = store("values_round_trip_in_index_order").await else { return };
    for n in 0..20u32 {
        s.swap(format!("20.5000/rt{n}").as_bytes(), Expect::Absent, Some(rich_record(n))).await.unwrap();
    }
    for key in [vec![0u8], vec![0xff, 0xfe, 0x00], b"\x80\x81/bin".to_vec()] {
        s.swap(&key, Expect::Absent, Some(url_record("bin"))).await.unwrap();
        assert_eq!(s.get(&key).await.unwrap(), Some(url_record("bin")), "binary key {key:?}");
    }
    for n in 0..20u32 {
        let got = s.get(format!("20.5000/rt{n}").as_bytes()).await.unwrap();
        assert_eq!(got, Some(rich_record(n)));
    }
    // Values given out of index order come back in it.
    let mut shuffled = rich_record(99);
    shuffled.values.rotate_left(1);
    s.swap(b"20.5000/shuffled", Expect::Absent, Some(shuffled.clone())).await.unwrap();
    assert_eq!(s.get(b"20.5000/shuffled").await.unwrap(), Some(rich_record(99)));
    // Handle.Net's dataindex holds a value's data up to about 2.7 kB (after
    // compression); a larger one is refused, saying why, and nothing is written.
    let big = HandleRecord::new(vec![HandleValue::new(7, "BIG", vec![0xabu8; 2_600])]);
    s.swap(b"20.5000/big", Expect::Absent, Some(big.clone())).await.unwrap();
    assert_eq!(s.get(b"20.5000/big").await.unwrap(), Some(big));
    let huge = HandleRecord::new(vec![HandleValue::new(7, "BIG", crate::sql_common::noise(20_000, 7))]);
    let e = s.swap(b"20.5000/huge", Expect::Absent, Some(huge)).await.unwrap_err();
    assert!(e.to_string().contains("dataindex"), "{e}");
    assert_eq!(s.get(b"20.5000/huge").await.unwrap(), None);
    assert_eq!(s.count().await.unwrap(), 25);
}

/// A handle lookup is one statement for many keys (read_batch.rs), and
/// PostgreSQL plans it once a session, not at every run: planning it cost the
/// database more than running it (options.rs, `point_read_pool`).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn lookups_are_planned_once_a_session() {
    let Some(o) = crate::options("lookups_planned_once").await else { return };
    let o = handled_store::SqlOptions { read_statements: Some(2), ..o };
    let s = std::sync::Arc::new(handled_store::SqlStore::connect(&o).await.unwrap());
    // Rows as another program writes them, so that the only statements with
    // `order by idx` are the lookups.
    crate::run_sql(
        &o.url,
        "insert into handles select convert_to('T/' || i, 'UTF8'), 1, 'URL'::bytea, 'https://x'::bytea, \
         0, 86400, 0, '', true, true, true, false from generate_series(0, 7) i",
    )
    .await;
    for _ in 0..20 {
        let gets: Vec<_> = (0..8)
            .map(|n| {
                let s = std::sync::Arc::clone(&s);
                tokio::spawn(async move { s.get(format!("T/{n}").as_bytes()).await })
            })
            .collect();
        for g in gets {
            assert!(g.await.unwrap().unwrap().is_some());
        }
    }
    let db = o.url.rsplit('/').next().unwrap();
    let server = crate::pg_server::server().unwrap();
    let (plans, calls) = match crate::pg_server::statement_counts(server, db, "order by idx") {
        Ok(counts) => counts,
        Err(why) => return handled_testenv::skipped(&format!("cannot count plans: {why}")),
    };
    assert!(calls >= 20, "{calls} lookup statements for 160 lookups in rounds of 8");
    assert!(plans <= 2, "{plans} plans for {calls} lookup statements on at most 2 connections");
}
