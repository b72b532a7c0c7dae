//! Nodes sharing `store = "cassandra"` with record caches: the cluster
//! channel and its timings (docs/cluster.md).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct ClusterConfig {
    /// With `store = "cassandra"` and `cache_mb > 0`: this node's cluster
    /// channel (`ip:port`, a private address the other nodes reach). Writes
    /// are announced over it to every node serving from its cache before they
    /// are answered (docs/cluster.md, "A record cache coherent across nodes").
    #[serde(rename = "cluster_listen")]
    pub listen: Option<std::net::SocketAddr>,
    /// Length of a node's lease to serve from its cache, renewed every quarter.
    #[serde(rename = "cluster_lease_ms")]
    pub lease_ms: u64,
    /// Clock skew allowed between nodes (keep them on NTP): a node stops
    /// serving from its cache this long before its lease ends.
    #[serde(rename = "cluster_margin_ms")]
    pub margin_ms: u64,
    /// Oldest view of the cluster's members a write is announced to.
    #[serde(rename = "cluster_view_refresh_ms")]
    pub view_refresh_ms: u64,
    /// Longest wait for a node's acknowledgement of an announced write before
    /// it is fenced (and its lease waited out, once).
    #[serde(rename = "cluster_ack_timeout_ms")]
    pub ack_timeout_ms: u64,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig { listen: None, lease_ms: 2000, margin_ms: 250, view_refresh_ms: 500, ack_timeout_ms: 200 }
    }
}

impl ClusterConfig {
    /// The cluster timings .
    pub fn timings(&self) -> crate::cluster::coherence::Timings {
        let ms = std::time::Duration::from_millis;
        crate::cluster::coherence::Timings {
            lease: ms(self.lease_ms),
            margin: ms(self.margin_ms),
            view_refresh: ms(self.view_refresh_ms),
            ack_timeout: ms(self.ack_timeout_ms),
        }
    }
}
