//! RETRIEVE_TXN_LOG: the log entries after the mirror's last id, each with the
//! handle's values as they are at send time (a create or update of a handle
//! gone since carries none), or NEED_TO_REDUMP when the log no longer reaches
//! back to the mirror.
//!
//! The redump rule. Handle.Net decides by dates: no redump when the queue's
//! first date ≤ the mirror's lastQueryDate (plus grace cases for a queue that
//! starts at id 1). We know exactly which ids the log still holds (`floor`:
//! every id above it is kept), so we decide by ids: redump iff the mirror's
//! last id is below the floor, i.e. some entry it lacks was pruned. Like the
//! original, a source with no transactions never asks for a redump (an ex-mirror
//! becoming a primary). Unlike it, a mirror claiming ids we never issued
//! (ahead of our last: the source lost its log, e.g. restored from a backup)
//! is told to redump rather than silently miss our next changes.

use super::layout;
use super::sink::Sink;
use crate::replication::kept_queues::{self, KeptEntry};
use crate::replication::ReplicationContext;
use crate::site::SITE_INDEX;
use handled_proto::replication::txn_stream::{FORMAT_ONE_QUEUE, STATUS_NEED_TO_REDUMP, STATUS_SENDING};
use handled_proto::replication::{MirrorLayout, RetrieveTxnRequest, TxnAction, TxnQuery, TxnRecord, TxnStreamItem};
use handled_store::change_dates::{decode_priority, LOCAL_PRIORITY_META_KEY};
use handled_store::clock::machine_ms;
use handled_store::TxnLogBounds;
use std::io;
use std::time::Duration;

/// Log entries read at once (each is then sent before the next page is read).
const PAGE: usize = 256;

/// Our own queue's name as Handle.Net names queues, `<serverNum>:<siteName>`
/// with the site named `<index>:<handle>` of its HS_SITE value. In a
/// multi-primary group, our value in the sites handle (`0:2:TEST/SITES`);
/// otherwise server 0 of the HS_SITE at index 1 of our first prefix's handle,
/// e.g. `0:1:0.NA/TEST`.
pub async fn own_queue_name(state: &ReplicationContext) -> String {
    let r = &state.settings.replication;
    if let (Some(sites), true) = (&r.sites_handle, r.pulls_from_group()) {
        let stored = state.records().meta_get(LOCAL_PRIORITY_META_KEY).await.ok().flatten();
        if let Some(Ok(priority)) = stored.as_deref().map(decode_priority) {
            return format!("0:{priority}:{}", sites.trim());
        }
    }
    let prefix = state.settings.prefixes.first().map_or(String::new(), |p| p.to_ascii_uppercase());
    format!("0:{SITE_INDEX}:0.NA/{prefix}")
}

/// The last id of our queue the mirror says it has.
pub async fn last_txn_id_of(state: &ReplicationContext, query: &TxnQuery) -> u64 {
    match query {
        TxnQuery::Since { last_txn_id, .. } => *last_txn_id,
        TxnQuery::AllQueues(info) => info.get(&own_queue_name(state).await).last_txn_id.max(0) as u64,
    }
}

/// Must a mirror that has everything up to `mirror_last` be dumped again?
pub fn needs_redump(bounds: &TxnLogBounds, mirror_last: u64) -> bool {
    if bounds.last == 0 {
        return false;
    }
    mirror_last < bounds.floor || mirror_last > bounds.last
}

/// Hold a long-polling pull until the log has an entry after the mirror's
/// last id, or `wait` has passed.
pub async fn wait_for_newer(state: &ReplicationContext, req: &RetrieveTxnRequest, wait: Duration) {
    let mirror_last = last_txn_id_of(state, &req.query).await;
    let mut committed = state.txn_log().txn_log_subscribe();
    let _ = tokio::time::timeout(wait, committed.wait_for(|&last| last != mirror_last)).await;
}

/// Send the stream answering a one-queue request from a mirror (of `layout`)
/// that has everything up to `mirror_last`.
pub async fn send(
    state: &ReplicationContext,
    layout: &MirrorLayout,
    (mirror_last, last_query_date_ms): (u64, u64),
    sink: &mut Sink<'_>,
) -> io::Result<()> {
    let bounds = state.txn_log().txn_log_bounds().await.map_err(io::Error::other)?;
    let redump = needs_redump(&bounds, mirror_last);
    if redump {
        tracing::warn!(
            "replication: a mirror at transaction {mirror_last} must be dumped again (log keeps {}..={})",
            bounds.floor + 1,
            bounds.last
        );
    }
    let status = if redump { STATUS_NEED_TO_REDUMP } else { STATUS_SENDING };
    sink.send(&TxnStreamItem::Header { format: FORMAT_ONE_QUEUE, status }).await?;
    if !redump {
        forward(state, layout, None, (mirror_last, bounds.last), sink).await?;
    }
    // The mirror's next lastQueryDate: unchanged while it must be dumped.
    let date = if redump { last_query_date_ms } else { machine_ms() };
    sink.send(&TxnStreamItem::End { date_ms: Some(date) }).await
}

/// Send the entries in `(after, upto]` the mirror's layout wants, page by
/// page: of our own log (`kept` None), or of another primary's queue we keep.
pub(super) async fn forward(
    state: &ReplicationContext,
    layout: &MirrorLayout,
    kept: Option<&str>,
    (after, upto): (u64, u64),
    sink: &mut Sink<'_>,
) -> io::Result<()> {
    let mut next = after;
    while next < upto {
        let page = match kept {
            None => {
                state.txn_log().txn_log_read(next, PAGE).await.map(|p| p.into_iter().map(KeptEntry::from).collect())
            }
            Some(queue) => kept_queues::read(state.uncached_documents(), queue, next, PAGE).await,
        };
        let page: Vec<KeptEntry> = page.map_err(io::Error::other)?;
        let Some(last) = page.last() else { break };
        next = last.id;
        let mut sent = 0;
        for entry in page.into_iter().take_while(|e| e.id <= upto) {
            if let Some(record) = record_of(state, layout, entry).await? {
                sink.send(&TxnStreamItem::Record(record)).await?;
                sent += 1;
            }
        }
        state.metrics.replication.entries_sent.inc_by(sent);
    }
    Ok(())
}

/// The record to send for `entry`, with the handle's values current here;
/// None when the mirror's layout leaves the handle to another of its servers.
async fn record_of(state: &ReplicationContext, layout: &MirrorLayout, e: KeptEntry) -> io::Result<Option<TxnRecord>> {
    let action = TxnAction(e.action);
    let homing = action == TxnAction::HOME_NA || action == TxnAction::UNHOME_NA;
    if !homing && !layout::wants(layout, &e.handle) {
        return Ok(None);
    }
    let values = if action.carries_values() {
        let current = state.record(&state.storage_key(&e.handle)).await.map_err(io::Error::other)?;
        Some(current.map(|r| r.values).unwrap_or_default())
    } else {
        None
    };
    Ok(Some(TxnRecord { txn_id: e.id, handle: e.handle, action, date_ms: e.date_ms, values }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redump_iff_the_log_lost_what_the_mirror_lacks() {
        let bounds = |floor, last| TxnLogBounds { floor, last, first_date_ms: Some(1) };
        assert!(!needs_redump(&bounds(0, 0), 0), "no transactions: never");
        assert!(!needs_redump(&bounds(0, 0), 7), "no transactions: never, even for a mirror ahead");
        assert!(!needs_redump(&bounds(0, 5), 0), "everything kept");
        assert!(!needs_redump(&bounds(3, 5), 3), "the mirror lacks 4 and 5, both kept");
        assert!(needs_redump(&bounds(3, 5), 2), "3 was pruned");
        assert!(!needs_redump(&bounds(5, 5), 5), "all pruned, none lacking");
        assert!(needs_redump(&bounds(0, 5), 6), "a mirror ahead of the log");
    }
}
