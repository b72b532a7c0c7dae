//! How to reach the cluster and how strongly to read and write.

use std::time::Duration;

use scylla::statement::{Consistency, SerialConsistency};

use crate::StoreError;

/// Connection and consistency settings of a [`super::CassandraStore`].
#[derive(Debug, Clone)]
pub struct CassandraOptions {
    /// `host:port` of one or more nodes; the driver discovers the rest.
    pub contact_points: Vec<String>,
    /// Keyspace of this registry; created (with `replication`) when missing.
    pub keyspace: String,
    /// Replication of a keyspace created by us: `"3"` (SimpleStrategy, factor 3)
    /// or `"dc1:3,dc2:3"` (NetworkTopologyStrategy per data centre).
    pub replication: String,
    /// Reads and writes (QUORUM by default; LOCAL_QUORUM across data centres).
    pub consistency: Consistency,
    /// Lightweight transactions (SERIAL, or LOCAL_SERIAL across data centres).
    pub serial_consistency: SerialConsistency,
    /// Plain-text authentication with the cluster.
    pub credentials: Option<(String, String)>,
    /// PEM file of the CA that signed the nodes' certificates: TLS to the cluster.
    pub tls_ca_file: Option<std::path::PathBuf>,
    /// Time a single request may take before it fails.
    pub request_timeout: Duration,
    /// Reads not answered within this delay are also sent to another replica.
    pub speculative_read_after: Option<Duration>,
    /// Keep the transaction log (replication source for mirrors); every node of
    /// a cluster must agree.
    pub txn_log: bool,
    /// A pending or missing log entry older than this is settled by a reader
    /// (its writer died or stalled): longer than a write with its retries.
    pub txn_settle_after: Duration,
    /// How often a node looks for other nodes' log entries (to wake its
    /// long-polling mirrors) and settles what dead writers left.
    pub txn_poll_interval: Duration,
}

impl Default for CassandraOptions {
    fn default() -> Self {
        CassandraOptions {
            contact_points: vec!["127.0.0.1:9042".into()],
            keyspace: "handled".into(),
            replication: "1".into(),
            consistency: Consistency::Quorum,
            serial_consistency: SerialConsistency::Serial,
            credentials: None,
            tls_ca_file: None,
            request_timeout: Duration::from_secs(5),
            speculative_read_after: Some(Duration::from_millis(50)),
            txn_log: true,
            txn_settle_after: Duration::from_secs(10),
            txn_poll_interval: Duration::from_secs(1),
        }
    }
}

/// A consistency level by its CQL name (`QUORUM`, `LOCAL_QUORUM`, `ONE`, …).
pub fn parse_consistency(name: &str) -> Result<Consistency, String> {
    Ok(match name.to_ascii_uppercase().as_str() {
        "ONE" => Consistency::One,
        "TWO" => Consistency::Two,
        "THREE" => Consistency::Three,
        "QUORUM" => Consistency::Quorum,
        "ALL" => Consistency::All,
        "LOCAL_QUORUM" => Consistency::LocalQuorum,
        "EACH_QUORUM" => Consistency::EachQuorum,
        "LOCAL_ONE" => Consistency::LocalOne,
        other => return Err(format!("unknown consistency level {other:?} (QUORUM, LOCAL_QUORUM, ONE, ALL, …)")),
    })
}

/// `SERIAL` or `LOCAL_SERIAL`.
pub fn parse_serial_consistency(name: &str) -> Result<SerialConsistency, String> {
    match name.to_ascii_uppercase().as_str() {
        "SERIAL" => Ok(SerialConsistency::Serial),
        "LOCAL_SERIAL" => Ok(SerialConsistency::LocalSerial),
        other => Err(format!("unknown serial consistency {other:?} (SERIAL or LOCAL_SERIAL)")),
    }
}

/// The `replication` map of `CREATE KEYSPACE` for [`CassandraOptions::replication`].
pub(crate) fn replication_map(spec: &str) -> Result<String, StoreError> {
    let bad = || StoreError::Backend(format!("bad cassandra replication {spec:?}: want \"3\" or \"dc1:3,dc2:3\""));
    let spec = spec.trim();
    if let Ok(n) = spec.parse::<u16>() {
        return if n == 0 {
            Err(bad())
        } else {
            Ok(format!("{{'class': 'SimpleStrategy', 'replication_factor': {n}}}"))
        };
    }
    let mut parts = vec!["'class': 'NetworkTopologyStrategy'".to_owned()];
    for dc in spec.split(',') {
        let (name, n) = dc.split_once(':').ok_or_else(bad)?;
        let name = name.trim();
        let n: u16 = n.trim().parse().map_err(|_| bad())?;
        if name.is_empty() || n == 0 || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
            return Err(bad());
        }
        parts.push(format!("'{name}': {n}"));
    }
    Ok(format!("{{{}}}", parts.join(", ")))
}

/// Keyspace names are CQL identifiers: letters, digits and `_`, at most 48.
pub(crate) fn check_keyspace(name: &str) -> Result<(), StoreError> {
    let ok = !name.is_empty()
        && name.len() <= 48
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && name.chars().next().is_some_and(|c| c.is_ascii_alphabetic());
    if ok {
        Ok(())
    } else {
        Err(StoreError::Backend(format!("bad cassandra keyspace name {name:?}: letters, digits and _, at most 48")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replication_specs() {
        assert_eq!(replication_map("3").unwrap(), "{'class': 'SimpleStrategy', 'replication_factor': 3}");
        assert_eq!(
            replication_map("dc1:3, dc2:2").unwrap(),
            "{'class': 'NetworkTopologyStrategy', 'dc1': 3, 'dc2': 2}"
        );
        for bad in ["0", "", "dc1", "dc1:x", "d'c:3", ":3"] {
            assert!(replication_map(bad).is_err(), "{bad}");
        }
        assert!(check_keyspace("handled_1").is_ok());
        assert!(check_keyspace("1abc").is_err() && check_keyspace("a-b").is_err());
        assert!(parse_consistency("local_quorum").is_ok() && parse_consistency("x").is_err());
    }
}
