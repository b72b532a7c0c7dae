//! Writes taken together under load (group commit). A create is a
//! transaction of several rounds (the opening with the handle's lock, the
//! locking read, the insert, the commit and its WAL flush), and under load
//! the database's work per create is mostly those rounds. So at most `lanes`
//! write transactions run at once (lanes.rs); swaps that arrive meanwhile
//! wait, and the lane's next transaction takes them together: one opening
//! locking all their handles, one locking read, one delete, one insert, one
//! log append, one commit, for up to [`MOST_KEYS`] distinct handles. A second
//! write of a handle already in the round waits for the next one, so it sees
//! the first.
//!
//! Each swap's outcome is what it would have been alone: its expectation is
//! compared with its handle's rows as the transaction locked them. A
//! transaction that fails is rolled back, then, if it held several swaps and
//! the database refused a statement (not when it is out of reach), they are
//! tried again one a transaction, so that a write the database refuses (a
//! value too large, a collation clash on MariaDB, a custom statement's error,
//! a handle another program keeps locked) fails alone. One that lost a race is tried again whole first (`retrying_write`).
//! A quiet server writes as before: a swap that finds a free lane goes at
//! once, alone.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::oneshot;

use super::custom::Stmt;
use super::error::may_be_one_writes_fault;
use super::lanes::Lanes;
use super::read_batch::MOST_KEYS;
use super::records::{holds, record_of, retrying_write};
use super::values::ValueRow;
use super::{SqlCore, SqlStore};
use crate::{Expect, HandleRecord, StoreError, SwapOutcome, TxnAction};

type Answer = Result<SwapOutcome, StoreError>;

struct Swap {
    key: Vec<u8>,
    expect: Expect,
    /// The new record's rows; `None`: delete.
    rows: Option<Vec<ValueRow>>,
    reply: oneshot::Sender<Answer>,
}

/// The batched writes of one store.
pub(crate) struct WriteBatches {
    lanes: Lanes<Swap>,
    writes: AtomicU64,
    transactions: AtomicU64,
    tries: AtomicU64,
}

/// How many swaps went in how many transactions, since the store was opened
/// (the one-by-one retries of a failed transaction included); `tries`: the
/// transactions begun, each try again after a lost race included.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteCounts {
    pub writes: u64,
    pub transactions: u64,
    pub tries: u64,
}

impl WriteBatches {
    pub(crate) fn new(lanes: usize) -> WriteBatches {
        WriteBatches {
            lanes: Lanes::new(lanes),
            writes: AtomicU64::new(0),
            transactions: AtomicU64::new(0),
            tries: AtomicU64::new(0),
        }
    }

    pub(crate) fn counts(&self) -> WriteCounts {
        WriteCounts {
            writes: self.writes.load(Ordering::Relaxed),
            transactions: self.transactions.load(Ordering::Relaxed),
            tries: self.tries.load(Ordering::Relaxed),
        }
    }
}

/// The next round: the waiting swaps of distinct handles, in the order they
/// came, at most [`MOST_KEYS`]; the others wait on, in their order.
fn distinct_handles(waiting: &mut Vec<Swap>) -> Vec<Swap> {
    let mut round: Vec<Swap> = Vec::new();
    let mut rest = Vec::new();
    for s in waiting.drain(..) {
        if round.len() < MOST_KEYS && !round.iter().any(|r| r.key == s.key) {
            round.push(s);
        } else {
            rest.push(s);
        }
    }
    *waiting = rest;
    round
}

impl SqlStore {
    pub(super) async fn swap_record(
        &self,
        key: &[u8],
        expect: Expect,
        new: Option<HandleRecord>,
    ) -> Result<SwapOutcome, StoreError> {
        self.check_writable()?;
        self.check_key(key)?;
        let rows = new.as_ref().map(|r| self.rows_of(key, r)).transpose()?;
        let (reply, answer) = oneshot::channel();
        if self.writes.lanes.push(Swap { key: key.to_vec(), expect, rows, reply }) {
            // A task of its own: a caller that gives up (a timeout, a client
            // gone) cannot cut the transaction of the others in its round.
            let core = Arc::clone(&self.core);
            tokio::spawn(async move { core.serve_write_lane().await });
        }
        answer.await.unwrap_or_else(|_| Err(StoreError::Backend("sql: a batched write was dropped".into())))
    }
}

impl SqlCore {
    /// Run transactions for the waiting swaps until none waits, then free the lane.
    async fn serve_write_lane(&self) {
        let mut lane = self.writes.lanes.reserved();
        while let Some(round) = lane.next(distinct_handles) {
            let started = Instant::now();
            let answers = self.swap_round(&round).await;
            // /metrics: store_group_commit_size shows how many writes went together.
            let done = answers.iter().filter(|a| a.is_ok()).count() as u64;
            if done > 0 {
                self.stats.committed(done, 0, true, started.elapsed().as_micros() as u64);
            }
            if done < answers.len() as u64 {
                self.stats.failed(answers.len() as u64 - done);
            }
            for (s, a) in round.into_iter().zip(answers) {
                let _ = s.reply.send(a);
            }
        }
    }

    /// Each swap's answer: all in one transaction, or one a transaction
    /// should that fail.
    async fn swap_round(&self, round: &[Swap]) -> Vec<Answer> {
        self.writes.writes.fetch_add(round.len() as u64, Ordering::Relaxed);
        self.writes.transactions.fetch_add(1, Ordering::Relaxed);
        match retrying_write(|| self.swap_together(round)).await {
            Ok(outcomes) => outcomes.into_iter().map(Ok).collect(),
            // Alone, or the database out of reach: the same answer for each
            // (trying each alone would wait out the connect timeout each time).
            Err(e) if round.len() == 1 || !may_be_one_writes_fault(&e) => {
                let e = self.write_error(e);
                round.iter().map(|_| Err(e.duplicate())).collect()
            }
            Err(e) => {
                tracing::debug!("sql: a transaction of {} writes failed ({e}); each is tried alone", round.len());
                let mut answers = Vec::with_capacity(round.len());
                for s in round {
                    self.writes.transactions.fetch_add(1, Ordering::Relaxed);
                    let alone = retrying_write(|| self.swap_together(std::slice::from_ref(s))).await;
                    answers.push(alone.map(|mut o| o.remove(0)).map_err(|e| self.write_error(e)));
                }
                answers
            }
        }
    }

    /// One transaction for `round` (distinct handles): lock the handles,
    /// read their rows locked, compare each, delete and insert what changes,
    /// log it (the log's lock last, txn_log.rs) and commit.
    async fn swap_together(&self, round: &[Swap]) -> Result<Vec<SwapOutcome>, sqlx::Error> {
        self.writes.tries.fetch_add(1, Ordering::Relaxed);
        let keys: Vec<&[u8]> = round.iter().map(|s| s.key.as_slice()).collect();
        let mut tx = self.begin_write(&keys).await?;
        let mut current = Vec::with_capacity(round.len());
        match self.custom.get(Stmt::GetHandle) {
            Some(p) => {
                for key in &keys {
                    current.push(tx.custom_read(p, key).await?);
                }
            }
            None => {
                let mut found = self.reads.fetch(&keys, Some(&mut tx)).await?;
                current.extend(keys.iter().map(|k| record_of(found.remove(*k).unwrap_or_default())));
            }
        }
        let (mut deleted, mut inserted, mut logged) = (Vec::new(), Vec::new(), Vec::new());
        let mut outcomes = Vec::with_capacity(round.len());
        for (s, current) in round.iter().zip(current) {
            if !holds(&s.expect, current.as_ref()) {
                outcomes.push(SwapOutcome::Conflict { current });
                continue;
            }
            if current.is_some() {
                deleted.push(s.key.as_slice());
            }
            if let Some(rows) = &s.rows {
                inserted.extend(rows.iter().map(|r| (s.key.as_slice(), r)));
            }
            if let Some(action) = TxnAction::of_handle_write(current.is_some(), s.rows.is_some()) {
                logged.push((action, s.key.as_slice()));
            }
            outcomes.push(SwapOutcome::Done { previous: current });
        }
        if deleted.is_empty() && inserted.is_empty() {
            tx.rollback().await?; // nothing to delete, nothing to write
            return Ok(outcomes);
        }
        if !deleted.is_empty() {
            self.delete_in(&mut tx, &deleted).await?;
        }
        self.insert_in(&mut tx, &inserted).await?;
        let last = self.log_in(&mut tx, logged).await?;
        tx.commit().await?;
        self.published(last);
        Ok(outcomes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn swap(key: &str) -> Swap {
        Swap { key: key.into(), expect: Expect::Any, rows: None, reply: oneshot::channel().0 }
    }

    #[test]
    fn a_round_holds_each_handle_once_and_the_rest_wait_in_order() {
        let mut waiting: Vec<Swap> = ["a", "b", "a", "c", "b", "a"].into_iter().map(swap).collect();
        let keys = |v: &[Swap]| v.iter().map(|s| String::from_utf8(s.key.clone()).unwrap()).collect::<Vec<_>>();
        assert_eq!(keys(&distinct_handles(&mut waiting)), ["a", "b", "c"]);
        assert_eq!(keys(&waiting), ["a", "b", "a"]);
        assert_eq!(keys(&distinct_handles(&mut waiting)), ["a", "b"]);
        assert_eq!(keys(&distinct_handles(&mut waiting)), ["a"]);
        let mut many: Vec<Swap> = (0..MOST_KEYS + 3).map(|i| swap(&i.to_string())).collect();
        assert_eq!(distinct_handles(&mut many).len(), MOST_KEYS);
        assert_eq!(many.len(), 3);
    }
}
