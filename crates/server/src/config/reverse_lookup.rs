//! Reverse lookup (`/hrls`, `crate::rest::hrls`): what one search may cost.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct ReverseLookupConfig {
    /// Deepest result a search may page to (`page × limit + limit`, for
    /// pages after the first).
    #[serde(rename = "hrls_max_offset")]
    pub max_offset: usize,
    /// Index entries one search may read; beyond, it is refused as too broad.
    #[serde(rename = "hrls_max_examined")]
    pub max_examined: usize,
    /// Longest run of one search before it is stopped (HTTP 503).
    #[serde(rename = "hrls_search_timeout_ms")]
    pub search_timeout_ms: u64,
    /// Searches reading more than one batch (1000) of index entries that may
    /// run at once; more are refused at once (HTTP 503, `Retry-After`).
    #[serde(rename = "hrls_max_scans")]
    pub max_scans: usize,
    /// Searches by pattern (`*`) need an authenticated caller; exact-value
    /// searches stay anonymous.
    #[serde(rename = "hrls_patterns_need_auth")]
    pub patterns_need_auth: bool,
}

impl Default for ReverseLookupConfig {
    fn default() -> Self {
        ReverseLookupConfig {
            max_offset: 10_000,
            max_examined: 100_000,
            search_timeout_ms: 2_000,
            max_scans: 1,
            patterns_need_auth: false,
        }
    }
}
