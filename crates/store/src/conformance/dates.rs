//! Multi-primary conflict dates (`crate::change_dates`): what a backend that
//! can be a multi-primary member must do (listed in [`super::CHANGE_DATES`]).

use std::sync::Arc;

use super::url_record;
use crate::change_dates::{date_meta_key, ChangeDate, LOCAL_PRIORITY_META_KEY};
use crate::{Expect, ReplicatedChange, Store, TxnAction, TxnEntry};

fn pulled(
    id: u64,
    date_ms: u64,
    action: TxnAction,
    handle: &str,
    value: Option<&str>,
    priority: i32,
) -> ReplicatedChange {
    ReplicatedChange {
        entry: TxnEntry { id, date_ms, action, handle: handle.as_bytes().to_vec() },
        record: value.map(url_record),
        priority: Some(priority),
    }
}

async fn date_of(s: &dyn Store, action: TxnAction, handle: &str) -> Option<ChangeDate> {
    let key = date_meta_key(action, handle.as_bytes());
    s.meta_get(&key).await.unwrap().map(|b| ChangeDate::decode(&key, &b).unwrap())
}

/// Pulled changes: applied iff newer by (date, priority), dated, never logged;
/// a delete's date stays and keeps an older change from bringing it back.
pub async fn dates_pulled_changes_settle_by_date_and_priority(s: Arc<dyn Store>) {
    let h = "20.5000/a";
    s.apply_replicated(vec![pulled(7, 1000, TxnAction::Create, h, Some("p1"), 1)], Vec::new()).await.unwrap();
    assert_eq!(s.get(h.as_bytes()).await.unwrap(), Some(url_record("p1")));
    assert_eq!(date_of(&*s, TxnAction::Update, h).await, Some(ChangeDate { date_ms: 1000, priority: 1 }));
    // Older, and the same date with a lower priority: ignored (also within one batch).
    let batch = vec![
        pulled(3, 999, TxnAction::Update, h, Some("older"), 5),
        pulled(4, 1000, TxnAction::Update, h, Some("lower"), 0),
    ];
    s.apply_replicated(batch, Vec::new()).await.unwrap();
    assert_eq!(s.get(h.as_bytes()).await.unwrap(), Some(url_record("p1")));
    // The same date and a higher (or equal) priority wins.
    s.apply_replicated(vec![pulled(5, 1000, TxnAction::Update, h, Some("tie"), 2)], Vec::new()).await.unwrap();
    assert_eq!(s.get(h.as_bytes()).await.unwrap(), Some(url_record("tie")));
    // A delete, then an older change: the handle stays deleted.
    s.apply_replicated(vec![pulled(6, 2000, TxnAction::Delete, h, None, 1)], Vec::new()).await.unwrap();
    s.apply_replicated(vec![pulled(9, 1500, TxnAction::Create, h, Some("late"), 9)], Vec::new()).await.unwrap();
    assert_eq!(s.get(h.as_bytes()).await.unwrap(), None, "a late older create resurrected a deleted handle");
    assert_eq!(date_of(&*s, TxnAction::Create, h).await, Some(ChangeDate { date_ms: 2000, priority: 1 }));
    // Prefixes are dated apart from handles.
    let na = "0.NA/20.5000";
    s.apply_replicated(vec![pulled(10, 3000, TxnAction::HomeNa, na, None, 1)], Vec::new()).await.unwrap();
    s.apply_replicated(vec![pulled(11, 2500, TxnAction::UnhomeNa, na, None, 1)], Vec::new()).await.unwrap();
    assert!(s.homed_prefixes().await.unwrap().contains(&na.as_bytes().to_vec()), "an older unhome applied");
    assert_eq!(s.txn_log_bounds().await.unwrap().last, 0, "another primary's changes are not logged here");
}

/// Local writes while dating is on: dated after the handle's last change,
/// whoever made it, and recorded with this server's priority; off, not dated.
pub async fn dates_local_writes_move_forward(s: Arc<dyn Store>) {
    let h = "20.5000/b";
    s.swap(h.as_bytes(), Expect::Absent, Some(url_record("undated"))).await.unwrap();
    assert_eq!(date_of(&*s, TxnAction::Update, h).await, None, "no dating outside multi-primary");
    s.meta_put(LOCAL_PRIORITY_META_KEY, Some(3i32.to_be_bytes().to_vec())).await.unwrap();
    // A peer whose clock is an hour ahead changed it.
    let ahead = crate::clock::machine_ms() + 3_600_000;
    s.apply_replicated(vec![pulled(1, ahead, TxnAction::Update, h, Some("peer"), 1)], Vec::new()).await.unwrap();
    s.swap(h.as_bytes(), Expect::Any, Some(url_record("local"))).await.unwrap();
    let local = date_of(&*s, TxnAction::Update, h).await.unwrap();
    assert_eq!(local, ChangeDate { date_ms: ahead + 1, priority: 3 });
    let log = super::read_whole_log(&*s).await;
    assert_eq!(log.last().map(|e| (e.date_ms, e.action)), Some((ahead + 1, TxnAction::Update)), "{log:?}");
    // So the peer's next pull of an older change leaves it alone.
    s.apply_replicated(vec![pulled(2, ahead, TxnAction::Update, h, Some("again"), 9)], Vec::new()).await.unwrap();
    assert_eq!(s.get(h.as_bytes()).await.unwrap(), Some(url_record("local")));
    // A local delete is dated too (the tombstone), and so is a homing.
    s.swap(h.as_bytes(), Expect::Any, None).await.unwrap();
    assert_eq!(date_of(&*s, TxnAction::Delete, h).await.map(|d| d.date_ms), Some(ahead + 2));
    s.home(b"0.NA/20.5000", true).await.unwrap();
    assert_eq!(date_of(&*s, TxnAction::HomeNa, "0.NA/20.5000").await.map(|d| d.priority), Some(3));
    s.put_many(vec![(b"20.5000/c".to_vec(), url_record("c"))]).await.unwrap();
    assert!(date_of(&*s, TxnAction::Create, "20.5000/c").await.is_some(), "imports are dated");
}
