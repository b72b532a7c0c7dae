//! The transaction log on Cassandra, writer side: ids handed out in groups by
//! one allocator per node, and writer steps 1, 2 and 4 around a change's own
//! lightweight transaction (step 3). Reader side: `txn_reader.rs`; tables:
//! `txn_tables.rs`; design and proofs: docs/cluster.md.
//!
//! Step 1 hands out ids with `UPDATE txn_seq SET last = k+n … IF last = k`: the
//! writers of this node that are waiting at that moment share one transaction
//! (each gets one of the n ids at once, so no id waits for a writer that does
//! not exist). Step 2 writes the id's entry pending (`IF NOT EXISTS`: a reader
//! may have voided it). Step 4 makes it done (`IF state = pending`) with the
//! action of the change that applied, or void when nothing was written.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use scylla::client::session::Session;
use tokio::sync::{mpsc, oneshot};

use super::txn_tables::{applied, bucket_of, EntryState, TxnStatements};
use crate::clock::machine_ms;
use crate::txn_log::TxnNotifier;
use crate::{StoreError, TxnAction};

/// Writers of one node served by one id transaction, at most.
const ALLOCATION_GROUP: usize = 1024;
/// Attempts of a step before a write gives up.
const STEP_ATTEMPTS: u32 = 50;

/// An id handed out, with its date.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    pub id: u64,
    pub date_ms: u64,
}

type SlotReply = oneshot::Sender<Result<Slot, StoreError>>;

/// What a node knows of the log; shared by writers, readers and the poll.
pub struct TxnLog {
    pub(super) session: Arc<Session>,
    pub(super) st: Arc<TxnStatements>,
    allocator: mpsc::Sender<SlotReply>,
    /// Reader state (see `txn_reader.rs`).
    pub(super) view: Mutex<View>,
    /// One frontier walk at a time.
    pub(super) walking: tokio::sync::Mutex<()>,
    pub(super) notifier: TxnNotifier,
    /// Age after which a pending or missing entry is settled by a reader (R3).
    pub(super) settle_after: Duration,
    pub(super) closed: AtomicBool,
}

/// The reader's view: the settled frontier and when ids were seen handed out.
#[derive(Debug, Default)]
pub struct View {
    pub epoch: u64,
    /// Every id at or below it is done or void (in `epoch`).
    pub frontier: u64,
    /// The frontier last written to `txn_state`.
    pub hinted: u64,
    /// `(last, when)`: ids up to `last` were handed out by `when` (R3's age).
    pub handed: VecDeque<(u64, Instant)>,
}

impl TxnLog {
    pub async fn open(
        session: Arc<Session>,
        st: TxnStatements,
        settle_after: Duration,
    ) -> Result<Arc<TxnLog>, StoreError> {
        let st = Arc::new(st);
        let seq = st.seq(&session).await?;
        let frontier = match st.hint(&session).await? {
            Some((f, epoch)) if epoch == seq.epoch => f.max(seq.floor).min(seq.last),
            _ => seq.floor,
        };
        let (tx, rx) = mpsc::channel(ALLOCATION_GROUP);
        tokio::spawn(allocate(session.clone(), st.clone(), rx));
        let view = View { epoch: seq.epoch, frontier, hinted: frontier, handed: VecDeque::new() };
        Ok(Arc::new(TxnLog {
            session,
            st,
            allocator: tx,
            view: Mutex::new(view),
            walking: tokio::sync::Mutex::new(()),
            notifier: TxnNotifier::new(frontier),
            settle_after,
            closed: AtomicBool::new(false),
        }))
    }

    /// Step 1: an id and its date.
    async fn take(&self) -> Result<Slot, StoreError> {
        let (tx, rx) = oneshot::channel();
        self.allocator.send(tx).await.map_err(|_| StoreError::Closed)?;
        let slot = rx.await.map_err(|_| StoreError::Closed)??;
        self.view.lock().seen_handed_out(slot.id);
        Ok(slot)
    }

    /// Steps 1 and 2: an id whose entry is pending, for a change of `handle`
    /// (`action` is what the writer means to do; step 4 says what it did).
    pub async fn begin(&self, action: TxnAction, handle: &[u8]) -> Result<Slot, StoreError> {
        let mut failure = None;
        for _ in 0..STEP_ATTEMPTS {
            let slot = self.take().await?;
            let values = (bucket_of(slot.id), slot.id as i64, i32::from(action.code()), handle, slot.date_ms as i64);
            // Not applied: a reader voided the id meanwhile (R3); take another.
            // Failed (a timeout): the entry may be there, pending; a reader
            // settles it (harmlessly done); one more try with another id.
            match applied(self.session.execute_unpaged(&self.st.pending, values).await, "txn_log pending") {
                Ok(true) => return Ok(slot),
                Ok(false) => {}
                Err(e) if failure.is_some() => return Err(e),
                Err(e) => failure = Some(e),
            }
        }
        Err(failure.unwrap_or_else(|| StoreError::Backend("cassandra: no transaction log id could be written".into())))
    }

    /// Step 4: `slot` done with `action` (the change applied), or void (`None`:
    /// nothing was written). If a reader took the entry over first, the change
    /// is logged again under a new id (after it, so a mirror reading that entry
    /// sees the change). Then the frontier moves on and subscribers are woken.
    pub async fn finish(&self, slot: Slot, action: Option<TxnAction>, handle: &[u8]) -> Result<(), StoreError> {
        let Some(action) = action else {
            // Not applied: a reader settled it already, which is as good.
            self.set_state(slot.id, EntryState::Void, None).await?;
            return self.advance(slot.id).await;
        };
        let mut slot = slot;
        for _ in 0..STEP_ATTEMPTS {
            if self.set_state(slot.id, EntryState::Done, Some(action)).await? {
                return self.advance(slot.id).await;
            }
            slot = self.begin(action, handle).await?;
        }
        Err(StoreError::Backend("cassandra: the change could not be logged".into()))
    }

    /// `UPDATE txn_log SET state = … IF state = pending`; a failure with an
    /// unknown outcome is settled by reading the entry back at SERIAL. After
    /// one, "not applied" may mean that ours applied meanwhile (its proposal
    /// completed by the next try: `lost.rs`), so the entry is read then too.
    async fn set_state(&self, id: u64, state: EntryState, action: Option<TxnAction>) -> Result<bool, StoreError> {
        let values = (state as i32, action.map(|a| i32::from(a.code())), bucket_of(id), id as i64);
        let mut lost = None;
        for _ in 0..3 {
            match applied(self.session.execute_unpaged(&self.st.finish, &values).await, "txn_log finish") {
                Ok(true) => return Ok(true),
                Ok(false) if lost.is_none() => return Ok(false),
                Ok(false) => {}
                Err(e) => lost = Some(e),
            }
            if let Ok(Some(row)) = self.st.one_serial(&self.session, id).await {
                if row.state != EntryState::Pending {
                    return Ok(row.state == state && row.action == action);
                }
            }
        }
        Err(lost.unwrap_or_else(|| StoreError::Backend("cassandra: txn_log finish failed".into())))
    }

    /// A homed-prefix meta write (`meta_put` under `HOMED_META_PREFIX`), by
    /// lightweight transaction so a reader's SERIAL read settles it (R3), and
    /// logged as HomeNa / UnhomeNa when `logged`.
    pub async fn homed_put(&self, key: &str, value: Option<Vec<u8>>, logged: bool) -> Result<(), StoreError> {
        let handle = key.strip_prefix(crate::HOMED_META_PREFIX).unwrap_or(key).as_bytes().to_vec();
        let mut slot = None;
        for _ in 0..STEP_ATTEMPTS {
            let existed = self.st.meta_exists(&self.session, key).await?;
            let action = crate::TxnAction::of_meta_write(key, existed, value.is_some()).map(|(a, _)| a);
            let Some(action) = action else {
                // Unhoming what is not homed: nothing to write or log.
                if let Some(s) = slot {
                    self.finish(s, None, &handle).await?;
                }
                return Ok(());
            };
            if logged && slot.is_none() {
                slot = Some(self.begin(action, &handle).await?);
            }
            let result = match (&value, existed) {
                (Some(v), false) => self.session.execute_unpaged(&self.st.meta_insert, (key, v)).await,
                (Some(v), true) => self.session.execute_unpaged(&self.st.meta_update, (v, key)).await,
                (None, _) => self.session.execute_unpaged(&self.st.meta_delete, (key,)).await,
            };
            // An unknown outcome leaves the entry pending: a reader settles it.
            if applied(result, "meta write")? {
                if let Some(s) = slot {
                    self.finish(s, Some(action), &handle).await?;
                }
                return Ok(());
            }
        }
        Err(StoreError::Backend(format!("cassandra: meta {key}: gave up after {STEP_ATTEMPTS} conflicting writes")))
    }

    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
    }
}

impl View {
    /// Ids up to `last` have been handed out (noted now, for R3's age).
    pub fn seen_handed_out(&mut self, last: u64) {
        if self.handed.back().is_some_and(|&(l, _)| l >= last) {
            return;
        }
        self.handed.push_back((last, Instant::now()));
        // Bounded: dropping the oldest marks only make ids look younger (a
        // reader then waits longer, never settles early).
        while self.handed.len() > 4096 {
            self.handed.pop_front();
        }
    }

    /// How long ago `id` is known to have been handed out (zero if not known).
    pub fn age(&self, id: u64) -> Duration {
        self.handed.iter().find(|&&(l, _)| l >= id).map_or(Duration::ZERO, |&(_, t)| t.elapsed())
    }

    /// Forget marks the frontier has passed (keeping the newest).
    pub fn forget_below(&mut self, frontier: u64) {
        while self.handed.len() > 1 && self.handed.front().is_some_and(|&(l, _)| l <= frontier) {
            self.handed.pop_front();
        }
    }
}

/// The allocator of a node (step 1): takes the writers waiting now, hands them
/// consecutive ids in one transaction on `txn_seq`. Ends with its store.
async fn allocate(session: Arc<Session>, st: Arc<TxnStatements>, mut rx: mpsc::Receiver<SlotReply>) {
    let mut known: Option<super::txn_tables::Seq> = None;
    let mut waiting = Vec::with_capacity(ALLOCATION_GROUP);
    while rx.recv_many(&mut waiting, ALLOCATION_GROUP).await > 0 {
        let n = waiting.len() as u64;
        let result = take_ids(&session, &st, &mut known, n).await;
        for (i, reply) in waiting.drain(..).enumerate() {
            let _ = reply.send(match &result {
                Ok(first) => Ok(Slot { id: first.id + i as u64, date_ms: first.date_ms }),
                Err(e) => Err(e.duplicate()),
            });
        }
    }
}

/// `n` consecutive ids; the first, with the date they all carry.
async fn take_ids(
    session: &Session,
    st: &TxnStatements,
    known: &mut Option<super::txn_tables::Seq>,
    n: u64,
) -> Result<Slot, StoreError> {
    for round in 0..super::MAX_ROUNDS {
        let seq = match *known {
            Some(s) => s,
            None => st.seq(session).await?,
        };
        let next = super::txn_tables::Seq {
            last: seq.last + n,
            date_ms: seq.date_ms.max(machine_ms()),
            owner: nonce(),
            ..seq
        };
        let values = (next.last as i64, next.date_ms as i64, next.owner, seq.last as i64);
        match applied(session.execute_unpaged(&st.seq_take, values).await, "txn_seq") {
            Ok(true) => {
                *known = Some(next);
                return Ok(Slot { id: seq.last + 1, date_ms: next.date_ms });
            }
            Ok(false) => *known = None,
            Err(e) => {
                // Unknown outcome: ours applied iff the row carries our nonce.
                *known = None;
                let now = st.seq(session).await.map_err(|_| e.duplicate())?;
                if now.owner == next.owner && now.last == next.last {
                    *known = Some(now);
                    return Ok(Slot { id: seq.last + 1, date_ms: next.date_ms });
                }
            }
        }
        if round > 2 {
            tokio::time::sleep(super::rand_jitter(round)).await;
        }
    }
    Err(StoreError::Backend("cassandra: gave up taking a transaction log id (txn_seq contended)".into()))
}

/// A random 63-bit number.
pub(super) fn nonce() -> i64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(Instant::now().elapsed().as_nanos() ^ u128::from(machine_ms()));
    (h.finish() >> 1) as i64
}
