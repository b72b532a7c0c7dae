//! The directory: what operations and authorization read, and nothing else —
//! the store, how handles are keyed, which prefixes are homed here, the policy
//! SIGHUP may change (admins, switches), the means of checking identities held
//! elsewhere, the budget of proof checks, and whether this server is a
//! read-only mirror. `ops` and `access` take a `&Directory`; the server state
//! holds one and derefs to it, so handlers pass `&state` as before.

use crate::auth::remote::RemoteAuth;
use crate::auth::work::AuthWork;
use crate::cache::{CachedDocuments, RecordCache};
use crate::config::Config;
use crate::live::Live;
use crate::replication_status::mirror::MirrorStatus;
use handled_proto::handle;
use handled_store::{DocumentStore, HandleRecord, RecordStore, Store, StoreAdmin, StoreError, TxnLogStore};
use std::collections::HashSet;
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::Instant;

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

pub struct Directory {
    /// Handles, metadata and documents; the record cache, when on, observes its
    /// writes. Callers reach it through the accessors below, each the seam
    /// they use ([`Directory::records`], [`Directory::admin`], ...).
    store: Arc<dyn Store>,
    /// `store` without the layer that calls its hooks (`store` itself when it
    /// has none): what [`Directory::record`] reads on every resolution.
    reads: Arc<dyn Store>,
    /// The record cache: reads of records ([`Directory::record`]) and of the
    /// documents handed out by [`Directory::documents`] go through it.
    pub cache: Option<Arc<RecordCache>>,
    /// Compare handle suffixes case-sensitively (§7.3).
    case_sensitive: bool,
    /// Normalized prefix handles (`0.NA/TEST`) this server is responsible for.
    homed: RwLock<HashSet<Vec<u8>>>,
    /// Nodes sharing a store see each other's HOME/UNHOME through it: the set
    /// above is re-read before any "not homed" answer and at least every
    /// [`HOMED_RELOAD`] (when it was last re-read; `None`: a single node).
    homed_reloaded: Option<Mutex<Instant>>,
    /// The keys SIGHUP may change (admins, switches); read through [`Directory::live`].
    live: RwLock<Arc<Live>>,
    /// Checking identities held on other servers (with `root_info`); SIGHUP may replace it.
    remote_auth: RwLock<Option<Arc<RemoteAuth>>>,
    /// The budget of CPU-heavy proof checking (PBKDF2, signatures).
    pub auth_work: AuthWork,
    /// Set when this server runs as a replication mirror (before it serves).
    mirror: OnceLock<Arc<MirrorStatus>>,
}

impl Directory {
    /// `homed` as stored; `shared`: other nodes may home and unhome through the
    /// store; `cache`: the record cache, already observing `store`'s writes.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        store: Arc<dyn Store>,
        cache: Option<Arc<RecordCache>>,
        case_sensitive: bool,
        homed: HashSet<Vec<u8>>,
        shared: bool,
        live: Live,
        remote_auth: Option<RemoteAuth>,
        auth_work: AuthWork,
    ) -> Directory {
        Directory {
            reads: store.beneath_hooks().unwrap_or_else(|| store.clone()),
            store,
            cache,
            case_sensitive,
            homed: RwLock::new(homed),
            homed_reloaded: shared.then(|| Mutex::new(Instant::now())),
            live: RwLock::new(Arc::new(live)),
            remote_auth: RwLock::new(remote_auth.map(Arc::new)),
            auth_work,
            mirror: OnceLock::new(),
        }
    }

    /// The record stored under `key` (a storage key), through the cache when it is on.
    pub async fn record(&self, key: &[u8]) -> Result<Option<HandleRecord>, StoreError> {
        match &self.cache {
            Some(cache) => cache.get(&*self.reads, key).await,
            None => self.reads.get(key).await,
        }
    }

    /// The record seam: handles, metadata, homing (what operations use).
    pub fn records(&self) -> &dyn RecordStore {
        &*self.store
    }

    /// The transaction log and replicated writes (what replication uses).
    pub fn txn_log(&self) -> &dyn TxnLogStore {
        &*self.store
    }

    /// Capabilities, stats, writability, checkpoints: the store's administration.
    pub fn admin(&self) -> &dyn StoreAdmin {
        &*self.store
    }

    /// The whole store, shared: for what must own one (the HTTP sessions a
    /// cluster shares through it, a backup's export) and for closing it at
    /// shutdown (on a blocking thread). Anything that uses one seam takes that
    /// seam instead.
    pub fn store_handle(&self) -> Arc<dyn Store> {
        self.store.clone()
    }

    /// The store's documents as stored, never through the cache: for what
    /// must see the store itself (replication's kept queues and redump marks,
    /// the reverse-lookup index, which the cache never holds).
    pub fn uncached_documents(&self) -> &dyn DocumentStore {
        &*self.store
    }

    /// The store's documents, read through the cache when it is on (the domain registry's).
    pub fn documents(&self) -> Arc<dyn DocumentStore> {
        match &self.cache {
            Some(cache) => Arc::new(CachedDocuments { store: self.store.clone(), cache: cache.clone() }),
            None => self.store.clone(),
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

    /// Storage key of a handle (§7.3 case rules).
    pub fn storage_key(&self, h: &[u8]) -> Vec<u8> {
        handle::normalize(&handle::canonical(h), self.case_sensitive)
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

    /// Is `h`'s prefix homed here, known without waiting: false when the
    /// homed set of a shared store is due for a re-read.
    pub fn is_homed_now(&self, h: &[u8]) -> bool {
        let fresh = match &self.homed_reloaded {
            None => true,
            Some(reloaded) => reloaded.lock().unwrap_or_else(|e| e.into_inner()).elapsed() < HOMED_RELOAD,
        };
        fresh && self.is_homed_here(h)
    }

    /// Re-read the homed prefixes from the shared store (nothing on a single node).
    pub async fn reload_homed(&self) {
        let Some(reloaded) = &self.homed_reloaded else { return };
        match self.store.homed_prefixes().await {
            Ok(homed) => {
                *self.homed.write().unwrap_or_else(|e| e.into_inner()) = homed.into_iter().collect();
                *reloaded.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
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
/// `remote_auth_timeout_ms`, `remote_auth_concurrent`, and where the
/// `[resolver]` table lets walks send); `None` without `root_info`.
pub fn remote_auth_of(config: &Config) -> Result<Option<RemoteAuth>, String> {
    let Some(path) = config.root_info.as_deref() else { return Ok(None) };
    let root = handled_client::sites::load_root_info(path)?;
    let timeout = std::time::Duration::from_millis(config.auth.remote_auth_timeout_ms.max(1));
    let upstream = (config.resolver.upstream_policy(), config.resolver.upstream_attempts.max(1));
    Ok(Some(RemoteAuth::new(root, timeout, config.auth.remote_auth_concurrent, upstream)))
}
