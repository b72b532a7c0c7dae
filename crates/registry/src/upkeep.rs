//! What keeps the registry's size bounded (F9 of the security trial: 1M records
//! grew the data directory by 473 MB and deleting them all gave nothing back,
//! because DELETE and expiry only mark a record `disconnected`).
//!
//! * Quotas on new records: hyperties per user, records per client address.
//! * Purge: a disconnected record is removed `retention` after the change feed
//!   handed it out (until then reads answer it as the original does: 408 for
//!   a hyperty, 200 for a data object), or `unseen_retention` after it went
//!   when no one reads the feed. Each walks an index ordered by the time the
//!   record went, so a purge costs the records it removes.

use std::net::IpAddr;
use std::sync::atomic::Ordering;

use handled_store::{DocExpect, DocOutcome, IndexHit, IndexMatch};

use super::model::{due_key, now_secs, Kind, Stored, IDX_GONE, IDX_GONE_UNSEEN, IDX_PEER, IDX_USER};
use super::service::{Error, Registry};

const PAGE: usize = 512;

impl Registry {
    /// Refuse to create `id` beyond the quotas (replacing an existing record is
    /// always allowed). Checked before the write, so concurrent creates may
    /// overshoot by their number.
    pub(super) async fn check_quota(
        &self,
        kind: Kind,
        id: &str,
        user: Option<&str>,
        peer: IpAddr,
    ) -> Result<(), Error> {
        let s = &self.settings;
        let per_user = user.filter(|_| s.max_hyperties_per_user > 0);
        let per_peer = s.max_records_per_peer > 0 && s.load_balancer_ip.is_none();
        if per_user.is_none() && !per_peer {
            return Ok(());
        }
        if self.store.doc_get(kind.collection(), id.as_bytes()).await?.is_some() {
            return Ok(());
        }
        if let Some(user) = per_user {
            let max = s.max_hyperties_per_user;
            if self.count(Kind::Hyperty, IDX_USER, user.as_bytes(), max).await? >= max {
                return Err(Error::Quota(format!("Quota exceeded: {user} has {max} hyperties")));
            }
        }
        if per_peer {
            let (max, key) = (s.max_records_per_peer, peer.to_string());
            let mut n = 0;
            for kind in Kind::ALL {
                n += self.count(kind, IDX_PEER, key.as_bytes(), max - n).await?;
            }
            if n >= max {
                return Err(Error::Quota(format!("Quota exceeded: {peer} has created {max} records")));
            }
        }
        Ok(())
    }

    /// Entries under one exact index key, counted up to `at_most`.
    async fn count(&self, kind: Kind, index: &str, key: &[u8], at_most: usize) -> Result<usize, Error> {
        let mut n = 0;
        let mut after: Option<IndexHit> = None;
        while n < at_most {
            let page =
                self.store.doc_lookup(kind.collection(), index, IndexMatch::Exact(key), after.as_ref(), PAGE).await?;
            n += page.len();
            if page.len() < PAGE {
                break;
            }
            after = page.last().cloned();
        }
        Ok(n.min(at_most))
    }

    /// Remove the disconnected records whose retention has passed; returns how many.
    pub async fn purge(&self) -> Result<usize, Error> {
        let now = now_secs();
        let cutoff = |d: std::time::Duration| now.saturating_sub(d.as_secs().min(i64::MAX as u64) as i64);
        let mut removed = 0;
        for kind in Kind::ALL {
            removed += self.purge_index(kind, IDX_GONE, cutoff(self.settings.retention)).await?;
            removed += self.purge_index(kind, IDX_GONE_UNSEEN, cutoff(self.settings.unseen_retention)).await?;
        }
        Ok(removed)
    }

    /// Walk one "gone" index up to `cutoff`, removing each record still in that
    /// state (a compare-and-set: a record revived meanwhile stays).
    async fn purge_index(&self, kind: Kind, index: &str, cutoff: i64) -> Result<usize, Error> {
        let coll = kind.collection();
        let last = due_key(cutoff);
        let mut removed = 0;
        let mut after: Option<IndexHit> = None;
        loop {
            let page = self.store.doc_lookup(coll, index, IndexMatch::Prefix(b""), after.as_ref(), PAGE).await?;
            let full = page.len() == PAGE;
            for hit in &page {
                if hit.key.as_slice() > last.as_slice() {
                    return Ok(removed);
                }
                let Some(doc) = self.store.doc_get(coll, &hit.id).await? else { continue };
                let still = Stored::from_document(&doc).is_some_and(|s| {
                    let in_state = if index == IDX_GONE { !s.notify } else { s.notify };
                    s.is_disconnected() && in_state && s.gone_at() <= cutoff
                });
                if !still {
                    continue;
                }
                if let DocOutcome::Done { .. } =
                    self.store.doc_swap(coll, &hit.id, DocExpect::Present(doc), None).await?
                {
                    removed += 1;
                    if kind == Kind::Hyperty {
                        let _ = self.hyperties.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
                    }
                }
            }
            after = page.last().cloned();
            if !full {
                return Ok(removed);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::model::IDX_FEED;
    use super::super::Settings;
    use super::*;
    use handled_store::{MemoryStore, Store};
    use std::sync::Arc;
    use std::time::Duration;

    const HYPERTY: &[u8] =
        br#"{"expires":3600,"dataSchemes":["comm"],"resources":["chat"],"runtime":"r","status":"created","descriptor":"d"}"#;
    const OBJECT: &[u8] = br#"{"schema":"s","name":"n","reporter":"hyperty://x/r","resources":["chat"],"dataSchemes":["comm"],"status":"live","expires":3600,"runtime":"r"}"#;

    fn settings() -> Settings {
        Settings {
            expires_max: 3600,
            sweep_period: Duration::ZERO,
            storage_type: "Ram",
            load_balancer_ip: None,
            dev_status_page: false,
            retention: Duration::ZERO,
            unseen_retention: Duration::from_secs(3600),
            max_hyperties_per_user: 0,
            max_records_per_peer: 0,
        }
    }

    async fn registry(settings: Settings) -> (Registry, Arc<dyn Store>) {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
        (Registry::open(store.clone(), settings).await.unwrap(), store)
    }

    async fn stored(store: &dyn Store, kind: Kind) -> usize {
        store.doc_scan(kind.collection(), b"", None, 100_000).await.unwrap().len()
    }

    fn peer(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    /// F9: deleted and expired records stayed forever. Now, once the change
    /// feed has handed them out (and the retention passed), they are removed;
    /// before that, reads and the feed see them exactly as before.
    #[tokio::test]
    async fn disconnected_records_are_removed_after_the_feed_saw_them() {
        let (reg, store) = registry(settings()).await;
        let me = peer("127.0.0.1");
        for i in 0..50 {
            reg.put_hyperty(me, "user://x/u", &format!("hyperty://x/{i}"), HYPERTY).await.unwrap();
            reg.put_data_object(me, &format!("comm://x/{i}"), OBJECT).await.unwrap();
        }
        for i in 0..50 {
            reg.delete_hyperty("user://x/u", &format!("hyperty://x/{i}")).await.unwrap();
        }
        assert_eq!(reg.purge().await.unwrap(), 0, "not before the change feed handed them out");
        let one = reg.load(Kind::Hyperty, "hyperty://x/7").await.unwrap().expect("still answered before the feed");
        assert!(one.is_disconnected());
        assert_eq!(reg.take_feed().await.unwrap().len(), 50, "the feed sees every deleted record");
        assert_eq!(reg.purge().await.unwrap(), 50);
        assert_eq!(stored(&*store, Kind::Hyperty).await, 0, "deleted hyperties are gone");
        assert_eq!(stored(&*store, Kind::DataObject).await, 50, "live records stay");
        assert_eq!(reg.hyperties_stored(), 0);
        assert!(reg.load(Kind::Hyperty, "hyperty://x/7").await.unwrap().is_none());
        let feed_left = store.doc_lookup(Kind::Hyperty.collection(), IDX_FEED, IndexMatch::Exact(b""), None, 10);
        assert!(feed_left.await.unwrap().is_empty());
    }

    /// Records deleted before the purge existed (no "gone" entry) are purged too.
    #[tokio::test]
    async fn records_from_before_the_purge_are_reindexed_at_open() {
        let (reg, store) = registry(settings()).await;
        reg.put_hyperty(peer("127.0.0.1"), "user://x/u", "hyperty://x/old", HYPERTY).await.unwrap();
        reg.delete_hyperty("user://x/u", "hyperty://x/old").await.unwrap();
        reg.take_feed().await.unwrap();
        // As an older version stored it: no `gone`, no gone entry.
        let coll = Kind::Hyperty.collection();
        let doc = store.doc_get(coll, b"hyperty://x/old").await.unwrap().unwrap();
        let mut old = Stored::from_document(&doc).unwrap();
        old.gone = None;
        let mut old_doc = old.to_document(Kind::Hyperty);
        old_doc.index.retain(|e| e.name != IDX_GONE);
        store.doc_swap(coll, b"hyperty://x/old", DocExpect::Present(doc), Some(old_doc)).await.unwrap();
        assert_eq!(reg.purge().await.unwrap(), 0, "invisible to the purge");
        let reg = Registry::open(store.clone(), settings()).await.unwrap();
        assert_eq!(reg.purge().await.unwrap(), 1);
        assert_eq!(stored(&*store, Kind::Hyperty).await, 0);
    }

    #[tokio::test]
    async fn unseen_records_wait_for_their_own_retention_and_revived_ones_stay() {
        let (reg, store) = registry(Settings { unseen_retention: Duration::ZERO, ..settings() }).await;
        let me = peer("127.0.0.1");
        reg.put_hyperty(me, "user://x/u", "hyperty://x/a", HYPERTY).await.unwrap();
        reg.put_hyperty(me, "user://x/u", "hyperty://x/b", HYPERTY).await.unwrap();
        reg.delete_hyperty("user://x/u", "hyperty://x/a").await.unwrap();
        reg.delete_hyperty("user://x/u", "hyperty://x/b").await.unwrap();
        reg.touch(Kind::Hyperty, "hyperty://x/b", b"{}").await.unwrap(); // keep-alive revives it
        assert_eq!(reg.purge().await.unwrap(), 1, "no one read the feed: removed after unseen_retention");
        assert_eq!(stored(&*store, Kind::Hyperty).await, 1);
        assert!(reg.load(Kind::Hyperty, "hyperty://x/b").await.unwrap().is_some_and(|s| !s.is_disconnected()));
    }

    /// F9: no quota let one client fill the disk. Now a user's hyperties and a
    /// client address's records are capped; replacing a record is always fine,
    /// and other users and addresses are unaffected.
    #[tokio::test]
    async fn new_records_are_held_to_quotas() {
        let (reg, _) = registry(Settings { max_hyperties_per_user: 3, max_records_per_peer: 5, ..settings() }).await;
        let (me, other) = (peer("127.0.0.1"), peer("127.0.0.2"));
        for i in 0..3 {
            reg.put_hyperty(me, "user://x/u", &format!("hyperty://x/{i}"), HYPERTY).await.unwrap();
        }
        let refused = reg.put_hyperty(me, "user://x/u", "hyperty://x/3", HYPERTY).await;
        assert!(matches!(refused, Err(Error::Quota(ref m)) if m.contains("user://x/u")), "{refused:?}");
        reg.put_hyperty(me, "user://x/u", "hyperty://x/0", HYPERTY).await.expect("replacing is no new record");
        reg.put_hyperty(me, "user://x/v", "hyperty://x/v0", HYPERTY).await.expect("another user");
        reg.put_data_object(me, "comm://x/0", OBJECT).await.unwrap();
        let refused = reg.put_data_object(me, "comm://x/1", OBJECT).await;
        assert!(matches!(refused, Err(Error::Quota(ref m)) if m.contains("127.0.0.1")), "{refused:?}");
        reg.put_data_object(other, "comm://x/1", OBJECT).await.expect("another address");
        // Behind a load balancer every request has its address: no per-peer quota.
        let lb = Settings { max_records_per_peer: 1, load_balancer_ip: Some(me), ..settings() };
        let (reg, _) = registry(lb).await;
        for i in 0..3 {
            reg.put_data_object(me, &format!("comm://x/{i}"), OBJECT).await.unwrap();
        }
    }
}
