//! MariaDB's own: handles as UTF-8 text matched by their bytes whatever the
//! table's collation, its limits (`blob`).

use handled_proto::HandleValue;
use handled_store::conformance::{rich_record, url_record};
use handled_store::{Expect, HandleRecord, RecordStore, SqlOptions, SqlStore, StoreError, SwapOutcome};

use crate::{mariadb, options, store};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn handles_are_utf8_text_in_byte_order() {
    let Some(s) = store("handles_are_utf8_text").await else { return };
    let keys: &[&str] =
        &["20.5000/b", "20.5000/a", "20.5000/", "20.5000/A", "20.5000/a0", "20.5000/\u{e9}", "20.5001/a"];
    for k in keys {
        assert!(s.swap(k.as_bytes(), Expect::Absent, Some(url_record(k))).await.unwrap().is_done(), "{k}");
    }
    let got = s.scan_keys(b"20.5000/", None, 100).await.unwrap();
    let mut want: Vec<Vec<u8>> =
        keys.iter().filter(|k| k.starts_with("20.5000/")).map(|k| k.as_bytes().to_vec()).collect();
    want.sort();
    assert_eq!(got, want, "bytewise, every case its own key");
    // MySQL's binary collations ignore trailing spaces (PAD SPACE): such a
    // second spelling is refused, saying why.
    let e = s.swap(b"20.5000/a ", Expect::Absent, Some(url_record("x"))).await.unwrap_err();
    assert!(e.to_string().contains("trailing spaces"), "{e}");
    assert_eq!(s.scan_keys(b"20.5000/", Some(b"20.5000/a"), 2).await.unwrap(), want[3..5].to_vec());
    assert_eq!(s.get(b"20.5000/A").await.unwrap(), Some(url_record("20.5000/A")));
    assert_eq!(s.get(b"20.5000/a").await.unwrap(), Some(url_record("20.5000/a")));
    assert!(s.swap(b"20.5000/A", Expect::Any, None).await.unwrap().is_done());
    assert_eq!(s.get(b"20.5000/a").await.unwrap(), Some(url_record("20.5000/a")), "a delete takes its own case only");
    // Not UTF-8: no such row can exist, and none is written.
    assert_eq!(s.get(b"20.5000/\xff").await.unwrap(), None);
    let e = s.swap(b"20.5000/\xff", Expect::Absent, Some(url_record("x"))).await.unwrap_err();
    assert!(matches!(&e, StoreError::Invalid(m) if m.0.contains("UTF-8")), "{e:?}");
    assert!(s.put_many(vec![(b"\x80".to_vec(), url_record("x"))]).await.is_err());
    assert_eq!(s.scan_keys(b"\xff\xff", None, 10).await.unwrap(), Vec::<Vec<u8>>::new());
    assert_eq!(s.count().await.unwrap(), keys.len() as u64 - 1);
}

/// Handle.Net's tables as a DBA makes them from the manual (§8.1.2), in the
/// database's collation (Debian's default: case-insensitive, PAD SPACE).
const MANUAL_TABLES: &str = "create table nas (na varchar(255) not null, PRIMARY KEY(na)); \
     create table handles (handle varchar(255) not null, idx int4 not null, type blob, data blob, \
     ttl_type int2, ttl int4, timestamp int4, refs blob, admin_read bool, admin_write bool, pub_read bool, \
     pub_write bool, PRIMARY KEY(handle, idx))";

/// A table as a DBA makes it from the manual, in a database whose collation
/// ignores case (Debian's default): the store still matches bytes, and says
/// why when the table cannot hold a second spelling.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_case_insensitive_table_is_matched_by_bytes() {
    let Some(o) = options("case_insensitive_table").await else { return };
    mariadb(&o.url, MANUAL_TABLES);
    let s = SqlStore::connect(&SqlOptions { create_schema: true, ..o.clone() }).await.unwrap();
    assert!(mariadb(&o.url, "show create table handles").contains("utf8mb4_general_ci"));
    s.swap(b"T/ABC", Expect::Absent, Some(url_record("upper"))).await.unwrap();
    assert_eq!(s.get(b"T/abc").await.unwrap(), None, "the collation would match it; the bytes do not");
    assert_eq!(s.get(b"T/ABC ").await.unwrap(), None);
    assert_eq!(s.swap(b"T/abc", Expect::Any, None).await.unwrap(), SwapOutcome::Done { previous: None });
    assert_eq!(s.get(b"T/ABC").await.unwrap(), Some(url_record("upper")), "not deleted through another case");
    let e = s.swap(b"T/abc", Expect::Absent, Some(url_record("lower"))).await.unwrap_err();
    assert!(e.to_string().contains("collation"), "{e}");
    assert_eq!(s.scan_keys(b"T/", None, 10).await.unwrap(), vec![b"T/ABC".to_vec()]);
    s.meta_put("homed/0.NA/T", Some(Vec::new())).await.unwrap();
    assert_eq!(s.meta_get("homed/0.NA/t").await.unwrap(), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn values_round_trip_in_index_order() {
    let Some(s) = store("values_round_trip_in_index_order").await else { return };
    for n in 0..20u32 {
        s.swap(format!("20.5000/rt{n}").as_bytes(), Expect::Absent, Some(rich_record(n))).await.unwrap();
    }
    for n in 0..20u32 {
        let got = s.get(format!("20.5000/rt{n}").as_bytes()).await.unwrap();
        assert_eq!(got, Some(rich_record(n)));
    }
    let mut shuffled = rich_record(99);
    shuffled.values.rotate_left(1);
    s.swap(b"20.5000/shuffled", Expect::Absent, Some(shuffled)).await.unwrap();
    assert_eq!(s.get(b"20.5000/shuffled").await.unwrap(), Some(rich_record(99)));
    // Handle.Net's `blob` holds 65535 bytes; a larger value is refused, saying
    // why, and nothing is written.
    let big = HandleRecord::new(vec![HandleValue::new(7, "BIG", vec![0xabu8; 65_535])]);
    s.swap(b"20.5000/big", Expect::Absent, Some(big.clone())).await.unwrap();
    assert_eq!(s.get(b"20.5000/big").await.unwrap(), Some(big));
    let huge = HandleRecord::new(vec![HandleValue::new(1, "URL", "x"), HandleValue::new(7, "BIG", vec![1u8; 65_536])]);
    let e = s.swap(b"20.5000/huge", Expect::Absent, Some(huge)).await.unwrap_err();
    assert!(e.to_string().contains("65535 bytes"), "{e}");
    assert_eq!(s.get(b"20.5000/huge").await.unwrap(), None);
    assert_eq!(s.count().await.unwrap(), 22);
}

/// S5: a handle the table takes for another (its collation: letter case and
/// trailing spaces in Debian's default one) and a name longer than its
/// `varchar(255)` are refused at once, each saying what, after one try: a
/// duplicate key on MariaDB is no lost race (the write's locking read holds
/// the key's range), so it is not tried again WRITE_TRIES times, nor answered
/// "unavailable".
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_collation_clash_and_a_long_name_are_refused_at_once() {
    use handled_store::Refused;
    let Some(o) = options("collation_clash_refused_at_once").await else { return };
    mariadb(&o.url, MANUAL_TABLES);
    let s = SqlStore::connect(&o).await.unwrap();
    s.swap(b"TEST/A", Expect::Absent, Some(url_record("upper"))).await.unwrap();
    let tries = s.write_counts().tries;
    let e = s.swap(b"TEST/a ", Expect::Absent, Some(url_record("lower"))).await.unwrap_err();
    assert!(matches!(&e, StoreError::Refused { what: Refused::Taken, .. }), "{e:?}");
    assert!(e.to_string().contains("collation"), "{e}");
    assert_eq!(s.write_counts().tries - tries, 1, "one try, not one per lost race: {e}");
    let e = s.put_many(vec![(b"TEST/a".to_vec(), url_record("lower"))]).await.unwrap_err();
    assert!(matches!(&e, StoreError::Refused { what: Refused::Taken, .. }), "{e:?}");

    let long = format!("TEST/{}", "n".repeat(295));
    let tries = s.write_counts().tries;
    let e = s.swap(long.as_bytes(), Expect::Absent, Some(url_record("long"))).await.unwrap_err();
    assert!(matches!(&e, StoreError::Refused { what: Refused::Name, .. }), "{e:?}");
    assert!(e.to_string().contains("handle name"), "{e}");
    assert_eq!(s.write_counts().tries - tries, 1, "{e}");
    assert_eq!(s.scan_keys(b"TEST/", None, 10).await.unwrap(), vec![b"TEST/A".to_vec()]);
}
