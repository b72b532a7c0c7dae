//! The changes of a pulled batch that win by the multi-primary rule
//! (`handled_store::change_dates`), chosen before the commit so that what
//! rides along with it (reverse-index documents, cache invalidations) follows
//! the winners only. The store applies the same rule again inside the commit,
//! which is what decides: a local write landing in between only makes it
//! refuse one more change.

use handled_store::change_dates::{date_meta_key, ChangeDate};
use handled_store::{RecordStore, ReplicatedChange, StoreError};
use std::collections::HashMap;

/// `changes` without those older than the last change of their handle (or
/// prefix), stored or earlier in the batch. Mirror changes (no priority) all stay.
pub async fn newer_only(
    store: &dyn RecordStore,
    changes: Vec<ReplicatedChange>,
) -> Result<Vec<ReplicatedChange>, StoreError> {
    let mut last: HashMap<String, Option<ChangeDate>> = HashMap::new();
    let mut out = Vec::with_capacity(changes.len());
    for c in changes {
        let Some(priority) = c.priority else {
            out.push(c);
            continue;
        };
        let key = date_meta_key(c.entry.action, &c.entry.handle);
        let known = match last.get(&key) {
            Some(d) => *d,
            None => store.meta_get(&key).await?.map(|b| ChangeDate::decode(&key, &b)).transpose()?,
        };
        let date = ChangeDate { date_ms: c.entry.date_ms, priority };
        if date.supersedes(known) {
            last.insert(key, Some(date));
            out.push(c);
        } else {
            last.insert(key, known);
            tracing::debug!(
                "multi-primary: {:?} of {:?} dated {} is older than the last change: not applied",
                c.entry.action,
                String::from_utf8_lossy(&c.entry.handle),
                c.entry.date_ms
            );
        }
    }
    Ok(out)
}
