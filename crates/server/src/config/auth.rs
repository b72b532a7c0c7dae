//! What authentication may cost (sessions, challenges, proof checks, remote
//! identity checks), who may take backups, and admin references as written.

use super::ConfigError;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct AuthConfig {
    /// Who may ask for a checkpoint (BACKUP_SERVER), besides `server_admins`.
    pub backup_admins: Vec<String>,
    /// Longest time one remote identity check (site lookups and the
    /// verification itself) may take before it fails (406).
    pub remote_auth_timeout_ms: u64,
    /// Remote identity checks in progress at once; beyond them (after a short
    /// wait) too busy.
    pub remote_auth_concurrent: usize,
    /// Longest idle time of a session; clients ask for a timeout (86 400 s by
    /// default) and get at most this.
    pub max_session_secs: u64,
    /// Longest life of a session that has not (yet) authenticated, from its
    /// setup; once authenticated it lives up to `max_session_secs` idle.
    pub unauthenticated_session_secs: u64,
    /// Memory for unauthenticated sessions, in MiB; when spent, the oldest
    /// unauthenticated session is ended to make room.
    pub session_budget_mb: usize,
    /// Unauthenticated sessions one peer (IPv4 address or IPv6 /64) may hold.
    /// Behind a TCP balancer every client has the balancer's address: raise it
    /// (and `challenges_per_peer`) there.
    pub sessions_per_peer: usize,
    /// How long a challenge waits for its answer.
    pub challenge_timeout_secs: u64,
    /// Memory for pending challenges (each keeps the challenged request, up to
    /// 256 KiB), in MiB; beyond it new challenges are refused as too busy.
    pub challenge_budget_mb: usize,
    /// Pending challenges one peer (IPv4 address or IPv6 /64) may hold.
    pub challenges_per_peer: usize,
    /// Most PBKDF2 work the server does for one secret-key answer, in
    /// iterations of 160 bits (iterations × ⌈key bits / 160⌉); the Java client
    /// sends 10,000 × 160. Answers asking for more fail authentication.
    pub max_pbkdf2_iterations: u32,
    /// CPU-heavy proof checks (PBKDF2, signatures) run at once, apart from
    /// request admission; beyond them (after a short wait) too busy.
    pub auth_workers: usize,
}

impl Default for AuthConfig {
    fn default() -> Self {
        AuthConfig {
            backup_admins: Vec::new(),
            remote_auth_timeout_ms: 5_000,
            remote_auth_concurrent: 4,
            max_session_secs: 86_400,
            unauthenticated_session_secs: 30,
            session_budget_mb: 16,
            sessions_per_peer: 256,
            challenge_timeout_secs: 60,
            challenge_budget_mb: 32,
            challenges_per_peer: 256,
            max_pbkdf2_iterations: 10_000,
            auth_workers: 1,
        }
    }
}

/// A list of admin references (`server_admins`, `replication_admins`, ...).
pub fn parse_admin_list(list: &[String]) -> Result<Vec<(Vec<u8>, i32)>, ConfigError> {
    list.iter().map(|a| parse_admin_ref(a)).collect()
}

/// `300:TEST/ADMIN` or `TEST/ADMIN` (index 0).
pub fn parse_admin_ref(text: &str) -> Result<(Vec<u8>, i32), ConfigError> {
    let bad = || ConfigError::Invalid(format!("bad admin reference {text:?}: expected INDEX:PREFIX/SUFFIX"));
    let (index, handle) = match text.split_once(':') {
        Some((i, h)) if !i.is_empty() && i.bytes().all(|b| b.is_ascii_digit()) => (i.parse().map_err(|_| bad())?, h),
        _ => (0, text),
    };
    if !handle.contains('/') || handle.starts_with('/') {
        return Err(bad());
    }
    Ok((handle.as_bytes().to_vec(), index))
}
