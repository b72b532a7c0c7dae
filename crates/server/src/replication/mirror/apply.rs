//! Turning what a source sends into store changes, and committing them in
//! batches together with the progress that accounts for them.

use crate::replication::ReplicationContext;
use handled_proto::handle;
use handled_proto::replication::TxnAction as WireAction;
use handled_proto::value::HandleValue;
use handled_store::{DocWrite, HandleRecord, ReplicatedChange, TxnAction, TxnEntry};

/// Records committed together (one atomic store commit with their progress).
pub const BATCH_RECORDS: usize = 500;
/// ...or fewer, when they add up to this many bytes of values.
pub const BATCH_BYTES: usize = 4 << 20;

/// Changes waiting for their commit.
#[derive(Default)]
pub struct Batch {
    pub changes: Vec<ReplicatedChange>,
    bytes: usize,
    /// Document writes in the same commit (a redump's marks).
    docs: Vec<DocWrite>,
}

impl Batch {
    pub fn push(&mut self, change: ReplicatedChange) {
        self.bytes += change.entry.handle.len() + change.record.as_ref().map_or(0, |r| r.encoded_len());
        self.changes.push(change);
    }

    /// Write `doc` in the same commit as the changes.
    pub fn mark(&mut self, doc: DocWrite) {
        self.bytes += doc.id.len();
        self.docs.push(doc);
    }

    pub fn is_full(&self) -> bool {
        self.changes.len() >= BATCH_RECORDS || self.bytes >= BATCH_BYTES
    }

    pub fn is_empty(&self) -> bool {
        self.changes.is_empty() && self.docs.is_empty()
    }

    /// Commit the changes and `progress` atomically, then tell the request
    /// handlers about prefixes homed or unhomed.
    pub async fn commit(
        &mut self,
        state: &ReplicationContext,
        progress: Vec<(String, Option<Vec<u8>>)>,
    ) -> Result<usize, handled_store::StoreError> {
        let changes = std::mem::take(&mut self.changes);
        let docs = std::mem::take(&mut self.docs);
        self.bytes = 0;
        let changes = crate::replication::multi_primary::winners::newer_only(state.records(), changes).await?;
        let homing: Vec<(Vec<u8>, bool)> = changes
            .iter()
            .filter_map(|c| match c.entry.action {
                TxnAction::HomeNa => Some((c.entry.handle.clone(), true)),
                TxnAction::UnhomeNa => Some((c.entry.handle.clone(), false)),
                _ => None,
            })
            .collect();
        let n = changes.len();
        state.txn_log().apply_replicated_with_docs(changes, progress, docs).await?;
        for (prefix, homed) in homing {
            state.set_homed(prefix, homed);
        }
        Ok(n)
    }
}

/// The normalized prefix handle (`0.NA/X`) of a HOME/UNHOME or dumped homed
/// prefix, which sources may send with or without `0.NA/`.
pub fn prefix_key(na: &[u8]) -> Vec<u8> {
    let canonical = handle::canonical(na);
    if handle::is_prefix_handle(&canonical) {
        handle::normalize(&canonical, false)
    } else {
        handle::normalize(&[handle::NA_HANDLE_PREFIX, &canonical].concat(), false)
    }
}

/// A handle's state as sent (a dump record, or a create/update with the
/// values current at the source): no values means it is gone.
pub fn handle_state(
    state: &ReplicationContext,
    id: u64,
    date_ms: u64,
    h: &[u8],
    values: Vec<HandleValue>,
) -> ReplicatedChange {
    let key = state.storage_key(h);
    let (action, record) = if values.is_empty() {
        (TxnAction::Delete, None)
    } else {
        (TxnAction::Update, Some(HandleRecord::named(values, &handle::canonical(h), &key)))
    };
    ReplicatedChange { entry: TxnEntry { id, date_ms, action, handle: key }, record, priority: None }
}

/// A homed (or unhomed) prefix.
pub fn homing(id: u64, date_ms: u64, na: &[u8], homed: bool) -> ReplicatedChange {
    let action = if homed { TxnAction::HomeNa } else { TxnAction::UnhomeNa };
    ReplicatedChange { entry: TxnEntry { id, date_ms, action, handle: prefix_key(na) }, record: None, priority: None }
}

/// Does this mirror take `change` from its source (issue 25 R13)? Prefixes
/// homed must be well-formed and, with `replication_prefixes`, listed there;
/// a prefix of this server's own `prefixes` is never unhomed by a source;
/// with `replication_prefixes`, handles of other prefixes are not taken.
pub fn admitted(state: &ReplicationContext, change: &ReplicatedChange) -> bool {
    let config = &state.settings;
    let taken = match change.entry.action {
        TxnAction::HomeNa | TxnAction::UnhomeNa => {
            let prefix = change.entry.handle.get(handle::NA_HANDLE_PREFIX.len()..).unwrap_or_default();
            let prefix = String::from_utf8_lossy(prefix);
            let own = config.prefixes.iter().any(|p| p.eq_ignore_ascii_case(&prefix));
            crate::config::is_prefix_name(&prefix)
                && !(change.entry.action == TxnAction::UnhomeNa && own)
                && listed(&config.replication.prefixes, &prefix)
        }
        _ => {
            let (prefix, suffix) = handle::split(&change.entry.handle);
            // A prefix handle `0.NA/X` belongs to X.
            let prefix = match suffix {
                Some(s) if prefix.eq_ignore_ascii_case(b"0.NA") => s,
                _ => prefix,
            };
            listed(&config.replication.prefixes, &String::from_utf8_lossy(prefix))
        }
    };
    if !taken {
        tracing::warn!(
            "replication: {:?} of {:?} not taken from the source (replication_prefixes, or a malformed or own prefix)",
            change.entry.action,
            String::from_utf8_lossy(&change.entry.handle)
        );
    }
    taken
}

/// Is `prefix` one of `list`, or a dotted child of one? An empty list takes all.
fn listed(list: &[String], prefix: &str) -> bool {
    list.is_empty()
        || list.iter().any(|p| {
            prefix.eq_ignore_ascii_case(p)
                || (prefix.len() > p.len()
                    && prefix.as_bytes()[p.len()] == b'.'
                    && prefix[..p.len()].eq_ignore_ascii_case(p))
        })
}

/// What to do with one record of the transaction stream.
pub enum Pulled {
    Change(ReplicatedChange),
    /// Nothing to apply (a placeholder).
    Skip,
    /// DELETE_ALL: the source dropped everything; only a redump can follow it.
    DeleteAll,
}

pub fn pulled(state: &ReplicationContext, r: handled_proto::replication::TxnRecord) -> Pulled {
    match wire_change(state, r) {
        Pulled::Change(c) if !admitted(state, &c) => Pulled::Skip,
        other => other,
    }
}

fn wire_change(state: &ReplicationContext, r: handled_proto::replication::TxnRecord) -> Pulled {
    let (id, date) = (r.txn_id, r.date_ms);
    match r.action {
        WireAction::CREATE | WireAction::UPDATE => {
            let mut change = handle_state(state, id, date, &r.handle, r.values.unwrap_or_default());
            if r.action == WireAction::CREATE && change.record.is_some() {
                change.entry.action = TxnAction::Create;
            }
            Pulled::Change(change)
        }
        WireAction::DELETE => Pulled::Change(handle_state(state, id, date, &r.handle, Vec::new())),
        WireAction::HOME_NA => Pulled::Change(homing(id, date, &r.handle, true)),
        WireAction::UNHOME_NA => Pulled::Change(homing(id, date, &r.handle, false)),
        WireAction::DELETE_ALL => Pulled::DeleteAll,
        _ => Pulled::Skip,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_with_or_without_na() {
        assert_eq!(prefix_key(b"0.NA/test"), prefix_key(b"TEST"));
        assert_eq!(prefix_key(b"0.na/20.5000"), b"0.NA/20.5000".to_vec());
    }

    async fn mirror_state(replication_prefixes: &[&str]) -> (std::sync::Arc<ReplicationContext>, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let mut config = crate::config::Config {
            ephemeral: true,
            admin_credentials: Some(dir.path().join("c.json")),
            ..crate::config::Config::default()
        };
        config.replication.prefixes = replication_prefixes.iter().map(|p| p.to_string()).collect();
        let store = crate::bootstrap::open_store(&config).await.unwrap();
        (crate::bootstrap::bootstrap(config, store).await.unwrap().state.replication.clone(), dir)
    }

    /// Issue 25 R13: a source homed `EVIL`, `0` and `""`, and unhomed the
    /// mirror's own `TEST`; with `replication_prefixes` it also sent handles
    /// of prefixes the mirror does not follow.
    #[tokio::test]
    async fn a_source_cannot_home_junk_or_unhome_our_own_prefixes() {
        let (state, _dir) = mirror_state(&[]).await;
        let home = |na: &[u8], on| admitted(&state, &homing(1, 0, na, on));
        assert!(home(b"EVIL", true), "no list: what the source homes");
        assert!(!home(b"", true) && !home(b"0.NA/", true) && !home(b"A B", true) && !home(b"X\n", true));
        assert!(!home(b"TEST", false) && !home(b"0.na/test", false), "the mirror's own prefix stays homed");
        assert!(home(b"EVIL", false));
        let put = |h: &[u8]| admitted(&state, &handle_state(&state, 1, 0, h, vec![HandleValue::new(1, "URL", "x")]));
        assert!(put(b"EVIL/x"));

        let (state, _dir) = mirror_state(&["20.5000"]).await;
        let home = |na: &[u8], on| admitted(&state, &homing(1, 0, na, on));
        assert!(
            home(b"20.5000", true) && home(b"0.NA/20.5000.1", true) && !home(b"EVIL", true) && !home(b"20.50001", true)
        );
        let put = |h: &[u8]| admitted(&state, &handle_state(&state, 1, 0, h, vec![HandleValue::new(1, "URL", "x")]));
        assert!(put(b"20.5000/abc") && put(b"20.5000.7/abc") && put(b"0.NA/20.5000"));
        assert!(!put(b"EVIL/x") && !put(b"0.NA/EVIL") && !put(b"TEST/x"));
    }

    #[test]
    fn listed_takes_dotted_children_only() {
        let list = ["20.5000".to_string()];
        assert!(listed(&list, "20.5000") && listed(&list, "20.5000.1"));
        assert!(!listed(&list, "20.50001") && !listed(&list, "20.500") && !listed(&list, ""));
        assert!(listed(&[], "anything"));
    }
}
