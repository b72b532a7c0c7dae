//! A `handled` server started in-process for tests, through the same
//! [`Server`] steps as `handled serve` (a mirror when the configuration names
//! a replication source, a member when it names a group): on ephemeral ports
//! and, unless the configuration says otherwise, an in-memory store. The
//! database servers and skips of `handled-testenv` come with it.

pub use handled_testenv::{db, skipped};

use handled_server::bootstrap::open_store;
use handled_server::config::Config;
use handled_server::replication::mirror::MirrorSettings;
use handled_server::replication::multi_primary::GroupSettings;
use handled_server::state::ServerState;
use handled_server::{BoundAddrs, Server};
use handled_store::Store;
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

pub struct TestServer {
    pub addrs: BoundAddrs,
    pub state: Arc<ServerState>,
    /// Admin credentials bootstrap wrote (removed when this is dropped).
    pub credentials: Vec<PathBuf>,
    /// None once shut down; dropped without a shutdown, the server runs on with the runtime.
    server: Option<Server>,
}

/// The configuration tests start from: in memory, every port chosen by the OS, one UDP socket.
pub fn config() -> Config {
    let mut config = Config { ephemeral: true, port: 0, http_port: 0, ..Config::default() };
    config.transport.udp_sockets = 1;
    config
}

/// A server on [`config`] changed by `tweak`.
pub async fn start(tweak: impl FnOnce(&mut Config)) -> TestServer {
    start_seeded(tweak, |_| async {}).await
}

/// A server whose store `seed` fills before bootstrap.
pub async fn start_seeded<F: Future<Output = ()>>(
    tweak: impl FnOnce(&mut Config),
    seed: impl FnOnce(Arc<dyn Store>) -> F,
) -> TestServer {
    let mut config = config();
    tweak(&mut config);
    let mirror = MirrorSettings::from_config(&config.replication).expect("mirror settings");
    let group = GroupSettings::from_config(&config).expect("group settings");
    let bound = Server::bind(config).expect("bind");
    let store = open_store(&bound.config).await.expect("store");
    seed(store.clone()).await;
    let booted = bound.bootstrap(store).await.expect("bootstrap");
    if let Some(mirror) = mirror {
        booted.start_mirror(mirror).await.expect("start the mirror");
    }
    booted.start_group(group).await.expect("join the group");
    let credentials = booted.new_credentials.clone();
    let server = booted.serve().expect("serve");
    TestServer { addrs: server.addrs, state: server.state.clone(), credentials, server: Some(server) }
}

impl TestServer {
    /// [`Server::shutdown`]: true if nothing in flight had to be cut.
    pub async fn shutdown(&mut self, grace: Duration) -> bool {
        self.server.take().expect("running").shutdown(grace).await
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        for p in &self.credentials {
            let _ = std::fs::remove_file(p);
        }
    }
}
