//! DUMP_HANDLES: every handle the mirror's layout wants, with its values, and
//! the homed prefixes, so that a new mirror starts from a copy and then pulls
//! the log from the id this dump names.
//!
//! The log position (THIS_SERVER) is read first: writes go on during the
//! scan, so the mirror's first pull replays some of them, which is harmless
//! as records are state-based. The store is scanned page by page, each page
//! sent before the next is read. We keep no multi-primary dates, so no
//! HANDLE_DATE / NA_DATE records, and no other queues, so no OTHER_SITE record.
//! A resumed dump (`startingPoint`) continues after the last handle (or
//! prefix) the mirror got and, like the original, names no log position.

use super::layout;
use super::sink::Sink;
use crate::replication::ReplicationContext;
use handled_proto::replication::request::{RESUME_AFTER_HANDLE, RESUME_AFTER_NA};
use handled_proto::replication::{DumpHandlesRequest, DumpStreamItem, DUMP_STREAM_VERSION};
use std::io;

/// Keys read (and records then fetched and sent) at once.
const PAGE: usize = 256;

/// Send the stream answering `req`; `(last_txn_id, date_ms)`: the log's last
/// id and the time when the request was answered.
pub async fn send(
    state: &ReplicationContext,
    req: &DumpHandlesRequest,
    (last_txn_id, date_ms): (u64, u64),
    sink: &mut Sink<'_>,
) -> io::Result<()> {
    sink.send(&DumpStreamItem::Header { version: DUMP_STREAM_VERSION }).await?;
    let (handles_after, prefixes_after) = match &req.resume {
        None => {
            sink.send(&DumpStreamItem::ThisServer { date_ms, last_txn_id }).await?;
            (Some(None), None)
        }
        Some((point, RESUME_AFTER_HANDLE)) => (Some(Some(point.clone())), None),
        Some((point, RESUME_AFTER_NA)) => (None, Some(point.clone())),
        // After a handle date or an NA date (none sent by us): from the start of the scan.
        Some(_) => (Some(None), None),
    };
    if let Some(after) = handles_after {
        send_handles(state, req, after, sink).await?;
    }
    for prefix in state.homed_prefixes() {
        if prefixes_after.as_ref().is_none_or(|after| prefix > *after) {
            sink.send(&DumpStreamItem::HomedPrefix(prefix)).await?;
        }
    }
    sink.send(&DumpStreamItem::Done).await?;
    state.metrics.replication.dumps_served.inc();
    Ok(())
}

/// The handles after `after` (storage order), with their current values.
async fn send_handles(
    state: &ReplicationContext,
    req: &DumpHandlesRequest,
    mut after: Option<Vec<u8>>,
    sink: &mut Sink<'_>,
) -> io::Result<()> {
    loop {
        let keys = state.records().scan_keys(b"", after.as_deref(), PAGE).await.map_err(io::Error::other)?;
        let Some(last) = keys.last().cloned() else { return Ok(()) };
        for key in keys {
            if !layout::wants(&req.layout, &key) {
                continue;
            }
            // Gone since the scan read its key: nothing to send.
            let Some(record) = state.record(&key).await.map_err(io::Error::other)? else { continue };
            sink.send(&DumpStreamItem::Handle { handle: key, values: record.values }).await?;
        }
        after = Some(last);
    }
}
