//! Replication (docs/replication.md): this server as a source (who may pull,
//! how many streams, how much log is kept) and as a mirror (where it pulls from,
//! as whom, how often). Handle.Net's key names.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct ReplicationConfig {
    /// Pull every handle from this replication source and serve it read-only:
    /// a site record file (Handle.Net's `siteinfo.json`, or `siteinfo.bin`), the
    /// `host:port` of the source's native TCP interface (its key is taken from
    /// its GET_SITE_INFO answer on first contact and pinned), or `index:handle`
    /// of an HS_SITE value (resolved at `replication_resolver`, else in our own
    /// store). Unset: this server is a primary.
    #[serde(rename = "replication_source")]
    pub source: Option<String>,
    /// Where to resolve an `index:handle` source, `host:port` (native TCP).
    #[serde(rename = "replication_resolver")]
    pub resolver: Option<String>,
    /// The mirror's identity, Handle.Net's form: `secretkey:INDEX:HANDLE` (the
    /// secret in `replication_secret`) or `privatekey:INDEX:HANDLE` (an RSA
    /// PKCS#8 key, DER or PEM, in `replication_private_key`). The source must
    /// list it in its `replication_admins` (or `server_admins`).
    #[serde(rename = "replication_authentication")]
    pub authentication: Option<String>,
    /// The secret of a `secretkey:` identity (or `HANDLED_REPLICATION_SECRET`).
    #[serde(rename = "replication_secret")]
    pub secret: Option<String>,
    #[serde(rename = "replication_private_key")]
    pub private_key: Option<PathBuf>,
    /// Or the identity as a credentials file `handled serve` writes
    /// (`admin-<prefix>.json`), with `replication_credentials_key` = "secret"
    /// (default) or "public_key" choosing which of its keys answers.
    #[serde(rename = "replication_credentials")]
    pub credentials: Option<PathBuf>,
    #[serde(rename = "replication_credentials_key")]
    pub credentials_key: String,
    /// Time between pulls of the source's transaction log, ms (the original's
    /// code: 30 000). In low-latency mode, how long the source may hold a pull
    /// open waiting for a transaction.
    #[serde(rename = "replication_interval_ms")]
    pub interval_ms: u64,
    /// Longest wait for any read from the source (connect, answer, each piece
    /// of a stream), ms; the original's default is 300 000.
    #[serde(rename = "replication_timeout_ms")]
    pub timeout_ms: u64,
    /// Long-poll: ask again at once, and let a `handled` source hold the
    /// request until a transaction arrives (a trailing wait time in
    /// RETRIEVE_TXN_LOG, which Handle.Net sources ignore), so this mirror is
    /// milliseconds behind instead of up to an interval.
    #[serde(rename = "replication_low_latency")]
    pub low_latency: bool,
    /// Only these prefixes (and their dotted children, `20.5000` → `20.5000.1`)
    /// are taken from the source: handles, and homing. Empty: whatever the
    /// source homes. Either way, a prefix in `prefixes` is never unhomed by
    /// the source, and malformed prefix names are never homed.
    #[serde(rename = "replication_prefixes")]
    pub prefixes: Vec<String>,
    /// Who may pull the transaction log and dumps (RETRIEVE_TXN_LOG,
    /// DUMP_HANDLES): `index:handle` references to HS_PUBKEY/HS_SECKEY values
    /// or HS_VLIST groups; `server_admins` may too.
    #[serde(rename = "replication_admins")]
    pub admins: Vec<String>,
    /// Replication streams (log pulls and dumps) served at once; more are
    /// refused as too busy.
    #[serde(rename = "replication_max_streams")]
    pub max_streams: usize,
    /// Longest wait for a mirror to take the next piece of a stream before the
    /// stream is cut (a slow reader holds at most one page meanwhile).
    #[serde(rename = "replication_write_timeout_secs")]
    pub write_timeout_secs: u64,
    /// Log pulls one mirror address may hold open waiting for changes (the
    /// long-poll extension); more are answered at once.
    #[serde(rename = "replication_waits_per_peer")]
    pub waits_per_peer: usize,
    /// Days of transaction log kept (pruned daily); a mirror further behind
    /// must be dumped again. 0 = forever.
    pub txnlog_num_days_to_keep: u64,
    /// Multi-primary (Handle.Net's Manual §7.3, docs/multi-primary.md): a
    /// handle whose primary HS_SITE values are the group's primaries, this
    /// one's among them (found by address and port; its value's index is this
    /// server's priority). With `do_replication` (or `multi_primary`) this
    /// server pulls from every other one while it takes writes itself.
    #[serde(rename = "replication_sites_handle")]
    pub sites_handle: Option<String>,
    /// Pull from the primaries of `replication_sites_handle` (Handle.Net's
    /// key; its default, "multiPrimary in the site record", is `multi_primary`).
    pub do_replication: Option<bool>,
    /// Publish the multi-primary flag in this server's site record (Handle.Net's
    /// `"multiPrimary": true` in siteinfo.json); also turns `do_replication` on.
    pub multi_primary: bool,
    /// Proxied mirroring (Handle.Net's key): pull every queue (the source's own
    /// and the other primaries' queues it keeps) from `replication_source`, which
    /// must then be `index:handle` of the source's HS_SITE value (Handle.Net's
    /// `replication_site_handle_value`); embedded or memory store.
    #[serde(rename = "replication_pull_other_transactions")]
    pub pull_other_transactions: bool,
    /// Keep the transactions pulled from other primaries, per queue, so that
    /// proxied mirrors can pull them from us (Handle.Net's key and default: on).
    #[serde(rename = "replication_keep_other_transactions")]
    pub keep_other_transactions: bool,
    /// Multi-primary: a change pulled from another primary dated more than
    /// this many ms after our clock is held back (the pull from that peer
    /// stops before it) until our clock comes within this much of its date;
    /// docs/multi-primary.md, "Clocks".
    #[serde(rename = "replication_max_clock_skew_ms")]
    pub max_clock_skew_ms: u64,
}

impl ReplicationConfig {
    /// Is this server a multi-primary member that pulls from the others?
    pub fn pulls_from_group(&self) -> bool {
        self.sites_handle.is_some() && self.do_replication.unwrap_or(self.multi_primary)
    }
}

impl Default for ReplicationConfig {
    fn default() -> Self {
        ReplicationConfig {
            source: None,
            resolver: None,
            authentication: None,
            secret: None,
            private_key: None,
            credentials: None,
            credentials_key: "secret".into(),
            interval_ms: 30_000,
            timeout_ms: 300_000,
            low_latency: false,
            prefixes: Vec::new(),
            admins: Vec::new(),
            max_streams: 4,
            write_timeout_secs: 60,
            waits_per_peer: 2,
            txnlog_num_days_to_keep: 0,
            sites_handle: None,
            do_replication: None,
            multi_primary: false,
            pull_other_transactions: false,
            keep_other_transactions: true,
            max_clock_skew_ms: 300_000,
        }
    }
}
