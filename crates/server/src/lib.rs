//! The `handled` server: request handling, transports and start-up.
//!
//! Layout after hickory-dns's server crate: [`transport`] frames bytes and
//! hands request units to a [`handler::NativeHandler`], which [`native`]
//! implements to answer protocol requests; the store lives behind `handled_store::Store`.

pub mod access;
pub mod admission;
pub mod auth;
pub mod backup;
pub mod bootstrap;
pub mod cache;
pub mod client_cert;
pub mod cluster;
pub mod config;
pub mod console;
pub mod directory;
pub mod handler;
pub mod http_body;
pub mod import;
pub mod keys;
pub mod lifecycle;
pub mod live;
pub mod logging;
pub mod memory;
pub mod metrics;
pub mod native;
pub mod ops;
pub mod proxy;
pub mod quota;
pub mod recursion;
pub mod registry_port;
pub mod reload;
pub mod replication;
pub mod replication_status;
pub mod rest;
pub mod reverse_index;
mod server;
pub mod session;
pub mod site;
pub mod state;
pub mod store_answer;
pub mod tls;
pub mod transport;
pub mod web;
pub mod web_context;
pub mod xml;

/// This build's version and git commit (`build.rs`; "unknown" outside a checkout).
pub mod build {
    pub const VERSION: &str = env!("CARGO_PKG_VERSION");
    pub const GIT_COMMIT: &str = env!("HANDLED_GIT_COMMIT");
    /// `0.1.0 (commit 0123456789ab)`, as `handled --version` prints it.
    pub const LONG_VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("HANDLED_GIT_COMMIT"), ")");
}

pub use server::{Booted, Bound, BoundAddrs, Server};
