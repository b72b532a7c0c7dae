//! Multi-primary conflict dates (Handle.Net's `replicationDb`, Technical
//! Manual §3.7.6 and §7.3; docs/multi-primary.md).
//!
//! Several primaries take writes and pull each other's transaction logs; a
//! handle changed on two of them settles, on every member, on the change with
//! the higher `(date, priority)`: a pulled change is applied iff
//! `date > last.date || (date == last.date && priority >= last.priority)`, and
//! a local write is dated `max(now, last.date + 1)`, so it always moves the
//! handle forward. `priority` is the index of the writing primary's HS_SITE
//! value in `replication_sites_handle`.
//!
//! The last `(date, priority)` of each handle (and of each homed prefix) is
//! kept in the meta table under [`DATES_META_PREFIX`], written by the store in
//! the same atomic commit as the change it dates. A delete keeps its date (the
//! record is gone, the date stays: a tombstone), so an older change that
//! arrives later does not bring the handle back (Handle.Net 9.0.0 keeps no
//! date for a deleted handle and does bring it back; docs/multi-primary.md). Local writes are dated only
//! while [`LOCAL_PRIORITY_META_KEY`] is set, i.e. while the server is a
//! multi-primary member.

use crate::clock::now_ms;
use crate::{StoreError, TxnAction, TxnEntry};

/// Meta-key prefix of the dates: `replication/dates/h/<hex handle>` and
/// `replication/dates/na/<hex prefix handle>`.
pub const DATES_META_PREFIX: &str = "replication/dates/";
/// This server's own priority (i32 BE), set while it is a multi-primary
/// member: local writes are dated while it is there.
pub const LOCAL_PRIORITY_META_KEY: &str = "replication/multi-primary/priority";
/// The latest date a change may carry: Java's dates are `long`s, so a later
/// one reads negative at a Handle.Net peer (older than any change there).
pub const MAX_DATE_MS: u64 = i64::MAX as u64;

/// When a handle (or prefix) last changed, and by which primary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChangeDate {
    pub date_ms: u64,
    pub priority: i32,
}

impl ChangeDate {
    const ENCODED: usize = 12;

    /// Handle.Net's rule: does a change dated `self` win over the last one?
    pub fn supersedes(&self, last: Option<ChangeDate>) -> bool {
        match last {
            None => true,
            Some(l) => self.date_ms > l.date_ms || (self.date_ms == l.date_ms && self.priority >= l.priority),
        }
    }

    /// The date of a local write at `now_ms`: never before the last change + 1 ms,
    /// never after [`MAX_DATE_MS`]. Pulled dates are held to now + the allowed
    /// clock skew, so the cap is only reached from a date stored before that
    /// bound existed; the write then ties and its priority decides.
    pub fn local(now_ms: u64, last: Option<ChangeDate>, priority: i32) -> ChangeDate {
        let floor = last.map_or(0, |l| l.date_ms.saturating_add(1));
        ChangeDate { date_ms: now_ms.max(floor).min(MAX_DATE_MS), priority }
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(Self::ENCODED);
        out.extend_from_slice(&self.date_ms.to_be_bytes());
        out.extend_from_slice(&self.priority.to_be_bytes());
        out
    }

    pub fn decode(key: &str, b: &[u8]) -> Result<ChangeDate, StoreError> {
        if b.len() != Self::ENCODED {
            return Err(StoreError::Corrupt(format!("meta {key}: malformed change date")));
        }
        let date_ms = u64::from_be_bytes(b[..8].try_into().expect("8 bytes"));
        let priority = i32::from_be_bytes(b[8..].try_into().expect("4 bytes"));
        Ok(ChangeDate { date_ms, priority })
    }
}

/// The meta key dating `handle` for a change of kind `action` (prefixes,
/// HOME/UNHOME, have their own space, as Handle.Net's `nasDates`).
pub fn date_meta_key(action: TxnAction, handle: &[u8]) -> String {
    let space = match action {
        TxnAction::HomeNa | TxnAction::UnhomeNa => "na/",
        _ => "h/",
    };
    let mut key = String::with_capacity(DATES_META_PREFIX.len() + 3 + 2 * handle.len());
    key.push_str(DATES_META_PREFIX);
    key.push_str(space);
    for b in handle {
        key.push_str(&format!("{b:02x}"));
    }
    key
}

/// The local priority as stored under [`LOCAL_PRIORITY_META_KEY`].
pub fn decode_priority(b: &[u8]) -> Result<i32, StoreError> {
    let raw: [u8; 4] =
        b.try_into().map_err(|_| StoreError::Corrupt(format!("meta {LOCAL_PRIORITY_META_KEY}: malformed priority")))?;
    Ok(i32::from_be_bytes(raw))
}

/// A meta write (key, value) a backend commits with a change.
pub(crate) type DateWrite = (String, Vec<u8>);

/// The date of a local change (`priority` = this server's, when dating is
/// on) and the meta write recording it; `get` reads a meta value as the
/// commit sees it. `None` when dating is off.
pub(crate) fn date_local(
    priority: Option<i32>,
    action: TxnAction,
    handle: &[u8],
    get: impl FnOnce(&str) -> Result<Option<Vec<u8>>, StoreError>,
) -> Result<Option<(u64, DateWrite)>, StoreError> {
    let Some(priority) = priority else { return Ok(None) };
    let key = date_meta_key(action, handle);
    let last = get(&key)?.map(|b| ChangeDate::decode(&key, &b)).transpose()?;
    let date = ChangeDate::local(now_ms(), last, priority);
    Ok(Some((date.date_ms, (key, date.encode()))))
}

/// Whether a pulled change from the primary of `priority` is applied, and
/// the meta write dating it if so.
pub(crate) fn date_pulled(
    entry: &TxnEntry,
    priority: i32,
    get: impl FnOnce(&str) -> Result<Option<Vec<u8>>, StoreError>,
) -> Result<Option<DateWrite>, StoreError> {
    let key = date_meta_key(entry.action, &entry.handle);
    let last = get(&key)?.map(|b| ChangeDate::decode(&key, &b)).transpose()?;
    let date = ChangeDate { date_ms: entry.date_ms, priority };
    Ok(date.supersedes(last).then(|| (key, date.encode())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rule_is_handle_nets() {
        let d = |date_ms, priority| ChangeDate { date_ms, priority };
        assert!(d(5, 0).supersedes(None));
        assert!(d(6, 0).supersedes(Some(d(5, 9))), "newer wins whatever the priority");
        assert!(!d(4, 9).supersedes(Some(d(5, 0))), "older loses whatever the priority");
        assert!(d(5, 2).supersedes(Some(d(5, 1))) && d(5, 1).supersedes(Some(d(5, 1))));
        assert!(!d(5, 1).supersedes(Some(d(5, 2))), "a tie goes to the higher priority");
        assert_eq!(ChangeDate::local(100, Some(d(500, 3)), 1), d(501, 1), "after a peer's clock ahead");
        assert_eq!(ChangeDate::local(100, Some(d(50, 3)), 1), d(100, 1));
        assert_eq!(ChangeDate::local(7, None, 2), d(7, 2));
        // Issue 41 S6: after a date at (or beyond) Java's last one, a local
        // write stays readable by Handle.Net peers instead of saturating at u64::MAX.
        assert_eq!(ChangeDate::local(100, Some(d(u64::MAX, 3)), 1), d(MAX_DATE_MS, 1));
        assert_eq!(ChangeDate::local(100, Some(d(MAX_DATE_MS, 3)), 1), d(MAX_DATE_MS, 1));
        assert_eq!(ChangeDate::local(u64::MAX, None, 1), d(MAX_DATE_MS, 1), "a clock beyond Java's dates");
        assert_eq!(ChangeDate::decode("k", &d(u64::MAX, -1).encode()).unwrap(), d(u64::MAX, -1));
        assert!(ChangeDate::decode("k", b"short").is_err());
    }

    #[test]
    fn handles_and_prefixes_are_dated_apart() {
        assert_eq!(date_meta_key(TxnAction::Update, b"T/1"), "replication/dates/h/542f31");
        assert_eq!(date_meta_key(TxnAction::Delete, b"T/1"), date_meta_key(TxnAction::Create, b"T/1"));
        assert_eq!(date_meta_key(TxnAction::HomeNa, b"0.NA/T"), date_meta_key(TxnAction::UnhomeNa, b"0.NA/T"));
        assert_ne!(date_meta_key(TxnAction::HomeNa, b"0.NA/T"), date_meta_key(TxnAction::Update, b"0.NA/T"));
    }
}
