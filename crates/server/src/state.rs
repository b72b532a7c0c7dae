//! The server's parts, built once at start (the composition root's output):
//! the directory that operations read, the resolution chain, the native
//! protocol's and replication's contexts, and what the transports and the
//! web front end keep (admission, metrics, logs, the HTTPS certificate), and
//! the HTTP port's context ([`WebContext`]).

use crate::admission::{Admission, AdmissionLimits};
use crate::auth::challenge::Challenges;
use crate::auth::work::AuthWork;
use crate::cache::RecordCache;
use crate::config::Config;
pub use crate::directory::{homed_in, remote_auth_of, Directory, HOMED_RELOAD};
use crate::keys::RsaSigner;
use crate::live::Live;
use crate::logging::Logs;
use crate::metrics::Metrics;
use crate::native::service::NativeService;
use crate::native::NativeContext;
use crate::ops::resolve::{standard_chain, ChainParts, ResolutionChain};
use crate::quota::Quota;
use crate::replication::ReplicationContext;
use crate::session::{SessionLimits, Sessions};
use crate::tls::CertSlot;
use crate::web_context::WebContext;
use handled_store::Store;
use std::collections::HashSet;
use std::sync::Arc;

pub struct ServerState {
    pub config: Arc<Config>,
    /// What operations read; the state derefs to it.
    pub directory: Arc<Directory>,
    pub key: Arc<RsaSigner>,
    /// The HTTPS certificate (None: TLS setup failed, plain HTTP only).
    pub tls: Option<Arc<CertSlot>>,
    /// Access lines and failed authentications: policy and counters.
    pub logs: Arc<Logs>,
    /// What the native protocol (over every transport) works with.
    pub native: Arc<NativeContext>,
    /// The native protocol as the transports see it (`crate::handler`).
    pub native_service: Arc<NativeService>,
    pub admission: Admission,
    pub metrics: Arc<Metrics>,
    /// What replication (source, mirror, group) works with.
    pub replication: Arc<ReplicationContext>,
    /// The record cache (also the directory's), for its figures and the cluster.
    pub cache: Option<Arc<RecordCache>>,
    /// What the HTTP port's application works with.
    pub web: Arc<WebContext>,
    /// Resolving handles homed elsewhere (`[resolver]`), when on.
    pub recursion: Arc<crate::recursion::Recursion>,
    /// Where resolutions look, in order (`ops::resolve`).
    pub chain: Arc<ResolutionChain>,
}

impl ServerState {
    pub fn new(
        config: Config,
        store: Arc<dyn Store>,
        key: RsaSigner,
        site_bytes: Vec<u8>,
        site_serial: u16,
        homed: HashSet<Vec<u8>>,
        certificate_identity: Option<String>,
    ) -> Self {
        // Config::validate has checked the list; bootstrap refuses invalid configs.
        let logs = Logs::new(config.transport.access_log, config.transport.access_log_sample_every);
        let tls = match CertSlot::load(&config, &key, certificate_identity) {
            Ok(slot) => Some(slot),
            Err(e) => {
                tracing::error!("HTTPS disabled on the HTTP port: {e}");
                None
            }
        };
        let challenge_ttl = std::time::Duration::from_secs(config.auth.challenge_timeout_secs.max(1));
        let challenge_quota =
            Quota { max_bytes: config.auth.challenge_budget_mb << 20, per_peer: config.auth.challenges_per_peer };
        let session_limits = SessionLimits {
            unauthenticated: Quota {
                max_bytes: config.auth.session_budget_mb << 20,
                per_peer: config.auth.sessions_per_peer,
            },
            unauthenticated_life: std::time::Duration::from_secs(config.auth.unauthenticated_session_secs.max(1)),
        };
        // Nodes sharing a store share challenges and sessions too: a balancer
        // may send the next message of an exchange to another node.
        let shared = store.capabilities().shared;
        let (challenges, sessions) = if shared {
            (
                Challenges::shared(challenge_ttl, challenge_quota, store.clone()),
                Sessions::shared(session_limits, store.clone()),
            )
        } else {
            (Challenges::new(challenge_ttl, challenge_quota), Sessions::new(session_limits))
        };
        let auth_work = AuthWork::new(config.auth.auth_workers, config.auth.max_pbkdf2_iterations);
        let remote_auth = remote_auth_of(&config).unwrap_or_else(|e| {
            tracing::error!("remote identities are not verified: {e}");
            None
        });
        let admission = Admission::new(AdmissionLimits {
            max_concurrent: config.admission.max_concurrent,
            queue: config.admission.queue_length,
            max_wait: std::time::Duration::from_millis(config.admission.max_queue_wait_ms),
        });
        // A cluster node without a cache of its own still announces its writes through one.
        let cache = (config.storage.record_cache_mb > 0 || config.cluster.listen.is_some())
            .then(|| Arc::new(RecordCache::new((config.storage.record_cache_mb as u64) << 20)));
        // The cache observes every write through the store from here on (the
        // writes before it went around an empty cache). Without it, no layer:
        // reads go straight to the store.
        let store = match &cache {
            Some(c) => c.observe(store),
            None => store,
        };
        let metrics = Arc::new(Metrics::default());
        let recursion = crate::recursion::Recursion::new(&metrics);
        match recursion.prepare(&config) {
            Ok(prepared) => recursion.apply(prepared),
            Err(e) => tracing::error!("handles homed elsewhere are not resolved: {e}"),
        }
        let directory = Arc::new(Directory::new(
            store,
            cache.clone(),
            config.case_sensitive,
            homed,
            shared,
            Live::of(&config),
            remote_auth,
            auth_work,
        ));
        let chain = Arc::new(standard_chain(ChainParts {
            directory: directory.clone(),
            metrics: metrics.clone(),
            recursion: recursion.clone(),
            templates: config.templates.clone(),
            case_sensitive: config.case_sensitive,
            status_monitor: config.enable_monitor_daemon,
        }));
        let (config, key) = (Arc::new(config), Arc::new(key));
        let replication = Arc::new(ReplicationContext::new(directory.clone(), &config, key.clone(), metrics.clone()));
        let logs = Arc::new(logs);
        let native = Arc::new(NativeContext {
            directory: directory.clone(),
            max_session_secs: config.auth.max_session_secs,
            chain: chain.clone(),
            key: key.clone(),
            site_bytes,
            site_serial,
            challenges,
            sessions,
            logs: logs.clone(),
            replication: replication.clone(),
        });
        let native_service =
            Arc::new(NativeService { native: native.clone(), admission: admission.clone(), metrics: metrics.clone() });
        let web = Arc::new(WebContext {
            directory: directory.clone(),
            chain: chain.clone(),
            native: native.clone(),
            key: key.clone(),
            admission: admission.clone(),
            metrics: metrics.clone(),
            logs: logs.clone(),
            recursion: recursion.clone(),
            cache: cache.clone(),
            tls: tls.clone(),
            transport: config.transport.clone(),
            reverse_lookup: config.reverse_lookup.clone(),
            max_session_secs: config.auth.max_session_secs,
            data_dir: config.data_dir.clone(),
            ready: Default::default(),
        });
        ServerState {
            native,
            native_service,
            admission,
            metrics,
            recursion,
            chain,
            cache,
            web,
            directory,
            replication,
            config,
            key,
            tls,
            logs,
        }
    }

    pub fn is_ready(&self) -> bool {
        self.web.ready.get()
    }

    pub fn set_ready(&self) {
        self.web.ready.set();
    }

    /// What a SIGHUP reload reads and changes (`crate::reload`).
    pub fn reloadable(&self) -> crate::reload::Reloadable<'_> {
        crate::reload::Reloadable {
            config: &self.config,
            directory: &self.directory,
            recursion: &self.recursion,
            tls: self.tls.as_deref(),
            key: &self.key,
        }
    }
}

/// The state extends the directory with what transports, sessions and the
/// replication source keep: handlers read `state.records()` and pass `&state`
/// where a `&Directory` is taken.
impl std::ops::Deref for ServerState {
    type Target = Directory;
    fn deref(&self) -> &Directory {
        &self.directory
    }
}
