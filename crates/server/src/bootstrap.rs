//! Start-up: open (or create) everything a server needs from one data directory.
//! On first start this makes the server key, homes the configured prefixes and
//! creates for each a prefix handle and an admin handle with fresh credentials.

use crate::config::Config;
use crate::keys::{write_private, KeyError, RsaSigner, SERVER_KEY_FILE};
use crate::site::{build_site, fingerprint};
use crate::state::ServerState;
use base64::Engine;
use handled_proto::codec::Codec;
use handled_proto::data::admin::{AdminPermissions, AdminRecord};
use handled_proto::handle;
use handled_proto::value::{types, HandleValue, ValuePermissions};
use handled_store::{DocExpect, DocOutcome, Document, Expect, HandleRecord, Store, StoreError, SwapOutcome};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

const META_SITE_SERIAL: &str = "site/serial";
const META_SITE_FINGERPRINT: &str = "site/fingerprint";
/// Where nodes sharing a store keep the site's private key (PKCS#8).
const SITE_KEY_COLLECTION: &str = "site";
const SITE_KEY_ID: &[u8] = b"signing-key";

pub use crate::site::{ADMIN_INDEX, PUBKEY_INDEX, SECKEY_INDEX, SITE_INDEX};

#[derive(Debug, thiserror::Error)]
pub enum BootstrapError {
    #[error("cannot create data directory {path}: {source}")]
    DataDir { path: PathBuf, source: std::io::Error },
    #[error(transparent)]
    Key(#[from] KeyError),
    #[error("store: {0}")]
    Store(#[from] StoreError),
    #[error("{0}")]
    Invalid(String),
}

/// Result of bootstrapping: the shared state, and where newly generated admin
/// credentials were written (one file per newly created admin handle).
pub struct Bootstrapped {
    pub state: Arc<ServerState>,
    pub new_credentials: Vec<PathBuf>,
}

/// Open the store the configuration names (embedded by default, memory when
/// ephemeral, the Cassandra cluster or Handle.Net's SQL tables) through the store crate's one
/// factory, and put the server's own layer on it.
pub async fn open_store(config: &Config) -> Result<Arc<dyn Store>, BootstrapError> {
    let store_config = config.store_config().map_err(|e| BootstrapError::Invalid(e.to_string()))?;
    if !config.ephemeral {
        // The server key and new admins' credentials live there, whatever the store.
        ensure_dir(&config.data_dir)?;
    }
    let store = handled_store::open_store(&store_config).await?;
    // Reverse lookup (/hrls): every handle write through it also maintains the
    // value index, which is kept in documents.
    Ok(if store.capabilities().documents { crate::reverse_index::ValueIndex::keep(store) } else { store })
}

pub async fn bootstrap(config: Config, store: Arc<dyn Store>) -> Result<Bootstrapped, BootstrapError> {
    config.validate().map_err(|e| BootstrapError::Invalid(e.to_string()))?;
    let key = load_or_create_key(&config, &*store).await?;
    let hs_pubkey = key.hs_pubkey();

    // A mirror (or a promoted one) serves the prefixes, prefix and admin handles it
    // replicates: writing its own would log changes outside the source's sequence.
    let promoted = crate::replication::mirror::is_promoted(&*store).await?;
    let replicated = config.replication.source.is_some() || promoted;
    // A multi-primary member homes its prefixes but makes no prefix or admin
    // handle: the group's are made once, on one member, and reach the others
    // by replication (two made apart would conflict, one admin losing its keys).
    let member = config.replication.pulls_from_group();
    // A mirror's site record says so (a promoted one is a primary).
    let primary = config.replication.source.is_none() || promoted;

    // Bump the serial only when the published record really changed (§6.3).
    let fresh = build_site(&config, hs_pubkey.clone(), 0, primary);
    let print = fingerprint(&fresh);
    let old_serial = read_u16(&*store, META_SITE_SERIAL).await?;
    // A read-only store (Handle.Net's sql_read_only) is served as it is:
    // nothing is written, neither the serial nor prefix and admin handles.
    let read_only = store.capabilities().read_only;
    let serial = match (old_serial, store.meta_get(META_SITE_FINGERPRINT).await?) {
        (Some(serial), Some(old)) if old == print => serial,
        (serial, _) if read_only => serial.unwrap_or(1),
        (serial, _) => {
            let next = serial.unwrap_or(0).wrapping_add(1).max(1);
            store.meta_put(META_SITE_FINGERPRINT, Some(print)).await?;
            store.meta_put(META_SITE_SERIAL, Some(next.to_be_bytes().to_vec())).await?;
            next
        }
    };
    let site = build_site(&config, hs_pubkey, serial, primary);
    let site_bytes = site.to_bytes();

    let mut homed: HashSet<Vec<u8>> = store.homed_prefixes().await?.into_iter().collect();

    let mut new_credentials = Vec::new();
    // The HS_SITE value this server wrote with its key, which its HTTPS
    // certificate names (tls.rs): none where the prefix handles are another's.
    let mut published_site = None;
    let prefixes: &[String] = if replicated { &[] } else { &config.prefixes };
    for prefix in prefixes {
        let prefix_handle = handle::normalize(format!("0.NA/{prefix}").as_bytes(), false);
        if read_only {
            // Served, as the operator said; the database is left as it is.
            homed.insert(prefix_handle);
            continue;
        }
        if homed.insert(prefix_handle.clone()) {
            store.home(&prefix_handle, true).await?;
        }
        let admin_handle = format!("{prefix}/ADMIN").into_bytes();
        let admin_ref = AdminRecord {
            permissions: AdminPermissions(AdminPermissions::ALL),
            handle: admin_handle.clone(),
            index: 0,
        };
        if member {
            continue;
        }
        upsert_prefix_handle(&*store, &prefix_handle, &admin_ref, &site_bytes).await?;
        published_site.get_or_insert_with(|| crate::tls::site_identity(prefix));
        let admin_key = handle::normalize(&admin_handle, config.case_sensitive);
        if store.get(&admin_key).await?.is_none() {
            // Another node sharing the store may win the race to create it.
            if let Some(path) =
                create_admin_handle(&config, &*store, prefix, &admin_key, &admin_handle, &admin_ref).await?
            {
                new_credentials.push(path);
            }
        }
    }

    let for_cluster = store.clone();
    let state = Arc::new(ServerState::new(config, store, key, site_bytes, serial, homed, published_site));
    join_cluster(&state, for_cluster).await?;
    Ok(Bootstrapped { state, new_credentials })
}

/// With `cluster_listen`: take a lease, serve peers' invalidations, and tell
/// them to drop everything (this start's writes went around the cache). A
/// node sharing a store without it would write behind the caches of nodes
/// that have one: it refuses to start while any holds a lease.
async fn join_cluster(state: &ServerState, store: Arc<dyn Store>) -> Result<(), BootstrapError> {
    use crate::cache::Coherence;
    use crate::cluster::{coherence::Cluster, lease};
    match (state.config.cluster.listen, &state.cache) {
        (Some(listen), Some(cache)) => {
            let timings = state.config.cluster.timings();
            let cluster = Cluster::start(store, cache, listen, state.key.pkcs8(), timings)
                .await
                .map_err(|e| BootstrapError::Invalid(format!("cluster_listen {listen}: {e}")))?;
            cluster.publish(&crate::cache::Change::All).await?;
        }
        _ if store.capabilities().shared => {
            let rows = store.doc_scan(lease::COLLECTION, b"", None, 1024).await?;
            let now = handled_store::clock::now_ms();
            let caching = rows.iter().filter_map(|(_, d)| lease::Member::of(d)).find(|m| m.lease_until > now);
            if let Some(m) = caching {
                return Err(BootstrapError::Invalid(format!(
                    "the node at {} serves from its record cache: every node of this cluster needs cluster_listen \
                     (and cache_mb), or its writes would not reach that cache",
                    m.addr
                )));
            }
        }
        _ => {}
    }
    Ok(())
}

fn ensure_dir(path: &Path) -> Result<(), BootstrapError> {
    std::fs::create_dir_all(path).map_err(|source| BootstrapError::DataDir { path: path.to_owned(), source })
}

/// The site's signing key: `server_key_file` if set; a key file in the data directory if there is one;
/// with a shared (Cassandra) store, the one key every node of the site uses,
/// kept in the store (the first node to start makes it); else a new key file.
async fn load_or_create_key(config: &Config, store: &dyn Store) -> Result<RsaSigner, BootstrapError> {
    if let Some(path) = &config.server_key_file {
        return Ok(RsaSigner::load(path)?);
    }
    if config.ephemeral {
        return Ok(RsaSigner::generate()?);
    }
    let path = config.data_dir.join(SERVER_KEY_FILE);
    if path.exists() {
        refuse_lost_store(config, store, &path).await?;
        return Ok(RsaSigner::load(&path)?);
    }
    if store.capabilities().shared {
        let mine = RsaSigner::generate()?;
        let doc = Document::new(mine.pkcs8().to_vec(), Vec::new());
        return match store.doc_swap(SITE_KEY_COLLECTION, SITE_KEY_ID, DocExpect::Absent, Some(doc)).await? {
            DocOutcome::Done { .. } => Ok(mine),
            DocOutcome::Conflict { current: Some(d) } => Ok(RsaSigner::from_pkcs8(&d.body, "the shared store")?),
            DocOutcome::Conflict { current: None } => Err(BootstrapError::Invalid("shared site key vanished".into())),
        };
    }
    let key = RsaSigner::generate()?;
    key.save(&path)?;
    Ok(key)
}

/// A data directory with a server key has been started before, so a durable
/// store of this node's own (the embedded one) holds the site record. Without
/// it the store was lost or replaced (or rolled back): bootstrapping would make
/// a new admin over the old one's files. (A shared store may be new to this node.)
async fn refuse_lost_store(config: &Config, store: &dyn Store, key_path: &Path) -> Result<(), BootstrapError> {
    let caps = store.capabilities();
    if !caps.durable || caps.shared || store.meta_get(META_SITE_SERIAL).await?.is_some() {
        return Ok(());
    }
    Err(BootstrapError::Invalid(format!(
        "data directory {} holds a server key ({}) but its store has no site record: the store was lost, \
         replaced or damaged. Refusing to bootstrap over it; restore the store from a backup, or move the \
         data directory away to start a new server",
        config.data_dir.display(),
        key_path.display()
    )))
}

async fn read_u16(store: &dyn Store, key: &str) -> Result<Option<u16>, BootstrapError> {
    Ok(store.meta_get(key).await?.and_then(|b| <[u8; 2]>::try_from(b.as_slice()).ok()).map(u16::from_be_bytes))
}

fn stamped(mut v: HandleValue) -> HandleValue {
    v.timestamp = handled_store::clock::now_secs_i32();
    v
}

/// Make sure `0.NA/<prefix>` exists with an HS_ADMIN and our current HS_SITE.
async fn upsert_prefix_handle(
    store: &dyn Store,
    key: &[u8],
    admin: &AdminRecord,
    site_bytes: &[u8],
) -> Result<(), BootstrapError> {
    loop {
        let current = store.get(key).await?;
        let mut record = current.clone().unwrap_or_default();
        if !record.values.iter().any(|v| v.is_type(types::HS_ADMIN)) {
            record.values.push(stamped(HandleValue::new(ADMIN_INDEX, types::HS_ADMIN, admin.to_bytes())));
        }
        match record.values.iter().position(|v| v.index == SITE_INDEX) {
            Some(i) if record.values[i].is_type(types::HS_SITE) && record.values[i].data != site_bytes => {
                record.values[i] = stamped(HandleValue { data: site_bytes.to_vec(), ..record.values[i].clone() });
            }
            Some(_) => {}
            None => record.values.insert(0, stamped(HandleValue::new(SITE_INDEX, types::HS_SITE, site_bytes.to_vec()))),
        }
        if current.as_ref() == Some(&record) {
            return Ok(());
        }
        let expect = match current {
            Some(r) => Expect::Present(r),
            None => Expect::Absent,
        };
        if let SwapOutcome::Done { .. } = store.swap(key, expect, Some(record)).await? {
            return Ok(());
        }
    }
}

/// Where the credentials of `prefix`'s new admin handle go.
fn credentials_path(config: &Config, prefix: &str) -> PathBuf {
    if let Some(p) = &config.admin_credentials {
        if config.prefixes.len() <= 1 {
            return p.clone();
        }
        let stem = p.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        let name = match p.extension() {
            Some(ext) => format!("{stem}-{prefix}.{}", ext.to_string_lossy()),
            None => format!("{stem}-{prefix}"),
        };
        return p.with_file_name(name);
    }
    if config.ephemeral {
        // Unique per server: several ephemeral servers may share a process (tests).
        let name = format!("handled-{}-{:08x}-admin-{prefix}.json", std::process::id(), rand::random::<u32>());
        return std::env::temp_dir().join(name);
    }
    config.data_dir.join(format!("admin-{prefix}.json"))
}

/// Create `<prefix>/ADMIN` with a random secret key and an RSA key, and write
/// both secrets to a credentials file only the owner can read. `None` when the
/// handle appeared meanwhile (another node created it): nothing is written.
async fn create_admin_handle(
    config: &Config,
    store: &dyn Store,
    prefix: &str,
    key: &[u8],
    admin_handle: &[u8],
    admin_ref: &AdminRecord,
) -> Result<Option<PathBuf>, BootstrapError> {
    let path = credentials_path(config, prefix);
    if path.exists() {
        return Err(BootstrapError::Invalid(format!(
            "{} is not in the store but its credentials file {} exists: refusing to make a new admin over it \
             (was the store lost? restore it from a backup; or move the file away to create a new admin)",
            String::from_utf8_lossy(admin_handle),
            path.display()
        )));
    }
    let secret: String = {
        use rand::distr::{Alphanumeric, SampleString};
        Alphanumeric.sample_string(&mut rand::rng(), 32)
    };
    let admin_key = RsaSigner::generate()?;
    let mut seckey = HandleValue::new(SECKEY_INDEX, types::HS_SECKEY, secret.as_bytes().to_vec());
    seckey.permissions = ValuePermissions(ValuePermissions::ADMIN_READ | ValuePermissions::ADMIN_WRITE);
    let values = vec![
        stamped(HandleValue::new(ADMIN_INDEX, types::HS_ADMIN, admin_ref.to_bytes())),
        stamped(seckey),
        stamped(HandleValue::new(PUBKEY_INDEX, types::HS_PUBKEY, admin_key.hs_pubkey())),
    ];
    let record = HandleRecord::named(values, admin_handle, key);
    if !store.swap(key, Expect::Absent, Some(record)).await?.is_done() {
        return Ok(None);
    }

    let handle_text = String::from_utf8_lossy(admin_handle).into_owned();
    let b64 = base64::engine::general_purpose::STANDARD;
    let credentials = serde_json::json!({
        "handle": handle_text,
        "secret_key": { "index": SECKEY_INDEX, "secret": secret },
        "public_key": { "index": PUBKEY_INDEX, "private_key_pkcs8": b64.encode(admin_key.pkcs8()) },
    });
    let text = serde_json::to_vec_pretty(&credentials).map_err(|e| BootstrapError::Invalid(e.to_string()))?;
    write_private(&path, &text)?;
    Ok(Some(path))
}
