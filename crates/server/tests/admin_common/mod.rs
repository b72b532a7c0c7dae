//! An in-process server on ephemeral ports whose admin credentials are kept,
//! plus helpers for the administration tests.

#![allow(dead_code)]

use handled_client::{AdminSession, ConnectParams, Credentials, KeyChoice, Protocol};
use handled_server::config::Config;
use handled_server::state::ServerState;
use handled_server::BoundAddrs;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

pub struct AdminServer {
    pub addrs: BoundAddrs,
    pub credentials: PathBuf,
    pub state: Arc<ServerState>,
    /// Removes the credentials when dropped.
    _server: handled_testkit::TestServer,
}

impl AdminServer {
    pub fn addr(&self, p: Protocol) -> std::net::SocketAddr {
        match p {
            Protocol::Udp => self.addrs.udp,
            Protocol::Tcp => self.addrs.tcp,
            Protocol::Http => self.addrs.http,
        }
    }

    pub fn params(&self, p: Protocol, use_session: bool) -> ConnectParams {
        ConnectParams { timeout: Duration::from_secs(10), use_session, ..ConnectParams::new(p, self.addr(p)) }
    }

    pub fn creds(&self, choice: KeyChoice) -> Credentials {
        Credentials::load(&self.credentials, choice).expect("credentials file")
    }

    /// The bootstrap admin (TEST/ADMIN) over `p`.
    pub async fn admin(&self, p: Protocol, choice: KeyChoice, use_session: bool) -> AdminSession {
        AdminSession::open(self.params(p, use_session), self.creds(choice)).await.expect("admin session")
    }
}

pub async fn start() -> AdminServer {
    start_with(|_| {}).await
}

pub async fn start_with(tweak: impl FnOnce(&mut Config)) -> AdminServer {
    let server = handled_testkit::start(tweak).await;
    let credentials = server.credentials.first().expect("admin credentials written").clone();
    AdminServer { addrs: server.addrs, credentials, state: server.state.clone(), _server: server }
}
