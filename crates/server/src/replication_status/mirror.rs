//! What the mirror is doing, for `/metrics`, `handled status` and the logs:
//! phase, last transaction applied, last pull, lag, dump progress.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// What the mirror is busy with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Starting,
    /// First copy of everything (DUMP_HANDLES), resumable.
    Dumping,
    /// Pulling the transaction log.
    Pulling,
    /// The source said NEED_TO_REDUMP: copying everything again while serving the old data.
    Redumping,
    /// Promoted to a primary: no more pulling, writes accepted.
    Promoted,
}

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::Starting => "starting",
            Phase::Dumping => "dumping",
            Phase::Pulling => "pulling",
            Phase::Redumping => "redumping",
            Phase::Promoted => "promoted",
        }
    }

    const ALL: [Phase; 5] = [Phase::Starting, Phase::Dumping, Phase::Pulling, Phase::Redumping, Phase::Promoted];
}

/// A copy of the figures at one moment.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub phase: Phase,
    /// Highest source transaction id applied (0: none yet).
    pub last_txn_id: u64,
    /// When the last pull (successful or not) ended, ms since the epoch (0: never).
    pub last_pull_ms: u64,
    /// When a pull last ended with everything the source had, ms since the epoch.
    pub caught_up_ms: u64,
    /// Records applied by the current (or last) dump.
    pub dump_records: u64,
    pub pull_errors: u64,
    pub redumps: u64,
    pub last_error: Option<String>,
    /// Multi-primary: how far ahead of our clock the change the pull waits
    /// on is dated, ms (0: none held).
    pub held_ahead_ms: u64,
    /// Multi-primary: changes refused for a date no Java peer can read.
    pub refused_dates: u64,
    /// When a held or refused date was last logged, ms since the epoch (rate limit).
    pub date_warned_ms: u64,
}

/// The mirror's status, shared with the request handlers (which refuse
/// writes while it is not promoted) and the metrics.
pub struct MirrorStatus {
    /// The configured source, as written.
    pub source: String,
    promoted: AtomicBool,
    inner: Mutex<Snapshot>,
    /// The pull loop, stopped at promotion.
    task: Mutex<Option<tokio::task::AbortHandle>>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SourceLabel {
    source: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PhaseLabels {
    source: String,
    phase: &'static str,
}

use handled_store::clock::machine_ms;

impl MirrorStatus {
    pub fn new(source: String, promoted: bool) -> Self {
        let phase = if promoted { Phase::Promoted } else { Phase::Starting };
        MirrorStatus {
            source,
            promoted: AtomicBool::new(promoted),
            inner: Mutex::new(Snapshot {
                phase,
                last_txn_id: 0,
                last_pull_ms: 0,
                // Until a pull catches up, the lag counts from the start.
                caught_up_ms: machine_ms(),
                dump_records: 0,
                pull_errors: 0,
                redumps: 0,
                last_error: None,
                held_ahead_ms: 0,
                refused_dates: 0,
                date_warned_ms: 0,
            }),
            task: Mutex::new(None),
        }
    }

    pub fn set_task(&self, task: tokio::task::AbortHandle) {
        *self.task.lock().unwrap_or_else(|e| e.into_inner()) = Some(task);
    }

    /// Stop the pull loop (a commit already handed to the store still lands,
    /// before anything written after this).
    pub fn stop_task(&self) {
        if let Some(t) = self.task.lock().unwrap_or_else(|e| e.into_inner()).take() {
            t.abort();
        }
    }

    /// Does this server refuse (or forward) writes, as a mirror does?
    pub fn is_read_only(&self) -> bool {
        !self.promoted.load(Ordering::Acquire)
    }

    pub fn set_promoted(&self) {
        self.promoted.store(true, Ordering::Release);
        self.update(|s| s.phase = Phase::Promoted);
    }

    pub fn snapshot(&self) -> Snapshot {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub fn update(&self, f: impl FnOnce(&mut Snapshot)) {
        f(&mut self.inner.lock().unwrap_or_else(|e| e.into_inner()));
    }

    /// Seconds the served data may be behind the source: since the last pull
    /// that found nothing more to take (or since start, before any).
    pub fn lag_seconds(&self, now_ms: u64) -> f64 {
        let s = self.snapshot();
        if s.phase == Phase::Promoted {
            return 0.0;
        }
        now_ms.saturating_sub(s.caught_up_ms) as f64 / 1000.0
    }

    /// Add the figures to a scrape.
    pub fn register(&self, r: &mut Registry) {
        let s = self.snapshot();
        let label = SourceLabel { source: self.source.clone() };
        let gauge = |v: i64| {
            let f: Family<SourceLabel, Gauge> = Family::default();
            f.get_or_create(&label).set(v);
            f
        };
        let float = |v: f64| {
            let f: Family<SourceLabel, Gauge<f64, std::sync::atomic::AtomicU64>> = Family::default();
            f.get_or_create(&label).set(v);
            f
        };
        r.register("replication_last_txn_id", "Highest source transaction id applied", gauge(s.last_txn_id as i64));
        r.register(
            "replication_last_pull_timestamp_seconds",
            "When the last pull from the source ended (Unix time)",
            float(s.last_pull_ms as f64 / 1000.0),
        );
        r.register(
            "replication_lag_seconds",
            "Seconds since a pull last found nothing more at the source",
            float(self.lag_seconds(machine_ms())),
        );
        r.register(
            "replication_dump_handles",
            "Records applied by the current or last dump",
            gauge(s.dump_records as i64),
        );
        r.register("replication_pull_errors", "Pulls or dumps that failed", gauge(s.pull_errors as i64));
        r.register("replication_redumps", "Redumps the source asked for", gauge(s.redumps as i64));
        r.register(
            "replication_held_change_ahead_seconds",
            "Multi-primary: how far beyond our clock the change the pull from this peer waits on is dated (0: none)",
            float(s.held_ahead_ms as f64 / 1000.0),
        );
        r.register(
            "replication_refused_dates",
            "Multi-primary: changes refused for a date beyond 2^63-1 ms",
            gauge(s.refused_dates as i64),
        );
        let phases: Family<PhaseLabels, Gauge> = Family::default();
        for p in Phase::ALL {
            phases
                .get_or_create(&PhaseLabels { source: self.source.clone(), phase: p.name() })
                .set((p == s.phase) as i64);
        }
        r.register("replication_phase", "What the mirror is doing (1 for the current phase)", phases);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_per_source_and_promotion() {
        let s = MirrorStatus::new("h:1".into(), false);
        assert!(s.is_read_only());
        s.update(|x| {
            x.phase = Phase::Pulling;
            x.last_txn_id = 42;
            x.caught_up_ms = machine_ms() - 2_000;
        });
        assert!((1.9..5.0).contains(&s.lag_seconds(machine_ms())));
        let mut r = Registry::with_prefix("handled");
        s.register(&mut r);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &r).unwrap();
        for line in [
            r#"handled_replication_last_txn_id{source="h:1"} 42"#,
            r#"handled_replication_phase{source="h:1",phase="pulling"} 1"#,
            r#"handled_replication_phase{source="h:1",phase="dumping"} 0"#,
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
        }
        s.set_promoted();
        assert!(!s.is_read_only());
        assert_eq!((s.snapshot().phase, s.lag_seconds(machine_ms())), (Phase::Promoted, 0.0));
    }
}
