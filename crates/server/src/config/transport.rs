//! The listeners: UDP, TCP and the HTTP port (keep-alive, HTTPS, bodies, the
//! web proxy switch, access lines), and the connection limits they share.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct TransportConfig {
    /// UDP sockets (with SO_REUSEPORT); 0 = one per core.
    pub udp_sockets: usize,
    /// While refusing (overload), run the UDP receiving threads at realtime
    /// priority (SCHED_FIFO 1) if the process may (root, CAP_SYS_NICE or
    /// LimitRTPRIO=1), so refusals do not wait for the scheduler to preempt
    /// the workers (up to 4 ms); normal priority otherwise.
    pub udp_realtime_refusals: bool,
    /// Memory per UDP socket for multi-datagram requests being put together,
    /// in MiB (each may announce up to 256 KiB); beyond it new ones are dropped.
    pub udp_reassembly_mb: usize,
    /// Unfinished multi-datagram requests one peer may have per UDP socket.
    pub udp_reassembly_per_peer: usize,
    /// Largest answer sent over UDP, in bytes (all its datagrams); a larger one
    /// is replaced by a short "ask over TCP" refusal (RC 500, on which the Java
    /// client moves to TCP), so a small request cannot bring back 250 KB.
    pub udp_max_response_bytes: usize,
    /// UDP answer bytes per second (and burst) per source address, in KiB, like
    /// DNS response-rate limiting; beyond it the "ask over TCP" refusal. 0 = no
    /// limit. Loopback sources are never limited (they cannot be spoofed).
    /// Behind a UDP balancer every client has its address: raise it or set 0.
    pub udp_rate_limit_kb: usize,
    /// Seconds an idle TCP connection may stay open between requests.
    pub tcp_idle_timeout_secs: u64,
    /// Open TCP connections (native TCP, HTTP/HTTPS and registry ports
    /// together); beyond, a connection is refused at once (HTTP 503). Lowered at
    /// start to fit the file-descriptor limit (whose soft value is raised to the hard one).
    pub max_connections: usize,
    /// Open TCP connections from one client address; 0 = only `max_connections`.
    /// Raise it when clients arrive through a proxy or load balancer.
    pub max_connections_per_peer: usize,
    /// PEM certificate chain and private key for HTTPS on the HTTP port;
    /// neither: a self-signed certificate made from the server key at start.
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    /// Ask HTTPS clients for an optional certificate in every handshake, so
    /// that one naming `index:handle` (UID or CN) with that HS_PUBKEY's key
    /// authenticates the JSON API (§14.6.2). Handle.Net asks only when a request
    /// says `Authorization: Handle clientCert="true"`, by renegotiating, which
    /// rustls does not do; browsers may then offer the user's certificates.
    pub https_client_certificates: bool,
    /// Idle seconds before a keep-alive connection is closed (also the limit
    /// for receiving a request's headers); advertised in `Keep-Alive`.
    pub http_keep_alive_secs: u64,
    /// Requests served on one HTTP connection before it is closed.
    pub http_max_requests: u64,
    /// MiB that request bodies being received may hold together (all HTTP
    /// ports), a quarter of it from one client address; a body that does not
    /// fit is refused at once (HTTP 503).
    pub http_body_budget_mb: usize,
    /// Serve the web handle proxy on the HTTP port (`GET /{handle}` redirects to
    /// the handle's URL, as hdl.handle.net does); false: such a GET answers 302
    /// to `/api/handles/{handle}`, as Handle.Net with `enable_proxy = no`.
    pub enable_proxy: bool,
    /// Which requests get an access line (UDP, TCP and HTTP; shown with
    /// `HANDLED_LOG=warn,access=info`): "full", "sampled" or "off". Requests
    /// refused as too busy get none (the metrics count them).
    pub access_log: crate::logging::AccessLogMode,
    /// With `access_log = "sampled"`: one request in this many.
    pub access_log_sample_every: u64,
}

impl Default for TransportConfig {
    fn default() -> Self {
        TransportConfig {
            udp_sockets: 0,
            udp_realtime_refusals: true,
            udp_reassembly_mb: 4,
            udp_reassembly_per_peer: 8,
            udp_max_response_bytes: 8192,
            udp_rate_limit_kb: 1024,
            tcp_idle_timeout_secs: 60,
            max_connections: 10_000,
            max_connections_per_peer: 2_000,
            tls_cert: None,
            tls_key: None,
            https_client_certificates: false,
            http_keep_alive_secs: 15,
            http_max_requests: 100_000,
            http_body_budget_mb: 256,
            enable_proxy: true,
            access_log: crate::logging::AccessLogMode::Full,
            access_log_sample_every: 100,
        }
    }
}

impl TransportConfig {
    /// `udp_sockets`, 0 meaning one per core.
    pub fn udp_socket_count(&self) -> usize {
        if self.udp_sockets > 0 {
            self.udp_sockets
        } else {
            std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
        }
    }
}
