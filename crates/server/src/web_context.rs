//! What the HTTP port's application (operations endpoints, JSON API, web
//! proxy, console, tunnel) works with, built once by the composition root
//! (`state.rs`): each front end takes this, not the whole server's state.

use crate::admission::Admission;
use crate::cache::RecordCache;
use crate::config::{ReverseLookupConfig, TransportConfig};
use crate::directory::Directory;
use crate::keys::RsaSigner;
use crate::logging::Logs;
use crate::metrics::Metrics;
use crate::native::NativeContext;
use crate::ops::resolve::ResolutionChain;
use crate::recursion::Recursion;
use crate::tls::CertSlot;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

pub struct WebContext {
    /// What operations read; the context derefs to it.
    pub directory: Arc<Directory>,
    /// Where resolutions look (JSON API, proxy).
    pub chain: Arc<ResolutionChain>,
    /// The native protocol's context: the site record the API shows.
    pub native: Arc<NativeContext>,
    /// The server key (HTTP sessions, challenge answers).
    pub key: Arc<RsaSigner>,
    pub admission: Admission,
    pub metrics: Arc<Metrics>,
    /// Access lines and failed authentications.
    pub logs: Arc<Logs>,
    /// The global resolver, for the proxy's links.
    pub recursion: Arc<Recursion>,
    /// The record cache, for its figures (`/metrics`).
    pub cache: Option<Arc<RecordCache>>,
    /// The HTTPS certificate (None: TLS setup failed, plain HTTP only).
    pub tls: Option<Arc<CertSlot>>,
    /// The HTTP port's settings (keep-alive, bodies, `enable_proxy`).
    pub transport: TransportConfig,
    /// What a reverse-lookup search may cost.
    pub reverse_lookup: ReverseLookupConfig,
    /// The longest an HTTP session lives (`max_session_secs`).
    pub max_session_secs: u64,
    /// Where the state files a backup carries live.
    pub data_dir: PathBuf,
    /// Set once every listener serves (`/readyz`).
    pub ready: Ready,
}

/// Whether every listener serves yet (`/readyz`).
#[derive(Default)]
pub struct Ready(AtomicBool);

impl Ready {
    pub fn get(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }

    pub fn set(&self) {
        self.0.store(true, Ordering::Release);
    }
}

impl std::ops::Deref for WebContext {
    type Target = Directory;
    fn deref(&self) -> &Directory {
        &self.directory
    }
}
