//! PostgreSQL's own: its limits (dataindex), statement timeouts, reconnects
//! after the database cut connections, the statements a missing table needs.

use std::time::Duration;

use handled_proto::HandleValue;
use handled_store::conformance::{rich_record, url_record};
use handled_store::{Expect, HandleRecord, RecordStore, SqlOptions, SqlStore, StoreAdmin};
use sqlx::{Connection, Executor};

use crate::{options, store};

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
    let mut x = 7u32;
    let noise: Vec<u8> = (0..20_000)
        .map(|_| {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            (x >> 16) as u8
        })
        .collect();
    let huge = HandleRecord::new(vec![HandleValue::new(7, "BIG", noise)]);
    let e = s.swap(b"20.5000/huge", Expect::Absent, Some(huge)).await.unwrap_err();
    assert!(e.to_string().contains("dataindex"), "{e}");
    assert_eq!(s.get(b"20.5000/huge").await.unwrap(), None);
    assert_eq!(s.count().await.unwrap(), 25);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn missing_tables_are_named_with_their_statements() {
    let Some(o) = options("missing_tables").await else { return };
    let e = SqlStore::connect(&SqlOptions { create_schema: false, ..o }).await.err().unwrap().to_string();
    assert!(e.contains("nas, handles, handled_meta"), "{e}");
    assert!(e.contains("create table handles (handle bytea not null"), "{e}");
    assert!(!e.contains("password"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_held_row_lock_times_out_instead_of_hanging() {
    let Some(o) = options("held_row_lock").await else { return };
    let fast = SqlOptions { statement_timeout: Duration::from_millis(300), ..o.clone() };
    let s = SqlStore::connect(&fast).await.unwrap();
    s.swap(b"T/locked", Expect::Absent, Some(url_record("x"))).await.unwrap();
    // Another program holds the handle's rows.
    let mut other = sqlx::PgConnection::connect(&o.url).await.unwrap();
    other.execute("begin").await.unwrap();
    other.execute("select * from handles where handle = 'T/locked'::bytea for update").await.unwrap();
    let started = std::time::Instant::now();
    let e = s.swap(b"T/locked", Expect::Any, Some(url_record("y"))).await.unwrap_err();
    assert!(e.to_string().contains("timed out"), "{e}");
    assert!(started.elapsed() < Duration::from_secs(5));
    other.execute("rollback").await.unwrap();
    assert!(s.swap(b"T/locked", Expect::Any, Some(url_record("y"))).await.unwrap().is_done());
    assert_eq!(s.stats().failed_ops, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn connections_the_database_cut_are_replaced() {
    let Some(o) = options("connections_cut").await else { return };
    let s = SqlStore::connect(&o).await.unwrap();
    s.swap(b"T/1", Expect::Absent, Some(url_record("x"))).await.unwrap();
    for _ in 0..3 {
        assert_eq!(s.get(b"T/1").await.unwrap(), Some(url_record("x")));
    }
    // As a database restart or an idle cut would.
    let mut admin = sqlx::PgConnection::connect(&o.url).await.unwrap();
    let cut: Vec<(bool,)> = sqlx::query_as(
        "select pg_terminate_backend(pid) from pg_stat_activity \
         where datname = current_database() and pid <> pg_backend_pid()",
    )
    .fetch_all(&mut admin)
    .await
    .unwrap();
    assert!(!cut.is_empty(), "the store had connections open");
    assert_eq!(s.get(b"T/1").await.unwrap(), Some(url_record("x")));
    assert!(s.swap(b"T/2", Expect::Absent, Some(url_record("y"))).await.unwrap().is_done());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn unreachable_database_is_a_clear_error() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let o = SqlOptions {
        url: format!("postgres://u:secret@127.0.0.1:{port}/none"),
        connect_timeout: Duration::from_millis(500),
        ..SqlOptions::default()
    };
    let e = SqlStore::connect(&o).await.err().expect("nothing listens there").to_string();
    assert!(e.contains("connect_timeout_ms") || e.contains("refused"), "{e}");
    assert!(!e.contains("secret"), "{e}");
}
