//! The status handle `0.SITE/status`, as Handle.Net 9 answers it (observed
//! black-box: `tests/status-handle/handle-net-9.0.0-sample.json`). It lives in
//! no store and needs no homed prefix. Server administrators and the identities
//! in `status_handle_admins` read three values, all admin-read/write only, TTL
//! one day, no timestamp:
//!
//! 1. `CNRI.SERVER_STATUS`, `freemem=…; totalmem=…; maxmem=…; runtime=…; numreqs=…`;
//! 2. `CNRI.SERVER_STATUS`, the monitor's JSON (only with `enable_monitor_daemon`);
//! 3. `CNRI.REPLICATION_STATUS`, `{"latestTxnId":N}`.
//!
//! Index and type filters are ignored (the original sends all three). Asked for
//! public values only: 200 with none; anonymously for all: a challenge;
//! authenticated but on neither list: 400, with an empty message as there.

mod system;

use super::resolve::chain::{Lookup, Query, ResolutionSource};
use super::{require, OpError};
use crate::access::authorize::{in_admin_list, is_server_admin};
use crate::auth::Caller;
use crate::directory::Directory;
use crate::metrics::Metrics;
use async_trait::async_trait;
use handled_proto::header::ResponseCode;
use handled_proto::value::{HandleValue, ValuePermissions};
use serde::Serialize;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// The handle, compared without regard to case (as the original does).
pub const STATUS_HANDLE: &[u8] = b"0.SITE/status";

const SERVER_STATUS: &str = "CNRI.SERVER_STATUS";
const REPLICATION_STATUS: &str = "CNRI.REPLICATION_STATUS";

pub fn is_status_handle(handle: &[u8]) -> bool {
    handle.eq_ignore_ascii_case(STATUS_HANDLE)
}

/// The status handle as the first source of the resolution chain: its values
/// are made on the spot and read under rules of their own.
pub struct StatusHandle {
    directory: Arc<Directory>,
    metrics: Arc<Metrics>,
    /// `enable_monitor_daemon`: the second value.
    with_monitor: bool,
}

impl StatusHandle {
    pub fn new(directory: Arc<Directory>, metrics: Arc<Metrics>, with_monitor: bool) -> Self {
        StatusHandle { directory, metrics, with_monitor }
    }
}

#[async_trait]
impl ResolutionSource for StatusHandle {
    async fn lookup(&self, query: &Query<'_>, _not_found: bool) -> Result<Lookup, OpError> {
        if !is_status_handle(query.canonical) {
            return Ok(Lookup::Pass);
        }
        Ok(Lookup::Values(resolve_status(self, query.caller, query.request.public_only).await?))
    }
}

/// The status values for `caller`, or the original's refusal.
async fn resolve_status(
    source: &StatusHandle,
    caller: &Caller,
    public_only: bool,
) -> Result<Vec<HandleValue>, OpError> {
    let state = &source.directory;
    if public_only {
        return Err(OpError::new(ResponseCode::VALUES_NOT_FOUND, ""));
    }
    let identity = require(caller)?;
    let listed = state.live().status_handle_admins.clone();
    if !is_server_admin(state, identity).await? && !in_admin_list(state, identity, listed).await? {
        return Err(OpError::new(ResponseCode::INVALID_ADMIN, ""));
    }
    let latest_txn_id = state.txn_log().txn_log_bounds().await?.last;
    let state_for_figures = (source.metrics.uptime(), source.metrics.handle_requests.snapshot());
    let with_monitor = source.with_monitor;
    let read_only = state.mirror().is_some_and(|m| m.is_read_only());
    let started = source.metrics.started_at();
    // /proc and statvfs are blocking file system calls: off the async workers.
    let (summary, monitor) = tokio::task::spawn_blocking(move || {
        let (uptime, requests) = state_for_figures;
        let summary = system::summary_line(uptime, requests.total);
        let monitor = with_monitor.then(|| monitor_json(requests, started, read_only));
        (summary, monitor)
    })
    .await
    .map_err(|e| OpError::new(ResponseCode::ERROR, format!("status figures: {e}")))?;

    let mut values = vec![status_value(1, SERVER_STATUS, summary)];
    if let Some(json) = monitor {
        values.push(status_value(2, SERVER_STATUS, json));
    }
    values.push(status_value(3, REPLICATION_STATUS, format!("{{\"latestTxnId\":{latest_txn_id}}}")));
    Ok(values)
}

fn status_value(index: i32, value_type: &str, data: String) -> HandleValue {
    HandleValue { permissions: ValuePermissions::SECRET, ..HandleValue::new(index, value_type, data) }
}

/// Index 2, field names and order as the original's.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Monitor {
    requests: Requests,
    last_update: u64,
    start_time: u64,
    domain_name: String,
    is_read_only: bool,
    version: &'static str,
    disk_info: Vec<system::Disk>,
    load_avg: Vec<f64>,
    mem: system::SystemMemory,
}

#[derive(Serialize)]
struct Requests {
    admin: u64,
    resolution: u64,
    total: u64,
    txn: u64,
}

fn millis(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

fn monitor_json(r: crate::metrics::RequestCounts, started: SystemTime, read_only: bool) -> String {
    let monitor = Monitor {
        requests: Requests { admin: r.admin, resolution: r.resolution, total: r.total, txn: r.txn },
        // Read now, not sampled every minute as the original's daemon does.
        last_update: millis(SystemTime::now()),
        start_time: millis(started),
        domain_name: system::host_name(),
        is_read_only: read_only,
        version: crate::build::VERSION,
        disk_info: system::disks(),
        load_avg: system::load_average(),
        mem: system::system_memory(),
    };
    // Plain structs of numbers and strings: serializing cannot fail.
    serde_json::to_string(&monitor).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_handle_matches_without_case() {
        assert!(is_status_handle(b"0.SITE/status"));
        assert!(is_status_handle(b"0.site/STATUS"));
        assert!(!is_status_handle(b"0.SITE/statusx"));
        assert!(!is_status_handle(b"0.SITE/DB_STATUS"));
    }

    #[test]
    fn monitor_json_has_the_original_fields_in_order() {
        let counts = crate::metrics::RequestCounts { total: 9, resolution: 5, admin: 2, txn: 1 };
        let text = monitor_json(counts, UNIX_EPOCH + std::time::Duration::from_millis(1234), true);
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["requests"], serde_json::json!({"admin": 2, "resolution": 5, "total": 9, "txn": 1}));
        assert_eq!(v["startTime"], 1234);
        assert_eq!(v["isReadOnly"], true);
        assert_eq!(v["loadAvg"].as_array().unwrap().len(), 3);
        assert!(v["mem"]["used"].as_u64().unwrap() > 0 && v["mem"]["free"].as_u64().unwrap() > 0);
        assert!(v["diskInfo"].as_array().unwrap().iter().any(|d| d["name"].as_str().unwrap().ends_with(":/")));
        let keys = [
            "requests",
            "lastUpdate",
            "startTime",
            "domainName",
            "isReadOnly",
            "version",
            "diskInfo",
            "loadAvg",
            "mem",
        ];
        let positions: Vec<usize> = keys.iter().map(|k| text.find(&format!("\"{k}\":")).unwrap()).collect();
        assert!(positions.windows(2).all(|w| w[0] < w[1]), "field order {positions:?} in {text}");
    }
}
