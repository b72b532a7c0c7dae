//! What every request handler shares: configuration, the directory (store,
//! homed prefixes, policy: what operations read), server key, our site record,
//! and the transports' and authentication's bookkeeping.

use crate::admission::{Admission, AdmissionLimits};
use crate::auth::challenge::Challenges;
use crate::auth::remote::RemoteAuth;
use crate::auth::work::AuthWork;
use crate::cache::CachingStore;
use crate::config::Config;
pub use crate::directory::{homed_in, stored_homed, Directory, HOMED_RELOAD};
use crate::keys::RsaSigner;
use crate::live::Live;
use crate::logging::Logs;
use crate::metrics::Metrics;
use crate::quota::Quota;
use crate::session::{SessionLimits, Sessions};
use crate::tls::CertSlot;
use handled_store::Store;
use std::collections::HashSet;
use std::sync::Arc;

pub struct ServerState {
    pub config: Config,
    /// What operations read; the state derefs to it.
    pub directory: Directory,
    pub key: RsaSigner,
    /// Encoded HS_SITE record answered by GET_SITE_INFO.
    pub site_bytes: Vec<u8>,
    pub site_serial: u16,
    /// The HTTPS certificate (None: TLS setup failed, plain HTTP only).
    pub tls: Option<Arc<CertSlot>>,
    /// Access lines and failed authentications: policy and counters.
    pub logs: Logs,
    pub challenges: Challenges,
    pub sessions: Sessions,
    pub admission: Admission,
    pub metrics: Metrics,
    /// The replication source's stream slots and waiting pulls.
    pub replication: crate::replication_status::slots::Source,
    /// The cache in front of `store` (which already goes through it), for its figures.
    pub cache: Option<Arc<CachingStore>>,
    /// Set once every listener serves (`/readyz`).
    ready: std::sync::atomic::AtomicBool,
    /// Resolving handles homed elsewhere (`[resolver]`), when on.
    pub recursion: Arc<crate::recursion::Recursion>,
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
            .then(|| Arc::new(CachingStore::new(store.clone(), (config.storage.record_cache_mb as u64) << 20)));
        let store = match &cache {
            Some(c) => c.clone() as Arc<dyn Store>,
            None => store,
        };
        let metrics = Metrics::default();
        let recursion = crate::recursion::Recursion::new(&metrics);
        match recursion.prepare(&config) {
            Ok(prepared) => recursion.apply(prepared),
            Err(e) => tracing::error!("handles homed elsewhere are not resolved: {e}"),
        }
        ServerState {
            admission,
            metrics,
            recursion,
            replication: crate::replication_status::slots::Source::new(&config),
            cache,
            ready: Default::default(),
            directory: Directory::new(
                store,
                config.case_sensitive,
                homed,
                shared,
                Live::of(&config),
                remote_auth,
                auth_work,
            ),
            config,
            key,
            site_bytes,
            site_serial,
            tls,
            logs,
            challenges,
            sessions,
        }
    }

    /// Forget expired challenges (and sessions) every second, so that what a
    /// flood left behind goes even when nothing new arrives.
    pub async fn sweep_expired(self: Arc<Self>) {
        let mut every = tokio::time::interval(std::time::Duration::from_secs(1));
        loop {
            every.tick().await;
            self.challenges.sweep();
            self.sessions.sweep();
        }
    }

    pub fn is_ready(&self) -> bool {
        self.ready.load(std::sync::atomic::Ordering::Acquire)
    }

    pub fn set_ready(&self) {
        self.ready.store(true, std::sync::atomic::Ordering::Release);
    }

    /// A fresh id for a challenge or a session: one id space for both (§7.5),
    /// random so that ids reveal nothing about other clients.
    pub fn new_auth_id(&self) -> i32 {
        loop {
            let id = rand::random::<i32>() & 0x7fff_ffff;
            if id != 0 && !self.sessions.contains(id) && !self.challenges.contains(id) {
                return id;
            }
        }
    }
}

/// The state extends the directory with what transports, sessions and the
/// replication source keep: handlers read `state.store` and pass `&state`
/// where a `&Directory` is taken.
impl std::ops::Deref for ServerState {
    type Target = Directory;
    fn deref(&self) -> &Directory {
        &self.directory
    }
}

/// Checking identities held elsewhere as `config` says (`root_info`,
/// `remote_auth_timeout_ms`, `remote_auth_concurrent`, and where the
/// `[resolver]` table lets walks send); `None` without `root_info`.
pub fn remote_auth_of(config: &Config) -> Result<Option<RemoteAuth>, String> {
    let Some(path) = config.root_info.as_deref() else { return Ok(None) };
    let root = handled_client::sites::load_root_info(path)?;
    let timeout = std::time::Duration::from_millis(config.auth.remote_auth_timeout_ms.max(1));
    let upstream = (config.resolver.upstream_policy(), config.resolver.upstream_attempts.max(1));
    Ok(Some(RemoteAuth::new(root, timeout, config.auth.remote_auth_concurrent, upstream)))
}
