//! Conformance tests of running a store ([`crate::StoreAdmin`]), and of the
//! refusals its [`crate::Capabilities`] announce.

use std::sync::Arc;

use super::fixtures::url_record;
use crate::{Backup, DocExpect, Expect, IndexMatch, Store, StoreError};

pub async fn stats_count_writes(s: Arc<dyn Store>) {
    let before = s.stats();
    for i in 0..5 {
        s.swap(format!("20.5000/s{i}").as_bytes(), Expect::Absent, Some(url_record("s"))).await.unwrap();
    }
    s.meta_put("m", Some(vec![1])).await.unwrap();
    s.put_many(vec![(b"20.5000/imp".to_vec(), url_record("i"))]).await.unwrap();
    let after = s.stats();
    assert_eq!(after.write_ops - before.write_ops, 6);
    assert_eq!(after.imported - before.imported, 1);
    assert!(after.commits > before.commits);
    assert!(after.max_batch >= 1);
    assert_eq!(after.failed_ops, 0);
}

/// After `close`, reads and writes fail with `Closed` instead of hanging or panicking.
pub async fn closed_store_refuses(s: Arc<dyn Store>) {
    s.swap(b"20.5000/a", Expect::Absent, Some(url_record("a"))).await.unwrap();
    s.close();
    assert!(matches!(s.swap(b"20.5000/b", Expect::Absent, Some(url_record("b"))).await, Err(StoreError::Closed)));
    assert!(matches!(s.meta_put("k", Some(vec![1])).await, Err(StoreError::Closed)));
    s.close(); // twice is harmless
}

/// What a store says it cannot do, it refuses with `Unsupported` (never an
/// empty answer that looks like "nothing there"), and writes still work.
pub async fn capabilities_are_kept(s: Arc<dyn Store>) {
    let caps = s.capabilities();
    let unsupported = |r: Result<(), StoreError>| matches!(r, Err(StoreError::Unsupported(_)));
    if !caps.documents {
        assert!(unsupported(s.doc_get("c", b"a").await.map(drop)));
        assert!(unsupported(s.doc_swap("c", b"a", DocExpect::Absent, None).await.map(drop)));
        assert!(unsupported(s.doc_lookup("c", "i", IndexMatch::Exact(b"k"), None, 1).await.map(drop)));
        assert!(unsupported(s.doc_scan("c", b"", None, 1).await.map(drop)));
    }
    if !caps.txn_log {
        assert!(unsupported(s.txn_log_read(0, 1).await.map(drop)));
        assert!(unsupported(s.txn_log_bounds().await.map(drop)));
        assert!(unsupported(s.txn_log_prune(0).await.map(drop)));
        assert!(unsupported(s.txn_log_reset(1).await));
        assert!(unsupported(s.apply_replicated(Vec::new(), Vec::new()).await));
        assert_eq!(*s.txn_log_subscribe().borrow(), 0);
    }
    match caps.backup {
        Backup::Export => assert!(s.export().is_ok()),
        Backup::Refused(why) => match s.export() {
            Err(StoreError::Unsupported(e)) => assert_eq!(e, why),
            other => panic!("export of a store that refuses backups: {:?}", other.err()),
        },
    }
    assert!(s.swap(b"20.5000/a", Expect::Absent, Some(url_record("a"))).await.unwrap().is_done());
}
