//! Prometheus metrics (text format at `/metrics`). Request counts and latency
//! are recorded per request; admission, cache and store figures are read from
//! their own counters at scrape time, so the hot paths keep a single copy.

use crate::admission::AdmissionStats;
use crate::cache::CacheStats;
use handled_proto::envelope::ENVELOPE_LEN;
use handled_proto::header::{OpCode, ResponseCode, HEADER_LEN};
use handled_store::StoreStats;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    transport: &'static str,
    op: &'static str,
    code: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TransportLabel {
    transport: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabel {
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RefusedLabels {
    transport: &'static str,
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabels {
    version: &'static str,
    commit: &'static str,
}

/// The upper bound of a bucket.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct UpperBound {
    le: &'static str,
}

fn latency_histogram() -> Histogram {
    // 20 µs .. ~5 s
    Histogram::new(exponential_buckets(0.000_02, 2.0, 19))
}

fn refusal_histogram() -> Histogram {
    // 1 µs .. 5 s in 1-2-5 steps: refusals are meant to take microseconds, and
    // the target (under 1 ms) falls on a bucket bound.
    let micros = (0..7).map(|e| 10u32.pow(e)).flat_map(|d| [d, 2 * d, 5 * d]);
    Histogram::new(micros.map(|us| f64::from(us) / 1e6))
}

pub struct Metrics {
    requests: Family<RequestLabels, Counter>,
    latency: Family<TransportLabel, Histogram, fn() -> Histogram>,
    /// Requests refused as too busy are timed apart: their time shows how fast
    /// overload is turned away, and would only blur the served requests' latency.
    refusals: Family<TransportLabel, Histogram, fn() -> Histogram>,
    connections: Family<TransportLabel, Gauge>,
    connections_refused: Family<RefusedLabels, Counter>,
    udp_duplicates: Counter,
    /// Template handles refused, by the bound their construction ran into.
    templates_refused: Family<ReasonLabel, Counter>,
    /// Replication source: log entries and dumps sent, streams running, and
    /// the log's last id (set at scrape time).
    pub replication: ReplicationMetrics,
    started: std::time::Instant,
    /// Wall-clock start (the status handle's `startTime`).
    started_at: std::time::SystemTime,
    /// Handle requests by kind, for the status handle (`0.SITE/status`).
    pub handle_requests: HandleRequestCounts,
    /// Figures other rooms register at scrape time (the replication mirror's).
    scrape_hooks: std::sync::Mutex<Vec<ScrapeHook>>,
}

/// Adds a room's figures to the registry at each scrape.
pub type ScrapeHook = Box<dyn Fn(&mut Registry) + Send + Sync>;

/// The replication source's figures.
#[derive(Default)]
pub struct ReplicationMetrics {
    pub entries_sent: Counter,
    pub dumps_served: Counter,
    pub streams_active: Gauge,
    pub txn_log_last_id: Gauge,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            requests: Family::default(),
            latency: Family::new_with_constructor(latency_histogram),
            refusals: Family::new_with_constructor(refusal_histogram),
            connections: Family::default(),
            connections_refused: Family::default(),
            udp_duplicates: Counter::default(),
            templates_refused: Family::default(),
            replication: ReplicationMetrics::default(),
            started: std::time::Instant::now(),
            started_at: std::time::SystemTime::now(),
            handle_requests: HandleRequestCounts::default(),
            scrape_hooks: Default::default(),
        }
    }
}

/// Handle requests answered since start, as Handle.Net's status handle counts
/// them: every native message and JSON API request in `total`, resolutions,
/// administration (writes, listing, homing) and replication (`txn`) apart.
#[derive(Default)]
pub struct HandleRequestCounts {
    total: AtomicU64,
    resolution: AtomicU64,
    admin: AtomicU64,
    txn: AtomicU64,
}

/// A snapshot of [`HandleRequestCounts`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RequestCounts {
    pub total: u64,
    pub resolution: u64,
    pub admin: u64,
    pub txn: u64,
}

impl HandleRequestCounts {
    /// One request more in `total`.
    pub fn request(&self) {
        self.total.fetch_add(1, Ordering::Relaxed);
    }

    /// Put a counted request of operation `op` in its kind (if any).
    pub fn classify(&self, op: OpCode) {
        let kind = match op {
            OpCode::RESOLUTION => &self.resolution,
            OpCode::CREATE_HANDLE
            | OpCode::DELETE_HANDLE
            | OpCode::ADD_VALUE
            | OpCode::REMOVE_VALUE
            | OpCode::MODIFY_VALUE
            | OpCode::LIST_HANDLES
            | OpCode::HOME_NA
            | OpCode::UNHOME_NA
            | OpCode::LIST_HOMED_NAS => &self.admin,
            OpCode::GET_NEXT_TXN_ID | OpCode::RETRIEVE_TXN_LOG | OpCode::DUMP_HANDLES => &self.txn,
            _ => return,
        };
        kind.fetch_add(1, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> RequestCounts {
        RequestCounts {
            total: self.total.load(Ordering::Relaxed),
            resolution: self.resolution.load(Ordering::Relaxed),
            admin: self.admin.load(Ordering::Relaxed),
            txn: self.txn.load(Ordering::Relaxed),
        }
    }
}

/// Op code and response code of a response unit, read from its header.
fn codes(unit: &[u8]) -> Option<(OpCode, ResponseCode)> {
    let h = unit.get(ENVELOPE_LEN..ENVELOPE_LEN + HEADER_LEN)?;
    let word = |i: usize| u32::from_be_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]);
    Some((OpCode(word(0)), ResponseCode(word(4))))
}

impl Metrics {
    /// Count a request by the response units it produced, and its latency.
    pub fn observe(&self, transport: &'static str, responses: &[Vec<u8>], elapsed: Duration) {
        let mut refused = false;
        self.handle_requests.request();
        if let Some((op, code)) = responses.last().and_then(|u| codes(u)) {
            self.handle_requests.classify(op);
            self.requests.get_or_create(&RequestLabels { transport, op: op.name(), code: code.name() }).inc();
            refused = code == ResponseCode::SERVER_TOO_BUSY;
        }
        let histogram = if refused { &self.refusals } else { &self.latency };
        histogram.get_or_create(&TransportLabel { transport }).observe(elapsed.as_secs_f64());
    }

    /// Count an HTTP request that is not a native message (REST, registry, health).
    pub fn observe_http(&self, service: &'static str, status: u16, elapsed: Duration) {
        let code = match status {
            200..=299 => "2xx",
            300..=399 => "3xx",
            400..=499 => "4xx",
            _ => "5xx",
        };
        self.requests.get_or_create(&RequestLabels { transport: "http", op: service, code }).inc();
        if service == "api" {
            // Its kind is counted by the JSON API itself (crate::rest), which knows the operation.
            self.handle_requests.request();
        }
        // Only admission control answers 503 on these services.
        let histogram = if status == 503 { &self.refusals } else { &self.latency };
        histogram.get_or_create(&TransportLabel { transport: service }).observe(elapsed.as_secs_f64());
    }

    /// Time since start.
    pub fn uptime(&self) -> Duration {
        self.started.elapsed()
    }

    /// When the server started (wall clock).
    pub fn started_at(&self) -> std::time::SystemTime {
        self.started_at
    }

    /// A re-sent UDP request dropped: its original is still queued or being served.
    pub fn udp_duplicate_dropped(&self) {
        self.udp_duplicates.inc();
    }

    /// A template handle whose construction ran into `bound` (a label).
    pub fn template_refused(&self, bound: &'static str) {
        self.templates_refused.get_or_create(&ReasonLabel { reason: bound }).inc();
    }

    /// Track an open connection until the guard is dropped.
    pub fn connection(&self, transport: &'static str) -> ConnectionGuard {
        let gauge = self.connections.get_or_create(&TransportLabel { transport }).clone();
        gauge.inc();
        ConnectionGuard(gauge)
    }

    /// A connection refused at accept (over a connection limit, `reason`).
    pub fn connection_refused(&self, transport: &'static str, reason: &'static str) {
        self.connections_refused.get_or_create(&RefusedLabels { transport, reason }).inc();
    }

    /// Register `hook` to add figures at every scrape.
    pub fn add_scrape_hook(&self, hook: ScrapeHook) {
        self.scrape_hooks.lock().unwrap_or_else(|e| e.into_inner()).push(hook);
    }

    /// The text at `/metrics`; `handles`: the store's handle count, if it answered.
    pub fn render(
        &self,
        admission: &AdmissionStats,
        cache: Option<&CacheStats>,
        store: &StoreStats,
        handles: Option<u64>,
        remote_upstream: Option<handled_client::sites::UpstreamGuards>,
    ) -> String {
        let mut r = Registry::with_prefix("handled");
        let build: Family<BuildLabels, Gauge> = Family::default();
        build.get_or_create(&BuildLabels { version: crate::build::VERSION, commit: crate::build::GIT_COMMIT }).set(1);
        r.register("build_info", "Version and git commit of this build (always 1)", build);
        let uptime: Gauge<f64, std::sync::atomic::AtomicU64> = Gauge::default();
        uptime.set(self.started.elapsed().as_secs_f64());
        r.register("uptime_seconds", "Seconds since the server started", uptime);
        r.register("requests", "Requests answered, by transport, operation and result code", self.requests.clone());
        r.register(
            "request_duration_seconds",
            "Time to answer a served request, from its admission",
            self.latency.clone(),
        );
        r.register(
            "refusal_duration_seconds",
            "Time to refuse a request as too busy, from its arrival",
            self.refusals.clone(),
        );
        r.register("open_connections", "Open TCP and HTTP connections", self.connections.clone());
        let repl = &self.replication;
        r.register("txn_log_last_id", "Highest transaction id in the replication log", repl.txn_log_last_id.clone());
        r.register("replication_entries_sent", "Log entries sent to mirrors", repl.entries_sent.clone());
        r.register("replication_dumps_served", "Full dumps sent to mirrors", repl.dumps_served.clone());
        r.register("replication_streams_active", "Log pulls and dumps being sent", repl.streams_active.clone());
        r.register(
            "connections_refused",
            "Connections refused at accept, over the total or per-address limit",
            self.connections_refused.clone(),
        );
        r.register(
            "udp_duplicates_dropped",
            "Re-sent UDP requests dropped because the original was still queued or being served",
            self.udp_duplicates.clone(),
        );
        r.register(
            "template_builds_refused",
            "Template handles refused: their construction ran into a bound (docs/template-handles.md, Bounds)",
            self.templates_refused.clone(),
        );

        r.register("admission_admitted", "Requests admitted for processing", counter(admission.admitted));
        r.register("admission_queued", "Requests that had to wait in the admission queue", counter(admission.queued));
        let rejected: Family<ReasonLabel, Counter> = Family::default();
        rejected.get_or_create(&ReasonLabel { reason: "queue_full" }).inc_by(admission.rejected_queue_full);
        rejected.get_or_create(&ReasonLabel { reason: "queue_timeout" }).inc_by(admission.rejected_timeout);
        rejected.get_or_create(&ReasonLabel { reason: "queue_wait_predicted" }).inc_by(admission.rejected_predicted);
        r.register("admission_rejected", "Requests refused as too busy", rejected);
        r.register("admission_in_flight", "Requests being processed", gauge(admission.in_flight));
        r.register("admission_waiting", "Requests waiting in the admission queue", gauge(admission.waiting));
        r.register(
            "admission_max_concurrent",
            "Configured maximum of requests processed at once",
            gauge(admission.max_concurrent),
        );
        r.register("admission_queue_capacity", "Configured admission queue length", gauge(admission.queue_capacity));

        if let Some(c) = cache {
            r.register("cache_hits", "Resolution cache hits", counter(c.hits));
            r.register("cache_misses", "Resolution cache misses", counter(c.misses));
            r.register("cache_evictions", "Entries evicted to stay within the byte budget", counter(c.evictions));
            r.register(
                "cache_invalidations",
                "Entries dropped because what they were derived from changed",
                counter(c.invalidations),
            );
            r.register("cache_bytes", "Bytes held by the cache", gauge(c.bytes));
            r.register("cache_entries", "Entries held by the cache", gauge(c.entries));
            r.register("cache_capacity_bytes", "Configured cache budget", gauge(c.capacity_bytes));
            if let Some(k) = &c.cluster {
                r.register(
                    "cluster_invalidations_sent",
                    "Writes announced to other nodes (one per node reached)",
                    counter(k.invalidations_sent),
                );
                r.register(
                    "cluster_invalidations_received",
                    "Writes of other nodes announced to this one",
                    counter(k.invalidations_received),
                );
                r.register(
                    "cluster_frames_refused",
                    "Cluster channel frames refused (bad tag, size or content)",
                    counter(k.refused_frames),
                );
                r.register(
                    "cluster_fences",
                    "Nodes fenced for not acknowledging an announced write",
                    counter(k.fences),
                );
                r.register(
                    "cluster_lease_live",
                    "1 while this node holds a live lease and may answer from its cache",
                    gauge(k.lease_live as u64),
                );
            }
        }

        if let Some(n) = handles {
            r.register("handles", "Handles stored (approximate on some stores)", gauge(n));
        }
        r.register("store_commits", "Write transactions committed", counter(store.commits));
        r.register("store_fsyncs", "Durable flushes", counter(store.fsyncs));
        r.register("store_write_ops", "Write operations acknowledged", counter(store.write_ops));
        r.register("store_failed_ops", "Write operations that failed", counter(store.failed_ops));
        r.register("store_commit_seconds", "Time spent committing, fsync included", {
            let c: Counter<f64> = Counter::default();
            c.inc_by(store.commit_micros as f64 / 1e6);
            c
        });
        const BOUNDS: [&str; 10] = ["1", "3", "7", "15", "31", "63", "127", "255", "511", "+Inf"];
        let batches = cumulative(&BOUNDS, &store.batch_sizes);
        r.register("store_group_commit_size", "Commits with at most `le` operations (cumulative)", batches);
        r.register("store_max_group_commit", "Largest number of operations committed together", gauge(store.max_batch));
        if store.lookups > 0 {
            // SQL only: how many lookups shared each statement (`read_statements`).
            r.register("store_lookups", "Handle lookups sent to the database", counter(store.lookups));
            r.register(
                "store_lookup_statements",
                "Statements that carried those lookups (fewer under load)",
                counter(store.lookup_statements),
            );
        }

        // Remote identity checks' walks (`root_info`): what their upstream guards refused.
        if let Some(g) = remote_upstream {
            let guards = [
                (
                    "remote_auth_upstream_refused",
                    "Upstream addresses remote identity checks did not ask (address policy)",
                    g.refused_by_policy,
                ),
                ("remote_auth_upstream_cut", "Remote identity checks stopped by upstream_attempts", g.cut_by_budget),
                (
                    "remote_auth_upstream_skipped",
                    "Remote identity lookups not sent: their sites failed within seconds",
                    g.skipped_unreachable,
                ),
            ];
            for (name, help, value) in guards {
                r.register(name, help, counter(value));
            }
        }
        for hook in self.scrape_hooks.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            hook(&mut r);
        }
        let mut out = String::with_capacity(8192);
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &r);
        out
    }
}

/// A counter standing at `v` (figures read from elsewhere at a scrape).
pub fn counter(v: u64) -> Counter {
    let c: Counter = Counter::default();
    c.inc_by(v);
    c
}

pub fn gauge(v: u64) -> Gauge {
    let g: Gauge = Gauge::default();
    g.set(v as i64);
    g
}

/// Gauges by upper bound `le` from counts per bucket, made cumulative.
pub fn cumulative(bounds: &[&'static str], counts: &[u64]) -> Family<UpperBound, Gauge> {
    let family: Family<UpperBound, Gauge> = Family::default();
    let mut sum = 0;
    for (bound, n) in bounds.iter().zip(counts) {
        sum += n;
        family.get_or_create(&UpperBound { le: bound }).set(sum as i64);
    }
    family
}

/// Decrements the open-connection gauge when dropped.
pub struct ConnectionGuard(Gauge);

impl Drop for ConnectionGuard {
    fn drop(&mut self) {
        self.0.dec();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_known_sequence() {
        let m = Metrics::default();
        let mut unit = vec![0u8; ENVELOPE_LEN + HEADER_LEN];
        unit[ENVELOPE_LEN + 3] = 1; // RESOLUTION
        unit[ENVELOPE_LEN + 7] = 100; // HANDLE_NOT_FOUND
        m.observe("udp", &[unit.clone()], Duration::from_micros(150));
        m.observe("udp", &[unit.clone()], Duration::from_micros(150));
        unit[ENVELOPE_LEN + 7] = 3; // SERVER_TOO_BUSY: timed apart
        m.observe("udp", &[unit], Duration::from_micros(3));
        m.observe_http("registry", 503, Duration::from_micros(5));
        m.udp_duplicate_dropped();
        let guard = m.connection("tcp");
        let admission = AdmissionStats {
            admitted: 7,
            rejected_queue_full: 2,
            in_flight: 1,
            max_concurrent: 5,
            ..Default::default()
        };
        let cache = CacheStats { hits: 3, misses: 4, bytes: 1000, ..Default::default() };
        let store = StoreStats { commits: 2, batch_sizes: [1, 1, 0, 0, 0, 0, 0, 0, 0, 0], ..Default::default() };
        let text = m.render(&admission, Some(&cache), &store, Some(3), None);
        let build = format!(
            r#"handled_build_info{{version="{}",commit="{}"}} 1"#,
            crate::build::VERSION,
            crate::build::GIT_COMMIT
        );
        for line in [
            r#"handled_requests_total{transport="udp",op="RESOLUTION",code="HANDLE_NOT_FOUND"} 2"#,
            r#"handled_request_duration_seconds_count{transport="udp"} 2"#,
            r#"handled_refusal_duration_seconds_count{transport="udp"} 1"#,
            r#"handled_refusal_duration_seconds_bucket{le="0.000005",transport="udp"} 1"#,
            r#"handled_refusal_duration_seconds_bucket{le="0.000002",transport="udp"} 0"#,
            r#"handled_refusal_duration_seconds_count{transport="registry"} 1"#,
            r#"handled_open_connections{transport="tcp"} 1"#,
            "handled_udp_duplicates_dropped_total 1",
            build.as_str(),
            "handled_handles 3",
            "handled_admission_admitted_total 7",
            r#"handled_admission_rejected_total{reason="queue_full"} 2"#,
            "handled_admission_in_flight 1",
            "handled_cache_hits_total 3",
            "handled_cache_bytes 1000",
            "handled_store_commits_total 2",
            r#"handled_store_group_commit_size{le="3"} 2"#,
        ] {
            assert!(text.lines().any(|l| l == line), "missing {line:?} in\n{text}");
        }
        drop(guard);
        assert!(m
            .render(&admission, None, &store, None, None)
            .contains("handled_open_connections{transport=\"tcp\"} 0"));
    }
}
