//! `txnlog_num_days_to_keep`: once a day (first at start) the log loses the
//! entries older than that many days; a mirror that had not pulled them must
//! then be dumped again (see [`super::txn::needs_redump`]). The other
//! primaries' queues kept for proxied mirrors are pruned by the same rule.

use crate::state::ServerState;
use handled_store::txn_log::now_ms;
use std::sync::Arc;
use std::time::Duration;

const DAY_MS: u64 = 86_400_000;

/// Entries dated before this are pruned when `days` are kept at `now_ms`.
pub fn cutoff(now_ms: u64, days: u64) -> u64 {
    now_ms.saturating_sub(days.saturating_mul(DAY_MS))
}

/// Prune daily, forever; spawn only when `txnlog_num_days_to_keep` > 0.
pub async fn prune_daily(state: Arc<ServerState>) {
    let days = state.config.replication.txnlog_num_days_to_keep;
    let mut every = tokio::time::interval(Duration::from_millis(DAY_MS));
    loop {
        every.tick().await;
        let before = cutoff(now_ms(), days);
        match state.store.txn_log_prune(before).await {
            Ok(0) => {}
            Ok(n) => tracing::info!("replication: pruned {n} transaction log entries older than {days} days"),
            Err(e) => tracing::warn!("replication: transaction log not pruned: {e}"),
        }
        // Other primaries' queues kept for proxied mirrors, as Handle.Net prunes them.
        match crate::replication::kept_queues::prune(&*state.store, before).await {
            Ok(0) => {}
            Ok(n) => {
                tracing::info!("replication: pruned {n} kept transactions of other primaries older than {days} days")
            }
            Err(e) => tracing::warn!("replication: other primaries' queues not pruned: {e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_given_days() {
        assert_eq!(cutoff(10 * DAY_MS + 5, 3), 7 * DAY_MS + 5);
        assert_eq!(cutoff(DAY_MS, 30), 0, "nothing before the epoch");
        assert_eq!(cutoff(DAY_MS, u64::MAX), 0);
    }
}
