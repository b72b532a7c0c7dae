//! Derived lookup entries: document index entries and the id listings behind
//! `scan_keys` and `doc_scan`, in the `lookups` table (ENTRIES is a CQL keyword).
//!
//! Entries are derived from object rows and can't share their row's lightweight
//! transaction (they live in other partitions), so they follow three rules that
//! keep them right across crashes and races without any cross-partition
//! transaction:
//! 1. A writer adds the entries of its new state *before* its compare-and-set, and
//!    removes those of the replaced state only *after* it: a committed state's
//!    entries are always present.
//! 2. Every entry write carries the write timestamp of the object version it
//!    belongs to (`USING TIMESTAMP version`), and Cassandra keeps the write with the
//!    highest timestamp (a delete wins a tie). So a late add from a writer that lost
//!    its compare-and-set, or a late delete from an older version, can never undo
//!    what a newer version wrote, whatever order they arrive in.
//! 3. Leftovers (an add whose compare-and-set failed, a crash between the steps)
//!    are filtered on read: a hit counts only if its object currently carries it,
//!    and a stale one is deleted at the object's current version.

use futures_util::future::try_join_all;
use scylla::client::session::Session;
use scylla::statement::prepared::PreparedStatement;

use super::schema::BUCKETS;
use super::{backend_error, rows_of};
use crate::{IndexHit, IndexMatch, StoreError};

/// One derived entry: under (collection, index), key → object id.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Entry {
    pub idx: String,
    pub key: Vec<u8>,
}

/// Partition of a key within its index.
pub fn bucket(key: &[u8]) -> i32 {
    (crc32fast::hash(key) % BUCKETS as u32) as i32
}

/// The smallest byte string greater than every string starting with `prefix`
/// (`None`: no such bound, the prefix is empty or all `0xff`).
fn successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut s = prefix.to_vec();
    while let Some(last) = s.pop() {
        if last < 0xff {
            s.push(last + 1);
            return Some(s);
        }
    }
    None
}

/// Prepared statements of the entries table.
pub struct EntryStatements {
    put: PreparedStatement,
    delete: PreparedStatement,
    exact: PreparedStatement,
    exact_after: PreparedStatement,
    /// Range reads: [lower inclusive?][upper bound?].
    range: [[PreparedStatement; 2]; 2],
}

impl EntryStatements {
    pub async fn prepare(session: &Session, ks: &str) -> Result<Self, StoreError> {
        let prep = |cql: String| async move {
            let mut p = session.prepare(cql.as_str()).await.map_err(|e| backend_error(&cql, e))?;
            p.set_is_idempotent(true);
            Ok::<_, StoreError>(p)
        };
        let base = format!("SELECT key, id FROM {ks}.lookups WHERE coll = ? AND idx = ? AND bucket = ?");
        let range = |lower: &str, upper: bool| {
            format!("{base} AND (key, id) {lower} (?, ?){} LIMIT ?", if upper { " AND (key) < (?)" } else { "" })
        };
        Ok(EntryStatements {
            put: prep(format!(
                "INSERT INTO {ks}.lookups (coll, idx, bucket, key, id) VALUES (?, ?, ?, ?, ?) USING TIMESTAMP ?"
            ))
            .await?,
            delete: prep(format!(
                "DELETE FROM {ks}.lookups USING TIMESTAMP ? WHERE coll = ? AND idx = ? AND bucket = ? AND key = ? AND id = ?"
            ))
            .await?,
            exact: prep(format!("{base} AND key = ? LIMIT ?")).await?,
            exact_after: prep(format!("{base} AND key = ? AND id > ? LIMIT ?")).await?,
            range: [
                [prep(range(">", false)).await?, prep(range(">", true)).await?],
                [prep(range(">=", false)).await?, prep(range(">=", true)).await?],
            ],
        })
    }

    /// Add (`add`) or remove entries of object `id` in `coll`, at write time `version`.
    pub async fn write(
        &self,
        session: &Session,
        coll: &str,
        id: &[u8],
        entries: &[Entry],
        version: i64,
        add: bool,
    ) -> Result<(), StoreError> {
        try_join_all(entries.iter().map(|e| async move {
            let b = bucket(&e.key);
            let result = if add {
                session.execute_unpaged(&self.put, (coll, &e.idx, b, &e.key, id, version)).await
            } else {
                session.execute_unpaged(&self.delete, (version, coll, &e.idx, b, &e.key, id)).await
            };
            result.map(|_| ()).map_err(|e| backend_error("entries write", e))
        }))
        .await?;
        Ok(())
    }

    /// Raw hits (not yet checked against their objects) in (key, id) order,
    /// strictly after `after`, at most `limit`.
    pub async fn lookup(
        &self,
        session: &Session,
        coll: &str,
        idx: &str,
        m: IndexMatch<'_>,
        after: Option<&IndexHit>,
        limit: usize,
    ) -> Result<Vec<IndexHit>, StoreError> {
        let limit_i32 = i32::try_from(limit.max(1)).unwrap_or(i32::MAX);
        match m {
            IndexMatch::Exact(key) => {
                let b = bucket(key);
                let rows = match after {
                    Some(a) if a.key.as_slice() > key => return Ok(Vec::new()),
                    Some(a) if a.key == key => {
                        session.execute_unpaged(&self.exact_after, (coll, idx, b, key, &a.id, limit_i32)).await
                    }
                    _ => session.execute_unpaged(&self.exact, (coll, idx, b, key, limit_i32)).await,
                };
                rows_of::<(Vec<u8>, Vec<u8>)>(rows, "entries lookup")
                    .map(|rows| rows.into_iter().map(|(key, id)| IndexHit { key, id }).collect())
            }
            IndexMatch::Prefix(prefix) => {
                // Start at the prefix, or just after `after` when that is further on.
                let (lower, inclusive) = match after {
                    Some(a) if a.key.as_slice() >= prefix => ((a.key.clone(), a.id.clone()), false),
                    _ => ((prefix.to_vec(), Vec::new()), true),
                };
                let upper = successor(prefix);
                let stmt = &self.range[inclusive as usize][upper.is_some() as usize];
                let per_bucket = try_join_all((0..BUCKETS).map(|b| {
                    let (lower, upper) = (&lower, &upper);
                    async move {
                        let rows = match upper {
                            Some(u) => {
                                session.execute_unpaged(stmt, (coll, idx, b, &lower.0, &lower.1, u, limit_i32)).await
                            }
                            None => session.execute_unpaged(stmt, (coll, idx, b, &lower.0, &lower.1, limit_i32)).await,
                        };
                        rows_of::<(Vec<u8>, Vec<u8>)>(rows, "entries scan")
                    }
                }))
                .await?;
                let mut hits: Vec<IndexHit> = per_bucket
                    .into_iter()
                    .flatten()
                    .filter(|(key, _)| key.starts_with(prefix))
                    .map(|(key, id)| IndexHit { key, id })
                    .collect();
                hits.sort();
                hits.truncate(limit);
                Ok(hits)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn successor_bounds_every_extension() {
        assert_eq!(successor(b"ab"), Some(b"ac".to_vec()));
        assert_eq!(successor(b"a\xff"), Some(b"b".to_vec()));
        assert_eq!(successor(b"\xff\xff"), None);
        assert_eq!(successor(b""), None);
        assert!(bucket(b"x") < BUCKETS && bucket(b"") >= 0);
    }
}
