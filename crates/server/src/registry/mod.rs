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

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use crate::transport::accept::Acceptor;

use crate::config::Config;
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
    /// Settings from the configuration and the original's environment variables.
    /// An unparsable `LOAD_BALANCER_IP` is an error: ignoring it would let every
    /// peer write (it used to fail open).
    pub fn from_config(c: &Config) -> Result<Settings, String> {
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
        let storage_type = match c.store_kind() {
            crate::config::StoreKind::Memory => "Ram",
            crate::config::StoreKind::Embedded => "Embedded",
            crate::config::StoreKind::Cassandra => "Cassandra",
        };
        Ok(Settings {
            expires_max: c.registry_expires_max.min(i64::MAX as u64) as i64,
            sweep_period: Duration::from_secs(c.registry_sweep_secs),
            storage_type,
            load_balancer_ip,
            dev_status_page: std::env::var("DOMAIN_ENV").is_ok_and(|v| v == "DEVELOPMENT"),
            retention: Duration::from_secs(c.registry_retention_secs),
            unseen_retention: Duration::from_secs(c.registry_unseen_retention_secs),
            max_hyperties_per_user: c.registry_max_hyperties_per_user,
            max_records_per_peer: c.registry_max_records_per_peer,
        })
    }
}

/// Serve the registry on `listener` until the process ends, with its sweeper.
/// Serve the registry; admission control and metrics are the server's own (`state`).
pub async fn serve(state: Arc<crate::state::ServerState>, settings: Settings, listener: Acceptor) {
    let registry = match Registry::open(state.store.clone(), settings).await {
        Ok(r) => Arc::new(r),
        Err(e) => {
            tracing::error!("domain registry cannot start: {e}");
            return;
        }
    };
    let period = registry.settings.sweep_period;
    if !period.is_zero() {
        let r = registry.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(period);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            tick.tick().await;
            loop {
                tick.tick().await;
                match r.sweep().await {
                    Ok(0) => {}
                    Ok(n) => tracing::debug!("registry sweep: {n} records expired"),
                    Err(e) => tracing::warn!("registry sweep failed: {e:?}"),
                }
                match r.purge().await {
                    Ok(0) => {}
                    Ok(n) => tracing::debug!("registry purge: {n} disconnected records removed"),
                    Err(e) => tracing::warn!("registry purge failed: {e:?}"),
                }
            }
        });
    }
    http::serve(registry, state, listener).await;
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
