//! RETRIEVE_TXN_LOG: the transactions after the last one applied. Each batch
//! is committed with the progress it makes (last id; the END date with the
//! last batch) in one atomic commit, so a crash at any moment resumes with
//! nothing lost or applied twice.

use super::apply::{pulled, Batch, Pulled};
use super::progress::{entry, DumpProgress, PullProgress, DUMP_KEY, PULL_KEY};
use super::MirrorError;
use crate::replication_status::mirror::{now_ms, MirrorStatus, Phase};
use crate::state::ServerState;
use handled_client::credentials::Credentials;
use handled_client::replication::SourceServer;
use handled_proto::replication::txn_stream::STATUS_NEED_TO_REDUMP;
use handled_proto::replication::{MirrorLayout, RetrieveTxnRequest, TxnStreamItem};
use handled_proto::request::RequestBody;
use std::time::Duration;

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
    state: &ServerState,
    source: &SourceServer,
    creds: &Credentials,
    status: &MirrorStatus,
    mut p: PullProgress,
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
    let mut pending_id = p.last_txn_id;
    loop {
        match stream.next(&mut decoder).await? {
            TxnStreamItem::Header { status: s, .. } => redump = s == STATUS_NEED_TO_REDUMP,
            TxnStreamItem::Record(r) => {
                let id = r.txn_id;
                match pulled(state, r) {
                    Pulled::Change(c) => batch.push(c),
                    Pulled::Skip => {}
                    Pulled::DeleteAll => {
                        tracing::error!("the source sent DELETE_ALL (txn {id}): redumping to follow it");
                        redump = true;
                    }
                }
                pending_id = pending_id.max(id);
                if batch.is_full() {
                    p.last_txn_id = pending_id;
                    applied += batch.commit(state, vec![entry(PULL_KEY, &p)]).await? as u64;
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
    if redump {
        let d = DumpProgress::new(&p.source, true, now_ms());
        // Whatever arrived before is dropped: the redump brings the current state.
        state.store.apply_replicated(Vec::new(), vec![entry(DUMP_KEY, &d)]).await?;
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
    applied += batch.commit(state, vec![entry(PULL_KEY, &p)]).await? as u64;
    status.update(|s| {
        s.last_txn_id = p.last_txn_id;
        s.caught_up_ms = now_ms();
    });
    Ok(PullOutcome::Applied(applied))
}
