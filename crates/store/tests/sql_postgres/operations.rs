//! PostgreSQL's own: its limits (dataindex).

use handled_proto::HandleValue;
use handled_store::conformance::{rich_record, url_record};
use handled_store::{Expect, HandleRecord};

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
