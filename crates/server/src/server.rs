//! A server from start to stop, in three steps and an end:
//! [`Server::bind`] (ports first, so that those the OS picks are known before the
//! site record is built), [`Bound::bootstrap`] (the store's site, prefixes and
//! admins), [`Booted::serve`], and [`Server::shutdown`]: listeners and background
//! loops stop, requests in flight get a grace period, the rest is cut, and the
//! store is closed only when no task or thread can use it any more.

use crate::bootstrap::{bootstrap, BootstrapError};
use crate::config::Config;
use crate::lifecycle::Shutdown;
use crate::replication::mirror::MirrorSettings;
use crate::state::ServerState;
use crate::{registry_port, replication, transport};
use handled_store::{Store, StoreError};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;

/// Addresses the listeners actually bound (ports may have been 0).
#[derive(Debug, Clone, Copy)]
pub struct BoundAddrs {
    pub udp: SocketAddr,
    pub tcp: SocketAddr,
    pub http: SocketAddr,
    /// The domain registry's port, when configured.
    pub registry: Option<SocketAddr>,
}

/// Bound, not yet serving.
pub struct Bound {
    /// The configuration with the ports the listeners got.
    pub config: Config,
    pub addrs: BoundAddrs,
    udp: Vec<std::net::UdpSocket>,
    tcp: tokio::net::TcpListener,
    http: tokio::net::TcpListener,
    registry: Option<tokio::net::TcpListener>,
}

/// Bootstrapped on its store, not yet serving.
pub struct Booted {
    pub state: Arc<ServerState>,
    /// Admin credentials files written for admins created now.
    pub new_credentials: Vec<PathBuf>,
    bound: Bound,
    shutdown: Shutdown,
}

/// A serving server.
pub struct Server {
    pub addrs: BoundAddrs,
    pub state: Arc<ServerState>,
    shutdown: Shutdown,
    /// Accept loops: one ending while serving is a bug.
    listeners: Vec<JoinHandle<()>>,
}

/// Each bind failure names what could not be bound (e.g. "native TCP 127.0.0.1:2641").
fn named(what: &'static str, addr: SocketAddr) -> impl FnOnce(std::io::Error) -> std::io::Error {
    move |e| std::io::Error::new(e.kind(), format!("{what} {addr}: {e}"))
}

impl Server {
    /// Bind every listener of `config` (native UDP and TCP, HTTP, the registry's port).
    pub fn bind(mut config: Config) -> std::io::Result<Bound> {
        let native = SocketAddr::new(config.listen, config.port);
        let (tcp, udp) = Self::bind_native(native, config.transport.udp_socket_count())?;
        let tcp_addr = tcp.local_addr()?;
        let udp_addr = udp[0].local_addr()?;
        let http_at = SocketAddr::new(config.listen, config.http_port);
        let http = transport::tcp::bind(http_at).map_err(named("HTTP", http_at))?;
        let http_addr = http.local_addr()?;
        let registry = match config.registry.port {
            Some(p) => {
                let at = SocketAddr::new(config.listen, p);
                Some(transport::tcp::bind(at).map_err(named("domain registry", at))?)
            }
            None => None,
        };
        let registry_addr = registry.as_ref().map(|l| l.local_addr()).transpose()?;
        let addrs = BoundAddrs { udp: udp_addr, tcp: tcp_addr, http: http_addr, registry: registry_addr };
        // The site record publishes the ports actually bound.
        config.port = tcp_addr.port();
        config.http_port = http_addr.port();
        config.registry.port = registry_addr.map(|a| a.port());
        Ok(Bound { config, addrs, udp, tcp, http, registry })
    }

    /// The native port, TCP and UDP on one number. With port 0 the number TCP
    /// gets may be held for UDP (by another program, or a server of this
    /// process still stopping): then another number is tried.
    fn bind_native(
        at: SocketAddr,
        udp_sockets: usize,
    ) -> std::io::Result<(tokio::net::TcpListener, Vec<std::net::UdpSocket>)> {
        let mut tries = 0;
        loop {
            let tcp = transport::tcp::bind_native(at).map_err(named("native TCP", at))?;
            let udp_at = SocketAddr::new(at.ip(), tcp.local_addr()?.port());
            match transport::udp::bind(udp_at, udp_sockets) {
                Ok(udp) => return Ok((tcp, udp)),
                Err(e) if at.port() == 0 && e.kind() == std::io::ErrorKind::AddrInUse && tries < 64 => tries += 1,
                Err(e) => return Err(named("native UDP", udp_at)(e)),
            }
        }
    }

    /// Resolves only if an accept loop ended while serving (a bug or a panic).
    pub async fn stopped_unexpectedly(&mut self) {
        if self.listeners.is_empty() {
            return std::future::pending().await;
        }
        let _ = futures_util::future::select_all(self.listeners.iter_mut()).await;
    }

    /// On every SIGHUP, until the server stops: re-read the configuration file
    /// `path` ([`crate::reload`]), then promote a mirror whose file no longer
    /// names a source. Each outcome is one line for `report` (the CLI prints
    /// them; operators and tests read them).
    pub fn reload_on_hangup(
        &self,
        path: Option<PathBuf>,
        report: impl Fn(String) + Send + 'static,
    ) -> std::io::Result<()> {
        let mut hangup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())?;
        let state = self.state.clone();
        self.shutdown.stop().spawn_until_draining(async move {
            while hangup.recv().await.is_some() {
                match crate::reload::reload(&state.reloadable(), path.as_deref()) {
                    Ok(reloaded) => report(reloaded.to_string()),
                    Err(e) => report(format!("nothing reloaded, the running configuration stays: {e}")),
                }
                match replication::mirror::promote_if_unconfigured(&state.replication, path.as_deref()).await {
                    Ok(true) => report("replication_source gone from the configuration: promoted to a primary".into()),
                    Ok(false) => {}
                    Err(e) => report(format!("promotion failed, still a mirror: {e}")),
                }
            }
        });
        Ok(())
    }

    /// Stop in order: no new connections, datagrams or background work; what is
    /// in flight gets `grace` to finish, then is cut; the cluster is left; and
    /// the store is closed last, when nothing can use it any more. True if
    /// nothing had to be cut.
    pub async fn shutdown(self, grace: Duration) -> bool {
        let finished = self.shutdown.run(grace).await;
        if let Some(cache) = &self.state.cache {
            cache.leave_cluster().await;
        }
        // Closing waits for the store's writer to commit what is queued.
        let store = self.state.store_handle();
        let _ = tokio::task::spawn_blocking(move || store.close()).await;
        finished
    }
}

impl Bound {
    /// Open what the server needs on `store` (server key, site, prefixes, admins).
    pub async fn bootstrap(self, store: Arc<dyn Store>) -> Result<Booted, BootstrapError> {
        let booted = bootstrap(self.config.clone(), store).await?;
        Ok(Booted {
            state: booted.state,
            new_credentials: booted.new_credentials,
            bound: self,
            shutdown: Shutdown::default(),
        })
    }
}

impl Booted {
    /// Make this server a mirror of the configured source (before serving); the
    /// pull loop stops when the server does.
    pub async fn start_mirror(&self, settings: MirrorSettings) -> Result<(), StoreError> {
        replication::mirror::start(&self.state.replication, settings, &self.shutdown.stop()).await
    }

    /// Take part in a multi-primary group (before serving), or, with none
    /// configured, stop dating local writes as a member does; the pull loop
    /// stops when the server does.
    pub async fn start_group(
        &self,
        settings: Option<replication::multi_primary::GroupSettings>,
    ) -> Result<(), StoreError> {
        match settings {
            Some(s) => replication::multi_primary::start(&self.state.replication, s, &self.shutdown.stop()).await,
            None if self.state.admin().capabilities().txn_log => {
                replication::multi_primary::leave(self.state.records()).await
            }
            None => Ok(()),
        }
    }

    /// Start serving on every listener (inside the runtime).
    pub fn serve(self) -> std::io::Result<Server> {
        let (b, state, stop) = (self.bound, self.state, self.shutdown.stop());
        let registry_settings = match &b.registry {
            Some(_) => Some(
                registry_port::settings(&state.config)
                    .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?,
            ),
            None => None,
        };
        let runtime = tokio::runtime::Handle::current();
        for socket in b.udp {
            let handler = state.native_service.clone();
            transport::udp::spawn(
                handler,
                &state.config.transport,
                state.metrics.clone(),
                socket,
                runtime.clone(),
                stop.clone(),
            )?;
        }
        // One set of connection limits over every TCP port: they share the descriptors.
        let limits = transport::limits::ConnectionLimits::from_config(&state.config.transport);
        let metrics = state.clone();
        let on_refusal: transport::accept::RefusalHook =
            Arc::new(move |name, why| metrics.metrics.connection_refused(name, why.label()));
        let acceptor =
            |l, name, refusal| transport::accept::Acceptor::new(l, name, limits.clone(), refusal, on_refusal.clone());
        let http_refusal = transport::accept::http_refusal;
        let mut listeners = Vec::new();
        let tcp = acceptor(b.tcp, "tcp", |_| None);
        let native_port = transport::tcp::NativePort {
            handler: state.native_service.clone(),
            idle_timeout: std::time::Duration::from_secs(state.config.transport.tcp_idle_timeout_secs),
            metrics: state.metrics.clone(),
        };
        listeners.push(stop.spawn_until_draining(transport::tcp::serve(native_port, tcp, stop.clone())));
        if let (Some(l), Some(settings)) = (b.registry, registry_settings) {
            let registry = acceptor(l, "registry", http_refusal);
            let host = registry_port::RegistryHost {
                documents: state.documents(),
                admission: state.admission.clone(),
                metrics: state.metrics.clone(),
            };
            listeners.push(stop.spawn_until_draining(registry_port::serve(host, settings, registry, stop.clone())));
        }
        let http = acceptor(b.http, "http", http_refusal);
        let port = crate::web::port(
            state.web.clone(),
            http.limits().bodies.clone(),
            NativeTunnel(state.native_service.clone()),
        );
        listeners.push(stop.spawn_until_draining(transport::unify::serve_port(port, http, stop.clone())));
        stop.spawn_until_draining(state.native.clone().sweep_expired());
        stop.spawn_until_draining(crate::memory::trim_every(std::time::Duration::from_secs(
            state.config.memory_trim_secs,
        )));
        if let Some(prune) = replication::source::prune::prune_daily(state.replication.clone()) {
            stop.spawn_until_draining(prune);
        }
        state.set_ready();
        Ok(Server { addrs: b.addrs, state, shutdown: self.shutdown, listeners })
    }
}

/// Native messages tunnelled over the HTTP port go where the other transports'
/// go: admission control, the native protocol, metrics.
struct NativeTunnel(Arc<crate::native::service::NativeService>);

impl crate::web::Tunnel for NativeTunnel {
    async fn serve(&self, unit: &[u8], peer: SocketAddr) -> Vec<Vec<u8>> {
        transport::serve_unit(&*self.0, unit, crate::native::Transport::Http, peer).await.units
    }
}
