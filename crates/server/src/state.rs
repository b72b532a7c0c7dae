//! What every request handler shares: configuration, store, server key, our
//! site record and the set of homed prefixes.

use crate::admission::{Admission, AdmissionConfig};
use crate::auth::challenge::Challenges;
use crate::auth::remote::RemoteAuth;
use crate::auth::work::AuthWork;
use crate::cache::CachingStore;
use crate::config::Config;
use crate::keys::RsaSigner;
use crate::live::Live;
use crate::logging::Logs;
use crate::metrics::Metrics;
use crate::quota::Quota;
use crate::session::{SessionLimits, Sessions};
use crate::tls::CertSlot;
use handled_proto::handle;
use handled_store::Store;
use std::collections::HashSet;
use std::sync::{Arc, RwLock};

/// The prefix handles homed at run time (HOME_NA), as the store keeps them.
pub async fn stored_homed(store: &dyn Store) -> Result<HashSet<Vec<u8>>, handled_store::StoreError> {
    Ok(store.homed_prefixes().await?.into_iter().collect())
}

/// Is `h` under one of `homed` (normalized prefix handles `0.NA/X`)? A prefix
/// handle also counts when a prefix it derives from is homed.
pub fn homed_in(homed: &HashSet<Vec<u8>>, h: &[u8]) -> bool {
    let canonical = handle::canonical(h);
    let governing = handle::normalize(&handle::prefix_handle(&canonical), false);
    if homed.contains(&governing) {
        return true;
    }
    if handle::is_prefix_handle(&canonical) {
        let own = handle::normalize(&canonical, false);
        return handle::ancestors(&own).iter().any(|a| homed.contains(a.as_slice()));
    }
    false
}
/// Longest time a node sharing a store serves from its copy of the homed set.
pub const HOMED_RELOAD: std::time::Duration = std::time::Duration::from_secs(1);

pub struct ServerState {
    pub config: Config,
    pub store: Arc<dyn Store>,
    pub key: RsaSigner,
    /// Encoded HS_SITE record answered by GET_SITE_INFO.
    pub site_bytes: Vec<u8>,
    pub site_serial: u16,
    /// Normalized prefix handles (`0.NA/TEST`) this server is responsible for.
    homed: RwLock<HashSet<Vec<u8>>>,
    /// Nodes sharing a store see each other's HOME/UNHOME through it: the set
    /// above is re-read before any "not homed" answer and at least every
    /// [`HOMED_RELOAD`] (when it was last re-read; `None`: a single node).
    homed_reloaded: Option<std::sync::Mutex<std::time::Instant>>,
    /// The keys SIGHUP may change (admins, switches); read through [`ServerState::live`].
    live: RwLock<Arc<Live>>,
    /// The HTTPS certificate (None: TLS setup failed, plain HTTP only).
    pub tls: Option<Arc<CertSlot>>,
    /// Access lines and failed authentications: policy and counters.
    pub logs: Logs,
    pub challenges: Challenges,
    /// The budget of CPU-heavy proof checking (PBKDF2, signatures).
    pub auth_work: AuthWork,
    /// Checking identities held on other servers (with `root_info`); SIGHUP may replace it.
    remote_auth: RwLock<Option<Arc<RemoteAuth>>>,
    pub sessions: Sessions,
    pub admission: Admission,
    pub metrics: Metrics,
    /// The replication source's stream slots and waiting pulls.
    pub replication: crate::replication_status::slots::Source,
    /// The cache in front of `store` (which already goes through it), for its figures.
    pub cache: Option<Arc<CachingStore>>,
    /// Set once every listener serves (`/readyz`).
    ready: std::sync::atomic::AtomicBool,
    /// Set when this server runs as a replication mirror (before it serves).
    mirror: std::sync::OnceLock<Arc<crate::replication_status::mirror::MirrorStatus>>,
    /// Resolving handles homed elsewhere (`[resolver]`), when on.
    pub recursion: Option<crate::recursion::Recursion>,
}

impl ServerState {
    pub fn new(
        config: Config,
        store: Arc<dyn Store>,
        key: RsaSigner,
        site_bytes: Vec<u8>,
        site_serial: u16,
        homed: HashSet<Vec<u8>>,
    ) -> Self {
        // Config::validate has checked the list; bootstrap refuses invalid configs.
        let live = RwLock::new(Arc::new(Live::of(&config)));
        let logs = Logs::new(config.access_log, config.access_log_sample_every);
        let tls = match CertSlot::load(&config, &key) {
            Ok(slot) => Some(slot),
            Err(e) => {
                tracing::error!("HTTPS disabled on the HTTP port: {e}");
                None
            }
        };
        let challenge_ttl = std::time::Duration::from_secs(config.challenge_timeout_secs.max(1));
        let challenge_quota =
            Quota { max_bytes: config.challenge_budget_mb << 20, per_peer: config.challenges_per_peer };
        let session_limits = SessionLimits {
            unauthenticated: Quota { max_bytes: config.session_budget_mb << 20, per_peer: config.sessions_per_peer },
            unauthenticated_life: std::time::Duration::from_secs(config.unauthenticated_session_secs.max(1)),
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
        let auth_work = AuthWork::new(config.auth_workers, config.max_pbkdf2_iterations);
        let remote_auth = remote_auth_of(&config).unwrap_or_else(|e| {
            tracing::error!("remote identities are not verified: {e}");
            None
        });
        let admission = Admission::new(AdmissionConfig {
            max_concurrent: config.max_concurrent,
            queue: config.queue_length,
            max_wait: std::time::Duration::from_millis(config.max_queue_wait_ms),
        });
        // A cluster node without a cache of its own still announces its writes through one.
        let cache = (config.cache_mb > 0 || config.cluster_listen.is_some())
            .then(|| Arc::new(CachingStore::new(store.clone(), (config.cache_mb as u64) << 20)));
        let store = match &cache {
            Some(c) => c.clone() as Arc<dyn Store>,
            None => store,
        };
        let metrics = Metrics::default();
        let recursion = crate::recursion::Recursion::of(&config, &metrics).unwrap_or_else(|e| {
            tracing::error!("handles homed elsewhere are not resolved: {e}");
            None
        });
        ServerState {
            admission,
            metrics,
            recursion,
            replication: crate::replication_status::slots::Source::new(&config),
            cache,
            ready: Default::default(),
            mirror: Default::default(),
            config,
            store,
            key,
            site_bytes,
            site_serial,
            homed: RwLock::new(homed),
            homed_reloaded: shared.then(|| std::sync::Mutex::new(std::time::Instant::now())),
            live,
            tls,
            logs,
            challenges,
            sessions,
            auth_work,
            remote_auth: RwLock::new(remote_auth.map(Arc::new)),
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

    /// The replication mirror's status, when this server is one.
    pub fn mirror(&self) -> Option<&Arc<crate::replication_status::mirror::MirrorStatus>> {
        self.mirror.get()
    }

    /// Make this server a mirror (once, before it serves).
    pub fn set_mirror(&self, status: Arc<crate::replication_status::mirror::MirrorStatus>) {
        let _ = self.mirror.set(status);
    }

    pub fn is_ready(&self) -> bool {
        self.ready.load(std::sync::atomic::Ordering::Acquire)
    }

    pub fn set_ready(&self) {
        self.ready.store(true, std::sync::atomic::Ordering::Release);
    }

    /// The reloadable configuration now in force.
    pub fn live(&self) -> Arc<Live> {
        self.live.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub fn set_live(&self, live: Live) {
        *self.live.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(live);
    }

    /// The means of checking identities held on other servers now in force.
    pub fn remote_auth(&self) -> Option<Arc<RemoteAuth>> {
        self.remote_auth.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Replace it (SIGHUP); checks under way finish with the one they started with.
    pub fn set_remote_auth(&self, remote: Option<RemoteAuth>) {
        *self.remote_auth.write().unwrap_or_else(|e| e.into_inner()) = remote.map(Arc::new);
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

    /// Storage key of a handle (§7.3 case rules).
    pub fn storage_key(&self, h: &[u8]) -> Vec<u8> {
        handle::normalize(&handle::canonical(h), self.config.case_sensitive)
    }

    /// Is this server responsible for `h` (§7.2)? Prefix handles `0.NA/a.b.c`
    /// are served when any ancestor prefix is homed. With a shared store, a
    /// prefix homed or unhomed on another node counts at once for "not homed"
    /// answers and within [`HOMED_RELOAD`] otherwise.
    pub async fn is_homed(&self, h: &[u8]) -> bool {
        let Some(reloaded) = &self.homed_reloaded else { return self.is_homed_here(h) };
        let stale = reloaded.lock().unwrap_or_else(|e| e.into_inner()).elapsed() >= HOMED_RELOAD;
        if !stale && self.is_homed_here(h) {
            return true;
        }
        self.reload_homed().await;
        self.is_homed_here(h)
    }

    /// Re-read the homed prefixes from the shared store (nothing on a single node).
    pub async fn reload_homed(&self) {
        let Some(reloaded) = &self.homed_reloaded else { return };
        match stored_homed(&*self.store).await {
            Ok(set) => {
                *self.homed.write().unwrap_or_else(|e| e.into_inner()) = set;
                *reloaded.lock().unwrap_or_else(|e| e.into_inner()) = std::time::Instant::now();
            }
            Err(e) => tracing::warn!("homed prefixes not reloaded: {e}"),
        }
    }

    fn is_homed_here(&self, h: &[u8]) -> bool {
        homed_in(&self.homed.read().unwrap_or_else(|e| e.into_inner()), h)
    }

    pub fn homed_prefixes(&self) -> Vec<Vec<u8>> {
        let homed = self.homed.read().unwrap_or_else(|e| e.into_inner());
        let mut v: Vec<_> = homed.iter().cloned().collect();
        v.sort();
        v
    }

    pub fn set_homed(&self, prefix_handle: Vec<u8>, homed: bool) {
        let mut set = self.homed.write().unwrap_or_else(|e| e.into_inner());
        if homed {
            set.insert(prefix_handle);
        } else {
            set.remove(&prefix_handle);
        }
    }
}

/// Checking identities held elsewhere as `config` says (`root_info`,
/// `remote_auth_timeout_ms`, `remote_auth_concurrent`); `None` without `root_info`.
pub fn remote_auth_of(config: &Config) -> Result<Option<RemoteAuth>, String> {
    let Some(path) = config.root_info.as_deref() else { return Ok(None) };
    let root = handled_client::sites::load_root_info(path)?;
    let timeout = std::time::Duration::from_millis(config.remote_auth_timeout_ms.max(1));
    Ok(Some(RemoteAuth::new(root, timeout, config.remote_auth_concurrent)))
}
