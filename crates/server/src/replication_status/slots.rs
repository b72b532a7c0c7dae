//! The source's own state, kept in the replication context: stream slots, long-polling
//! pulls per peer, and the TLS acceptor with the site key's certificate. Apart
//! from the request handling so that the server state does not depend on it.

use crate::tls::TlsError;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, OnceLock};
use tokio::sync::Semaphore;
use tokio_rustls::TlsAcceptor;

/// The source's own state: stream slots, waiting pulls per peer, the TLS
/// acceptor with the site key's certificate (made on first use).
pub struct Source {
    pub(crate) streams: Arc<Semaphore>,
    waits: Arc<Mutex<HashMap<IpAddr, usize>>>,
    acceptor: OnceLock<Option<TlsAcceptor>>,
    make_acceptor: MakeAcceptor,
}

/// Makes the TLS acceptor, once, when a mirror first asks for TLS.
pub type MakeAcceptor = Box<dyn Fn() -> Result<TlsAcceptor, TlsError> + Send + Sync>;

impl Source {
    pub fn new(max_streams: usize, make_acceptor: MakeAcceptor) -> Self {
        Source {
            streams: Arc::new(Semaphore::new(max_streams.max(1))),
            waits: Arc::default(),
            acceptor: OnceLock::new(),
            make_acceptor,
        }
    }

    pub(crate) fn acceptor(&self) -> Option<&TlsAcceptor> {
        self.acceptor
            .get_or_init(|| match (self.make_acceptor)() {
                Ok(a) => Some(a),
                Err(e) => {
                    tracing::error!("replication streams over TLS unavailable: {e}");
                    None
                }
            })
            .as_ref()
    }

    /// A waiting slot for `peer`, if it holds fewer than `per_peer`.
    pub(crate) fn wait_slot(&self, peer: IpAddr, per_peer: usize) -> Option<WaitSlot> {
        let mut waits = self.waits.lock().unwrap_or_else(|e| e.into_inner());
        let n = waits.entry(peer).or_insert(0);
        if *n >= per_peer {
            return None;
        }
        *n += 1;
        Some(WaitSlot { waits: self.waits.clone(), peer })
    }
}

/// One long-polling pull of a peer; the count goes down when it is dropped.
pub(crate) struct WaitSlot {
    waits: Arc<Mutex<HashMap<IpAddr, usize>>>,
    peer: IpAddr,
}

impl Drop for WaitSlot {
    fn drop(&mut self) {
        let mut waits = self.waits.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = waits.get_mut(&self.peer) {
            *n -= 1;
            if *n == 0 {
                waits.remove(&self.peer);
            }
        }
    }
}
