//! RETRIEVE_TXN_LOG: the transactions after the last one applied. Each batch
//! is committed with the progress it makes (last id; the END date with the
//! last batch) in one atomic commit, so a crash at any moment resumes with
//! nothing lost or applied twice.

use super::apply::{pulled, Batch, Pulled};
use super::progress::{entry, DumpProgress, PullProgress, DUMP_KEY, PULL_KEY};
use super::MirrorError;
use crate::replication::kept_queues;
use crate::replication::multi_primary::future_dates::{self, Verdict};
use crate::replication::ReplicationContext;
use crate::replication_status::mirror::{MirrorStatus, Phase};
use handled_client::credentials::Credentials;
use handled_client::replication::SourceServer;
use handled_proto::replication::txn_stream::STATUS_NEED_TO_REDUMP;
use handled_proto::replication::{MirrorLayout, RetrieveTxnRequest, TxnStreamItem};
use handled_proto::request::RequestBody;
use handled_store::clock::machine_ms;
use std::time::Duration;

/// Whose transactions a pull follows, and where its progress is kept.
pub struct Queue {
    /// The meta key of its [`PullProgress`].
    pub key: String,
    /// `Some`: another primary of a multi-primary group (the index of its
    /// HS_SITE value): its changes are applied only when newer, and a redump
    /// is left to the operator. `None`: this mirror's one source.
    pub priority: Option<i32>,
    /// Keep what is pulled as this queue of [`crate::replication::kept_queues`]
    /// (`replication_keep_other_transactions`), for proxied mirrors.
    pub keep_as: Option<String>,
}

impl Queue {
    /// The mirror's one source.
    pub fn mirror() -> Queue {
        Queue { key: PULL_KEY.to_string(), priority: None, keep_as: None }
    }
}

/// How a pull ended.
#[derive(Debug, PartialEq, Eq)]
pub enum PullOutcome {
    /// Transactions applied (maybe none).
    Applied(u64),
    /// The source asked for a redump; it is recorded and starts next.
    Redump,
}

/// One pull. `wait`: our long-poll extension (a `handled` source holds the
/// request until a transaction arrives or this much time passed).
pub async fn run(
    state: &ReplicationContext,
    source: &SourceServer,
    creds: &Credentials,
    status: &MirrorStatus,
    (queue, mut p): (&Queue, PullProgress),
    wait: Option<Duration>,
) -> Result<PullOutcome, MirrorError> {
    let mut request =
        RetrieveTxnRequest::since(source.version, p.last_txn_id, p.last_query_date_ms, MirrorLayout::SINGLE);
    request.wait_millis = wait.map(|w| w.as_millis().min(i32::MAX as u128) as i32);
    let (_, mut stream) = source.request_stream(creds, &RequestBody::RetrieveTxnLog(request)).await?;
    let mut decoder = stream.txn_decoder();
    let mut batch = Batch::default();
    let mut applied = 0u64;
    let mut redump = false;
    let mut held = false;
    let mut pending_id = p.last_txn_id;
    let max_skew_ms = state.settings.replication.max_clock_skew_ms;
    loop {
        match stream.next(&mut decoder).await? {
            TxnStreamItem::Header { status: s, .. } => redump = s == STATUS_NEED_TO_REDUMP,
            TxnStreamItem::Record(r) => {
                let id = checked_txn_id(r.txn_id)?;
                if id < p.last_txn_id {
                    // The source's log went back (restored or replaced): what
                    // this mirror holds can no longer be followed by ids.
                    tracing::error!(
                        "the source {} sent txn {id}, before {} already applied: its log went back",
                        p.source,
                        p.last_txn_id
                    );
                    redump = true;
                    break;
                }
                if queue.priority.is_some() {
                    match future_dates::judge(max_skew_ms, status, &p.source, &r) {
                        Verdict::Apply => {}
                        // The ids before it are committed below; it is asked for again next cycle.
                        Verdict::Hold { .. } => {
                            held = true;
                            break;
                        }
                        Verdict::Refuse => {
                            pending_id = pending_id.max(id);
                            continue;
                        }
                    }
                }
                if let Some(kept) = queue.keep_as.as_deref().and_then(|q| kept_queues::keep(q, &r)) {
                    batch.mark(kept);
                }
                match pulled(state, r) {
                    Pulled::Change(mut c) => {
                        c.priority = queue.priority;
                        batch.push(c)
                    }
                    Pulled::Skip => {}
                    Pulled::DeleteAll => {
                        tracing::error!("the source sent DELETE_ALL (txn {id}): redumping to follow it");
                        redump = true;
                    }
                }
                pending_id = pending_id.max(id);
                if batch.is_full() {
                    p.last_txn_id = pending_id;
                    applied += batch.commit(state, vec![entry(&queue.key, &p)]).await? as u64;
                    status.update(|s| s.last_txn_id = p.last_txn_id);
                }
            }
            TxnStreamItem::End { date_ms } => {
                if let Some(d) = date_ms {
                    p.last_query_date_ms = d;
                }
                break;
            }
            // Format 2 (all queues) is only sent to the all-queues query, which we do not make.
            TxnStreamItem::QueueName(_) | TxnStreamItem::QueueEnd { .. } => {
                return Err(MirrorError::Source("the source sent an all-queues stream to a one-queue pull".into()))
            }
        }
    }
    if redump && queue.priority.is_some() {
        // Handle.Net leaves this to the operator too (hdl-dumpfromprimary).
        tracing::error!(
            "the primary {} says NEED_TO_REDUMP after txn {}: this member missed transactions it no longer keeps; \
             pulling from it stops until the handles are copied again (docs/multi-primary.md)",
            p.source,
            p.last_txn_id
        );
        status.update(|s| s.phase = Phase::Redumping);
        return Ok(PullOutcome::Redump);
    }
    if redump {
        let d = DumpProgress::new(&p.source, true, machine_ms());
        // Whatever arrived before is dropped: the redump brings the current state.
        state.txn_log().apply_replicated(Vec::new(), vec![entry(DUMP_KEY, &d)]).await?;
        tracing::error!(
            "the source {} says NEED_TO_REDUMP after txn {}: this mirror missed transactions it no longer keeps; \
             redumping now (the old data is served meanwhile)",
            p.source,
            p.last_txn_id
        );
        status.update(|s| {
            s.redumps += 1;
            s.phase = Phase::Redumping;
        });
        return Ok(PullOutcome::Redump);
    }
    p.last_txn_id = pending_id;
    applied += batch.commit(state, vec![entry(&queue.key, &p)]).await? as u64;
    status.update(|s| s.last_txn_id = p.last_txn_id);
    if !held {
        future_dates::none_held(status);
        status.update(|s| s.caught_up_ms = machine_ms());
    }
    Ok(PullOutcome::Applied(applied))
}

/// A source's transaction id, refused above `i64::MAX`: Java's ids are
/// `long`s, and a larger one would wrap here and in the metrics.
pub(super) fn checked_txn_id(id: u64) -> Result<u64, MirrorError> {
    if id > i64::MAX as u64 {
        return Err(MirrorError::Source(format!(
            "transaction id {id} is above 2^63-1 (no Handle.Net server sends one)"
        )));
    }
    Ok(id)
}

#[cfg(test)]
mod tests {
    /// Issue 25 R8: id 2^64-1 from a source wrapped (GET_NEXT_TXN_ID answered
    /// 0, the metric showed -1); ids above Java's `long` are refused.
    #[test]
    fn transaction_ids_beyond_a_java_long_are_refused() {
        assert_eq!(super::checked_txn_id(i64::MAX as u64).unwrap(), i64::MAX as u64);
        for id in [i64::MAX as u64 + 1, u64::MAX] {
            let e = super::checked_txn_id(id).unwrap_err();
            assert!(e.to_string().contains("2^63-1"), "{e}");
        }
    }
}
