//! RETRIEVE_TXN_LOG with flag 1, "all queues" (Handle.Net's proxied mirroring,
//! `replication_pull_other_transactions` on the mirror; Java 9.0.0
//! `RetrieveTxnResponse.streamResponseForAllTransactions`): our own queue and
//! every other primary's queue we keep ([`crate::replication::kept_queues`]),
//! each from the position the mirror sent for it in its `ReplicationStateInfo`.
//!
//! As Handle.Net does it:
//! * the queues are the ones we pull (with our position in each: the last id
//!   applied and the END date of our last pull from it) and the ones we keep;
//!   those of the mirror's own site (`ownName`) are skipped;
//! * a queue is sent only up to the last id we applied from it, and only once
//!   we have pulled it (a position with a date); its QUEUE_END carries the date
//!   of our last pull from it, which the mirror sends back next time;
//! * one queue needing a redump makes the whole answer NEED_TO_REDUMP. For a
//!   kept queue the rule is Handle.Net's, by dates ([`needs_redump_by_date`]);
//!   for our own queue it is ours, by ids ([`super::txn::needs_redump`]).

use super::sink::Sink;
use super::txn::{self, needs_redump};
use crate::replication::kept_queues::{self, KeptEntry};
use crate::replication::mirror::progress::{decode, PullProgress, QUEUES_PREFIX};
use crate::replication::multi_primary::PULL_PREFIX;
use crate::replication::ReplicationContext;
use handled_proto::replication::txn_stream::{FORMAT_ALL_QUEUES, STATUS_NEED_TO_REDUMP, STATUS_SENDING};
use handled_proto::replication::{MirrorLayout, ReplicationStateInfo, TxnStreamItem};
use handled_store::clock::machine_ms;
use std::io;

const DAY_MS: i64 = 86_400_000;

/// Handle.Net's redump rule for one queue (`RetrieveTxnResponse.needsRedump`):
/// `servers_last` is the last id we applied from the queue, `first` the first
/// entry we keep of it (None: nothing kept), `client_*` the mirror's position.
pub fn needs_redump_by_date(
    first: Option<&KeptEntry>,
    servers_last: i64,
    client_last: i64,
    client_date: i64,
    now: i64,
) -> bool {
    if servers_last <= 0 {
        return false;
    }
    // Nothing kept (never, or all pruned): only a mirror behind us must redump.
    let Some(first) = first else { return servers_last > client_last };
    let first_date = first.date_ms.min(i64::MAX as u64) as i64;
    let starts_at_one = first.id == 1;
    if first_date <= client_date {
        return false;
    }
    if client_last <= 0 && first_date.saturating_add(10 * DAY_MS) > now && starts_at_one {
        return false;
    }
    if client_last <= 0 && first_date <= client_date.saturating_add(DAY_MS) && starts_at_one {
        return false;
    }
    client_last <= 0 || first_date > client_date.saturating_add(DAY_MS) || first.id as i64 != client_last + 1
}

/// Is `queue` one of the site named `own` (`<server>:<own>`)? Java's `isQueueNameInSiteNamed`.
fn in_site(queue: &str, own: Option<&str>) -> bool {
    match (queue.split_once(':'), own) {
        (Some((_, site)), Some(own)) => site == own,
        _ => false,
    }
}

/// Our position in every queue we pull: as a multi-primary member, and as a
/// proxied mirror (the queues its source relayed).
async fn our_positions(state: &ReplicationContext) -> io::Result<Vec<(String, PullProgress)>> {
    let mut out = Vec::new();
    for prefix in [PULL_PREFIX, QUEUES_PREFIX] {
        for (key, raw) in state.records().meta_scan(prefix).await.map_err(io::Error::other)? {
            let progress = decode::<PullProgress>(&key, &raw).map_err(io::Error::other)?;
            out.push((key[prefix.len()..].to_string(), progress));
        }
    }
    Ok(out)
}

/// Send the all-queues stream for a mirror whose positions are `info`.
pub async fn send(
    state: &ReplicationContext,
    layout: &MirrorLayout,
    info: &ReplicationStateInfo,
    sink: &mut Sink<'_>,
) -> io::Result<()> {
    let own = txn::own_queue_name(state).await;
    let bounds = state.txn_log().txn_log_bounds().await.map_err(io::Error::other)?;
    let own_last = info.get(&own).last_txn_id.max(0) as u64;
    let mut redump = needs_redump(&bounds, own_last);
    let positions = our_positions(state).await?;
    let mut names: Vec<String> = positions.iter().map(|(q, _)| q.clone()).collect();
    for kept in kept_queues::names(state.uncached_documents()).await.map_err(io::Error::other)? {
        if !names.contains(&kept) {
            names.push(kept);
        }
    }
    let requester = info.own_name.as_deref();
    names.retain(|q| *q != own && !in_site(q, requester));
    names.truncate(kept_queues::MAX_QUEUES);
    let ours = |q: &str| positions.iter().find(|(n, _)| n == q).map(|(_, p)| p.clone());
    let now = machine_ms() as i64;
    for q in &names {
        let first = kept_queues::first(state.uncached_documents(), q).await.map_err(io::Error::other)?;
        let servers_last = ours(q).map_or(0, |p| p.last_txn_id.min(i64::MAX as u64) as i64);
        let client = info.get(q);
        if needs_redump_by_date(first.as_ref(), servers_last, client.last_txn_id, client.last_timestamp, now) {
            tracing::warn!(
                "replication: a proxied mirror must be dumped again for queue {q} (it has {} of {servers_last}; we keep \
                 from {:?})",
                client.last_txn_id,
                first.map(|f| f.id)
            );
            redump = true;
        }
    }
    if redump {
        sink.send(&TxnStreamItem::Header { format: FORMAT_ALL_QUEUES, status: STATUS_NEED_TO_REDUMP }).await?;
        return sink.send(&TxnStreamItem::End { date_ms: None }).await;
    }
    sink.send(&TxnStreamItem::Header { format: FORMAT_ALL_QUEUES, status: STATUS_SENDING }).await?;
    sink.send(&TxnStreamItem::QueueName(own.into_bytes())).await?;
    txn::forward(state, layout, None, (own_last, bounds.last), sink).await?;
    sink.send(&TxnStreamItem::QueueEnd { date_ms: machine_ms() }).await?;
    for q in &names {
        let Some(p) = ours(q).filter(|p| p.last_query_date_ms > 0) else { continue };
        sink.send(&TxnStreamItem::QueueName(q.clone().into_bytes())).await?;
        let after = info.get(q).last_txn_id.max(0) as u64;
        txn::forward(state, layout, Some(q), (after, p.last_txn_id), sink).await?;
        sink.send(&TxnStreamItem::QueueEnd { date_ms: p.last_query_date_ms }).await?;
    }
    sink.send(&TxnStreamItem::End { date_ms: None }).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kept(id: u64, date: u64) -> KeptEntry {
        KeptEntry { id, action: 3, date_ms: date, handle: b"TEST/x".to_vec() }
    }

    #[test]
    fn handle_net_redump_rule() {
        let now = 100 * DAY_MS;
        let r =
            |first: Option<&KeptEntry>, servers, client, date| needs_redump_by_date(first, servers, client, date, now);
        assert!(!r(None, 0, 0, 0), "we pulled nothing from the queue");
        assert!(r(None, 5, 3, 0) && !r(None, 5, 5, 0), "nothing kept: only a mirror behind");
        let old = kept(1, (now - 20 * DAY_MS) as u64);
        assert!(!r(Some(&old), 9, 4, now - 20 * DAY_MS), "pulled since the first kept entry");
        assert!(r(Some(&old), 9, 0, 0), "a new mirror, the queue older than 10 days");
        let young = kept(1, (now - DAY_MS) as u64);
        assert!(!r(Some(&young), 9, 0, 0), "a new mirror, a young queue from id 1");
        let pruned = kept(5, (now - DAY_MS) as u64);
        assert!(r(Some(&pruned), 9, 0, 0), "a new mirror, the head pruned");
        assert!(!r(Some(&pruned), 9, 4, now - DAY_MS - 1000), "the queue starts right after the mirror, within a day");
        assert!(r(Some(&pruned), 9, 3, now - DAY_MS - 1000), "id 4 was pruned");
    }

    #[test]
    fn own_site_queues() {
        assert!(in_site("0:2:TEST/SITES", Some("2:TEST/SITES")));
        assert!(!in_site("0:3:TEST/SITES", Some("2:TEST/SITES")) && !in_site("0:2:TEST/SITES", None));
    }
}
