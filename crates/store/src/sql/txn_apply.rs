//! The writes the transaction log adds on SQL (txn_log.rs): homing that is
//! logged, a bulk load's Create or Update per handle, and a mirror's pulled
//! changes (`apply_replicated`), each in one transaction with its entries.

use std::collections::{BTreeMap, BTreeSet};

use super::custom::Stmt;
use super::custom_ops::{key_param, run_with_key, Cols, Param};
use super::db::{bind_key, on_tx, Sql, Tx};
use super::layout::{Col, PgKeys};
use super::records::retrying_write;
use super::values::ValueRow;
use super::{SqlCore, SqlStore};
use crate::{
    DocWrite, ReplicatedChange, ReplicatedWrite, StoreError, TxnAction, TxnEntry, TxnLogBounds, TxnLogStore,
    HOMED_META_PREFIX,
};

/// Keys per existence read on MariaDB (two parameters each).
const EXISTS_KEYS: usize = 1000;

const PUT_META: Sql = Sql {
    pg: "insert into handled_meta (k, v) values ($1, $2) on conflict (k) do update set v = $2",
    my: "insert into handled_meta (k, v) values (?, ?) on duplicate key update v = values(v)",
};
const DEL_META: Sql = Sql { pg: "delete from handled_meta where k = $1", my: "delete from handled_meta where k = ?" };

impl SqlCore {
    /// Whether `na` is homed, read inside a write.
    async fn have_na_in(&self, tx: &mut Tx, na: &[u8]) -> Result<bool, sqlx::Error> {
        if let Some(p) = self.custom.get(Stmt::HaveNa) {
            let n = run_with_key!(on_tx, &mut *tx, p, na, |q, c| {
                match q.fetch_optional(c).await? {
                    Some(r) => r.int(0)?.unwrap_or(0),
                    None => 0,
                }
            });
            return Ok(n > 0);
        }
        if self.custom.is_view() {
            return Ok(false); // as meta.rs: a view homes no prefix
        }
        let (d, l) = (self.pool.dialect(), self.options.layout);
        let sql = self.queries.have_na.as_str();
        let name = l.name(d, Col::Na, na);
        let n: i64 = on_tx!(tx, c => bind_key!(sqlx::query_scalar(sql), d, name).fetch_one(c).await)?;
        Ok(n > 0)
    }

    /// Home (or unhome) `na` in `tx`: whether it was homed before (for
    /// homing with the built-in statement, which homes once whatever it
    /// finds, `true`: a homing is logged either way).
    async fn home_in(&self, tx: &mut Tx, na: &[u8], home: bool) -> Result<bool, sqlx::Error> {
        let stmt = if home { Stmt::AddNa } else { Stmt::DelNa };
        if let Some(p) = self.custom.get(stmt) {
            // As Handle.Net's setHaveNA: only if it is not so already (custom_writes.rs).
            let existed = self.have_na_in(tx, na).await?;
            if existed != home {
                run_with_key!(on_tx, &mut *tx, p, na, |q, c| q.execute(c).await.map(drop)?);
            }
            return Ok(existed);
        }
        let (d, l) = (self.pool.dialect(), self.options.layout);
        let name = l.name(d, Col::Na, na);
        if home {
            let sql = self.queries.add_na.as_str();
            on_tx!(tx, c => sqlx::query(sql).bind(name).execute(c).await.map(drop))?;
            return Ok(true);
        }
        let sql = self.queries.del_na.as_str();
        let n = on_tx!(tx, c => bind_key!(sqlx::query(sql), d, name).execute(c).await?.rows_affected());
        Ok(n > 0)
    }

    /// A homing (`meta_put` of a `homed/` key) with the log on: the row and
    /// its entry in one commit.
    pub(super) async fn logged_home(&self, key: &str, na: &[u8], home: bool) -> Result<(), StoreError> {
        let started = std::time::Instant::now();
        let done = retrying_write(|| async {
            let mut tx = self.pool.begin().await?;
            let existed = self.home_in(&mut tx, na, home).await?;
            let change = TxnAction::of_meta_write(key, existed, home);
            let last = self.log_in(&mut tx, change.as_ref().map(|(a, h)| (*a, h.as_slice()))).await?;
            tx.commit().await?;
            self.published(last);
            Ok(())
        })
        .await;
        self.counted_write(started, done)
    }

    /// Which of `keys` have rows, read (and locked) inside a bulk load.
    pub(super) async fn existing_in(&self, tx: &mut Tx, keys: &[&[u8]]) -> Result<BTreeSet<Vec<u8>>, sqlx::Error> {
        let mut found = BTreeSet::new();
        if let Some(p) = self.custom.get(Stmt::GetHandle) {
            for key in keys {
                if tx.custom_read(p, key).await?.is_some() {
                    found.insert(key.to_vec());
                }
            }
            return Ok(found);
        }
        let (d, l) = (self.pool.dialect(), self.options.layout);
        let column = l.bytes(d, Col::Handle);
        match tx {
            Tx::Postgres(t) => {
                let sql = format!("select {column} from handles where {} for update", l.pg_any_handle());
                let q = sqlx::query_scalar::<_, Vec<u8>>(&sql).bind(PgKeys::new(keys, l.text(Col::Handle)));
                found.extend(q.fetch_all(&mut **t).await?);
            }
            Tx::MySql(t) => {
                for part in keys.chunks(EXISTS_KEYS) {
                    let list = vec!["?"; part.len()].join(", ");
                    // The index finds the rows by collation, the bytes decide (db.rs, key_binds).
                    let sql = format!(
                        "select {column} from handles where handle in ({list}) and {column} in ({list}) for update"
                    );
                    let mut q = sqlx::query_scalar::<_, Vec<u8>>(&sql);
                    for k in part.iter().chain(part.iter()) {
                        q = q.bind(*k);
                    }
                    found.extend(q.fetch_all(&mut **t).await?);
                }
            }
        }
        Ok(found)
    }

    /// `apply_replicated_with_docs`: every pulled change (the last state of
    /// each handle and prefix), the progress and the entries, one commit.
    async fn apply_pulled(
        &self,
        changes: Vec<ReplicatedChange>,
        progress: Vec<(String, Option<Vec<u8>>)>,
        docs: Vec<DocWrite>,
    ) -> Result<(), StoreError> {
        self.check_writable()?;
        self.txn()?;
        if !docs.is_empty() {
            return Err(super::declined::no_documents());
        }
        if changes.iter().any(|c| c.priority.is_some()) {
            return Err(crate::traits::no_multi_primary());
        }
        let mut handles: BTreeMap<Vec<u8>, Vec<ValueRow>> = BTreeMap::new();
        let mut homes: BTreeMap<Vec<u8>, bool> = BTreeMap::new();
        for c in &changes {
            match c.write() {
                ReplicatedWrite::Handle(k, r) => {
                    self.check_key(&k)?;
                    let rows = match r {
                        Some(r) => {
                            r.validate()?;
                            self.rows_of(&k, &r)?
                        }
                        None => Vec::new(),
                    };
                    handles.insert(k, rows);
                }
                ReplicatedWrite::Meta(k, v) => {
                    let na = k.strip_prefix(HOMED_META_PREFIX).unwrap_or(&k).as_bytes().to_vec();
                    homes.insert(na, v.is_some());
                }
            }
        }
        for (k, _) in &progress {
            if k.starts_with(HOMED_META_PREFIX) {
                return Err(StoreError::Backend(format!("sql: replication progress key {k:?} is a homing")));
            }
            self.meta_table_or_refuse(k)?;
        }
        let started = std::time::Instant::now();
        let done = retrying_write(|| self.apply_once(&changes, &handles, &homes, &progress)).await;
        let done = done.map(|last| self.published(last));
        match done {
            Ok(()) => {
                let n = handles.len() as u64;
                self.stats.committed(0, n, true, started.elapsed().as_micros() as u64);
                Ok(())
            }
            Err(e) => {
                self.stats.failed(0);
                Err(self.write_error(e))
            }
        }
    }

    async fn apply_once(
        &self,
        changes: &[ReplicatedChange],
        handles: &BTreeMap<Vec<u8>, Vec<ValueRow>>,
        homes: &BTreeMap<Vec<u8>, bool>,
        progress: &[(String, Option<Vec<u8>>)],
    ) -> Result<Option<u64>, sqlx::Error> {
        let d = self.pool.dialect();
        let keys: Vec<&[u8]> = handles.keys().map(|k| k.as_slice()).collect();
        let mut tx = self.begin_write(&keys).await?;
        if !keys.is_empty() {
            self.delete_in(&mut tx, &keys).await?;
            let pairs: Vec<(&[u8], &ValueRow)> =
                handles.iter().flat_map(|(k, rows)| rows.iter().map(move |r| (k.as_slice(), r))).collect();
            self.insert_in(&mut tx, &pairs).await?;
        }
        for (na, home) in homes {
            self.home_in(&mut tx, na, *home).await?;
        }
        for (k, v) in progress {
            on_tx!(&mut tx, c => match v {
                Some(v) => sqlx::query(d.sql(&PUT_META)).bind(k.as_bytes()).bind(v.as_slice()).execute(c).await,
                None => sqlx::query(d.sql(&DEL_META)).bind(k.as_bytes()).execute(c).await,
            }
            .map(drop))?;
        }
        // Under the source's ids: those at or below ours are applied, not logged again.
        let mut state = tx.lock_log().await?;
        let before = state.last;
        let entries: Vec<TxnEntry> = changes.iter().filter_map(|c| state.replicated(&c.entry)).collect();
        tx.append(&entries).await?;
        if state.last != before {
            tx.save_log(&state).await?;
        }
        tx.commit().await?;
        Ok((state.last != before).then_some(state.last))
    }
}

/// The log, when `replication_log` is on; each method refuses otherwise.
#[async_trait::async_trait]
impl TxnLogStore for SqlStore {
    async fn txn_log_read(&self, after: u64, limit: usize) -> Result<Vec<TxnEntry>, StoreError> {
        self.log_read(after, limit).await
    }

    async fn txn_log_bounds(&self) -> Result<TxnLogBounds, StoreError> {
        self.log_bounds().await
    }

    async fn txn_log_prune(&self, before_ms: u64) -> Result<u64, StoreError> {
        self.log_prune(before_ms).await
    }

    fn txn_log_subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        match &self.txn {
            Some(txn) => txn.subscribe(),
            None => crate::traits::never_moves(),
        }
    }

    async fn apply_replicated_with_docs(
        &self,
        changes: Vec<ReplicatedChange>,
        progress: Vec<(String, Option<Vec<u8>>)>,
        docs: Vec<DocWrite>,
    ) -> Result<(), StoreError> {
        self.apply_pulled(changes, progress, docs).await
    }

    async fn txn_log_reset(&self, id: u64) -> Result<(), StoreError> {
        self.log_reset(id).await
    }
}
