//! What the native protocol works with, built once at start: the directory
//! that operations read, the resolution chain, the site record it announces,
//! the key that signs its answers, the sessions and challenges of its
//! clients, the authentication log, and replication for the source's
//! operations (1000–1003). Transports hand it units; it keeps no transport's
//! bookkeeping.

use crate::auth::challenge::Challenges;
use crate::directory::Directory;
use crate::keys::RsaSigner;
use crate::logging::Logs;
use crate::ops::resolve::ResolutionChain;
use crate::replication::ReplicationContext;
use crate::session::Sessions;
use std::sync::Arc;

pub struct NativeContext {
    pub directory: Arc<Directory>,
    /// `max_session_secs`: the longest session a client may set up.
    pub max_session_secs: u64,
    pub chain: Arc<ResolutionChain>,
    pub key: Arc<RsaSigner>,
    /// Encoded HS_SITE record answered by GET_SITE_INFO.
    pub site_bytes: Vec<u8>,
    pub site_serial: u16,
    pub challenges: Challenges,
    pub sessions: Sessions,
    pub logs: Arc<Logs>,
    pub replication: Arc<ReplicationContext>,
}

impl NativeContext {
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

/// Operations take a `&Directory`: handlers pass the context.
impl std::ops::Deref for NativeContext {
    type Target = Directory;
    fn deref(&self) -> &Directory {
        &self.directory
    }
}
