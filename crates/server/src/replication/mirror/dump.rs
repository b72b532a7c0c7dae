//! DUMP_HANDLES: the first copy of everything, and the redumps a source asks
//! for. Records are kept in batches, each committed with the dump's progress
//! (the last record kept), so a broken stream is asked again from there and a
//! crash resumes there. A redump serves the old data meanwhile and afterwards
//! deletes what the dump did not contain (mark and sweep; the marks are in the
//! store, [`super::marks`]).

use super::apply::{admitted, handle_state, homing, Batch};
use super::marks::{self, Kind};
use super::progress::{entry, DumpProgress, PullProgress, DUMP_KEY, PULL_KEY};
use super::MirrorError;
use crate::replication::ReplicationContext;
use crate::replication_status::mirror::{MirrorStatus, Phase};
use handled_client::credentials::Credentials;
use handled_client::replication::SourceServer;
use handled_proto::replication::request::{RESUME_AFTER_HANDLE, RESUME_AFTER_NA};
use handled_proto::replication::{DumpHandlesRequest, DumpStreamItem, MirrorLayout};
use handled_proto::request::RequestBody;
use handled_store::clock::machine_ms;
use std::time::Duration;

/// Attempts in a row that keep nothing before the dump is given up for this cycle.
const TRIES_WITHOUT_PROGRESS: u32 = 2;
/// Pause between attempts (the original waits 5 s).
const RETRY_PAUSE: Duration = Duration::from_secs(5);
/// Local keys read per page while sweeping.
const SWEEP_PAGE: usize = 1000;

/// Run (or resume) the dump `d` to its end, then hand over to pulling.
pub async fn run(
    state: &ReplicationContext,
    source: &SourceServer,
    creds: &Credentials,
    status: &MirrorStatus,
    mut d: DumpProgress,
) -> Result<(), MirrorError> {
    if d.redump && d.records > 0 {
        tracing::error!("resuming the REDUMP from {} after {} records (its marks are kept)", d.source, d.records);
    } else if d.redump {
        tracing::error!(
            "REDUMP of every handle from {} begins (the old data is served until it ends; {} local records will be compared)",
            d.source,
            state.records().count().await.unwrap_or(0)
        );
        marks::clear(state).await?;
        d = DumpProgress { redump: true, ..DumpProgress::new(&d.source, true, machine_ms()) };
    } else if d.records > 0 {
        tracing::info!("resuming the dump from {} after {} records", d.source, d.records);
    } else {
        tracing::info!("dumping every handle from {}", d.source);
    }
    status.update(|s| {
        s.phase = if d.redump { Phase::Redumping } else { Phase::Dumping };
        s.dump_records = d.records;
    });
    let mut fruitless = 0;
    loop {
        let before = d.records;
        match attempt(state, source, creds, status, &mut d).await {
            Ok(()) => break,
            Err(e) if d.records > before => {
                tracing::warn!(
                    "dump stream from {} broke after {} records ({e}); asking again from there",
                    d.source,
                    d.records
                );
            }
            Err(e) => {
                fruitless += 1;
                if fruitless >= TRIES_WITHOUT_PROGRESS {
                    return Err(e);
                }
                tracing::warn!("dump from {} failed ({e}); trying again", d.source);
            }
        }
        tokio::time::sleep(RETRY_PAUSE).await;
    }
    if d.redump {
        sweep(state, &d).await?;
        marks::clear(state).await?;
    }
    let txn_id = d.txn_id.unwrap_or(0);
    state.txn_log().txn_log_reset(txn_id).await?;
    let pull = PullProgress { source: d.source.clone(), last_txn_id: txn_id, last_query_date_ms: d.date_ms };
    state.txn_log().apply_replicated(Vec::new(), vec![entry(PULL_KEY, &pull), (DUMP_KEY.to_string(), None)]).await?;
    tracing::info!(
        "dump from {} done: {} records in {:.1} s; pulling transactions after {txn_id}",
        d.source,
        d.records,
        machine_ms().saturating_sub(d.started_ms) as f64 / 1000.0
    );
    status.update(|s| {
        s.phase = Phase::Pulling;
        s.last_txn_id = txn_id;
        s.dump_records = d.records;
    });
    Ok(())
}

/// One DUMP_HANDLES request, from the resume point, kept until the stream ends or breaks.
async fn attempt(
    state: &ReplicationContext,
    source: &SourceServer,
    creds: &Credentials,
    status: &MirrorStatus,
    d: &mut DumpProgress,
) -> Result<(), MirrorError> {
    let request = DumpHandlesRequest { layout: MirrorLayout::SINGLE, resume: d.resume_point() };
    let (_, mut stream) = source.request_stream(creds, &RequestBody::DumpHandles(request)).await?;
    let mut decoder = stream.dump_decoder();
    let mut batch = Batch::default();
    let mut last: Option<(Vec<u8>, i32)> = None;
    let result = loop {
        let item = match stream.next(&mut decoder).await {
            Ok(item) => item,
            Err(e) => break Err(MirrorError::from(e)),
        };
        match item {
            DumpStreamItem::ThisServer { date_ms, last_txn_id } if d.txn_id.is_none() => {
                // Taken before the scan: replaying from here may apply some changes twice (harmless).
                match super::pull::checked_txn_id(last_txn_id) {
                    Ok(id) => d.txn_id = Some(id),
                    Err(e) => break Err(e),
                }
                d.date_ms = date_ms;
            }
            DumpStreamItem::Handle { handle, values } => {
                let change = handle_state(state, 0, 0, &handle, values);
                if d.redump {
                    batch.mark(marks::mark(Kind::Handle, &change.entry.handle));
                }
                if admitted(state, &change) {
                    batch.push(change);
                }
                last = Some((handle, RESUME_AFTER_HANDLE));
            }
            DumpStreamItem::HomedPrefix(na) => {
                let change = homing(0, 0, &na, true);
                if d.redump {
                    batch.mark(marks::mark(Kind::Prefix, &change.entry.handle));
                }
                if admitted(state, &change) {
                    batch.push(change);
                }
                last = Some((na, RESUME_AFTER_NA));
            }
            DumpStreamItem::Done => break Ok(()),
            // Dates serve multi-primary conflict resolution, which we do not do.
            _ => {}
        }
        if batch.is_full() {
            keep(state, status, d, &mut batch, &mut last).await?;
        }
    };
    // What arrived whole is kept even when the stream broke after it.
    keep(state, status, d, &mut batch, &mut last).await?;
    result
}

async fn keep(
    state: &ReplicationContext,
    status: &MirrorStatus,
    d: &mut DumpProgress,
    batch: &mut Batch,
    last: &mut Option<(Vec<u8>, i32)>,
) -> Result<(), MirrorError> {
    if batch.is_empty() {
        return Ok(());
    }
    let mut next = d.clone();
    next.records += batch.changes.len() as u64;
    if let Some((h, kind)) = last.take() {
        next.set_resume(&h, kind);
    }
    batch.commit(state, vec![entry(DUMP_KEY, &next)]).await?;
    *d = next;
    if d.records % 10_000 < super::apply::BATCH_RECORDS as u64 {
        tracing::info!("dump from {}: {} records", d.source, d.records);
    }
    status.update(|s| s.dump_records = d.records);
    Ok(())
}

/// After a redump: delete the handles and homed prefixes the dump did not contain.
async fn sweep(state: &ReplicationContext, d: &DumpProgress) -> Result<(), MirrorError> {
    let mut gone = 0u64;
    let mut after: Option<Vec<u8>> = None;
    loop {
        let keys = state.records().scan_keys(b"", after.as_deref(), SWEEP_PAGE).await?;
        let Some(last) = keys.last().cloned() else { break };
        let mut batch = Batch::default();
        for key in keys {
            if !marks::seen(state, Kind::Handle, &key).await? {
                batch.push(handle_state(state, 0, 0, &key, Vec::new()));
            }
        }
        gone += batch.changes.len() as u64;
        batch.commit(state, Vec::new()).await?;
        after = Some(last);
    }
    let mut batch = Batch::default();
    for prefix in state.records().homed_prefixes().await? {
        let unhome = homing(0, 0, &prefix, false);
        if !marks::seen(state, Kind::Prefix, &prefix).await? && admitted(state, &unhome) {
            batch.push(unhome);
        }
    }
    gone += batch.changes.len() as u64;
    batch.commit(state, Vec::new()).await?;
    tracing::error!(
        "REDUMP from {} done: {} records kept, {gone} local ones the source no longer has deleted",
        d.source,
        d.records
    );
    Ok(())
}
