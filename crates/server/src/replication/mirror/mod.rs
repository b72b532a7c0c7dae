//! `handled` as a replication mirror of a Handle.Net (or `handled`) primary
//! (docs/replication.md): a first full copy (DUMP_HANDLES, resumable), then
//! the source's transaction log pulled every `replication_interval_ms` (or
//! long-polled), each batch committed with its progress. Meanwhile the server
//! resolves from its copy and answers administration requests "not a
//! primary" (RC 301), until it is promoted.

pub(crate) mod apply;
mod dump;
mod marks;
pub mod progress;
mod proxied;
pub(crate) mod pull;
pub mod settings;
pub(crate) mod source;

pub use crate::replication_status::mirror::MirrorStatus;
pub use settings::MirrorSettings;

use crate::replication::ReplicationContext;
use crate::replication_status::mirror::Phase;
use handled_client::replication::ReplicationError;
use handled_store::clock::machine_ms;
use progress::{decode, DumpProgress, PullProgress, DUMP_KEY, PROMOTED_KEY, PULL_KEY};
use pull::PullOutcome;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Why a cycle failed; the loop logs it and tries again later.
#[derive(Debug, thiserror::Error)]
pub enum MirrorError {
    #[error("{0}")]
    Source(String),
    #[error(transparent)]
    Stream(#[from] ReplicationError),
    #[error("store: {0}")]
    Store(#[from] handled_store::StoreError),
}

/// Longest pause after failures in a row.
const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// A long-poll answered faster than this without transactions means the
/// source does not hold requests (Handle.Net ignores the wait): pace by the interval.
const NOT_HELD: Duration = Duration::from_millis(200);

/// Has this server been promoted (durably)? Then it is a primary whatever its
/// configuration says.
pub async fn is_promoted(store: &dyn handled_store::RecordStore) -> Result<bool, handled_store::StoreError> {
    Ok(store.meta_get(PROMOTED_KEY).await?.is_some())
}

/// Make `state` a mirror and start pulling (inside the runtime, before the
/// listeners serve). A promoted server only logs that its source is ignored.
pub async fn start(
    state: &Arc<ReplicationContext>,
    settings: MirrorSettings,
    stop: &crate::lifecycle::Stop,
) -> Result<(), handled_store::StoreError> {
    let promoted = is_promoted(state.records()).await?;
    let status = Arc::new(MirrorStatus::new(settings.source_text.clone(), promoted));
    state.set_mirror(status.clone());
    let scrape = status.clone();
    state.metrics.add_scrape_hook(Box::new(move |r| scrape.register(r)));
    if promoted {
        tracing::warn!(
            "this server was promoted to a primary: replication_source {} is ignored (remove it from the configuration)",
            settings.source_text
        );
        return Ok(());
    }
    if let Some(p) = state.records().meta_get(PULL_KEY).await? {
        if let Ok(p) = decode::<PullProgress>(PULL_KEY, &p) {
            status.update(|s| s.last_txn_id = p.last_txn_id);
        }
    }
    // Stopped with the server, before its store closes.
    let task = stop.spawn_until_draining(run(state.clone(), settings, status.clone()));
    status.set_task(task.abort_handle());
    Ok(())
}

/// Promote: stop pulling and take writes, continuing the source's transaction
/// ids (the log holds them). Durable before it returns.
pub async fn promote(state: &ReplicationContext) -> Result<bool, handled_store::StoreError> {
    let Some(status) = state.mirror() else { return Ok(false) };
    if !status.is_read_only() {
        return Ok(false);
    }
    status.stop_task();
    write_promoted(state.txn_log()).await?;
    status.set_promoted();
    tracing::warn!("PROMOTED to a primary: pulling from {} stopped, writes accepted", status.source);
    Ok(true)
}

/// SIGHUP: a mirror whose configuration file no longer names a source is
/// promoted (online promotion, no restart). Ok(true) when it was.
pub async fn promote_if_unconfigured(
    state: &ReplicationContext,
    path: Option<&std::path::Path>,
) -> Result<bool, String> {
    if !state.mirror().is_some_and(|m| m.is_read_only()) {
        return Ok(false);
    }
    let file = crate::config::Config::load(path).map_err(|e| e.to_string())?;
    if file.replication.source.is_some() {
        return Ok(false);
    }
    promote(state).await.map_err(|e| e.to_string())
}

/// The durable promotion flag (also what `handled promote` writes offline).
/// An unfinished dump is dropped: a primary has nothing to resume it from.
pub async fn write_promoted(store: &dyn handled_store::TxnLogStore) -> Result<(), handled_store::StoreError> {
    let when = machine_ms().to_string().into_bytes();
    store.apply_replicated(Vec::new(), vec![(PROMOTED_KEY.into(), Some(when)), (DUMP_KEY.into(), None)]).await
}

/// The pull loop: runs until promotion.
async fn run(state: Arc<ReplicationContext>, settings: MirrorSettings, status: Arc<MirrorStatus>) {
    let mut failures = 0u32;
    while status.is_read_only() {
        let started = Instant::now();
        let outcome = cycle(&state, &settings, &status).await;
        status.update(|s| s.last_pull_ms = machine_ms());
        let pause = match outcome {
            Ok(Some(PullOutcome::Applied(n))) if settings.low_latency => {
                failures = 0;
                if n == 0 && started.elapsed() < NOT_HELD {
                    settings.interval
                } else {
                    Duration::ZERO
                }
            }
            Ok(Some(PullOutcome::Applied(_))) => {
                failures = 0;
                settings.interval
            }
            // A proxied mirror does not redump by itself (the operator does): ask again later.
            Ok(Some(PullOutcome::Redump)) if settings.all_queues.is_some() => settings.interval,
            Ok(_) => {
                failures = 0;
                Duration::ZERO
            }
            Err(e) => {
                failures += 1;
                tracing::warn!("replication from {}: {e}", settings.source_text);
                status.update(|s| {
                    s.pull_errors += 1;
                    s.last_error = Some(e.to_string());
                });
                Duration::from_secs(1u64 << failures.min(6))
                    .min(MAX_BACKOFF)
                    .min(settings.interval.max(Duration::from_secs(1)))
            }
        };
        if !pause.is_zero() {
            tokio::time::sleep(pause).await;
        }
    }
}

/// One step: finish a dump in progress, start the first one, or pull.
/// `Ok(None)`: a dump ended (pull at once).
async fn cycle(
    state: &ReplicationContext,
    settings: &MirrorSettings,
    status: &MirrorStatus,
) -> Result<Option<PullOutcome>, MirrorError> {
    // The read limit covers the time a long-polling source may hold the request.
    let wait = settings.low_latency.then_some(settings.interval);
    let timeout = settings.timeout.max(wait.map_or(Duration::ZERO, |w| w + Duration::from_secs(10)));
    let source = source::find(settings, state, timeout).await.map_err(MirrorError::Source)?;
    let creds = &settings.credentials;
    let store = state.records();
    if let Some(raw) = store.meta_get(DUMP_KEY).await? {
        let d: DumpProgress = decode(DUMP_KEY, &raw).map_err(MirrorError::Source)?;
        dump::run(state, &source, creds, status, d).await?;
        return Ok(None);
    }
    let Some(raw) = store.meta_get(PULL_KEY).await? else {
        let d = DumpProgress::new(&settings.source_text, false, machine_ms());
        dump::run(state, &source, creds, status, d).await?;
        return Ok(None);
    };
    let mut p: PullProgress = decode(PULL_KEY, &raw).map_err(MirrorError::Source)?;
    if p.source != settings.source_text {
        tracing::warn!(
            "replication source changed from {} to {}: continuing after txn {} (the new source must continue the same \
             transaction sequence, as a promoted mirror of the old one does; otherwise it answers NEED_TO_REDUMP)",
            p.source,
            settings.source_text,
            p.last_txn_id
        );
        p.source = settings.source_text.clone();
    }
    status.update(|s| {
        if s.phase != Phase::Promoted {
            s.phase = Phase::Pulling;
        }
    });
    if let Some(own) = &settings.all_queues {
        return Ok(Some(proxied::run(state, &source, creds, status, (own, p)).await?));
    }
    Ok(Some(pull::run(state, &source, creds, status, (&pull::Queue::mirror(), p), wait).await?))
}
