//! Changes another primary dated in our future (issue 41 S6;
//! docs/multi-primary.md, "Clocks"). A peer whose clock is ahead dates its
//! changes ahead, and by the conflict rule they beat every change dated
//! before them. Such a change is **held**, not clamped: the pull from that
//! peer stops just before it and asks again every cycle, and it is applied,
//! with its own date, once our clock is within `replication_max_clock_skew_ms`
//! of it. Every member then still applies every change with the date its
//! origin gave it, so the group converges as the rule says; a clamped date
//! would differ from the origin's, which keeps its own, and the two would
//! disagree on any later change dated in between.
//!
//! A date beyond [`MAX_DATE_MS`] is refused for good: no clock reaches it,
//! and Handle.Net peers read it as negative, older than any change.

use crate::replication_status::mirror::MirrorStatus;
use handled_proto::replication::TxnRecord;
use handled_store::change_dates::MAX_DATE_MS;
use handled_store::clock::now_ms;

/// One logged line a minute per peer at most: a flood of future-dated
/// changes is re-met at every cycle.
const WARN_EVERY_MS: u64 = 60_000;

/// What a pull does with a peer's change, by its date.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    Apply,
    /// Dated too far ahead of our clock: stop before it, ask again later.
    Hold {
        ahead_ms: u64,
    },
    /// Dated beyond any clock: skip it for good.
    Refuse,
}

/// The verdict on a change dated `date_ms` at our clock's `now_ms`.
pub fn verdict(date_ms: u64, now_ms: u64, max_skew_ms: u64) -> Verdict {
    if date_ms > MAX_DATE_MS {
        Verdict::Refuse
    } else if date_ms > now_ms.saturating_add(max_skew_ms) {
        Verdict::Hold { ahead_ms: date_ms - now_ms }
    } else {
        Verdict::Apply
    }
}

/// [`verdict`] on a record pulled from the peer `peer` (its queue name) now,
/// counted in its status and logged (rate-limited).
pub fn judge(max_skew_ms: u64, status: &MirrorStatus, peer: &str, r: &TxnRecord) -> Verdict {
    let now = now_ms();
    let v = verdict(r.date_ms, now, max_skew_ms);
    let mut warn = false;
    status.update(|s| {
        match v {
            Verdict::Apply => return,
            Verdict::Hold { ahead_ms } => s.held_ahead_ms = ahead_ms,
            Verdict::Refuse => s.refused_dates += 1,
        }
        warn = now.saturating_sub(s.date_warned_ms) >= WARN_EVERY_MS;
        if warn {
            s.date_warned_ms = now;
        }
    });
    if warn {
        let handle = String::from_utf8_lossy(&r.handle);
        match v {
            Verdict::Hold { ahead_ms } => tracing::warn!(
                "multi-primary: {peer} dated txn {} ({handle:?}) {} s ahead of our clock, beyond \
                 replication_max_clock_skew_ms: pulling from it waits until the date comes (check that \
                 server's clock; docs/multi-primary.md, \"Clocks\")",
                r.txn_id,
                ahead_ms / 1000
            ),
            _ => tracing::warn!(
                "multi-primary: {peer} dated txn {} ({handle:?}) {} ms, beyond 2^63-1: refused (a Handle.Net \
                 peer reads it as negative)",
                r.txn_id,
                r.date_ms
            ),
        }
    }
    v
}

/// A pull from the peer of `status` ended without holding anything.
pub fn none_held(status: &MirrorStatus) {
    status.update(|s| s.held_ahead_ms = 0);
}

#[cfg(test)]
mod tests {
    use super::*;
    use handled_proto::replication::TxnAction;

    #[test]
    fn dates_beyond_the_skew_wait_and_beyond_java_are_refused() {
        let (now, skew) = (1_000_000, 300_000);
        assert_eq!(verdict(now, now, skew), Verdict::Apply);
        assert_eq!(verdict(now + skew, now, skew), Verdict::Apply, "the skew itself is allowed");
        assert_eq!(verdict(0, now, skew), Verdict::Apply, "the past is the rule's business");
        assert_eq!(verdict(now + skew + 1, now, skew), Verdict::Hold { ahead_ms: skew + 1 });
        assert_eq!(verdict(now + 3_600_000, now, skew), Verdict::Hold { ahead_ms: 3_600_000 });
        assert_eq!(verdict(MAX_DATE_MS + 1, now, skew), Verdict::Refuse);
        assert_eq!(verdict(u64::MAX, now, u64::MAX), Verdict::Refuse, "no skew lets them in");
        assert_eq!(verdict(MAX_DATE_MS, now, u64::MAX), Verdict::Apply);
    }

    #[test]
    fn a_flood_is_logged_once_a_minute_and_counted() {
        let status = MirrorStatus::new("0:2:TEST/SITES".into(), false);
        let record = |date_ms| TxnRecord {
            txn_id: 7,
            handle: b"TEST/x".to_vec(),
            action: TxnAction::UPDATE,
            date_ms,
            values: None,
        };
        let ahead = now_ms() + 3_600_000;
        for _ in 0..3 {
            assert!(matches!(judge(300_000, &status, "p", &record(ahead)), Verdict::Hold { .. }));
        }
        let warned = status.snapshot().date_warned_ms;
        assert!(warned > 0 && status.snapshot().held_ahead_ms > 3_000_000);
        assert_eq!(judge(300_000, &status, "p", &record(u64::MAX)), Verdict::Refuse);
        assert_eq!((status.snapshot().refused_dates, status.snapshot().date_warned_ms), (1, warned), "within a minute");
        none_held(&status);
        assert_eq!(status.snapshot().held_ahead_ms, 0);
    }
}
