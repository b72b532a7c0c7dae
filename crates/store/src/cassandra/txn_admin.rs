//! The transaction log on Cassandra: pruning, reset (a mirror's dump) and
//! applying what a mirror pulled (`apply_replicated`).

use std::collections::BTreeMap;

use futures_util::{stream, StreamExt, TryStreamExt};

use super::txn_log::{nonce, TxnLog};
use super::txn_tables::{applied, bucket_of, EntryState, BUCKET_IDS};
use super::CassandraStore;
use crate::{DocWrite, Expect, ReplicatedChange, ReplicatedWrite, StoreError};

/// Rows removed per prune round (a prune goes round after round).
const PRUNE_CHUNK: usize = 10_000;
/// Deletes or entry writes in flight at once.
const WRITES_IN_FLIGHT: usize = 64;

impl TxnLog {
    /// Remove the settled prefix of the log dated before `before_ms` (void
    /// entries with it), raising the floor; returns how many done entries went.
    pub(super) async fn prune(&self, before_ms: u64) -> Result<u64, StoreError> {
        let mut removed = 0;
        loop {
            let seq = self.handed_out().await?;
            self.advance(seq.last).await?;
            let frontier = self.view.lock().frontier;
            let mut ids = Vec::new();
            let mut done = 0;
            let mut at = seq.floor;
            'scan: while at < frontier && ids.len() < PRUNE_CHUNK {
                let rows = self.st.page(&self.session, at, frontier, PRUNE_CHUNK - ids.len()).await?;
                let Some(last) = rows.last().map(|r| r.id) else {
                    // Nothing in this bucket up to the frontier: pruned already.
                    at = frontier.min((bucket_of(at + 1) as u64 + 1) * BUCKET_IDS - 1);
                    continue;
                };
                for r in rows {
                    if r.state == EntryState::Done {
                        if r.date_ms >= before_ms {
                            break 'scan;
                        }
                        done += 1;
                    }
                    ids.push(r.id);
                    at = r.id;
                }
                at = at.max(last);
            }
            let Some(&highest) = ids.last() else { return Ok(removed) };
            let values = (highest as i64, seq.floor as i64);
            if !applied(self.session.execute_unpaged(&self.st.seq_floor, values).await, "txn_seq floor")? {
                continue; // pruned or reset meanwhile: look again
            }
            self.delete_entries(ids).await?;
            removed += done;
        }
    }

    async fn delete_entries(&self, ids: Vec<u64>) -> Result<(), StoreError> {
        stream::iter(ids)
            .map(|id| async move {
                let values = (bucket_of(id), id as i64);
                self.session.execute_unpaged(&self.st.delete_entry, values).await.map(drop)
            })
            .buffer_unordered(WRITES_IN_FLIGHT)
            .try_collect::<Vec<()>>()
            .await
            .map(drop)
            .map_err(|e| super::backend_error("txn_log delete", e))
    }

    /// A mirror's dump: the log continues at `id` (floor = last = `id`), in a
    /// new epoch, with every kept entry dropped first.
    pub(super) async fn reset(&self, id: u64) -> Result<(), StoreError> {
        for _ in 0..super::MAX_ROUNDS {
            let seq = self.handed_out().await?;
            let lowest = bucket_of(seq.floor.min(id) + 1);
            let highest = bucket_of(seq.last.max(lowest as u64 * BUCKET_IDS));
            stream::iter(lowest..=highest)
                .map(|b| async move { self.session.execute_unpaged(&self.st.delete_bucket, (b,)).await.map(drop) })
                .buffer_unordered(WRITES_IN_FLIGHT)
                .try_collect::<Vec<()>>()
                .await
                .map_err(|e| super::backend_error("txn_log delete", e))?;
            let epoch = seq.epoch + 1;
            let values = (id as i64, id as i64, epoch as i64, nonce(), seq.epoch as i64);
            if applied(self.session.execute_unpaged(&self.st.seq_reset, values).await, "txn_seq reset")? {
                self.handed_out().await?;
                self.notifier.publish(self.view.lock().frontier);
                return Ok(());
            }
        }
        Err(StoreError::Backend("cassandra: transaction log reset: txn_seq kept changing".into()))
    }

    /// Log pulled changes under their source ids (those above `last`; dates
    /// raised to never decrease; ids skipped by the source written void), then
    /// move `last` past them. Entries first, so no reader looks at those ids
    /// before they are written.
    async fn log_replicated(&self, changes: &[ReplicatedChange]) -> Result<(), StoreError> {
        for _ in 0..super::MAX_ROUNDS {
            let seq = self.handed_out().await?;
            let mut rows = Vec::new();
            let (mut prev, mut date) = (seq.last, seq.date_ms);
            for c in changes.iter().filter(|c| c.entry.id > seq.last) {
                if c.entry.id <= prev {
                    continue;
                }
                rows.extend((prev + 1..c.entry.id).map(|id| (id, EntryState::Void, None, Vec::new(), 0)));
                date = date.max(c.entry.date_ms);
                let action = Some(i32::from(c.entry.action.code()));
                rows.push((c.entry.id, EntryState::Done, action, c.entry.handle.clone(), date));
                prev = c.entry.id;
            }
            if prev == seq.last {
                return Ok(());
            }
            stream::iter(rows)
                .map(|(id, state, action, handle, date)| async move {
                    let values = (bucket_of(id), id as i64, state as i32, action, handle, date as i64);
                    self.session.execute_unpaged(&self.st.put_entry, values).await.map(drop)
                })
                .buffer_unordered(WRITES_IN_FLIGHT)
                .try_collect::<Vec<()>>()
                .await
                .map_err(|e| super::backend_error("txn_log write", e))?;
            let values = (prev as i64, date as i64, nonce(), seq.last as i64);
            if applied(self.session.execute_unpaged(&self.st.seq_take, values).await, "txn_seq")? {
                return self.advance(prev).await;
            }
            // Ids were handed out meanwhile (a local write on a mirror): log
            // the pulled changes after them.
        }
        Err(StoreError::Backend("cassandra: pulled changes not logged: txn_seq kept changing".into()))
    }
}

impl CassandraStore {
    /// `apply_replicated_with_docs`: validate everything, write the changes
    /// (state-based, the last one per handle), the documents, the entries,
    /// then the progress; a retry after a failure at any point redoes it
    /// harmlessly (the progress is written last).
    pub(super) async fn apply_pulled(
        &self,
        txn: &TxnLog,
        changes: Vec<ReplicatedChange>,
        progress: Vec<(String, Option<Vec<u8>>)>,
        docs: Vec<DocWrite>,
    ) -> Result<(), StoreError> {
        self.check_open()?;
        let mut writes = BTreeMap::new();
        let mut metas = BTreeMap::new();
        for c in &changes {
            match c.write() {
                ReplicatedWrite::Handle(k, r) => {
                    if let Some(r) = &r {
                        r.validate()?;
                    }
                    writes.insert(k, r);
                }
                ReplicatedWrite::Meta(k, v) => drop(metas.insert(k, v)),
            }
        }
        stream::iter(writes)
            .map(|(k, r)| async move { self.swap_uncounted(&k, Expect::Any, r, Vec::new(), false).await.map(drop) })
            .buffer_unordered(32)
            .try_collect::<Vec<()>>()
            .await?;
        for (k, v) in metas {
            txn.homed_put(&k, v, false).await?;
        }
        self.write_foreign_docs(docs).await?;
        txn.log_replicated(&changes).await?;
        for (k, v) in progress {
            self.rows.meta_put(&self.session, &k, v).await?;
        }
        Ok(())
    }
}
