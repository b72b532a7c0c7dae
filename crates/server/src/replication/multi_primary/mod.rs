//! `handled` as a member of a multi-primary group (Handle.Net's Technical
//! Manual §7.3; docs/multi-primary.md): it takes writes, serves its own
//! transaction log to the others, and pulls every other primary's log,
//! settling conflicts by Handle.Net's rule (`handled_store::change_dates`:
//! the later `(date, priority)` wins, a local write is dated after the
//! handle's last change, a delete keeps its date).
//!
//! The pull is the mirror's ([`crate::replication::mirror`]), one progress
//! record per peer, with the peer's priority on each change so the store
//! applies only the newer ones and does not log them (the ids are the peer's).

pub mod future_dates;
mod group;
pub mod winners;

use crate::config::Config;
use crate::replication::mirror::progress::{decode, PullProgress};
use crate::replication::mirror::pull::{self, Queue};
use crate::replication::mirror::{MirrorError, MirrorStatus};
use crate::replication::ReplicationContext;
use crate::replication_status::mirror::Phase;
use handled_client::credentials::Credentials;
use handled_store::change_dates::{decode_priority, LOCAL_PRIORITY_META_KEY};
use handled_store::{RecordStore, StoreError};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// Meta-key prefix of the pull progress per peer (then its queue name).
pub const PULL_PREFIX: &str = "replication/multi-primary/pull/";
/// Most peers given metrics over the server's life.
const MAX_SHOWN: usize = 4 * group::MAX_PRIMARIES;
/// Longest pause after failed cycles in a row.
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// What a member needs from the configuration.
pub struct GroupSettings {
    pub sites_handle: Vec<u8>,
    pub resolver: Option<String>,
    pub credentials: Credentials,
    pub interval: Duration,
    pub timeout: Duration,
}

impl GroupSettings {
    /// None when this server does not pull from a group.
    pub fn from_config(config: &Config) -> Result<Option<GroupSettings>, String> {
        let r = &config.replication;
        let Some(text) = &r.sites_handle else { return Ok(None) };
        if !r.pulls_from_group() {
            tracing::warn!(
                "replication_sites_handle is set but neither do_replication nor multi_primary: not pulling (as Handle.Net)"
            );
            return Ok(None);
        }
        if r.source.is_some() {
            return Err("replication_source (a mirror) and replication_sites_handle with do_replication (a \
                        multi-primary member) exclude each other"
                .into());
        }
        if !config.store_kind().dates_changes() {
            return Err(format!(
                "multi-primary replication needs the embedded (or memory) store, not {:?}: the store dates each \
                 change in the same commit as the change (docs/multi-primary.md)",
                config.store_kind()
            ));
        }
        let handle = text.trim();
        if !handle.contains('/') || handle.bytes().any(|b| b.is_ascii_control()) {
            return Err(format!("replication_sites_handle {text:?} is not a handle"));
        }
        Ok(Some(GroupSettings {
            sites_handle: handle.as_bytes().to_vec(),
            resolver: r.resolver.clone(),
            credentials: crate::replication::mirror::settings::identity(r)?,
            interval: Duration::from_millis(r.interval_ms.max(1)),
            timeout: Duration::from_millis(r.timeout_ms.max(100)),
        }))
    }
}

/// Join the group (before serving): this server's priority is set from the
/// sites handle if our store holds it (else kept from the last run, or set by
/// the first cycle that finds it, at `replication_resolver` if need be: a
/// resolver out of reach does not hold up the start), then the pull loop starts.
pub async fn start(
    state: &Arc<ReplicationContext>,
    settings: GroupSettings,
    stop: &crate::lifecycle::Stop,
) -> Result<(), StoreError> {
    match group::find(state, &settings, false).await {
        Ok(g) => set_priority(state.records(), Some(g.own_priority)).await?,
        Err(e) => tracing::warn!("multi-primary: {e}; trying again every cycle"),
    }
    stop.spawn_until_draining(run(state.clone(), settings));
    Ok(())
}

/// A server that is not (or no longer) a member stops dating its writes.
pub async fn leave(store: &dyn RecordStore) -> Result<(), StoreError> {
    set_priority(store, None).await
}

/// Record this server's priority (local writes are dated while it is set).
async fn set_priority(store: &dyn RecordStore, priority: Option<i32>) -> Result<(), StoreError> {
    let stored = store.meta_get(LOCAL_PRIORITY_META_KEY).await?;
    let now = stored.as_deref().map(decode_priority).transpose()?;
    if now != priority {
        store.meta_put(LOCAL_PRIORITY_META_KEY, priority.map(|p| p.to_be_bytes().to_vec())).await?;
        if let Some(p) = priority {
            tracing::info!("multi-primary: this server's priority is {p}");
        }
    }
    Ok(())
}

/// The pull loop: every peer once per interval, until the server stops.
async fn run(state: Arc<ReplicationContext>, settings: GroupSettings) {
    let mut statuses: HashMap<String, Arc<MirrorStatus>> = HashMap::new();
    let mut failures = 0u32;
    loop {
        let pause = match cycle(&state, &settings, &mut statuses).await {
            Ok(()) => {
                failures = 0;
                settings.interval
            }
            Err(e) => {
                failures += 1;
                tracing::warn!("multi-primary: {e}");
                Duration::from_secs(1u64 << failures.min(6))
                    .min(MAX_BACKOFF)
                    .min(settings.interval.max(Duration::from_secs(1)))
            }
        };
        tokio::time::sleep(pause).await;
    }
}

async fn cycle(
    state: &ReplicationContext,
    settings: &GroupSettings,
    statuses: &mut HashMap<String, Arc<MirrorStatus>>,
) -> Result<(), String> {
    let group = group::find(state, settings, true).await?;
    set_priority(state.records(), Some(group.own_priority)).await.map_err(|e| e.to_string())?;
    for peer in &group.peers {
        let status = match statuses.get(&peer.queue) {
            Some(s) => s.clone(),
            // The sites handle is a replicated handle: however often it is
            // rewritten, the peers shown in the metrics stay bounded.
            None if statuses.len() >= MAX_SHOWN => Arc::new(MirrorStatus::new(peer.queue.clone(), false)),
            None => {
                let status = Arc::new(MirrorStatus::new(peer.queue.clone(), false));
                let scrape = status.clone();
                state.metrics.add_scrape_hook(Box::new(move |r| scrape.register(r)));
                statuses.insert(peer.queue.clone(), status.clone());
                status
            }
        };
        // One peer down does not hold up the others.
        if let Err(e) = pull_peer(state, settings, peer, &status).await {
            tracing::warn!("multi-primary: pulling from {} ({}): {e}", peer.queue, peer.server.addr);
            status.update(|s| {
                s.pull_errors += 1;
                s.last_error = Some(e.to_string());
            });
        }
    }
    Ok(())
}

async fn pull_peer(
    state: &ReplicationContext,
    settings: &GroupSettings,
    peer: &group::Peer,
    status: &MirrorStatus,
) -> Result<(), MirrorError> {
    let key = format!("{PULL_PREFIX}{}", peer.queue);
    let progress = match state.records().meta_get(&key).await? {
        Some(raw) => decode::<PullProgress>(&key, &raw).map_err(MirrorError::Source)?,
        // A new member starts from the peer's first transaction.
        None => PullProgress { source: peer.queue.clone(), last_txn_id: 0, last_query_date_ms: 0 },
    };
    status.update(|s| {
        s.last_txn_id = progress.last_txn_id;
        if s.phase != Phase::Redumping {
            s.phase = Phase::Pulling;
        }
    });
    let keep_as = state.settings.replication.keep_other_transactions.then(|| peer.queue.clone());
    let queue = Queue { key, priority: Some(peer.priority), keep_as };
    pull::run(state, &peer.server, &settings.credentials, status, (&queue, progress), None).await?;
    status.update(|s| s.last_pull_ms = handled_store::clock::machine_ms());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(f: impl FnOnce(&mut Config)) -> Config {
        let mut c = Config::default();
        c.replication.sites_handle = Some("0.NA/TEST".into());
        c.replication.authentication = Some("secretkey:300:TEST/ADMIN".into());
        c.replication.secret = Some("s".into());
        f(&mut c);
        c
    }

    #[test]
    fn who_is_a_member() {
        let plain = config(|_| {});
        assert!(GroupSettings::from_config(&plain).unwrap().is_none(), "a sites handle alone pulls nothing");
        let member = config(|c| c.replication.multi_primary = true);
        assert_eq!(GroupSettings::from_config(&member).unwrap().unwrap().sites_handle, b"0.NA/TEST");
        let by_key = config(|c| c.replication.do_replication = Some(true));
        assert!(GroupSettings::from_config(&by_key).unwrap().is_some());
        let off = config(|c| {
            c.replication.multi_primary = true;
            c.replication.do_replication = Some(false);
        });
        assert!(GroupSettings::from_config(&off).unwrap().is_none(), "do_replication = false wins");
    }

    #[test]
    fn refusals_say_why() {
        // Multi-primary with each of these: the refusal says all of its words.
        type Case = (fn(&mut Config), &'static [&'static str]);
        let cases: [Case; 4] = [
            (|c| c.replication.source = Some("127.0.0.1:2641".into()), &["exclude each other"]),
            (|c| c.storage.store = crate::config::StoreKind::Cassandra, &["embedded", "Cassandra"]),
            (|c| c.replication.sites_handle = Some("no-slash".into()), &["not a handle"]),
            (|c| c.replication.authentication = None, &["needs an identity"]),
        ];
        for (tweak, words) in cases {
            let c = config(|c| {
                c.replication.multi_primary = true;
                tweak(c);
            });
            let e = GroupSettings::from_config(&c).err().unwrap();
            assert!(words.iter().all(|w| e.contains(w)), "{e}");
        }
    }
}
