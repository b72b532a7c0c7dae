//! The operations endpoints: `/healthz`, `/readyz` and `/metrics`. They answer
//! before admission, so a saturated server still says how it is.

use super::text;
use crate::web_context::WebContext;
use bytes::Bytes;
use http_body_util::Full;
use hyper::{Response, StatusCode};

pub(super) fn health() -> Response<Full<Bytes>> {
    text(StatusCode::OK, "text/plain", "ok\n".into())
}

pub(super) async fn metrics(ctx: &WebContext) -> Response<Full<Bytes>> {
    text(StatusCode::OK, "text/plain; version=0.0.4", Box::pin(metrics_text(ctx)).await)
}

async fn metrics_text(ctx: &WebContext) -> String {
    let cache = ctx.cache.as_ref().map(|c| c.cache_stats());
    let handles = ctx.records().count().await.ok();
    if let Ok(bounds) = ctx.txn_log().txn_log_bounds().await {
        ctx.metrics.replication.txn_log_last_id.set(bounds.last as i64);
    }
    let remote = ctx.remote_auth().map(|r| r.guards());
    ctx.metrics.render(&ctx.admission.stats(), cache.as_ref(), &ctx.admin().stats(), handles, remote)
}

/// Ready when the listeners are serving and the store answers.
pub(super) async fn readiness(ctx: &WebContext) -> Response<Full<Bytes>> {
    // A store that cannot take writes (disk full) is not ready: the balancer
    // sends writes elsewhere until it is.
    // A store that cannot count (a SQL view without a scan statement) still
    // answered; one read-only by configuration (sql_read_only) takes no writes
    // by design, which is no reason to send its reads elsewhere.
    let counted = match ctx.records().count().await {
        Err(handled_store::StoreError::Unsupported(_)) => Ok(0),
        other => other,
    };
    let read_only = ctx.admin().capabilities().read_only;
    let store = counted.and_then(|_| if read_only { Ok(()) } else { ctx.admin().writable() });
    let listening = ctx.ready.get();
    // A store still reading its file into memory after a start answers, but
    // slower (a cold file: a disk read per lookup): not ready at speed yet.
    let warming = ctx.admin().warming();
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
