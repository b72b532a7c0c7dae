//! `txnlog_num_days_to_keep`: once a day (first at start) the log loses the
//! entries older than that many days; a mirror that had not pulled them must
//! then be dumped again (see [`super::txn::needs_redump`]). The other
//! primaries' queues kept for proxied mirrors are pruned by the same rule.

use crate::replication::ReplicationContext;
use handled_store::clock::machine_ms;
use handled_store::Capabilities;
use std::sync::Arc;
use std::time::Duration;

const DAY_MS: u64 = 86_400_000;

/// Entries dated before this are pruned when `days` are kept at `now_ms`.
pub fn cutoff(now_ms: u64, days: u64) -> u64 {
    now_ms.saturating_sub(days.saturating_mul(DAY_MS))
}

/// What there is to prune: the store's transaction log, and the other
/// primaries' queues (kept as documents) once a member kept one.
#[derive(Debug, PartialEq, Eq)]
pub struct Pruned {
    pub log: bool,
    pub kept_queues: bool,
}

/// What `days` > 0 prunes on a store with these capabilities; None (with the
/// reason, for one line at start) when it has nothing to prune, as on SQL
/// without `replication_log`: warning every day about a log that is not
/// kept would only be noise.
pub fn what_to_prune(days: u64, caps: &Capabilities) -> Result<Pruned, Option<&'static str>> {
    if days == 0 {
        return Err(None);
    }
    if !caps.txn_log {
        return Err(Some(
            "txnlog_num_days_to_keep is ignored: this store keeps no transaction log \
             (store = \"sql\" keeps one only with replication_log = true)",
        ));
    }
    Ok(Pruned { log: true, kept_queues: caps.documents })
}

/// The daily pruning to spawn, when `txnlog_num_days_to_keep` > 0 and the
/// store has something to prune.
pub fn prune_daily(state: Arc<ReplicationContext>) -> Option<impl std::future::Future<Output = ()> + Send + 'static> {
    let days = state.settings.replication.txnlog_num_days_to_keep;
    let pruned = match what_to_prune(days, &state.admin().capabilities()) {
        Ok(p) => p,
        Err(why) => {
            if let Some(why) = why {
                tracing::warn!("replication: {why}");
            }
            return None;
        }
    };
    Some(async move {
        let mut every = tokio::time::interval(Duration::from_millis(DAY_MS));
        loop {
            every.tick().await;
            let before = cutoff(machine_ms(), days);
            match state.txn_log().txn_log_prune(before).await {
                Ok(0) => {}
                Ok(n) => tracing::info!("replication: pruned {n} transaction log entries older than {days} days"),
                Err(e) => tracing::warn!("replication: transaction log not pruned: {e}"),
            }
            if !pruned.kept_queues {
                continue;
            }
            // Other primaries' queues kept for proxied mirrors, as Handle.Net prunes them.
            match crate::replication::kept_queues::prune(state.uncached_documents(), state.txn_log(), before).await {
                Ok(0) => {}
                Ok(n) => {
                    tracing::info!(
                        "replication: pruned {n} kept transactions of other primaries older than {days} days"
                    )
                }
                Err(e) => tracing::warn!("replication: other primaries' queues not pruned: {e}"),
            }
        }
    })
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

    fn caps(txn_log: bool, documents: bool) -> Capabilities {
        Capabilities {
            shared: false,
            durable: true,
            documents,
            txn_log,
            backup: handled_store::Backup::Refused("none"),
            read_only: false,
            remote: true,
        }
    }

    #[test]
    fn prunes_only_what_the_store_keeps() {
        assert_eq!(what_to_prune(0, &caps(true, true)), Err(None), "0 keeps forever");
        let sql_without_log = what_to_prune(4, &caps(false, false)).unwrap_err().unwrap();
        assert!(sql_without_log.contains("replication_log"), "{sql_without_log}");
        assert_eq!(what_to_prune(4, &caps(true, false)), Ok(Pruned { log: true, kept_queues: false }));
        assert_eq!(what_to_prune(4, &caps(true, true)), Ok(Pruned { log: true, kept_queues: true }));
    }
}
