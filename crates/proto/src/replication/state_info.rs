//! `ReplicationStateInfo`: the mirror's position in every queue, sent as Gson JSON
//! in the "all queues" RETRIEVE_TXN_LOG request:
//! `{"replicationServerStates":{"<queue>":{"lastTxnId":N,"lastTimestamp":ms},…},"ownName":"<site>"}`.
//! Gson (as `GsonUtility` builds it: no naming policy, HTML escaping off) omits a
//! null `ownName`, fills missing fields with 0/null and ignores unknown ones; so do we.
//! Queue order is kept as sent, so a decoded request re-encodes to the same bytes.

use crate::codec::{DecodeError, DecodeResult};
use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// One queue's position. Java longs: -1 means "not known" (`setLastTxnId` on a new
/// queue leaves the timestamp at -1).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ReplicationServerState {
    pub last_txn_id: i64,
    pub last_timestamp: i64,
}

/// Most queues a state may list (a topology has a handful).
pub const MAX_QUEUES: usize = 4096;

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ReplicationStateInfo {
    /// Queue name (`"<serverNum>:<siteName>"`) → position, in wire order.
    #[serde(with = "ordered_map")]
    pub replication_server_states: Vec<(String, ReplicationServerState)>,
    /// The requesting mirror's own site name; its own queues are skipped by the source.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub own_name: Option<String>,
}

impl ReplicationStateInfo {
    /// Position in `queue` (0/0 when absent, as Java's getters answer).
    pub fn get(&self, queue: &str) -> ReplicationServerState {
        self.replication_server_states.iter().find(|(q, _)| q == queue).map(|(_, s)| *s).unwrap_or_default()
    }

    pub fn from_json(json: &[u8]) -> DecodeResult<Self> {
        let state: Self = serde_json::from_slice(json)
            .map_err(|e| DecodeError::Invalid { what: "replication state JSON", detail: e.to_string() })?;
        if state.replication_server_states.len() > MAX_QUEUES {
            let len = state.replication_server_states.len() as i64;
            return Err(DecodeError::BadLength { what: "replication state queues", len });
        }
        Ok(state)
    }

    /// Compact JSON, as Gson writes it.
    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }
}

/// A JSON object kept as an ordered list of pairs (Java's map order is whatever
/// its `ConcurrentHashMap` iterates; we keep what was sent).
mod ordered_map {
    use super::*;

    pub fn serialize<S: Serializer>(pairs: &[(String, ReplicationServerState)], s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(pairs.len()))?;
        for (k, v) in pairs {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<(String, ReplicationServerState)>, D::Error> {
        struct Pairs;
        impl<'de> Visitor<'de> for Pairs {
            type Value = Vec<(String, ReplicationServerState)>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object of queue states")
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(Vec::new())
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut out = Vec::new();
                while let Some((k, v)) = map.next_entry::<String, ReplicationServerState>()? {
                    if out.len() >= MAX_QUEUES {
                        return Err(serde::de::Error::custom("too many queues"));
                    }
                    // A repeated key replaces the earlier one, as in a Java map.
                    match out.iter_mut().find(|(q, _): &&mut (String, ReplicationServerState)| *q == k) {
                        Some(slot) => slot.1 = v,
                        None => out.push((k, v)),
                    }
                }
                Ok(out)
            }
        }
        d.deserialize_any(Pairs)
    }
}
