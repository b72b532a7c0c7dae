//! What the server logs about its peers: an access line per request (every
//! transport; all, one in N, or none, as `access_log` says; shown with
//! `HANDLED_LOG=...,access=info`) and failed authentications (target
//! `auth`, at most [`AUTH_LINES_PER_SEC`] lines a second, the rest counted).

use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Failed authentications logged per second at most; a flood of wrong keys
/// must not become a flood of log lines.
pub const AUTH_LINES_PER_SEC: u64 = 10;

/// Which requests get an access line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AccessLogMode {
    Off,
    /// One request in `access_log_sample_every`.
    Sampled,
    #[default]
    Full,
}

/// The server's log policy and its counters.
pub struct Logs {
    mode: AccessLogMode,
    sample_every: u64,
    requests: AtomicU64,
    auth: Mutex<AuthWindow>,
}

struct AuthWindow {
    started: Instant,
    logged: u64,
    suppressed: u64,
}

impl Logs {
    pub fn new(mode: AccessLogMode, sample_every: u64) -> Logs {
        Logs {
            mode,
            sample_every: sample_every.max(1),
            requests: AtomicU64::new(0),
            auth: Mutex::new(AuthWindow { started: Instant::now(), logged: 0, suppressed: 0 }),
        }
    }

    /// Should this request get an access line? (Cheap when access lines are filtered out.)
    pub fn wants_access_line(&self) -> bool {
        if !tracing::enabled!(target: "access", tracing::Level::INFO) {
            return false;
        }
        match self.mode {
            AccessLogMode::Off => false,
            AccessLogMode::Full => true,
            AccessLogMode::Sampled => self.requests.fetch_add(1, Ordering::Relaxed).is_multiple_of(self.sample_every),
        }
    }

    /// Log a failed authentication of `identity` from `peer`, unless this
    /// second's share is used up; suppressed lines are counted in the next one.
    pub fn auth_failed(&self, identity: &str, peer: Option<SocketAddr>, reason: &str) {
        let suppressed_before = {
            let mut w = self.auth.lock().unwrap_or_else(|e| e.into_inner());
            if w.started.elapsed().as_secs() >= 1 {
                let suppressed = w.suppressed;
                *w = AuthWindow { started: Instant::now(), logged: 0, suppressed: 0 };
                w.logged = 1;
                suppressed
            } else if w.logged < AUTH_LINES_PER_SEC {
                w.logged += 1;
                0
            } else {
                w.suppressed += 1;
                return;
            }
        };
        let peer = peer.map_or_else(|| "-".to_string(), |p| p.to_string());
        if suppressed_before > 0 {
            tracing::warn!(target: "auth", suppressed = suppressed_before, "failed authentications not logged in the last second (rate limit)");
        }
        tracing::warn!(target: "auth", identity, %peer, reason, "authentication failed");
    }
}

/// A warning logged at most once per interval, with how many were held back.
pub struct ThrottledWarning {
    interval: Duration,
    last: Option<Instant>,
    held_back: u64,
}

impl ThrottledWarning {
    pub const fn new(interval: Duration) -> ThrottledWarning {
        ThrottledWarning { interval, last: None, held_back: 0 }
    }

    /// Log `message` unless one was logged less than an interval ago; returns
    /// whether it was logged.
    pub fn warn(&mut self, message: std::fmt::Arguments<'_>) -> bool {
        let now = Instant::now();
        if self.last.is_some_and(|t| now.duration_since(t) < self.interval) {
            self.held_back += 1;
            return false;
        }
        match std::mem::take(&mut self.held_back) {
            0 => tracing::warn!("{message}"),
            n => tracing::warn!("{message} ({n} more like it not logged)"),
        }
        self.last = Some(now);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warnings_are_held_back_within_the_interval() {
        let mut w = ThrottledWarning::new(Duration::from_secs(60));
        assert!(w.warn(format_args!("first")));
        assert!(!w.warn(format_args!("second")));
        assert!(!w.warn(format_args!("third")));
        assert_eq!(w.held_back, 2);
        w.last = Some(Instant::now() - Duration::from_secs(61));
        assert!(w.warn(format_args!("fourth")));
        assert_eq!(w.held_back, 0);
    }

    #[test]
    fn auth_failures_are_rate_limited() {
        let logs = Logs::new(AccessLogMode::Off, 1);
        for _ in 0..AUTH_LINES_PER_SEC + 5 {
            logs.auth_failed("300:TEST/ADMIN", None, "wrong key");
        }
        let w = logs.auth.lock().unwrap();
        assert_eq!((w.logged, w.suppressed), (AUTH_LINES_PER_SEC, 5));
    }
}
