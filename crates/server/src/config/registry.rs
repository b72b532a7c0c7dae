//! The domain registry API (crate handled-registry, served by
//! `crate::registry_port`).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct RegistryConfig {
    /// Port of the domain registry API (served at its root); unset: not served.
    #[serde(rename = "registry_port")]
    pub port: Option<u16>,
    /// `EXPIRES_MAX`: larger `expires` values are clamped to this many seconds.
    #[serde(rename = "registry_expires_max")]
    pub expires_max: u64,
    /// Seconds between sweeps that mark expired endpoints (0: only on reads)
    /// and purge old disconnected ones.
    #[serde(rename = "registry_sweep_secs")]
    pub sweep_secs: u64,
    /// A disconnected (expired or deleted) record is removed this many seconds
    /// after the change feed (`/registry/updated`) handed it out; until then
    /// reads still answer it (408) as the original does.
    #[serde(rename = "registry_retention_secs")]
    pub retention_secs: u64,
    /// ...and this long after it went, when no one reads the change feed.
    #[serde(rename = "registry_unseen_retention_secs")]
    pub unseen_retention_secs: u64,
    /// Hyperties one user may have (disconnected ones count until removed);
    /// beyond, a create is refused (403). 0 = no limit.
    #[serde(rename = "registry_max_hyperties_per_user")]
    pub max_hyperties_per_user: usize,
    /// Records (hyperties and data objects) one client address may create;
    /// beyond, 403. Not applied behind `LOAD_BALANCER_IP` (every request comes
    /// from the balancer). 0 = no limit.
    #[serde(rename = "registry_max_records_per_peer")]
    pub max_records_per_peer: usize,
}

impl Default for RegistryConfig {
    fn default() -> Self {
        RegistryConfig {
            port: None,
            expires_max: 3600,
            sweep_secs: 60,
            retention_secs: 86_400,
            unseen_retention_secs: 7 * 86_400,
            max_hyperties_per_user: 1_000,
            max_records_per_peer: 100_000,
        }
    }
}
