//! Apache Cassandra backend (`store = "cassandra"`): several stateless `handled`
//! nodes share one registry.
//!
//! Correctness first (see `schema.rs` for the tables, `entries.rs` for derived data):
//! * every change of a handle or document is a lightweight transaction on its row's
//!   version (`UPDATE … IF version = ?`): creates can't double, concurrent edits on
//!   different nodes can't lose an update; a handle and the documents that share its
//!   key (the reverse-lookup document) change in one conditional batch;
//! * reads and writes run at the configured consistency (QUORUM by default), LWTs at
//!   the serial one; a compare whose expectation fails is confirmed by a SERIAL read
//!   before a conflict is reported, and a write whose answer was lost (timeout) is
//!   kept until a SERIAL read shows whether it applied (`lost.rs`);
//! * statements are prepared, token-aware, and marked idempotent where they are, so
//!   the driver may retry them on another node and speculate on slow reads.

mod entries;
mod key_locks;
mod lost;
mod options;
mod rows;
mod schema;
mod seams;
mod txn_admin;
mod txn_log;
mod txn_reader;
mod txn_tables;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use futures_util::future::try_join_all;
use futures_util::{stream, StreamExt, TryStreamExt};
use scylla::client::execution_profile::ExecutionProfile;
use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;
use scylla::errors::ExecutionError;
use scylla::policies::speculative_execution::SimpleSpeculativeExecutionPolicy;
use scylla::response::query_result::QueryResult;

pub use options::{parse_consistency, parse_serial_consistency, CassandraOptions};

use entries::{Entry, EntryStatements};
use lost::{LostAttempt, LostAttempts, Verdict};
use rows::{Cas, RowStatements, RowWrite};
use schema::{HANDLE_COLL, LISTING_IDX};

use crate::{
    Backup, Capabilities, DocExpect, DocOutcome, DocWrite, Document, DocumentStore, Expect, HandleRecord, IndexHit,
    IndexMatch, RecordStore, ReplicatedChange, StatCounters, StoreAdmin, StoreError, StoreStats, SwapOutcome,
    TxnAction, TxnEntry, TxnLogBounds, TxnLogStore, HOMED_META_PREFIX,
};
use txn_log::TxnLog;

/// What the transaction-log methods answer when the log is off.
const NO_TXN_LOG: &str = "the transaction log (replication source) is off on this cluster (replication_log = false)";

/// Compare-and-set rounds before a write gives up on a hot row.
const MAX_ROUNDS: u32 = 200;

/// Lost compare-and-sets before a write gives up (its outcome then unknown).
const MAX_LOST: usize = 3;

/// Object reads in flight at once while checking a page of lookup hits.
const CHECK_CONCURRENCY: usize = 64;

fn unknown_outcome(why: &str) -> StoreError {
    StoreError::Backend(format!("cassandra: outcome of a write unknown ({why}); it may have applied"))
}

pub(crate) fn backend_error(what: &str, e: impl std::fmt::Display) -> StoreError {
    StoreError::Backend(format!("cassandra: {what}: {e}"))
}

/// A prepared statement, marked idempotent (the driver may retry it) or not,
/// read at SERIAL or at the session's consistency.
pub(crate) async fn prepare(
    session: &Session,
    cql: String,
    idempotent: bool,
    serial: bool,
) -> Result<scylla::statement::prepared::PreparedStatement, StoreError> {
    let mut p = session.prepare(cql.as_str()).await.map_err(|e| backend_error(&cql, e))?;
    p.set_is_idempotent(idempotent);
    if serial {
        p.set_consistency(scylla::statement::Consistency::Serial);
    }
    Ok(p)
}

/// Typed rows of a query result.
pub(crate) fn rows_of<R>(result: Result<QueryResult, ExecutionError>, what: &str) -> Result<Vec<R>, StoreError>
where
    R: for<'f, 'm> scylla::deserialize::row::DeserializeRow<'f, 'm>,
{
    let rows = result.map_err(|e| backend_error(what, e))?.into_rows_result().map_err(|e| backend_error(what, e))?;
    let typed = rows.rows::<R>().map_err(|e| backend_error(what, e))?;
    typed.collect::<Result<Vec<R>, _>>().map_err(|e| backend_error(what, e))
}

/// Handles and documents in a Cassandra keyspace.
pub struct CassandraStore {
    session: Arc<Session>,
    rows: RowStatements,
    entries: EntryStatements,
    stats: StatCounters,
    closed: AtomicBool,
    /// This node's writes to one partition take turns (see `key_locks`).
    key_locks: key_locks::KeyLocks,
    /// The transaction log, unless it is off (`CassandraOptions::txn_log`).
    txn: Option<Arc<TxnLog>>,
}

/// Storage key of an object row (partition keys can't be empty, ids can).
fn pk(id: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(id.len() + 1);
    k.push(b'k');
    k.extend_from_slice(id);
    k
}

/// The derived entries of one stored state of a row.
fn entries_of(coll: &str, body: Option<&[u8]>) -> Result<Vec<Entry>, StoreError> {
    let Some(body) = body else { return Ok(Vec::new()) };
    let mut out = vec![Entry { idx: LISTING_IDX.to_owned(), key: Vec::new() }];
    if coll != HANDLE_COLL {
        out.extend(Document::decode(body)?.index.into_iter().map(|e| Entry { idx: e.name, key: e.key }));
    }
    Ok(out)
}

/// Listing entries are keyed by the id itself.
fn keyed(mut entries: Vec<Entry>, id: &[u8]) -> Vec<Entry> {
    for e in &mut entries {
        if e.idx == LISTING_IDX {
            e.key = id.to_vec();
        }
    }
    entries
}

fn check_names(collection: &str, doc: Option<&Document>) -> Result<(), StoreError> {
    let bad = |m: String| Err(StoreError::Invalid(crate::InvalidRecord(m)));
    if collection.starts_with('\0') {
        return bad("collection names may not start with NUL".into());
    }
    if let Some(e) = doc.and_then(|d| d.index.iter().find(|e| e.name.starts_with('\0'))) {
        return bad(format!("index name {:?} may not start with NUL", e.name));
    }
    Ok(())
}

impl CassandraStore {
    /// Connect, create or check the keyspace and tables, prepare statements.
    pub async fn connect(o: &CassandraOptions) -> Result<Self, StoreError> {
        let mut profile = ExecutionProfile::builder()
            .consistency(o.consistency)
            .serial_consistency(Some(o.serial_consistency))
            .request_timeout(Some(o.request_timeout));
        if let Some(delay) = o.speculative_read_after {
            profile = profile.speculative_execution_policy(Some(Arc::new(SimpleSpeculativeExecutionPolicy {
                max_retry_count: 1,
                retry_interval: delay,
            })));
        }
        let mut builder = SessionBuilder::new()
            .known_nodes(&o.contact_points)
            .default_execution_profile_handle(profile.build().into_handle())
            .connection_timeout(o.request_timeout);
        if let Some((user, password)) = &o.credentials {
            builder = builder.user(user, password);
        }
        if let Some(ca) = &o.tls_ca_file {
            builder = builder.tls_context(Some(tls_config(ca)?));
        }
        let session = builder.build().await.map_err(|e| {
            StoreError::Backend(format!("cassandra: cannot connect to {}: {e}", o.contact_points.join(", ")))
        })?;
        schema::ensure(&session, &o.keyspace, &o.replication).await?;
        let rows = RowStatements::prepare(&session, &o.keyspace).await?;
        let entries = EntryStatements::prepare(&session, &o.keyspace).await?;
        let session = Arc::new(session);
        let txn = if o.txn_log {
            let statements = txn_tables::TxnStatements::prepare(&session, &o.keyspace).await?;
            let log = TxnLog::open(session.clone(), statements, o.txn_settle_after).await?;
            txn_reader::spawn_poll(Arc::downgrade(&log), o.txn_poll_interval);
            Some(log)
        } else {
            None
        };
        Ok(CassandraStore {
            session,
            rows,
            entries,
            stats: StatCounters::default(),
            key_locks: key_locks::KeyLocks::new(),
            closed: AtomicBool::new(false),
            txn,
        })
    }

    fn txn(&self) -> Result<&TxnLog, StoreError> {
        self.check_open()?;
        self.txn.as_deref().ok_or_else(|| StoreError::Unsupported(NO_TXN_LOG.into()))
    }

    fn check_open(&self) -> Result<(), StoreError> {
        if self.closed.load(Ordering::Acquire) {
            return Err(StoreError::Closed);
        }
        Ok(())
    }

    /// Entries first, then the compare-and-set, then the replaced state's entries
    /// away (the order `entries.rs` relies on; `entries_replaced` does the last step).
    async fn commit(&self, id: &[u8], writes: &[RowWrite]) -> Result<Cas, StoreError> {
        self.write_entries(id, writes, true).await?;
        Ok(self.rows.compare_and_set(&self.session, &pk(id), writes).await)
    }

    /// After `writes` applied: remove the entries only the replaced state had.
    async fn entries_replaced(&self, id: &[u8], writes: &[RowWrite]) -> Result<(), StoreError> {
        self.write_entries(id, writes, false).await
    }

    /// Add the entries only the new states have, or remove those only the old ones had.
    async fn write_entries(&self, id: &[u8], writes: &[RowWrite], add: bool) -> Result<(), StoreError> {
        let mut changes = Vec::with_capacity(writes.len());
        for w in writes {
            let old = keyed(entries_of(&w.coll, w.old.body())?, id);
            let new = keyed(entries_of(&w.coll, w.new_body.as_deref())?, id);
            let (from, other) = if add { (new, old) } else { (old, new) };
            changes.push((w, from.into_iter().filter(|e| !other.contains(e)).collect::<Vec<Entry>>()));
        }
        try_join_all(
            changes
                .iter()
                .map(|(w, entries)| self.entries.write(&self.session, &w.coll, id, entries, w.new_version(), add)),
        )
        .await?;
        Ok(())
    }

    /// One compare-and-set write of a row group sharing partition `id`: `decide`
    /// sees the current rows and returns the writes to make (and what to log
    /// for them), or an early answer. With `txn`, a write that logs takes its
    /// log entry before its transaction and settles it after (writer steps 1–4,
    /// `txn_log.rs`); an error in between leaves the entry pending for a reader
    /// to settle. A write whose answer was lost is kept until a read shows how
    /// it ended (`lost.rs`).
    async fn cas_loop<T>(
        &self,
        id: &[u8],
        txn: Option<&TxnLog>,
        mut decide: impl FnMut(&rows::Partition, bool) -> Result<Decision<T>, StoreError>,
    ) -> Result<T, StoreError> {
        self.check_open()?;
        let _turn = self.key_locks.turn(id).await;
        let mut slot = None;
        let mut lost = LostAttempts::new();
        for round in 0..MAX_ROUNDS {
            let serial = round > 0;
            let partition = match self.rows.read_partition(&self.session, &pk(id), serial).await {
                Ok(p) => p,
                Err(e) if !lost.is_empty() => return Err(unknown_outcome(&e.to_string())),
                Err(e) => return Err(e),
            };
            let applied = match lost.judge(&partition) {
                Verdict::Applied(attempt) => {
                    // Found later than the first read back, it is what the store
                    // took for another writer's before lost.rs: worth seeing in the logs.
                    if round > attempt.round + 1 {
                        tracing::info!(
                            "cassandra: a write whose answer was lost ({}) applied, seen {} reads later",
                            attempt.error,
                            round - attempt.round
                        );
                    }
                    Some((attempt.writes, attempt.done, attempt.action))
                }
                Verdict::Unknown(e) => return Err(unknown_outcome(&e)),
                Verdict::Open => match decide(&partition, serial)? {
                    // A lost attempt may still apply unless a commit on the row fences it.
                    Decision::Answer(_) if !lost.is_empty() => {
                        return Err(unknown_outcome("the row did not move after a lost write"))
                    }
                    Decision::Answer(t) => {
                        if let (Some(txn), Some(s)) = (txn, slot) {
                            txn.finish(s, None, id).await?;
                        }
                        return Ok(t);
                    }
                    Decision::Reread => None,
                    Decision::Write(writes, done, action) => {
                        if let (Some(txn), Some(a), None) = (txn, action, slot) {
                            slot = Some(txn.begin(a, id).await?);
                        }
                        match self.commit(id, &writes).await? {
                            Cas::Applied => Some((writes, done, action)),
                            Cas::Moved => None,
                            Cas::Lost(e) if lost.len() + 1 >= MAX_LOST => return Err(unknown_outcome(&e)),
                            Cas::Lost(error) => {
                                lost.push(LostAttempt { writes, done, action, error, round });
                                None
                            }
                        }
                    }
                },
            };
            if let Some((writes, done, action)) = applied {
                self.entries_replaced(id, &writes).await?;
                if let (Some(txn), Some(s)) = (txn, slot) {
                    txn.finish(s, action, id).await?;
                }
                return Ok(done);
            }
            if round > 2 {
                tokio::time::sleep(rand_jitter(round)).await;
            }
        }
        Err(StoreError::Backend(format!("cassandra: gave up after {MAX_ROUNDS} conflicting writes to one row")))
    }

    /// Count one write operation (conflicts included) in the statistics.
    async fn counted<T>(&self, op: impl std::future::Future<Output = Result<T, StoreError>>) -> Result<T, StoreError> {
        let started = Instant::now();
        let result = op.await;
        match &result {
            Ok(_) => self.stats.committed(1, 0, true, started.elapsed().as_micros() as u64),
            Err(_) => self.stats.failed(1),
        }
        result
    }

    /// Apply documents that ride along with a handle write but live in another
    /// partition (their id is not the handle's key): each its own transaction, after
    /// the handle's. The server's own ride-along documents share the key.
    async fn write_foreign_docs(&self, docs: Vec<DocWrite>) -> Result<(), StoreError> {
        for d in docs {
            self.doc_write(&d.collection, &d.id, DocExpect::Any, d.doc).await?;
        }
        Ok(())
    }

    async fn doc_write(
        &self,
        collection: &str,
        id: &[u8],
        expect: DocExpect,
        new: Option<Document>,
    ) -> Result<DocOutcome, StoreError> {
        let new = new.map(Document::normalized);
        if let Some(d) = &new {
            d.validate()?;
        }
        check_names(collection, new.as_ref())?;
        let new_body = new.as_ref().map(Document::encode);
        let expect = match expect {
            DocExpect::Present(d) => DocExpect::Present(d.normalized()),
            e => e,
        };
        self.cas_loop(id, None, |partition, serial| {
            let row = partition.row(collection);
            let current = row.body().map(Document::decode).transpose()?;
            if !crate::cas::holds(expect.precondition(), current.as_ref(), |want, c| want == c) {
                return Ok(if serial { Decision::Answer(DocOutcome::Conflict { current }) } else { Decision::Reread });
            }
            if current.is_none() && new_body.is_none() {
                return Ok(Decision::Answer(DocOutcome::Done { previous: None }));
            }
            let write = RowWrite { coll: collection.to_owned(), old: row.clone(), new_body: new_body.clone() };
            Ok(Decision::Write(vec![write], DocOutcome::Done { previous: current }, None))
        })
        .await
    }

    /// Read the objects behind `hits` and keep those that still carry their entry
    /// (deleting stale entries at the object's version); returns kept hits with the
    /// object body.
    async fn checked(
        &self,
        coll: &str,
        idx: &str,
        hits: Vec<IndexHit>,
    ) -> Result<Vec<(IndexHit, Vec<u8>)>, StoreError> {
        let checked: Vec<Option<(IndexHit, Vec<u8>)>> = stream::iter(hits)
            .map(|hit| async move {
                let row = self.rows.read_row(&self.session, &pk(&hit.id), coll).await?;
                let carried = keyed(entries_of(coll, row.body())?, &hit.id);
                let wanted = Entry { idx: idx.to_owned(), key: hit.key.clone() };
                if carried.contains(&wanted) {
                    return Ok(row.into_body().map(|b| (hit, b)));
                }
                // Stale: written by a state that lost or was replaced; its version is
                // at most the row's, so this delete can't hide a newer add.
                let session = self.session.clone();
                let _ = self.entries.write(&session, coll, &hit.id, &[wanted], row.version(), false).await;
                Ok::<_, StoreError>(None)
            })
            .buffered(CHECK_CONCURRENCY)
            .try_collect()
            .await?;
        Ok(checked.into_iter().flatten().collect())
    }

    /// Checked hits of a lookup, paging past stale entries until `limit` are found
    /// or the index is exhausted.
    async fn lookup_checked(
        &self,
        coll: &str,
        idx: &str,
        m: IndexMatch<'_>,
        start_after: Option<&IndexHit>,
        limit: usize,
    ) -> Result<Vec<(IndexHit, Vec<u8>)>, StoreError> {
        self.check_open()?;
        let mut out = Vec::new();
        let mut after = start_after.cloned();
        while out.len() < limit {
            let want = limit - out.len();
            let raw = self.entries.lookup(&self.session, coll, idx, m, after.as_ref(), want).await?;
            let exhausted = raw.len() < want;
            after = raw.last().cloned();
            out.extend(self.checked(coll, idx, raw).await?);
            if exhausted {
                break;
            }
        }
        Ok(out)
    }

    /// A handle compare-and-set with its ride-along documents (statistics
    /// aside), logged in the transaction log when `logged` and the log is on.
    async fn swap_uncounted(
        &self,
        key: &[u8],
        expect: Expect,
        new: Option<HandleRecord>,
        docs: Vec<DocWrite>,
        logged: bool,
    ) -> Result<SwapOutcome, StoreError> {
        if let Some(r) = &new {
            r.validate()?;
        }
        let mut local = Vec::new();
        let mut foreign = Vec::new();
        for d in docs {
            let doc = d.doc.map(Document::normalized);
            if let Some(doc) = &doc {
                doc.validate()?;
            }
            check_names(&d.collection, doc.as_ref())?;
            let d = DocWrite { doc, ..d };
            if d.id == key {
                local.push(d)
            } else {
                foreign.push(d)
            }
        }
        let new_body = new.as_ref().map(HandleRecord::encode_wire);
        let txn = self.txn.as_deref().filter(|_| logged);
        let outcome = self
            .cas_loop(key, txn, |partition, serial| {
                let row = partition.row(HANDLE_COLL);
                let current = row.body().map(|b| HandleRecord::decode_stored(key, b)).transpose()?;
                if !crate::cas::holds(expect.precondition(), current.as_ref(), |want, c| want == c) {
                    return Ok(if serial {
                        Decision::Answer(SwapOutcome::Conflict { current })
                    } else {
                        Decision::Reread
                    });
                }
                let mut writes =
                    vec![RowWrite { coll: HANDLE_COLL.to_owned(), old: row.clone(), new_body: new_body.clone() }];
                for d in &local {
                    let old = partition.row(&d.collection);
                    writes.push(RowWrite {
                        coll: d.collection.clone(),
                        old,
                        new_body: d.doc.as_ref().map(Document::encode),
                    });
                }
                writes.retain(|w| w.old.body().is_some() || w.new_body.is_some());
                if writes.is_empty() {
                    return Ok(Decision::Answer(SwapOutcome::Done { previous: None }));
                }
                let action = TxnAction::of_handle_write(current.is_some(), new_body.is_some());
                Ok(Decision::Write(writes, SwapOutcome::Done { previous: current }, action))
            })
            .await?;
        if let SwapOutcome::Done { previous } = &outcome {
            let delta = match (previous.is_some(), new.is_some()) {
                (false, true) => 1,
                (true, false) => -1,
                _ => 0,
            };
            self.rows.count_add(&self.session, key, delta).await;
            self.write_foreign_docs(foreign).await?;
        }
        Ok(outcome)
    }
}

/// What a compare-and-set round does next.
enum Decision<T> {
    /// Stop with this answer, writing nothing.
    Answer(T),
    /// Read again at SERIAL before deciding (the answer would be a conflict).
    Reread,
    /// Make these writes; answer `T` if they apply; log this action.
    Write(Vec<RowWrite>, T, Option<TxnAction>),
}

/// A short randomized pause between contended rounds.
fn rand_jitter(round: u32) -> std::time::Duration {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(round);
    let spread = 1000 * u64::from(round.min(20));
    std::time::Duration::from_micros(200 + h.finish() % spread.max(1))
}

fn tls_config(ca: &std::path::Path) -> Result<Arc<rustls::ClientConfig>, StoreError> {
    let pem = std::fs::read(ca).map_err(|e| StoreError::Backend(format!("cassandra TLS CA {}: {e}", ca.display())))?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls::pki_types::pem::PemObject::pem_slice_iter(&pem) {
        let cert: rustls::pki_types::CertificateDer<'static> =
            cert.map_err(|e| StoreError::Backend(format!("cassandra TLS CA {}: {e}", ca.display())))?;
        roots.add(cert).map_err(|e| StoreError::Backend(format!("cassandra TLS CA {}: {e}", ca.display())))?;
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::aws_lc_rs::default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(|e| StoreError::Backend(format!("cassandra TLS: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}
