//! Admission control: how many requests run at once, wait, and for how long.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct AdmissionConfig {
    /// Admission control: requests processed at once...
    pub max_concurrent: usize,
    /// ...requests allowed to wait for a turn...
    pub queue_length: usize,
    /// ...and for how long, before being refused as too busy.
    pub max_queue_wait_ms: u64,
}

impl Default for AdmissionConfig {
    fn default() -> Self {
        AdmissionConfig { max_concurrent: 256, queue_length: 2048, max_queue_wait_ms: 1000 }
    }
}
