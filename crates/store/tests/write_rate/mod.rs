//! The creates/s a store takes, for the measurements of what its transaction
//! log costs per write (`txn_log_write_cost` in `cassandra.rs` and `sql_common`).

use std::sync::Arc;
use std::time::Instant;

use futures_util::StreamExt;
use handled_store::conformance::url_record;
use handled_store::{Expect, Store};

/// `creates` new handles `B/0`… from `writers` concurrent writers: creates/s.
pub async fn creates_per_second(s: &Arc<dyn Store>, creates: usize, writers: usize) -> f64 {
    let started = Instant::now();
    futures_util::stream::iter(0..creates)
        .map(|i| {
            let s = s.clone();
            async move {
                let k = format!("B/{i}").into_bytes();
                s.swap(&k, Expect::Absent, Some(url_record("x"))).await.unwrap();
            }
        })
        .buffer_unordered(writers)
        .collect::<Vec<()>>()
        .await;
    creates as f64 / started.elapsed().as_secs_f64()
}
