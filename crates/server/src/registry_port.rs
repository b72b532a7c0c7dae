//! The domain registry (crate `handled-registry`) on its own port: this server
//! owns the connections (limits, timeouts, metrics, `Server-Timing`) and lends
//! the registry its admission control and body budget, shared with every other
//! service; the registry owns its routes and records.

use std::convert::Infallible;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use handled_registry::{BodyRefused, Busy, Registry, Settings};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::sync::OwnedSemaphorePermit;

use crate::admission::Admission;
use crate::config::Config;
use crate::http_body::BodyReader;
use crate::lifecycle::Stop;
use crate::metrics::Metrics;
use crate::transport::accept::Acceptor;
use crate::transport::timing::server_timing;

/// Idle keep-alive connections and slow request heads are cut after this.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// Time to receive a request body.
const BODY_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// The registry's settings from the configuration and the original's environment variables.
pub fn settings(c: &Config) -> Result<Settings, String> {
    let storage_type = c.store_kind().registry_storage_type();
    Settings {
        expires_max: c.registry.expires_max.min(i64::MAX as u64) as i64,
        sweep_period: Duration::from_secs(c.registry.sweep_secs),
        storage_type,
        load_balancer_ip: None,
        dev_status_page: false,
        retention: Duration::from_secs(c.registry.retention_secs),
        unseen_retention: Duration::from_secs(c.registry.unseen_retention_secs),
        max_hyperties_per_user: c.registry.max_hyperties_per_user,
        max_records_per_peer: c.registry.max_records_per_peer,
    }
    .with_environment()
}

/// What the registry's port takes from the server: the store the registry
/// keeps its records in, admission control and metrics (shared with every
/// other service).
pub struct RegistryHost {
    /// The document seam, through the record cache when it is on.
    pub documents: Arc<dyn handled_store::DocumentStore>,
    pub admission: Admission,
    pub metrics: Arc<Metrics>,
}

/// What the registry borrows from this server.
struct Lent {
    admission: Admission,
    metrics: Arc<Metrics>,
    bodies: BodyReader,
}

impl handled_registry::Host for Lent {
    type Turn = OwnedSemaphorePermit;

    async fn admit(&self) -> Result<OwnedSemaphorePermit, Busy> {
        let admission = &self.admission;
        admission
            .admit()
            .await
            .map_err(|why| Busy { reason: why.as_str(), retry_after_secs: admission.retry_after_secs() })
    }

    async fn read_body(&self, body: Incoming, max: usize, peer: IpAddr) -> Result<Bytes, BodyRefused> {
        use crate::http_body::BodyError;
        self.bodies.read(body, max, peer).await.map_err(|e| match e {
            BodyError::Busy => BodyRefused::Busy,
            BodyError::Unreadable(_) | BodyError::TimedOut => BodyRefused::Unreadable,
        })
    }
}

/// Serve the registry on `listener`, with its upkeep, until the task is dropped
/// (connections run under `stop`); returns early only if the registry cannot
/// open its records.
pub async fn serve(host: RegistryHost, settings: Settings, mut listener: Acceptor, stop: Stop) {
    let RegistryHost { documents, admission, metrics } = host;
    let registry = match Registry::open(documents, settings).await {
        Ok(r) => Arc::new(r),
        Err(e) => {
            tracing::error!("domain registry cannot start: {e}");
            return;
        }
    };
    // The upkeep ends when the server drains, or with this task, dropped or not.
    let _upkeep = AbortOnDrop(stop.spawn_until_draining(handled_registry::upkeep(registry.clone())));
    let bodies = BodyReader::new(BODY_READ_TIMEOUT, listener.limits().bodies.clone());
    let lent = Arc::new(Lent { admission, metrics, bodies });
    loop {
        let (stream, peer, slot) = listener.next().await;
        let _ = stream.set_nodelay(true);
        let (registry, lent, draining) = (registry.clone(), lent.clone(), stop.clone());
        stop.spawn(async move {
            let _open = (slot, lent.metrics.connection("registry"));
            let service = hyper::service::service_fn(move |req| {
                let (registry, lent) = (registry.clone(), lent.clone());
                async move {
                    let started = Instant::now();
                    let mut r = handled_registry::http::respond(&registry, &*lent, peer.ip(), req).await;
                    lent.metrics.observe_http("registry", r.status().as_u16(), started.elapsed());
                    server_timing(r.headers_mut(), started);
                    Ok::<_, Infallible>(r)
                }
            });
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .keep_alive(true)
                .header_read_timeout(HEADER_READ_TIMEOUT)
                .max_buf_size(crate::transport::MAX_HTTP_BUFFER)
                .serve_connection(TokioIo::new(stream), service);
            if let Err(e) = crate::transport::until_stopped(connection, &draining).await {
                tracing::debug!("registry connection from {peer}: {e}");
            }
        });
    }
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
