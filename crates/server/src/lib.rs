//! The `handled` server: request handling, transports and start-up.
//!
//! Layout after hickory-dns's server crate: [`transport`] frames bytes,
//! [`native`] answers protocol requests, the store lives behind `handled_store::Store`.

pub mod admission;
pub mod auth;
pub mod backup;
pub mod bootstrap;
pub mod cache;
pub mod cluster;
pub mod config;
pub mod console;
pub mod import;
pub mod keys;
pub mod live;
pub mod logging;
pub mod memory;
pub mod metrics;
pub mod native;
pub mod ops;
pub mod proxy;
pub mod quota;
pub mod registry_port;
pub mod reload;
pub mod replication;
pub mod rest;
pub mod session;
pub mod site;
pub mod state;
pub mod transport;

/// This build's version and git commit (`build.rs`; "unknown" outside a checkout).
pub mod build {
    pub const VERSION: &str = env!("CARGO_PKG_VERSION");
    pub const GIT_COMMIT: &str = env!("HANDLED_GIT_COMMIT");
    /// `0.1.0 (commit 0123456789ab)`, as `handled --version` prints it.
    pub const LONG_VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("HANDLED_GIT_COMMIT"), ")");
}

use state::ServerState;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::task::JoinSet;

/// Addresses the listeners actually bound (ports may have been 0).
#[derive(Debug, Clone, Copy)]
pub struct BoundAddrs {
    pub udp: SocketAddr,
    pub tcp: SocketAddr,
    pub http: SocketAddr,
    /// The domain registry's port, when configured.
    pub registry: Option<SocketAddr>,
}

/// Bound but not yet serving listeners. Bind first, so that ports picked by
/// the OS (port 0) are known before the site record is built.
pub struct Listeners {
    pub addrs: BoundAddrs,
    udp: Vec<std::net::UdpSocket>,
    tcp: tokio::net::TcpListener,
    http: tokio::net::TcpListener,
    registry: Option<tokio::net::TcpListener>,
}

impl Listeners {
    pub fn bind(config: &config::Config) -> std::io::Result<Listeners> {
        // Each failure names what could not be bound (e.g. "native TCP 127.0.0.1:2641").
        let named = |what: &'static str, addr: SocketAddr| {
            move |e: std::io::Error| std::io::Error::new(e.kind(), format!("{what} {addr}: {e}"))
        };
        let native = SocketAddr::new(config.listen, config.port);
        let tcp = transport::tcp::bind(native).map_err(named("native TCP", native))?;
        let tcp_addr = tcp.local_addr()?;
        // UDP shares the native port number with TCP (matters when it was 0).
        let udp_at = SocketAddr::new(config.listen, tcp_addr.port());
        let udp = transport::udp::bind(udp_at, config.udp_socket_count()).map_err(named("native UDP", udp_at))?;
        let udp_addr = udp[0].local_addr()?;
        let http_at = SocketAddr::new(config.listen, config.http_port);
        let http = transport::tcp::bind(http_at).map_err(named("HTTP", http_at))?;
        let http_addr = http.local_addr()?;
        let registry = match config.registry_port {
            Some(p) => {
                let at = SocketAddr::new(config.listen, p);
                Some(transport::tcp::bind(at).map_err(named("domain registry", at))?)
            }
            None => None,
        };
        let registry_addr = registry.as_ref().map(|l| l.local_addr()).transpose()?;
        let addrs = BoundAddrs { udp: udp_addr, tcp: tcp_addr, http: http_addr, registry: registry_addr };
        Ok(Listeners { addrs, udp, tcp, http, registry })
    }

    /// Record the bound ports in the configuration the site record is built from.
    pub fn apply_ports(&self, config: &mut config::Config) {
        config.port = self.addrs.tcp.port();
        config.http_port = self.addrs.http.port();
        config.registry_port = self.addrs.registry.map(|a| a.port());
    }

    /// Start serving on every listener (must be called inside the runtime).
    pub fn serve(self, state: Arc<ServerState>) -> std::io::Result<RunningServer> {
        let registry_settings = match &self.registry {
            Some(_) => Some(
                registry_port::settings(&state.config)
                    .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?,
            ),
            None => None,
        };
        let mut tasks = JoinSet::new();
        let runtime = tokio::runtime::Handle::current();
        for socket in self.udp {
            // UDP threads run until the process exits; they hold no state worth flushing.
            transport::udp::spawn(state.clone(), socket, runtime.clone())?;
        }
        // One set of connection limits over every TCP port: they share the descriptors.
        let limits = transport::limits::ConnectionLimits::from_config(&state.config);
        let metrics = state.clone();
        let on_refusal: transport::accept::RefusalHook =
            Arc::new(move |name, why| metrics.metrics.connection_refused(name, why.label()));
        let acceptor =
            |l, name, refusal| transport::accept::Acceptor::new(l, name, limits.clone(), refusal, on_refusal.clone());
        let http_refusal = transport::accept::http_refusal;
        tasks.spawn(transport::tcp::serve(state.clone(), acceptor(self.tcp, "tcp", |_| None)));
        if let (Some(l), Some(settings)) = (self.registry, registry_settings) {
            tasks.spawn(registry_port::serve(state.clone(), settings, acceptor(l, "registry", http_refusal)));
        }
        tasks.spawn(transport::unify::serve_port(state.clone(), acceptor(self.http, "http", http_refusal)));
        tasks.spawn(state.clone().sweep_expired());
        if state.config.txnlog_num_days_to_keep > 0 {
            tasks.spawn(replication::source::prune::prune_daily(state.clone()));
        }
        state.set_ready();
        Ok(RunningServer { addrs: self.addrs, tasks })
    }
}

/// A started server: its addresses and the tasks serving them.
pub struct RunningServer {
    pub addrs: BoundAddrs,
    tasks: JoinSet<()>,
}

impl RunningServer {
    /// Wait until a listener task ends (which only happens on a bug or panic).
    pub async fn wait(mut self) {
        self.tasks.join_next().await;
    }
}
