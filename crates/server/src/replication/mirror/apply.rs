//! Turning what a source sends into store changes, and committing them in
//! batches together with the progress that accounts for them.

use crate::state::ServerState;
use handled_proto::handle;
use handled_proto::replication::TxnAction as WireAction;
use handled_proto::value::HandleValue;
use handled_store::{HandleRecord, ReplicatedChange, TxnAction, TxnEntry};

/// Records committed together (one atomic store commit with their progress).
pub const BATCH_RECORDS: usize = 500;
/// ...or fewer, when they add up to this many bytes of values.
pub const BATCH_BYTES: usize = 4 << 20;

/// Changes waiting for their commit.
#[derive(Default)]
pub struct Batch {
    pub changes: Vec<ReplicatedChange>,
    bytes: usize,
}

impl Batch {
    pub fn push(&mut self, change: ReplicatedChange) {
        self.bytes += change.entry.handle.len() + change.record.as_ref().map_or(0, |r| r.encoded_len());
        self.changes.push(change);
    }

    pub fn is_full(&self) -> bool {
        self.changes.len() >= BATCH_RECORDS || self.bytes >= BATCH_BYTES
    }

    pub fn is_empty(&self) -> bool {
        self.changes.is_empty()
    }

    /// Commit the changes and `progress` atomically, then tell the request
    /// handlers about prefixes homed or unhomed.
    pub async fn commit(
        &mut self,
        state: &ServerState,
        progress: Vec<(String, Option<Vec<u8>>)>,
    ) -> Result<usize, handled_store::StoreError> {
        let changes = std::mem::take(&mut self.changes);
        self.bytes = 0;
        let homing: Vec<(Vec<u8>, bool)> = changes
            .iter()
            .filter_map(|c| match c.entry.action {
                TxnAction::HomeNa => Some((c.entry.handle.clone(), true)),
                TxnAction::UnhomeNa => Some((c.entry.handle.clone(), false)),
                _ => None,
            })
            .collect();
        let n = changes.len();
        state.store.apply_replicated(changes, progress).await?;
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
    state: &ServerState,
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
    ReplicatedChange { entry: TxnEntry { id, date_ms, action, handle: key }, record }
}

/// A homed (or unhomed) prefix.
pub fn homing(id: u64, date_ms: u64, na: &[u8], homed: bool) -> ReplicatedChange {
    let action = if homed { TxnAction::HomeNa } else { TxnAction::UnhomeNa };
    ReplicatedChange { entry: TxnEntry { id, date_ms, action, handle: prefix_key(na) }, record: None }
}

/// What to do with one record of the transaction stream.
pub enum Pulled {
    Change(ReplicatedChange),
    /// Nothing to apply (a placeholder).
    Skip,
    /// DELETE_ALL: the source dropped everything; only a redump can follow it.
    DeleteAll,
}

pub fn pulled(state: &ServerState, r: handled_proto::replication::TxnRecord) -> Pulled {
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
}
