//! An in-process server on ephemeral ports whose admin credentials are kept,
//! plus helpers for the administration tests.

#![allow(dead_code)]

use handled_client::{AdminSession, ConnectParams, Credentials, KeyChoice, Protocol};
use handled_proto::request::RequestBody;
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

    /// The bootstrap admin's HS_SECKEY.
    pub fn admin_secret(&self) -> Vec<u8> {
        match self.creds(KeyChoice::Secret).key {
            handled_client::credentials::Key::Secret(k) => k,
            _ => unreachable!("asked for the secret key"),
        }
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

/// VERIFY_CHALLENGE (201) for the bootstrap admin's HS_SECKEY (TEST/ADMIN,
/// index 300): does `answer` answer `nonce` over `digest`?
pub fn verify_admin_challenge(nonce: &[u8], digest: &[u8], answer: Vec<u8>) -> RequestBody {
    RequestBody::VerifyChallenge(handled_proto::session::VerifyChallengeRequest {
        handle: b"TEST/ADMIN".to_vec(),
        index: 300,
        nonce: nonce.to_vec(),
        request_digest: digest.to_vec(),
        digest_alg: None,
        answer,
    })
}

/// The request id of a unit or datagram (bytes 8..12 of the envelope).
pub fn request_id_of(datagram: &[u8]) -> Option<i32> {
    Some(i32::from_be_bytes(datagram.get(8..12)?.try_into().ok()?))
}

/// Requests from `socket` to the server at `to`.
pub struct Udp<'a> {
    pub socket: &'a tokio::net::UdpSocket,
    pub to: std::net::SocketAddr,
}

impl Udp<'_> {
    /// Send `datagrams` (one request) and return the first reply datagram
    /// carrying `request_id`, sending them again every `every` for up to 60 s:
    /// a datagram lost on a busy machine must not fail a test. The server
    /// drops a copy of a request it is still serving, so resending is harmless.
    pub async fn ask(&self, datagrams: &[Vec<u8>], request_id: i32, every: Duration) -> Vec<u8> {
        self.send(datagrams).await;
        self.answer(datagrams, request_id, every).await
    }

    /// [`Udp::ask`] for a request already sent: wait `every` before sending again.
    pub async fn answer(&self, datagrams: &[Vec<u8>], request_id: i32, every: Duration) -> Vec<u8> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        let mut buf = vec![0u8; 65_536];
        loop {
            let resend_at = tokio::time::Instant::now() + every;
            while let Ok(received) = tokio::time::timeout_at(resend_at, self.socket.recv(&mut buf)).await {
                let n = received.expect("receive a UDP datagram");
                if request_id_of(&buf[..n]) == Some(request_id) {
                    return buf[..n].to_vec();
                }
            }
            assert!(tokio::time::Instant::now() < deadline, "no UDP answer to request {request_id} in 60 s");
            self.send(datagrams).await;
        }
    }

    async fn send(&self, datagrams: &[Vec<u8>]) {
        for d in datagrams {
            self.socket.send_to(d, self.to).await.expect("send a UDP datagram");
        }
    }
}
