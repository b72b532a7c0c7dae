//! Proxied mirroring (Handle.Net's `replication_pull_other_transactions` with
//! `replication_site_handle_value`; Java 9.0.0 `ReplicationDaemon` with
//! `isPullEntireGroupTransactions`): every queue of a multi-primary group is
//! pulled from one server, the source, with the all-queues RETRIEVE_TXN_LOG
//! (flag 1) that sends our position in each queue as `ReplicationStateInfo`.
//!
//! As Handle.Net: the records of each queue (after its NAME_OF_QUEUE) are
//! applied by the multi-primary rule with the priority its name gives
//! (`<server>:<index>:<handle>` → index), so a change relayed late never
//! overwrites a newer one; each queue's position is its last id and the date
//! of its QUEUE_END. Ours: each batch is committed with the position of its
//! queue (the source's own queue keeps the mirror's [`PULL_KEY`], the others
//! [`QUEUES_PREFIX`]`<queue>`), so a crash resumes every queue exactly; what
//! is pulled is also kept per queue (`replication_keep_other_transactions`)
//! so that proxied mirrors can pull from this mirror in turn.
//!
//! NEED_TO_REDUMP about any queue stops the pull with an ERROR line, as
//! Handle.Net leaves it to the operator too: a redump restarts every queue.

use super::apply::{pulled, Batch, Pulled};
use super::progress::{decode, entry, PullProgress, PULL_KEY, QUEUES_PREFIX};
use super::pull::{checked_txn_id, PullOutcome};
use super::MirrorError;
use crate::replication::kept_queues;
use crate::replication::multi_primary::future_dates::{self, Verdict};
use crate::replication::ReplicationContext;
use crate::replication_status::mirror::{MirrorStatus, Phase};
use handled_client::credentials::Credentials;
use handled_client::replication::SourceServer;
use handled_proto::envelope::Version;
use handled_proto::replication::txn_stream::STATUS_NEED_TO_REDUMP;
use handled_proto::replication::{
    MirrorLayout, ReplicationServerState, ReplicationStateInfo, RetrieveTxnRequest, TxnQuery, TxnStreamItem,
};
use handled_proto::request::RequestBody;
use handled_store::clock::machine_ms;

/// The priority of a queue's changes: the HS_SITE index in its name
/// (`0:2:TEST/SITES` → 2), 0 when it has none (Java's `getIndexFromQueueName`).
pub fn priority_of(queue: &str) -> Result<i32, MirrorError> {
    let site = queue.split_once(':').map_or(queue, |(_, site)| site);
    match site.split_once(':') {
        None => Ok(0),
        Some((index, _)) => {
            index.parse().map_err(|_| MirrorError::Source(format!("queue name {queue:?} has no HS_SITE index")))
        }
    }
}

/// One queue being received: where its position is kept, and the position.
struct Current {
    name: String,
    key: String,
    progress: PullProgress,
    priority: i32,
    pending_id: u64,
    /// A change dated too far ahead was met: the rest of this queue waits
    /// for the next pull (its position stays before it).
    held: bool,
}

/// Our position in every queue but the source's own (kept in `own`).
async fn positions(state: &ReplicationContext) -> Result<Vec<(String, PullProgress)>, MirrorError> {
    let mut out = Vec::new();
    for (key, raw) in state.records().meta_scan(QUEUES_PREFIX).await? {
        let p = decode::<PullProgress>(&key, &raw).map_err(MirrorError::Source)?;
        out.push((key[QUEUES_PREFIX.len()..].to_string(), p));
    }
    Ok(out)
}

fn position(p: &PullProgress) -> ReplicationServerState {
    ReplicationServerState {
        last_txn_id: p.last_txn_id.min(i64::MAX as u64) as i64,
        last_timestamp: p.last_query_date_ms.min(i64::MAX as u64) as i64,
    }
}

/// One all-queues pull. `own`: the source's own queue name (`0:<index>:<handle>`
/// of `replication_source`), whose position is `own_p`.
pub async fn run(
    state: &ReplicationContext,
    source: &SourceServer,
    creds: &Credentials,
    status: &MirrorStatus,
    (own, own_p): (&str, PullProgress),
) -> Result<PullOutcome, MirrorError> {
    if source.version < Version::V2_9 {
        return Err(MirrorError::Source(
            "replication_pull_other_transactions needs a source at protocol 2.9 or later (an RSA site key)".into(),
        ));
    }
    let mut known = positions(state).await?;
    let mut info = ReplicationStateInfo::default();
    info.replication_server_states.push((own.to_string(), position(&own_p)));
    for (name, p) in &known {
        info.replication_server_states.push((name.clone(), position(p)));
    }
    let request = RetrieveTxnRequest {
        query: TxnQuery::AllQueues(info),
        layout: MirrorLayout::SINGLE,
        flagged: true,
        wait_millis: None,
    };
    let (_, mut stream) = source.request_stream(creds, &RequestBody::RetrieveTxnLog(request)).await?;
    let mut decoder = stream.txn_decoder();
    let keep = state.settings.replication.keep_other_transactions;
    let mut batch = Batch::default();
    let mut current: Option<Current> = None;
    let mut applied = 0u64;
    let mut queues_seen = 0usize;
    let mut redump = false;
    let mut held_any = false;
    let max_skew_ms = state.settings.replication.max_clock_skew_ms;
    loop {
        match stream.next(&mut decoder).await? {
            TxnStreamItem::Header { status: s, .. } => redump = s == STATUS_NEED_TO_REDUMP,
            TxnStreamItem::QueueName(raw) => {
                if let Some(c) = current.take() {
                    applied += commit(state, &mut batch, &c).await?;
                }
                queues_seen += 1;
                let name = String::from_utf8(raw)
                    .ok()
                    .filter(|n| kept_queues::is_keepable(n) && queues_seen <= kept_queues::MAX_QUEUES)
                    .ok_or_else(|| MirrorError::Source("the source sent a malformed or one queue too many".into()))?;
                // Each queue's position is kept: a source naming new queues at will is refused.
                if name != own && !known.iter().any(|(n, _)| *n == name) && known.len() >= kept_queues::MAX_QUEUES {
                    return Err(MirrorError::Source(format!(
                        "the source relays more than {} queues; {name:?} refused",
                        kept_queues::MAX_QUEUES
                    )));
                }
                let (key, progress) = if name == own {
                    (PULL_KEY.to_string(), own_p.clone())
                } else {
                    let p = known.iter().find(|(n, _)| *n == name).map(|(_, p)| p.clone());
                    let fresh = || PullProgress { source: name.clone(), last_txn_id: 0, last_query_date_ms: 0 };
                    (format!("{QUEUES_PREFIX}{name}"), p.unwrap_or_else(fresh))
                };
                let pending_id = progress.last_txn_id;
                current = Some(Current { priority: priority_of(&name)?, name, key, progress, pending_id, held: false });
            }
            TxnStreamItem::Record(r) => {
                let c = current
                    .as_mut()
                    .ok_or_else(|| MirrorError::Source("the source sent a record outside any queue".into()))?;
                let id = checked_txn_id(r.txn_id)?;
                if c.held {
                    continue;
                }
                match future_dates::judge(max_skew_ms, status, &c.name, &r) {
                    Verdict::Apply => {}
                    Verdict::Hold { .. } => {
                        (c.held, held_any) = (true, true);
                        continue;
                    }
                    Verdict::Refuse => {
                        c.pending_id = c.pending_id.max(id);
                        continue;
                    }
                }
                if keep && c.name != own {
                    if let Some(kept) = kept_queues::keep(&c.name, &r) {
                        batch.mark(kept);
                    }
                }
                match pulled(state, r) {
                    Pulled::Change(mut change) => {
                        change.priority = Some(c.priority);
                        batch.push(change);
                    }
                    Pulled::Skip => {}
                    Pulled::DeleteAll => {
                        tracing::error!("the source sent DELETE_ALL (queue {}, txn {id}): not followed", c.name);
                    }
                }
                c.pending_id = c.pending_id.max(id);
                if batch.is_full() {
                    c.progress.last_txn_id = c.pending_id;
                    applied += batch.commit(state, vec![entry(&c.key, &c.progress)]).await? as u64;
                }
            }
            TxnStreamItem::QueueEnd { date_ms } => {
                let mut c = current
                    .take()
                    .ok_or_else(|| MirrorError::Source("the source ended a queue it had not named".into()))?;
                if !c.held {
                    c.progress.last_query_date_ms = date_ms;
                }
                applied += commit(state, &mut batch, &c).await?;
                if c.name == own {
                    status.update(|s| s.last_txn_id = c.pending_id);
                } else if let Some(slot) = known.iter_mut().find(|(n, _)| *n == c.name) {
                    slot.1 = c.progress;
                } else {
                    known.push((c.name.clone(), c.progress));
                }
            }
            TxnStreamItem::End { .. } => break,
        }
    }
    if let Some(c) = current.take() {
        applied += commit(state, &mut batch, &c).await?;
    }
    if redump {
        tracing::error!(
            "the source {} says NEED_TO_REDUMP for the queues it relays: this mirror missed transactions the source no \
             longer keeps; pulling stops until the handles are copied again (docs/multi-primary.md, proxied mirroring)",
            own
        );
        status.update(|s| s.phase = Phase::Redumping);
        return Ok(PullOutcome::Redump);
    }
    if !held_any {
        future_dates::none_held(status);
        status.update(|s| s.caught_up_ms = machine_ms());
    }
    Ok(PullOutcome::Applied(applied))
}

/// Commit what `batch` holds with the position of the queue `c` up to its last id.
async fn commit(state: &ReplicationContext, batch: &mut Batch, c: &Current) -> Result<u64, MirrorError> {
    let mut p = c.progress.clone();
    p.last_txn_id = c.pending_id;
    Ok(batch.commit(state, vec![entry(&c.key, &p)]).await? as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn priorities_from_queue_names() {
        assert_eq!(priority_of("0:2:TEST/SITES").unwrap(), 2);
        assert_eq!(priority_of("1:17:0.NA/X").unwrap(), 17);
        assert_eq!(priority_of("0:sources").unwrap(), 0, "a file-based site has no index");
        assert!(priority_of("0:x:TEST/SITES").is_err());
    }
}
