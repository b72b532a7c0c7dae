//! The mirror's durable state, in the store's meta table. Each is written in
//! the same atomic commit as the records it accounts for
//! (`Store::apply_replicated`), so after a crash at any moment the mirror
//! resumes exactly after the last record it kept: nothing lost, nothing twice.

use serde::{Deserialize, Serialize};

/// Where pulling resumes: the source's last transaction applied and the END
/// date of the last pull (the source's redump check compares it with its log).
pub const PULL_KEY: &str = "replication/mirror/pull";
/// Meta-key prefix of a proxied mirror's position in each queue its source
/// relays (then the queue's name); the source's own queue stays in [`PULL_KEY`].
pub const QUEUES_PREFIX: &str = "replication/mirror/queues/";
/// A dump in progress (first copy, or a redump the source asked for).
pub const DUMP_KEY: &str = "replication/mirror/dump";
/// The source's key as first seen, for a source named by `host:port`.
pub const PINNED_KEY: &str = "replication/mirror/source-key";
/// Set by promotion: this server is a primary now, whatever its configuration says.
pub const PROMOTED_KEY: &str = "replication/mirror/promoted";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PullProgress {
    /// `replication_source` when this was written.
    pub source: String,
    pub last_txn_id: u64,
    pub last_query_date_ms: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DumpProgress {
    pub source: String,
    /// A redump (mark and sweep over the data served meanwhile) rather than the
    /// first copy. One interrupted by a crash resumes like a first copy: its
    /// marks are in the store (`super::marks`).
    pub redump: bool,
    /// The source's last transaction id and date when the dump began
    /// (THIS_SERVER_REPLICATION_INFO): pulling resumes there.
    pub txn_id: Option<u64>,
    pub date_ms: u64,
    /// The last record kept, hex, and its kind (`RESUME_AFTER_*`): a broken
    /// stream is asked again from there.
    pub resume: Option<(String, i32)>,
    /// Records kept so far.
    pub records: u64,
    pub started_ms: u64,
}

impl DumpProgress {
    pub fn new(source: &str, redump: bool, now_ms: u64) -> Self {
        DumpProgress {
            source: source.to_string(),
            redump,
            txn_id: None,
            date_ms: 0,
            resume: None,
            records: 0,
            started_ms: now_ms,
        }
    }

    pub fn resume_point(&self) -> Option<(Vec<u8>, i32)> {
        let (hex_handle, kind) = self.resume.as_ref()?;
        Some((hex::decode(hex_handle).ok()?, *kind))
    }

    pub fn set_resume(&mut self, handle: &[u8], kind: i32) {
        self.resume = Some((hex::encode(handle), kind));
    }
}

/// A meta write of `value` as JSON.
pub fn entry<T: Serialize>(key: &str, value: &T) -> (String, Option<Vec<u8>>) {
    (key.to_string(), Some(serde_json::to_vec(value).expect("plain data serializes")))
}

pub fn decode<T: for<'de> Deserialize<'de>>(key: &str, bytes: &[u8]) -> Result<T, String> {
    serde_json::from_slice(bytes).map_err(|e| format!("meta {key}: unreadable ({e})"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        let mut d = DumpProgress::new("127.0.0.1:2641", false, 5);
        assert_eq!(d.resume_point(), None);
        d.set_resume(b"TEST/\x00x", 2);
        let (k, v) = entry(DUMP_KEY, &d);
        assert_eq!(k, DUMP_KEY);
        let back: DumpProgress = decode(DUMP_KEY, &v.unwrap()).unwrap();
        assert_eq!(back.resume_point(), Some((b"TEST/\x00x".to_vec(), 2)));
        assert!(decode::<PullProgress>(PULL_KEY, b"{").is_err());
    }
}
