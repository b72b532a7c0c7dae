//! Conformance tests of handle records and metadata ([`crate::RecordStore`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use handled_proto::HandleValue;

use super::fixtures::{rich_record, url_record};
use super::on_tasks;
use crate::{Expect, HandleRecord, Store, StoreError, SwapOutcome};

fn counter_record(n: u64) -> HandleRecord {
    HandleRecord::new(vec![HandleValue::new(1, "COUNTER", n.to_string())])
}

fn counter_of(r: &HandleRecord) -> u64 {
    std::str::from_utf8(&r.values[0].data).unwrap().parse().unwrap()
}

pub async fn get_absent(s: Arc<dyn Store>) {
    assert_eq!(s.get(b"20.5000/none").await.unwrap(), None);
    assert_eq!(s.get(b"").await.unwrap(), None);
    assert_eq!(s.count().await.unwrap(), 0);
}

pub async fn create_absent(s: Arc<dyn Store>) {
    let r1 = url_record("a");
    let out = s.swap(b"20.5000/a", Expect::Absent, Some(r1.clone())).await.unwrap();
    assert_eq!(out, SwapOutcome::Done { previous: None });
    assert_eq!(s.get(b"20.5000/a").await.unwrap(), Some(r1.clone()));
    // A second create conflicts and reports what is there; nothing changes.
    let out = s.swap(b"20.5000/a", Expect::Absent, Some(url_record("b"))).await.unwrap();
    assert_eq!(out, SwapOutcome::Conflict { current: Some(r1.clone()) });
    assert_eq!(s.get(b"20.5000/a").await.unwrap(), Some(r1));
    // Keys are exact bytes: case and neighbours are different keys.
    assert_eq!(s.get(b"20.5000/A").await.unwrap(), None);
    assert_eq!(s.get(b"20.5000/").await.unwrap(), None);
    assert_eq!(s.get(b"20.5000/aa").await.unwrap(), None);
    // An empty record (no values) is a record, distinct from absence.
    let out = s.swap(b"20.5000/empty", Expect::Absent, Some(HandleRecord::default())).await.unwrap();
    assert!(out.is_done());
    assert_eq!(s.get(b"20.5000/empty").await.unwrap(), Some(HandleRecord::default()));
    assert_eq!(s.count().await.unwrap(), 2);
}

pub async fn swap_present(s: Arc<dyn Store>) {
    let k = b"20.5000/p";
    let (r1, r2, r3) = (url_record("1"), url_record("2"), url_record("3"));
    // Present on an absent handle conflicts with current None.
    let out = s.swap(k, Expect::Present(r1.clone()), Some(r2.clone())).await.unwrap();
    assert_eq!(out, SwapOutcome::Conflict { current: None });
    assert_eq!(s.get(k).await.unwrap(), None);

    s.swap(k, Expect::Absent, Some(r1.clone())).await.unwrap();
    let out = s.swap(k, Expect::Present(r1.clone()), Some(r2.clone())).await.unwrap();
    assert_eq!(out, SwapOutcome::Done { previous: Some(r1.clone()) });
    // Stale expectation: conflict, current is r2, nothing written.
    let out = s.swap(k, Expect::Present(r1.clone()), Some(r3.clone())).await.unwrap();
    assert_eq!(out, SwapOutcome::Conflict { current: Some(r2.clone()) });
    assert_eq!(s.get(k).await.unwrap(), Some(r2.clone()));

    // "Exactly equal": same values in another order, or one field off, conflict.
    let two = HandleRecord::new(vec![HandleValue::new(1, "URL", "x"), HandleValue::new(2, "EMAIL", "y")]);
    s.swap(k, Expect::Any, Some(two.clone())).await.unwrap();
    let mut reordered = two.clone();
    reordered.values.reverse();
    let out = s.swap(k, Expect::Present(reordered), Some(r3.clone())).await.unwrap();
    assert_eq!(out, SwapOutcome::Conflict { current: Some(two.clone()) });
    let mut off = two.clone();
    off.values[1].ttl += 1;
    let out = s.swap(k, Expect::Present(off), Some(r3.clone())).await.unwrap();
    assert!(!out.is_done());
    let out = s.swap(k, Expect::Present(HandleRecord::default()), Some(r3.clone())).await.unwrap();
    assert!(!out.is_done());
    let out = s.swap(k, Expect::Present(two.clone()), Some(r3.clone())).await.unwrap();
    assert_eq!(out, SwapOutcome::Done { previous: Some(two) });
    assert_eq!(s.get(k).await.unwrap(), Some(r3));
}

pub async fn swap_any(s: Arc<dyn Store>) {
    let k = b"20.5000/any";
    let out = s.swap(k, Expect::Any, Some(url_record("1"))).await.unwrap();
    assert_eq!(out, SwapOutcome::Done { previous: None });
    let out = s.swap(k, Expect::Any, Some(url_record("2"))).await.unwrap();
    assert_eq!(out, SwapOutcome::Done { previous: Some(url_record("1")) });
    assert_eq!(s.get(k).await.unwrap(), Some(url_record("2")));
    let out = s.swap(k, Expect::Any, None).await.unwrap();
    assert_eq!(out, SwapOutcome::Done { previous: Some(url_record("2")) });
    assert_eq!(s.get(k).await.unwrap(), None);
    // Deleting what is not there is fine and reports no previous record.
    let out = s.swap(k, Expect::Any, None).await.unwrap();
    assert_eq!(out, SwapOutcome::Done { previous: None });
    assert_eq!(s.count().await.unwrap(), 0);
}

pub async fn delete(s: Arc<dyn Store>) {
    let k = b"20.5000/del";
    let r = rich_record(1);
    s.swap(k, Expect::Absent, Some(r.clone())).await.unwrap();
    s.swap(b"20.5000/keep", Expect::Absent, Some(url_record("k"))).await.unwrap();
    assert_eq!(s.count().await.unwrap(), 2);
    // Conditional delete with a stale expectation: conflict, still there.
    let out = s.swap(k, Expect::Present(url_record("other")), None).await.unwrap();
    assert_eq!(out, SwapOutcome::Conflict { current: Some(r.clone()) });
    // Delete guarded by Absent on a present handle: conflict.
    let out = s.swap(k, Expect::Absent, None).await.unwrap();
    assert!(!out.is_done());
    let out = s.swap(k, Expect::Present(r.clone()), None).await.unwrap();
    assert_eq!(out, SwapOutcome::Done { previous: Some(r.clone()) });
    assert_eq!(s.get(k).await.unwrap(), None);
    assert_eq!(s.scan_keys(b"20.5000/", None, 10).await.unwrap(), vec![b"20.5000/keep".to_vec()]);
    assert_eq!(s.count().await.unwrap(), 1);
    // Absent + delete of an absent handle: a no-op that succeeds.
    let out = s.swap(k, Expect::Absent, None).await.unwrap();
    assert_eq!(out, SwapOutcome::Done { previous: None });
    assert_eq!(s.get(k).await.unwrap(), None);
    // And it can be created again.
    assert!(s.swap(k, Expect::Absent, Some(r.clone())).await.unwrap().is_done());
    assert_eq!(s.get(k).await.unwrap(), Some(r));
}

pub async fn values_round_trip(s: Arc<dyn Store>) {
    let mut expected = BTreeMap::new();
    for n in 0..20u32 {
        let key = format!("20.5000/rt{n}").into_bytes();
        let r = rich_record(n);
        s.swap(&key, Expect::Absent, Some(r.clone())).await.unwrap();
        expected.insert(key, r);
    }
    // Binary keys, including bytes that are not UTF-8 and 0x00/0xff.
    for key in [vec![0u8], vec![0xff, 0xfe, 0x00], b"\x80\x81/bin".to_vec()] {
        s.swap(&key, Expect::Absent, Some(url_record("bin"))).await.unwrap();
        expected.insert(key, url_record("bin"));
    }
    // A value with a large (but legal) data field.
    let big = HandleRecord::new(vec![HandleValue::new(7, "BIG", vec![0xabu8; 300_000])]);
    s.swap(b"20.5000/big", Expect::Absent, Some(big.clone())).await.unwrap();
    expected.insert(b"20.5000/big".to_vec(), big);
    for (k, r) in &expected {
        assert_eq!(s.get(k).await.unwrap().as_ref(), Some(r), "key {k:?}");
    }
    assert_eq!(s.count().await.unwrap(), expected.len() as u64);
}

pub async fn invalid_record_rejected(s: Arc<dyn Store>) {
    let too_big =
        HandleRecord::new(vec![HandleValue::new(1, "URL", vec![0u8; handled_proto::codec::MAX_ARRAY_LEN + 1])]);
    let e = s.swap(b"20.5000/huge", Expect::Any, Some(too_big.clone())).await.unwrap_err();
    assert!(matches!(e, StoreError::Invalid(_)), "{e:?}");
    let e = s.put_many(vec![(b"20.5000/huge".to_vec(), too_big)]).await.unwrap_err();
    assert!(matches!(e, StoreError::Invalid(_)), "{e:?}");
    assert_eq!(s.get(b"20.5000/huge").await.unwrap(), None);
    assert_eq!(s.count().await.unwrap(), 0);
}

async fn create_keys(s: &Arc<dyn Store>, keys: &[&[u8]]) {
    for k in keys {
        assert!(s.swap(k, Expect::Absent, Some(url_record("x"))).await.unwrap().is_done());
    }
}

pub async fn scan_keys_order_prefix_limit(s: Arc<dyn Store>) {
    // Inserted out of order.
    let keys: &[&[u8]] = &[
        b"20.5000/b",
        b"20.5000/a",
        b"20.5000/",
        b"20.5001/a",
        b"20.500/z",
        b"20.5000/a/",
        b"20.5000/a0",
        b"0.NA/20.5000",
        b"20.5000/\xff",
        b"20.5000/\x00",
        b"20.50000/x",
        b"21/x",
    ];
    create_keys(&s, keys).await;
    let v = |ks: &[&[u8]]| ks.iter().map(|k| k.to_vec()).collect::<Vec<_>>();

    let got = s.scan_keys(b"20.5000/", None, 100).await.unwrap();
    assert_eq!(
        got,
        v(&[b"20.5000/", b"20.5000/\x00", b"20.5000/a", b"20.5000/a/", b"20.5000/a0", b"20.5000/b", b"20.5000/\xff"])
    );
    // The prefix is a byte prefix, nothing more: "20.5000" also matches "20.50000/x".
    let got = s.scan_keys(b"20.5000", None, 100).await.unwrap();
    assert_eq!(got.len(), 8);
    assert_eq!(got.last().unwrap(), b"20.50000/x");
    // Limit.
    let got = s.scan_keys(b"20.5000/", None, 2).await.unwrap();
    assert_eq!(got, v(&[b"20.5000/", b"20.5000/\x00"]));
    assert!(s.scan_keys(b"20.5000/", None, 0).await.unwrap().is_empty());
    // Empty prefix lists everything, sorted bytewise.
    let all = s.scan_keys(b"", None, 1000).await.unwrap();
    let mut sorted = v(keys);
    sorted.sort();
    assert_eq!(all, sorted);
    // No match.
    assert!(s.scan_keys(b"30.", None, 10).await.unwrap().is_empty());
    assert!(s.scan_keys(b"\xff\xff", None, 10).await.unwrap().is_empty());
}

pub async fn scan_keys_paging(s: Arc<dyn Store>) {
    let keys: Vec<Vec<u8>> = (0..257).map(|i| format!("20.5000/k{i:04}").into_bytes()).collect();
    let recs: Vec<_> = keys.iter().map(|k| (k.clone(), url_record("p"))).collect();
    s.put_many(recs).await.unwrap();
    create_keys(&s, &[b"20.4999/z", b"20.5001/a"]).await;

    // Page through with start_after = last key of the previous page.
    let mut got = Vec::new();
    let mut after: Option<Vec<u8>> = None;
    loop {
        let page = s.scan_keys(b"20.5000/", after.as_deref(), 50).await.unwrap();
        assert!(page.len() <= 50);
        if page.is_empty() {
            break;
        }
        after = page.last().cloned();
        got.extend(page);
    }
    assert_eq!(got, keys);

    // start_after is exclusive, and need not be a stored key.
    let page = s.scan_keys(b"20.5000/", Some(b"20.5000/k0009"), 2).await.unwrap();
    assert_eq!(page, vec![b"20.5000/k0010".to_vec(), b"20.5000/k0011".to_vec()]);
    let page = s.scan_keys(b"20.5000/", Some(b"20.5000/k0009x"), 1).await.unwrap();
    assert_eq!(page, vec![b"20.5000/k0010".to_vec()]);
    // start_after before the prefix: starts at the prefix.
    let page = s.scan_keys(b"20.5000/", Some(b"10"), 1).await.unwrap();
    assert_eq!(page, vec![b"20.5000/k0000".to_vec()]);
    let page = s.scan_keys(b"20.5000/", Some(b"20.4999/z"), 1).await.unwrap();
    assert_eq!(page, vec![b"20.5000/k0000".to_vec()]);
    // start_after equal to the prefix itself.
    let page = s.scan_keys(b"20.5000/", Some(b"20.5000/"), 1).await.unwrap();
    assert_eq!(page, vec![b"20.5000/k0000".to_vec()]);
    // start_after past the prefix range: nothing.
    assert!(s.scan_keys(b"20.5000/", Some(b"20.5000/k0256"), 10).await.unwrap().is_empty());
    assert!(s.scan_keys(b"20.5000/", Some(b"20.5001"), 10).await.unwrap().is_empty());
    assert!(s.scan_keys(b"20.5000/", Some(b"\xff"), 10).await.unwrap().is_empty());
}

pub async fn put_many(s: Arc<dyn Store>) {
    s.put_many(Vec::new()).await.unwrap();
    s.swap(b"20.5000/existing", Expect::Absent, Some(url_record("old"))).await.unwrap();
    // Unsorted, with a duplicate key (the later one wins) and an overwrite.
    let mut batch = Vec::new();
    for i in (0..1000u32).rev() {
        batch.push((format!("20.5000/bulk{i}").into_bytes(), rich_record(i)));
    }
    batch.push((b"20.5000/bulk7".to_vec(), url_record("second")));
    batch.push((b"20.5000/existing".to_vec(), url_record("new")));
    s.put_many(batch).await.unwrap();
    assert_eq!(s.count().await.unwrap(), 1001);
    assert_eq!(s.get(b"20.5000/bulk7").await.unwrap(), Some(url_record("second")));
    assert_eq!(s.get(b"20.5000/bulk8").await.unwrap(), Some(rich_record(8)));
    assert_eq!(s.get(b"20.5000/bulk999").await.unwrap(), Some(rich_record(999)));
    assert_eq!(s.get(b"20.5000/existing").await.unwrap(), Some(url_record("new")));
    // Imported handles take part in CAS like any other.
    let out = s.swap(b"20.5000/bulk8", Expect::Present(rich_record(8)), None).await.unwrap();
    assert!(out.is_done());
    assert_eq!(s.count().await.unwrap(), 1000);
    // Several put_many calls concurrently.
    on_tasks(&s, 4, |s, t| async move {
        let recs = (0..250u32).map(|i| (format!("20.6000/{t}/{i:03}").into_bytes(), url_record("c"))).collect();
        s.put_many(recs).await.unwrap();
    })
    .await;
    assert_eq!(s.scan_keys(b"20.6000/", None, 10_000).await.unwrap().len(), 1000);
}

pub async fn meta_ops(s: Arc<dyn Store>) {
    assert_eq!(s.meta_get("prefix/20.5000").await.unwrap(), None);
    assert!(s.meta_scan("").await.unwrap().is_empty());
    s.meta_put("prefix/20.5000", Some(b"1".to_vec())).await.unwrap();
    s.meta_put("prefix/20.5001", Some(Vec::new())).await.unwrap();
    s.meta_put("prefix/20.50", Some(b"x".to_vec())).await.unwrap();
    s.meta_put("serial", Some(7u64.to_be_bytes().to_vec())).await.unwrap();
    s.meta_put("prefiy", Some(b"after".to_vec())).await.unwrap();
    assert_eq!(s.meta_get("prefix/20.5000").await.unwrap(), Some(b"1".to_vec()));
    assert_eq!(s.meta_get("prefix/20.5001").await.unwrap(), Some(Vec::new()));
    assert_eq!(s.meta_get("prefix").await.unwrap(), None);
    // Overwrite.
    s.meta_put("serial", Some(8u64.to_be_bytes().to_vec())).await.unwrap();
    assert_eq!(s.meta_get("serial").await.unwrap(), Some(8u64.to_be_bytes().to_vec()));
    // Scan by prefix, in key order.
    let got = s.meta_scan("prefix/").await.unwrap();
    let names: Vec<&str> = got.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(names, ["prefix/20.50", "prefix/20.5000", "prefix/20.5001"]);
    assert_eq!(got[0].1, b"x");
    assert_eq!(s.meta_scan("").await.unwrap().len(), 5);
    assert!(s.meta_scan("zzz").await.unwrap().is_empty());
    // Delete, and delete of an absent key.
    s.meta_put("prefix/20.50", None).await.unwrap();
    s.meta_put("never", None).await.unwrap();
    assert_eq!(s.meta_get("prefix/20.50").await.unwrap(), None);
    assert_eq!(s.meta_scan("prefix/").await.unwrap().len(), 2);
    // Metadata is not a handle.
    assert_eq!(s.count().await.unwrap(), 0);
    assert!(s.scan_keys(b"", None, 10).await.unwrap().is_empty());
}

/// Many tasks creating distinct handles: every one succeeds and is readable.
pub async fn concurrent_distinct_keys(s: Arc<dyn Store>) {
    let tasks = 64u32;
    let per = 40u32;
    on_tasks(&s, tasks, |s, t| async move {
        for i in 0..per {
            let k = format!("20.5000/t{t}-{i}").into_bytes();
            let out = s.swap(&k, Expect::Absent, Some(url_record(&format!("{t}-{i}")))).await.unwrap();
            assert_eq!(out, SwapOutcome::Done { previous: None });
            // Read-your-writes: acknowledged means visible.
            assert_eq!(s.get(&k).await.unwrap(), Some(url_record(&format!("{t}-{i}"))));
        }
    })
    .await;
    assert_eq!(s.count().await.unwrap(), (tasks * per) as u64);
    for t in 0..tasks {
        for i in 0..per {
            let k = format!("20.5000/t{t}-{i}").into_bytes();
            assert_eq!(s.get(&k).await.unwrap(), Some(url_record(&format!("{t}-{i}"))));
        }
    }
}

/// Many tasks incrementing one counter by compare-and-set: no lost update.
pub async fn concurrent_same_key(s: Arc<dyn Store>) {
    let k: &'static [u8] = b"20.5000/counter";
    s.swap(k, Expect::Absent, Some(counter_record(0))).await.unwrap();
    let tasks = 16u32;
    let per = 25u32;
    on_tasks(&s, tasks, |s, _| async move {
        let mut seen = s.get(k).await.unwrap().unwrap();
        for _ in 0..per {
            loop {
                let next = counter_record(counter_of(&seen) + 1);
                match s.swap(k, Expect::Present(seen.clone()), Some(next.clone())).await.unwrap() {
                    SwapOutcome::Done { previous } => {
                        assert_eq!(previous, Some(seen));
                        seen = next;
                        break;
                    }
                    SwapOutcome::Conflict { current } => {
                        let current = current.expect("counter never deleted");
                        assert!(counter_of(&current) > counter_of(&seen));
                        seen = current;
                    }
                }
            }
        }
    })
    .await;
    let fin = s.get(k).await.unwrap().unwrap();
    assert_eq!(counter_of(&fin), u64::from(tasks * per));
}

/// Many tasks racing to create the same handles: exactly one wins each.
pub async fn same_key_racing_creates(s: Arc<dyn Store>) {
    let keys = 20u32;
    let tasks = 16u32;
    let wins = on_tasks(&s, tasks, |s, t| async move {
        let mut won = Vec::new();
        for i in 0..keys {
            let k = format!("20.5000/race{i}").into_bytes();
            match s.swap(&k, Expect::Absent, Some(url_record(&t.to_string()))).await.unwrap() {
                SwapOutcome::Done { previous: None } => won.push(i),
                SwapOutcome::Done { previous: Some(_) } => panic!("create replaced a record"),
                SwapOutcome::Conflict { current } => assert!(current.is_some()),
            }
        }
        (t, won)
    })
    .await;
    let mut winner = BTreeMap::new();
    for (t, won) in wins {
        for i in won {
            assert!(winner.insert(i, t).is_none(), "two creates of race{i} succeeded");
        }
    }
    assert_eq!(winner.len(), keys as usize);
    for (i, t) in winner {
        let k = format!("20.5000/race{i}").into_bytes();
        assert_eq!(s.get(&k).await.unwrap(), Some(url_record(&t.to_string())));
    }
}

/// Homing is its own operation: what `home` sets, `homed_prefixes` lists (in
/// byte order), and unhoming what is not homed is harmless.
pub async fn homing(s: Arc<dyn Store>) {
    assert!(s.homed_prefixes().await.unwrap().is_empty());
    s.home(b"0.NA/B", true).await.unwrap();
    s.home(b"0.NA/A", true).await.unwrap();
    s.home(b"0.NA/A", true).await.unwrap();
    assert_eq!(s.homed_prefixes().await.unwrap(), vec![b"0.NA/A".to_vec(), b"0.NA/B".to_vec()]);
    s.home(b"0.NA/A", false).await.unwrap();
    s.home(b"0.NA/C", false).await.unwrap();
    assert_eq!(s.homed_prefixes().await.unwrap(), vec![b"0.NA/B".to_vec()]);
}
