//! The transaction log on Cassandra, reader side (rules R1–R3 of
//! docs/cluster.md): ids are walked in order; a done entry is served, a void
//! one skipped; a pending or missing one stops the walk while it is young
//! (its writer may still be at work) and is settled once it is old: a missing
//! entry is written void, a pending one is made done after a SERIAL read of
//! its row (which finishes or rules out the write in flight). So once a walk
//! has passed an id, every id below it is done or void for good, and nothing
//! can appear there any more.
//!
//! Each node keeps the frontier (every id at or below it settled) in memory,
//! moves it on after its own writes (`advance`) and, for other nodes' writes,
//! by a poll (`poll`), and wakes `txn_log_subscribe` with it.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use super::txn_log::TxnLog;
use super::txn_tables::{applied, bucket_of, EntryRow, EntryState, Seq};
use crate::{StoreError, TxnAction, TxnEntry, TXN_LOG_READ_MAX};

/// Rows read per page.
const PAGE: usize = 1000;
/// Ids one walk goes through at most (served or not), so one call is bounded.
const WALK_MAX: u64 = 50_000;

/// Where a walk stopped.
struct Walked {
    /// Every id in `(from, settled]` was seen done or void.
    settled: u64,
}

impl TxnLog {
    /// R1: the sequence row at SERIAL; notes what is handed out, and starts
    /// over from the floor after a reset (a new epoch).
    pub(super) async fn handed_out(&self) -> Result<Seq, StoreError> {
        let seq = self.st.seq(&self.session).await?;
        let mut view = self.view.lock();
        if view.epoch != seq.epoch {
            view.epoch = seq.epoch;
            view.frontier = seq.floor;
            view.hinted = 0;
            view.handed.clear();
        }
        view.frontier = view.frontier.max(seq.floor).min(seq.last);
        view.seen_handed_out(seq.last);
        Ok(seq)
    }

    /// Walk `(from, upto]` (ids all handed out), pushing served entries to
    /// `out` until it holds `limit` (no `out`: only settle).
    async fn walk(
        &self,
        from: u64,
        upto: u64,
        limit: usize,
        mut out: Option<&mut Vec<TxnEntry>>,
    ) -> Result<Walked, StoreError> {
        let mut at = from;
        let stop = upto.min(from.saturating_add(WALK_MAX));
        let room = |out: &Option<&mut Vec<TxnEntry>>| out.as_ref().is_none_or(|o| o.len() < limit);
        'pages: while at < stop && room(&out) {
            let rows = self.st.page(&self.session, at, stop, PAGE).await?;
            let full = rows.len() == PAGE;
            let page_end = if full {
                rows.last().map_or(at, |r| r.id)
            } else {
                stop.min((bucket_of(at + 1) as u64 + 1) * super::txn_tables::BUCKET_IDS - 1)
            };
            let mut rows = rows.into_iter().peekable();
            while at < page_end && room(&out) {
                let id = at + 1;
                let row = match rows.peek() {
                    Some(r) if r.id == id => rows.next(),
                    _ => None, // missing: handed out, not written (yet)
                };
                let row = match row {
                    Some(r) if r.state != EntryState::Pending => r,
                    seen => {
                        if self.view.lock().age(id) < self.settle_after {
                            break 'pages; // R3: young, its writer may be at work
                        }
                        match self.settle(id, seen.is_some()).await? {
                            Some(r) => r,
                            None => break 'pages,
                        }
                    }
                };
                if let (EntryState::Done, Some(out)) = (row.state, out.as_mut()) {
                    out.push(row.entry()?);
                }
                at = id;
            }
        }
        Ok(Walked { settled: at })
    }

    /// R3 for an old entry: settle it and read it back at SERIAL (`None` if it
    /// could not be settled now).
    async fn settle(&self, id: u64, seen: bool) -> Result<Option<EntryRow>, StoreError> {
        let mut row = if seen { self.st.one_serial(&self.session, id).await? } else { None };
        for _ in 0..3 {
            match &row {
                Some(r) if r.state != EntryState::Pending => return Ok(row),
                Some(r) => self.take_over(r).await?,
                None => {
                    let v = (bucket_of(id), id as i64);
                    applied(self.session.execute_unpaged(&self.st.void_missing, v).await, "txn_log void")?;
                }
            }
            row = self.st.one_serial(&self.session, id).await?;
        }
        Ok(None)
    }

    /// A pending entry whose writer died or stalled: read its row at SERIAL
    /// (finishing or ruling out the write in flight), then mark the entry done
    /// with what that row now says.
    async fn take_over(&self, r: &EntryRow) -> Result<(), StoreError> {
        let meta = matches!(r.action, Some(TxnAction::HomeNa | TxnAction::UnhomeNa));
        let action = if meta {
            let key = crate::homed_meta_key(&r.handle);
            if self.st.meta_exists(&self.session, &key).await? {
                TxnAction::HomeNa
            } else {
                TxnAction::UnhomeNa
            }
        } else {
            if self.st.handle_present(&self.session, &r.handle).await? {
                TxnAction::Update
            } else {
                TxnAction::Delete
            }
        };
        let values = (EntryState::Done as i32, Some(i32::from(action.code())), bucket_of(r.id), r.id as i64);
        applied(self.session.execute_unpaged(&self.st.finish, values).await, "txn_log take over")?;
        Ok(())
    }

    /// Move the frontier on towards `upto` (ids known handed out) and wake
    /// subscribers. One walk at a time; writers finishing together wait for
    /// the walk in progress, which usually passes their ids too.
    pub(super) async fn advance(&self, upto: u64) -> Result<(), StoreError> {
        let _walking = self.walking.lock().await;
        let (from, epoch) = {
            let v = self.view.lock();
            (v.frontier, v.epoch)
        };
        if from >= upto {
            return Ok(());
        }
        // Stops at a young entry: its writer, or the poll, goes on from there.
        let walked = self.walk(from, upto, 0, None).await?;
        self.settled_to(epoch, walked.settled);
        Ok(())
    }

    /// Record a new frontier (same epoch only) and publish it.
    fn settled_to(&self, epoch: u64, settled: u64) {
        let mut v = self.view.lock();
        if v.epoch == epoch && settled > v.frontier {
            v.frontier = settled;
            v.forget_below(settled);
            self.notifier.publish(settled);
        }
    }

    /// The poll (other nodes' writes, and settling what writers left): R1, then
    /// move the frontier on, and write the frontier hint when it moved.
    pub(super) async fn poll(&self) -> Result<(), StoreError> {
        let seq = self.handed_out().await?;
        self.advance(seq.last).await?;
        let (frontier, epoch, hinted) = {
            let v = self.view.lock();
            (v.frontier, v.epoch, v.hinted)
        };
        if frontier != hinted {
            let values = (frontier as i64, epoch as i64);
            self.session
                .execute_unpaged(&self.st.hint_write, values)
                .await
                .map_err(|e| super::backend_error("txn_state", e))?;
            self.view.lock().hinted = frontier;
        }
        Ok(())
    }

    /// `txn_log_read`: entries after `after`, at most `limit`.
    pub(super) async fn read(&self, after: u64, limit: usize) -> Result<Vec<TxnEntry>, StoreError> {
        let limit = limit.min(TXN_LOG_READ_MAX);
        let mut out = Vec::new();
        if limit == 0 {
            return Ok(out);
        }
        let seq = self.handed_out().await?;
        let from = after.max(seq.floor);
        if from >= seq.last {
            return Ok(out);
        }
        let walked = self.walk(from, seq.last, limit, Some(&mut out)).await?;
        if from <= self.view.lock().frontier {
            self.settled_to(seq.epoch, walked.settled);
        }
        Ok(out)
    }

    /// `txn_log_bounds`: `last` is the frontier (ids above it may still be
    /// pending), so a dump taken at `last` holds every change up to it.
    pub(super) async fn bounds(&self) -> Result<crate::TxnLogBounds, StoreError> {
        let seq = self.handed_out().await?;
        self.advance(seq.last).await?;
        let frontier = self.view.lock().frontier;
        let mut first = Vec::new();
        let mut from = seq.floor;
        // The first done entry, past any void ones (each walk is bounded).
        while first.is_empty() && from < frontier {
            let walked = self.walk(from, frontier, 1, Some(&mut first)).await?;
            if walked.settled <= from {
                break;
            }
            from = walked.settled;
        }
        Ok(crate::TxnLogBounds {
            floor: seq.floor,
            last: frontier.max(seq.floor),
            first_date_ms: first.first().map(|e| e.date_ms),
        })
    }
}

/// Keep the frontier moving while the store lives: every `every`, a poll.
pub(super) fn spawn_poll(log: Weak<TxnLog>, every: Duration) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let Some(log) = log.upgrade() else { return };
            if log.closed.load(Ordering::Acquire) {
                return;
            }
            if let Err(e) = log.poll().await {
                tracing::debug!("cassandra: transaction log poll: {e}");
            }
            drop::<Arc<TxnLog>>(log);
        }
    });
}
