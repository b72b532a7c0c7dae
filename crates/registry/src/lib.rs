//! The domain registry (reThink Domain Registry API): users → live endpoints
//! ("hyperty instances") and the data objects they report, with search,
//! expiry, keep-alive and a change feed. Served at the root of its own port
//! (`registry_port`), as the original was. See `docs/domain-registry.md`
//! for the contract and `openapi.json` here for the routes.
//!
//! * [`model`]: records, validation, index entries, expiry rule, time format;
//! * [`service`]: operations (per-record compare-and-set on store documents,
//!   every lookup by index);
//! * [`http`]: routing on the raw path and the original's answers.
//!
//! Expiry is applied on every read and by a sweeper that walks the deadline
//! index every `registry_sweep_secs`; [`upkeep`] removes disconnected records
//! once the change feed has handed them out (and a retention time passed) and
//! holds new records to per-user and per-peer quotas.

pub mod http;
pub mod model;
pub mod service;
mod upkeep;

use std::future::Future;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use hyper::body::Incoming;
pub use service::Registry;

/// What the registry needs from the configuration and environment.
#[derive(Debug, Clone)]
pub struct Settings {
    /// `EXPIRES_MAX`: larger `expires` values are clamped to this.
    pub expires_max: i64,
    /// Sweeper period; zero disables the sweeper (expiry still applies on reads).
    pub sweep_period: Duration,
    /// `Storage_type` in `/live`.
    pub storage_type: &'static str,
    /// `LOAD_BALANCER_IP` (environment): only this peer may call.
    pub load_balancer_ip: Option<IpAddr>,
    /// `DOMAIN_ENV=DEVELOPMENT` (environment): `/live` has an HTML page for browsers.
    pub dev_status_page: bool,
    /// Disconnected records are removed this long after the change feed
    /// handed them out, or after `unseen_retention` when it never did.
    pub retention: Duration,
    pub unseen_retention: Duration,
    /// Quotas on new records (0: none).
    pub max_hyperties_per_user: usize,
    pub max_records_per_peer: usize,
}

impl Settings {
    /// `load_balancer_ip` and `dev_status_page` from the original's environment
    /// variables. An unparsable `LOAD_BALANCER_IP` is an error: ignoring it would
    /// let every peer write (it used to fail open).
    pub fn with_environment(self) -> Result<Settings, String> {
        let lb = std::env::var("LOAD_BALANCER_IP").ok().filter(|v| !v.is_empty());
        let load_balancer_ip = lb
            .map(|v| {
                v.parse().map_err(|_| {
                    format!(
                        "LOAD_BALANCER_IP={v:?} is not an IP address (unset it to let every peer call the registry)"
                    )
                })
            })
            .transpose()?;
        let dev_status_page = std::env::var("DOMAIN_ENV").is_ok_and(|v| v == "DEVELOPMENT");
        Ok(Settings { load_balancer_ip, dev_status_page, ..self })
    }
}

/// What the registry needs from the server that hosts it: the server owns the
/// port, the connections and their limits; the registry asks it for a turn
/// (admission control is shared with every other service) and for bodies
/// (their byte budget is shared too).
pub trait Host: Send + Sync {
    /// Held while a request runs.
    type Turn: Send;
    /// A turn, or why not now and how many seconds a client should wait.
    fn admit(&self) -> impl Future<Output = Result<Self::Turn, Busy>> + Send;
    /// A request body of at most `max` bytes, within the server's time limit and budget.
    fn read_body(
        &self,
        body: Incoming,
        max: usize,
        peer: IpAddr,
    ) -> impl Future<Output = Result<Bytes, BodyRefused>> + Send;
}

/// Admission refused a request.
#[derive(Debug, Clone, Copy)]
pub struct Busy {
    pub reason: &'static str,
    pub retry_after_secs: u64,
}

/// Why a request body was not read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyRefused {
    /// The server's body budget is spent by other requests.
    Busy,
    /// Too long, too slow or broken.
    Unreadable,
}

/// Expire and purge records every `sweep_period` (a zero period: never); never
/// returns, so that a host may run it beside its listeners until it stops them.
pub async fn upkeep(registry: Arc<Registry>) {
    let period = registry.settings.sweep_period;
    if period.is_zero() {
        return std::future::pending().await;
    }
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tick.tick().await;
        match registry.sweep().await {
            Ok(0) => {}
            Ok(n) => tracing::debug!("registry sweep: {n} records expired"),
            Err(e) => tracing::warn!("registry sweep failed: {e:?}"),
        }
        match registry.purge().await {
            Ok(0) => {}
            Ok(n) => tracing::debug!("registry purge: {n} disconnected records removed"),
            Err(e) => tracing::warn!("registry purge failed: {e:?}"),
        }
    }
}

#[cfg(test)]
mod tests {
    /// The OpenAPI fragment parses and documents every route.
    #[test]
    fn openapi_fragment_covers_every_route() {
        let v: serde_json::Value = serde_json::from_str(include_str!("openapi.json")).unwrap();
        let routes = [
            ("/", "get"),
            ("/live", "get"),
            ("/error", "get"),
            ("/registry/updated", "get"),
            ("/hyperty/user/{userID}", "get"),
            ("/hyperty/user/{userID}/{hypertyID}", "put"),
            ("/hyperty/user/{userID}/{hypertyID}", "delete"),
            ("/hyperty/user/{userID}/{hypertyID}", "get"),
            ("/hyperty/url/{hypertyID}", "get"),
            ("/hyperty/url/{hypertyID}", "put"),
            ("/hyperty/guid/{guid}", "get"),
            ("/hyperty/email/{email}", "get"),
            ("/hyperty/email/{email}/{anything}", "get"),
            ("/hyperty/dataobject/{url}", "put"),
            ("/dataobject/url/{url}", "put"),
            ("/hyperty/dataobject/url/{url}", "get"),
            ("/hyperty/dataobject/url/{url}/{anything}", "get"),
            ("/hyperty/dataobject/name/{name}", "get"),
            ("/hyperty/dataobject/name/{name}/{anything}", "get"),
            ("/hyperty/dataobject/reporter/{reporter}", "get"),
            ("/hyperty/dataobject/reporter/{reporter}/{anything}", "get"),
        ];
        for (path, method) in routes {
            assert!(v["paths"][path][method].is_object(), "{method} {path}");
        }
        assert_eq!(v["paths"].as_object().unwrap().len(), 18);
    }
}
