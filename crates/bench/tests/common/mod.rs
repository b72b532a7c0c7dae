//! Shared by the bench's integration tests.

use handled_bench::Model;
use std::time::Duration;

/// A closed loop of `clients` × `per_client` requests, no pause, no warm-up.
pub fn closed(clients: usize, per_client: u64) -> Model {
    Model::Closed {
        clients,
        requests_per_client: Some(per_client),
        duration: None,
        pause: Duration::ZERO,
        warmup: Duration::ZERO,
    }
}
