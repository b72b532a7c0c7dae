//! The HTTP port's transport floor. Connections are set up in [`super::unify`]
//! (TLS or plain from the first byte, keep-alive, Server-Timing, access log);
//! what a request means is the [`WebHandler`]'s (the server's is
//! `crate::web::Web`, whose one route table covers the native tunnel, the
//! operations endpoints, the JSON API, the console and the web proxy).

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Request, Response};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio_rustls::TlsAcceptor;

/// The connection a request came on.
#[derive(Debug, Clone)]
pub struct Conn {
    /// Over TLS: the only transport on which credentials count (unless configured).
    pub secure: bool,
    pub peer: SocketAddr,
    /// The TLS client certificate's claim, when the client sent one.
    pub client_cert: Option<Arc<crate::client_cert::ClientCertificate>>,
}

/// What the HTTP port serves: the application behind its connections.
pub trait WebHandler: Send + Sync + 'static {
    /// Held while a connection is open (a gauge's guard).
    type Open: Send + 'static;

    /// Answer one request.
    fn respond(&self, conn: Conn, req: Request<Incoming>) -> impl Future<Output = Response<Full<Bytes>>> + Send;

    /// Does the next request get an access line (tracing target `access`)?
    fn wants_access_line(&self) -> bool;

    /// A connection was accepted; it stays counted until the guard drops.
    fn opened(&self) -> Self::Open;
}

/// What every connection on the HTTP port shares.
pub struct HttpPort<H> {
    /// The application.
    pub handler: H,
    /// None when the TLS setup failed (logged at start): plain HTTP only.
    pub tls: Option<TlsAcceptor>,
    /// Idle / header-read limit, advertised as `Keep-Alive: timeout=`.
    pub keep_alive: Duration,
    /// Requests per connection, advertised as `Keep-Alive: max=`.
    pub max_requests: u64,
}
