//! `handled` as a replication source for Handle.Net mirrors (docs/replication.md):
//! GET_NEXT_TXN_ID (1000), RETRIEVE_TXN_LOG (1001), DUMP_HANDLES (1002) and
//! BACKUP_SERVER (1003). The two pulls answer with a short response message,
//! then the same TCP connection carries a stream ([`Stream`], run by the TCP
//! transport once the response is written): the log after the mirror's last id
//! ([`txn`]) or every handle ([`dump`]), with the values current at send time,
//! filtered by the mirror's hash layout ([`layout`]).
//!
//! Bounds: streams at once (`replication_max_streams`), a deadline on every
//! write (`replication_write_timeout_secs`), pages of the log and of the store
//! read one at a time; long polls capped at [`MAX_WAIT`] and counted per peer.

pub mod admins;
mod all_queues;
mod dump;
mod layout;
pub mod prune;
mod sink;
mod txn;

use crate::auth::Caller;
use crate::ops::OpError;
use crate::replication::ReplicationContext;
use crate::replication_status::slots::WaitSlot;
use admins::AdminList;
use handled_proto::envelope::Version;
use handled_proto::header::ResponseCode;
use handled_proto::replication::{DumpHandlesRequest, RetrieveTxnRequest, TxnQuery};
use handled_proto::response::ResponseBody;
use sink::Sink;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::net::TcpStream;
use tokio::sync::OwnedSemaphorePermit;

/// Longest a log pull waits for a newer transaction (our long-poll extension).
pub const MAX_WAIT: Duration = Duration::from_secs(30);

/// The source's operations, as decoded.
pub enum SourceOp<'r> {
    NextTxnId,
    RetrieveTxnLog(&'r RetrieveTxnRequest),
    DumpHandles(&'r DumpHandlesRequest),
    Backup,
}

/// The response body, and for the pulls the stream that follows it.
pub struct Answered {
    pub body: ResponseBody,
    pub stream: Option<Stream>,
}

/// Answer one of the source's operations for `caller`; the pulls only when the
/// request came over native TCP (`over_native_tcp`), which can carry the stream.
pub async fn answer(
    state: &ReplicationContext,
    op: SourceOp<'_>,
    caller: &Caller,
    over_native_tcp: bool,
    peer: SocketAddr,
    version: Version,
) -> Result<Answered, OpError> {
    let mut work = match op {
        SourceOp::NextTxnId => {
            // No authentication, as in Handle.Net: the next id reveals little.
            let bounds = state.txn_log().txn_log_bounds().await?;
            return Ok(Answered { body: ResponseBody::NextTxnId(bounds.last + 1), stream: None });
        }
        SourceOp::Backup => {
            admins::require(state, caller, AdminList::Backup).await?;
            state.admin().checkpoint().await?;
            return Ok(Answered { body: ResponseBody::Empty, stream: None });
        }
        SourceOp::RetrieveTxnLog(r) => Work::Txn(r.clone()),
        // The log position a dump names is taken first (see `dump`).
        SourceOp::DumpHandles(r) => Work::Dump(r.clone(), (0, 0)),
    };
    if !over_native_tcp {
        return Err(OpError::new(
            ResponseCode::OPERATION_NOT_SUPPORTED,
            "Transaction log pulls and dumps are streamed over native TCP only",
        ));
    }
    admins::require(state, caller, AdminList::Replication).await?;
    let layout = match &work {
        Work::Txn(r) => r.layout,
        Work::Dump(r, _) => r.layout,
    };
    layout::check(&layout)?;
    // A log the store cannot read is an error answer, not a stream cut short.
    let bounds = state.txn_log().txn_log_bounds().await?;
    if let Work::Dump(_, position) = &mut work {
        *position = (bounds.last, handled_store::clock::machine_ms());
    }
    let source = &state.slots;
    let wait = match &work {
        Work::Txn(r) => wait_asked(r)
            .and_then(|d| source.wait_slot(peer.ip(), state.settings.replication.waits_per_peer).map(|s| (d, s))),
        Work::Dump(..) => None,
    };
    // A waiting pull takes its stream slot when it wakes; others now or never.
    let permit = match wait {
        Some(_) => None,
        None => Some(source.streams.clone().try_acquire_owned().map_err(|_| {
            OpError::new(ResponseCode::SERVER_TOO_BUSY, "Too many replication streams; try again later")
        })?),
    };
    let body = match &work {
        Work::Txn(_) => ResponseBody::RetrieveTxnLog { keep_alive: false },
        Work::Dump(..) => ResponseBody::DumpHandles,
    };
    let stream = Stream { work, tls: version >= Version::V2_8, permit, wait, peer };
    Ok(Answered { body, stream: Some(stream) })
}

/// How long a pull asks to be held, capped; None when it does not ask.
fn wait_asked(r: &RetrieveTxnRequest) -> Option<Duration> {
    let millis = r.wait_millis.filter(|&ms| ms > 0)?;
    Some(Duration::from_millis(millis as u64).min(MAX_WAIT))
}

enum Work {
    Txn(RetrieveTxnRequest),
    /// The request, and the log's last id and the time when it was answered.
    Dump(DumpHandlesRequest, (u64, u64)),
}

/// The streamed part of a pull, to run on the request's connection after the
/// response message.
pub struct Stream {
    work: Work,
    /// Protocol ≥ 2.8: TLS; older: PK-signed.
    tls: bool,
    permit: Option<OwnedSemaphorePermit>,
    wait: Option<(Duration, WaitSlot)>,
    peer: SocketAddr,
}

impl Stream {
    /// Send the stream on `tcp`, then close it. Errors end the connection
    /// (the mirror retries); none is answered, the response has been sent.
    pub async fn run(mut self, state: &ReplicationContext, tcp: TcpStream) -> std::io::Result<()> {
        let write_timeout = Duration::from_secs(state.settings.replication.write_timeout_secs.max(1));
        if let (Some((wait, _slot)), Work::Txn(r)) = (self.wait.take(), &self.work) {
            txn::wait_for_newer(state, r, wait).await;
            let slots = state.slots.streams.clone();
            match tokio::time::timeout(write_timeout, slots.acquire_owned()).await {
                Ok(Ok(p)) => self.permit = Some(p),
                _ => return Ok(()),
            }
        }
        let metrics = &state.metrics.replication;
        metrics.streams_active.inc();
        let peer = self.peer;
        let result = self.send(state, tcp, write_timeout).await;
        metrics.streams_active.dec();
        if let Err(e) = &result {
            tracing::warn!("replication stream to {peer} ended early: {e}");
        }
        result
    }

    async fn send(self, state: &ReplicationContext, tcp: TcpStream, write_timeout: Duration) -> std::io::Result<()> {
        let kind = if matches!(self.work, Work::Txn(_)) { "log pull" } else { "dump" };
        let secured = if self.tls { "TLS" } else { "signed" };
        tracing::debug!("replication: {kind} by {}, {secured} stream", self.peer);
        let mut sink = if self.tls {
            let Some(acceptor) = state.slots.acceptor() else {
                return Err(std::io::Error::other("no TLS certificate for the site key"));
            };
            Sink::tls(tcp, acceptor, write_timeout).await?
        } else {
            Sink::signed(tcp, &state.key, write_timeout).await?
        };
        match &self.work {
            // The all-queues request (proxied mirroring) has its own module over txn's pieces.
            Work::Txn(r) => match &r.query {
                TxnQuery::AllQueues(info) => all_queues::send(state, &r.layout, info, &mut sink).await?,
                TxnQuery::Since { last_txn_id, last_query_date_ms } => {
                    txn::send(state, &r.layout, (*last_txn_id, *last_query_date_ms), &mut sink).await?
                }
            },
            Work::Dump(r, position) => dump::send(state, r, *position, &mut sink).await?,
        }
        sink.finish().await
    }
}
