//! The operations endpoints: `/healthz`, `/readyz` and `/metrics`. They answer
//! before admission, so a saturated server still says how it is.

use super::text;
use crate::state::ServerState;
use bytes::Bytes;
use http_body_util::Full;
use hyper::{Response, StatusCode};

/// The answer when `path` is an operations endpoint (GET).
pub(super) async fn answer(state: &ServerState, path: &str) -> Option<Response<Full<Bytes>>> {
    Some(match path {
        "/healthz" => text(StatusCode::OK, "text/plain", "ok\n".into()),
        "/readyz" => Box::pin(readiness(state)).await,
        "/metrics" => text(StatusCode::OK, "text/plain; version=0.0.4", Box::pin(metrics_text(state)).await),
        _ => return None,
    })
}

async fn metrics_text(state: &ServerState) -> String {
    let cache = state.cache.as_ref().map(|c| c.cache_stats());
    let handles = state.store.count().await.ok();
    if let Ok(bounds) = state.store.txn_log_bounds().await {
        state.metrics.replication.txn_log_last_id.set(bounds.last as i64);
    }
    let remote = state.remote_auth().map(|r| r.guards());
    state.metrics.render(&state.admission.stats(), cache.as_ref(), &state.store.stats(), handles, remote)
}

/// Ready when the listeners are serving and the store answers.
async fn readiness(state: &ServerState) -> Response<Full<Bytes>> {
    // A store that cannot take writes (disk full) is not ready: the balancer
    // sends writes elsewhere until it is.
    // A store that cannot count (a SQL view without a scan statement) still
    // answered; one read-only by configuration (sql_read_only) takes no writes
    // by design, which is no reason to send its reads elsewhere.
    let counted = match state.store.count().await {
        Err(handled_store::StoreError::Unsupported(_)) => Ok(0),
        other => other,
    };
    let read_only = state.store.capabilities().read_only;
    let store = counted.and_then(|_| if read_only { Ok(()) } else { state.store.writable() });
    let listening = state.is_ready();
    // A store still reading its file into memory after a start answers, but
    // slower (a cold file: a disk read per lookup): not ready at speed yet.
    let warming = state.store.warming();
    let ok = store.is_ok() && listening && warming.is_none();
    let store = match (&store, warming) {
        (Err(e), _) => e.to_string(),
        (Ok(_), Some(w)) => format!("warming: {} of {} MiB read", w.read_bytes >> 20, w.total_bytes >> 20),
        (Ok(_), None) => "open".to_string(),
    };
    let body = serde_json::json!({ "ready": ok, "listeners": listening, "store": store });
    let status = if ok { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    text(status, "application/json", body.to_string())
}
