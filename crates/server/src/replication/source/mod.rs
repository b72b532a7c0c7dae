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
mod dump;
mod layout;
mod sink;
mod txn;

use crate::auth::Caller;
use crate::native::Transport;
use crate::ops::OpError;
use crate::state::ServerState;
use admins::AdminList;
use handled_proto::envelope::Version;
use handled_proto::header::ResponseCode;
use handled_proto::replication::{DumpHandlesRequest, RetrieveTxnRequest};
use handled_proto::request::RequestBody;
use handled_proto::response::ResponseBody;
use sink::Sink;
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use tokio::net::TcpStream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_rustls::TlsAcceptor;

/// Longest a log pull waits for a newer transaction (our long-poll extension).
pub const MAX_WAIT: Duration = Duration::from_secs(30);

/// The source's own state: stream slots, waiting pulls per peer, the TLS
/// acceptor with the site key's certificate (made on first use).
pub struct Source {
    streams: Arc<Semaphore>,
    waits: Arc<Mutex<HashMap<IpAddr, usize>>>,
    acceptor: OnceLock<Option<TlsAcceptor>>,
}

impl Source {
    pub fn new(config: &crate::config::Config) -> Self {
        Source {
            streams: Arc::new(Semaphore::new(config.replication_max_streams.max(1))),
            waits: Arc::default(),
            acceptor: OnceLock::new(),
        }
    }

    fn acceptor(&self, state: &ServerState) -> Option<&TlsAcceptor> {
        self.acceptor
            .get_or_init(|| match crate::transport::tls::site_key_acceptor(&state.config, &state.key) {
                Ok(a) => Some(a),
                Err(e) => {
                    tracing::error!("replication streams over TLS unavailable: {e}");
                    None
                }
            })
            .as_ref()
    }

    /// A waiting slot for `peer`, if it holds fewer than `per_peer`.
    fn wait_slot(&self, peer: IpAddr, per_peer: usize) -> Option<WaitSlot> {
        let mut waits = self.waits.lock().unwrap_or_else(|e| e.into_inner());
        let n = waits.entry(peer).or_insert(0);
        if *n >= per_peer {
            return None;
        }
        *n += 1;
        Some(WaitSlot { waits: self.waits.clone(), peer })
    }
}

/// One long-polling pull of a peer; the count goes down when it is dropped.
struct WaitSlot {
    waits: Arc<Mutex<HashMap<IpAddr, usize>>>,
    peer: IpAddr,
}

impl Drop for WaitSlot {
    fn drop(&mut self) {
        let mut waits = self.waits.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = waits.get_mut(&self.peer) {
            *n -= 1;
            if *n == 0 {
                waits.remove(&self.peer);
            }
        }
    }
}

/// The source's operations, as decoded.
pub enum SourceOp<'r> {
    NextTxnId,
    RetrieveTxnLog(&'r RetrieveTxnRequest),
    DumpHandles(&'r DumpHandlesRequest),
    Backup,
}

impl<'r> SourceOp<'r> {
    pub fn of(request: &'r RequestBody) -> Option<SourceOp<'r>> {
        Some(match request {
            RequestBody::GetNextTxnId { .. } => SourceOp::NextTxnId,
            RequestBody::RetrieveTxnLog(r) => SourceOp::RetrieveTxnLog(r),
            RequestBody::DumpHandles(r) => SourceOp::DumpHandles(r),
            RequestBody::BackupServer { .. } => SourceOp::Backup,
            _ => return None,
        })
    }
}

/// The response body, and for the pulls the stream that follows it.
pub struct Answered {
    pub body: ResponseBody,
    pub stream: Option<Stream>,
}

/// Answer one of the source's operations for `caller`.
pub async fn answer(
    state: &ServerState,
    op: SourceOp<'_>,
    caller: &Caller,
    transport: Transport,
    peer: SocketAddr,
    version: Version,
) -> Result<Answered, OpError> {
    let work = match op {
        SourceOp::NextTxnId => {
            // No authentication, as in Handle.Net: the next id reveals little.
            let bounds = state.store.txn_log_bounds().await?;
            return Ok(Answered { body: ResponseBody::NextTxnId(bounds.last + 1), stream: None });
        }
        SourceOp::Backup => {
            admins::require(state, caller, AdminList::Backup).await?;
            state.store.checkpoint().await?;
            return Ok(Answered { body: ResponseBody::Empty, stream: None });
        }
        SourceOp::RetrieveTxnLog(r) => Work::Txn(r.clone()),
        SourceOp::DumpHandles(r) => Work::Dump(r.clone()),
    };
    if transport != Transport::Tcp {
        return Err(OpError::new(
            ResponseCode::OPERATION_NOT_SUPPORTED,
            "Transaction log pulls and dumps are streamed over native TCP only",
        ));
    }
    admins::require(state, caller, AdminList::Replication).await?;
    let layout = match &work {
        Work::Txn(r) => r.layout,
        Work::Dump(r) => r.layout,
    };
    layout::check(&layout)?;
    let source = &state.replication;
    let wait = match &work {
        Work::Txn(r) => wait_asked(r)
            .and_then(|d| source.wait_slot(peer.ip(), state.config.replication_waits_per_peer).map(|s| (d, s))),
        Work::Dump(_) => None,
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
        Work::Dump(_) => ResponseBody::DumpHandles,
    };
    let stream = Stream { work, tls: version >= Version::V2_8, permit, wait };
    Ok(Answered { body, stream: Some(stream) })
}

/// How long a pull asks to be held, capped; None when it does not ask.
fn wait_asked(r: &RetrieveTxnRequest) -> Option<Duration> {
    let millis = r.wait_millis.filter(|&ms| ms > 0)?;
    Some(Duration::from_millis(millis as u64).min(MAX_WAIT))
}

enum Work {
    Txn(RetrieveTxnRequest),
    Dump(DumpHandlesRequest),
}

/// The streamed part of a pull, to run on the request's connection after the
/// response message.
pub struct Stream {
    work: Work,
    /// Protocol ≥ 2.8: TLS; older: PK-signed.
    tls: bool,
    permit: Option<OwnedSemaphorePermit>,
    wait: Option<(Duration, WaitSlot)>,
}

impl Stream {
    /// Send the stream on `tcp`, then close it. Errors end the connection
    /// (the mirror retries); none is answered, the response has been sent.
    pub async fn run(mut self, state: &ServerState, tcp: TcpStream) -> std::io::Result<()> {
        let write_timeout = Duration::from_secs(state.config.replication_write_timeout_secs.max(1));
        if let (Some((wait, _slot)), Work::Txn(r)) = (self.wait.take(), &self.work) {
            txn::wait_for_newer(state, r, wait).await;
            let slots = state.replication.streams.clone();
            match tokio::time::timeout(write_timeout, slots.acquire_owned()).await {
                Ok(Ok(p)) => self.permit = Some(p),
                _ => return Ok(()),
            }
        }
        let metrics = &state.metrics.replication;
        metrics.streams_active.inc();
        let result = self.send(state, tcp, write_timeout).await;
        metrics.streams_active.dec();
        result
    }

    async fn send(self, state: &ServerState, tcp: TcpStream, write_timeout: Duration) -> std::io::Result<()> {
        let mut sink = if self.tls {
            let Some(acceptor) = state.replication.acceptor(state) else { return Ok(()) };
            Sink::tls(tcp, acceptor, write_timeout).await?
        } else {
            Sink::signed(tcp, &state.key, write_timeout).await?
        };
        match &self.work {
            Work::Txn(r) => txn::send(state, r, &mut sink).await?,
            Work::Dump(r) => dump::send(state, r, &mut sink).await?,
        }
        sink.finish().await
    }
}
