//! UDP (§4.1). Each SO_REUSEPORT socket gets its own OS thread that takes
//! datagrams in batches with `recvmmsg` and answers a batch with one
//! `sendmmsg`: per-datagram syscalls and epoll wake-ups were most of the CPU
//! spent per request. Multi-datagram requests are reassembled by (peer,
//! request id); replies over 512 bytes go out in 492-byte chunks.

use super::{refuse, serve_admitted};
use crate::admission::Turn;
use crate::native::{read_envelope, Transport};
use crate::state::ServerState;
use handled_proto::envelope::ENVELOPE_LEN;
use handled_proto::header::{OpCode, OpFlags};
use handled_proto::udp::{split_datagrams, Reassembly, MAX_DATAGRAM};
use nix::sys::socket::{recvmmsg, sendmmsg, MsgFlags, MultiHeaders, SockaddrStorage};
use std::collections::HashMap;
use std::io::IoSliceMut;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Datagrams taken per `recvmmsg`.
const BATCH: usize = 32;
/// Pause between receives while refusing (overload): adds at most this much to
/// a refusal's time, well under the 1 ms it may take.
const OVERLOAD_COALESCE: Duration = Duration::from_micros(400);
/// Larger than any datagram a Handle client sends (≤ 512), so oversized junk is
/// seen as truncated rather than silently cut to a plausible prefix.
const RECV_BUFFER: usize = 2048;
/// Unfinished multi-datagram requests are dropped after this long.
const REASSEMBLY_TIMEOUT: Duration = Duration::from_secs(5);
/// At most this many unfinished requests per socket (a flood cannot grow memory).
const MAX_PENDING: usize = 1024;
const SOCKET_BUFFER: usize = 4 << 20;

/// Bind `count` blocking sockets to the same address with SO_REUSEPORT.
pub fn bind(addr: SocketAddr, count: usize) -> std::io::Result<Vec<UdpSocket>> {
    let mut sockets = Vec::with_capacity(count);
    let mut addr = addr;
    for _ in 0..count.max(1) {
        let s = socket2::Socket::new(socket2::Domain::for_address(addr), socket2::Type::DGRAM, Some(socket2::Protocol::UDP))?;
        s.set_reuse_port(true)?;
        let _ = s.set_recv_buffer_size(SOCKET_BUFFER);
        let _ = s.set_send_buffer_size(SOCKET_BUFFER);
        s.bind(&addr.into())?;
        // With port 0 the first bind picks the port; the others must share it.
        addr = s.local_addr()?.as_socket().unwrap_or(addr);
        sockets.push(s.into());
    }
    Ok(sockets)
}

/// Serve one socket: its own thread receives in batches. Cheap requests (plain
/// resolution or site info) that find a free admission permit are answered
/// inline and their replies sent with one `sendmmsg`; everything else (signing,
/// administration, or no free permit) becomes a task that waits in the admission
/// queue or is refused at once. So the receiving thread never waits on slow work,
/// and under overload excess requests get RC_SERVER_TOO_BUSY instead of piling up
/// unread in the kernel buffer and timing out.
pub fn spawn(state: Arc<ServerState>, socket: UdpSocket, runtime: tokio::runtime::Handle) -> std::io::Result<std::thread::JoinHandle<()>> {
    let socket = Arc::new(socket);
    std::thread::Builder::new().name("handled-udp".into()).spawn(move || receive_loop(&state, &socket, &runtime))
}

/// One received datagram, copied out of the batch buffers.
pub struct Datagram {
    pub peer: SocketAddr,
    pub bytes: Vec<u8>,
}

fn receive_loop(state: &Arc<ServerState>, socket: &Arc<UdpSocket>, runtime: &tokio::runtime::Handle) {
    let mut receiver = BatchReceiver::new(socket);
    let mut pending: HashMap<(SocketAddr, i32), (Instant, Reassembly)> = HashMap::new();
    loop {
        let mut cheap = Vec::with_capacity(BATCH);
        let mut refused = Vec::new();
        let received = match receiver.receive() {
            Ok(batch) => batch,
            Err(e) => {
                // ICMP errors from earlier sends surface here; they concern one peer only.
                tracing::debug!("udp recvmmsg: {e}");
                continue;
            }
        };
        for d in received {
            let unit = match read_envelope(&d.bytes) {
                Some(env) if env.truncated => match reassemble(&mut pending, d.peer, &d.bytes) {
                    Some(unit) => unit,
                    None => continue,
                },
                Some(_) => d.bytes,
                None => continue,
            };
            // Admission is decided here, before any task exists: a backlog of
            // spawned tasks would be an unbounded queue of its own.
            let (state2, socket2, peer, arrived) = (state.clone(), socket.clone(), d.peer, Instant::now());
            match state.admission.request() {
                Ok(Turn::Now(permit)) if is_cheap(&unit) => cheap.push((peer, unit, permit)),
                Ok(Turn::Now(permit)) => {
                    runtime.spawn(async move {
                        let replies = serve_admitted(&state2, &unit, Transport::Udp).await;
                        drop(permit);
                        send_batch(&socket2, &replies.into_iter().map(|r| (peer, r)).collect::<Vec<_>>());
                    });
                }
                Ok(Turn::Queued(turn)) => {
                    runtime.spawn(async move {
                        let replies = match turn.wait().await {
                            Ok(permit) => {
                                let replies = serve_admitted(&state2, &unit, Transport::Udp).await;
                                drop(permit);
                                replies
                            }
                            Err(why) => refuse(&state2, &unit, Transport::Udp, why, arrived),
                        };
                        send_batch(&socket2, &replies.into_iter().map(|r| (peer, r)).collect::<Vec<_>>());
                    });
                }
                Err(why) => refused.extend(refuse(state, &unit, Transport::Udp, why, arrived).into_iter().map(|r| (peer, r))),
            }
        }
        let overloaded = !refused.is_empty();
        send_batch(socket, &refused);
        if !cheap.is_empty() {
            let replies = runtime.block_on(async {
                let mut replies = Vec::with_capacity(cheap.len());
                for (peer, unit, permit) in cheap.drain(..) {
                    replies.extend(serve_admitted(state, &unit, Transport::Udp).await.into_iter().map(|r| (peer, r)));
                    drop(permit);
                }
                replies
            });
            send_batch(socket, &replies);
        }
        if overloaded {
            // While refusing, let datagrams gather instead of waking for every
            // one or two: each wake-up preempts the workers doing admitted
            // work, and fuller batches make each refusal cheaper.
            std::thread::sleep(OVERLOAD_COALESCE);
        }
    }
}

/// Plain resolution or site info without a signature: microseconds of work.
fn is_cheap(unit: &[u8]) -> bool {
    let Some(header) = unit.get(ENVELOPE_LEN..ENVELOPE_LEN + 12) else { return false };
    let op = u32::from_be_bytes([header[0], header[1], header[2], header[3]]);
    let flags = OpFlags(u32::from_be_bytes([header[8], header[9], header[10], header[11]]));
    (op == OpCode::RESOLUTION.0 || op == OpCode::GET_SITE_INFO.0) && !flags.contains(OpFlags::CT)
}

/// Batch receiving state for one socket.
pub struct BatchReceiver<'s> {
    socket: &'s UdpSocket,
    headers: MultiHeaders<SockaddrStorage>,
    buffers: Vec<[u8; RECV_BUFFER]>,
}

impl<'s> BatchReceiver<'s> {
    pub fn new(socket: &'s UdpSocket) -> Self {
        BatchReceiver { socket, headers: MultiHeaders::preallocate(BATCH, None), buffers: vec![[0u8; RECV_BUFFER]; BATCH] }
    }

    /// Block for at least one datagram, then take up to a batch of what is queued.
    pub fn receive(&mut self) -> nix::Result<Vec<Datagram>> {
        let fd = self.socket.as_raw_fd();
        let meta: Vec<(Option<SockaddrStorage>, usize, bool)> = {
            let mut slices: Vec<[IoSliceMut<'_>; 1]> = self.buffers.iter_mut().map(|b| [IoSliceMut::new(&mut b[..])]).collect();
            recvmmsg(fd, &mut self.headers, slices.iter_mut(), MsgFlags::MSG_WAITFORONE, None)?
                .map(|m| (m.address, m.bytes, m.flags.contains(MsgFlags::MSG_TRUNC)))
                .collect()
        };
        let mut out = Vec::with_capacity(meta.len());
        for ((address, len, truncated), buffer) in meta.into_iter().zip(self.buffers.iter()) {
            // Larger than any Handle datagram: junk.
            let Some(peer) = address.and_then(|a| to_socket_addr(&a)).filter(|_| !truncated) else { continue };
            out.push(Datagram { peer, bytes: buffer[..len].to_vec() });
        }
        Ok(out)
    }
}

fn to_socket_addr(a: &SockaddrStorage) -> Option<SocketAddr> {
    if let Some(v4) = a.as_sockaddr_in() {
        return Some(SocketAddr::from((v4.ip(), v4.port())));
    }
    a.as_sockaddr_in6().map(|v6| SocketAddr::from((v6.ip(), v6.port())))
}

/// Send every reply, chunking those over 512 bytes, in as few syscalls as the kernel allows.
pub fn send_batch(socket: &UdpSocket, replies: &[(SocketAddr, Vec<u8>)]) {
    let fd = socket.as_raw_fd();
    let mut datagrams: Vec<(SockaddrStorage, Vec<u8>)> = Vec::with_capacity(replies.len());
    for (peer, unit) in replies {
        let addr = SockaddrStorage::from(*peer);
        if unit.len() <= MAX_DATAGRAM {
            datagrams.push((addr, unit.clone()));
        } else if let Some(envelope) = read_envelope(unit) {
            for d in split_datagrams(&envelope, &unit[ENVELOPE_LEN..], false) {
                datagrams.push((addr, d));
            }
        }
    }
    let mut sent = 0;
    while sent < datagrams.len() {
        let chunk = &datagrams[sent..(sent + BATCH).min(datagrams.len())];
        let slices: Vec<[std::io::IoSlice<'_>; 1]> = chunk.iter().map(|(_, d)| [std::io::IoSlice::new(d)]).collect();
        let addrs: Vec<Option<SockaddrStorage>> = chunk.iter().map(|(a, _)| Some(*a)).collect();
        let mut headers = MultiHeaders::<SockaddrStorage>::preallocate(chunk.len(), None);
        match sendmmsg(fd, &mut headers, slices.iter(), &addrs, [], MsgFlags::empty()) {
            Ok(results) => sent += results.count().max(1),
            Err(nix::errno::Errno::EINTR) => {}
            Err(e) => {
                // A full send buffer or an unreachable peer: drop this datagram, as UDP would.
                tracing::debug!("udp sendmmsg: {e}");
                sent += 1;
            }
        }
    }
}

/// Add a chunk; returns the whole unit (first envelope + full message) once complete.
fn reassemble(pending: &mut HashMap<(SocketAddr, i32), (Instant, Reassembly)>, peer: SocketAddr, datagram: &[u8]) -> Option<Vec<u8>> {
    let envelope = read_envelope(datagram)?;
    let key = (peer, envelope.request_id);
    let now = Instant::now();
    if !pending.contains_key(&key) {
        if pending.len() >= MAX_PENDING {
            pending.retain(|_, (started, _)| now.duration_since(*started) < REASSEMBLY_TIMEOUT);
            if pending.len() >= MAX_PENDING {
                return None;
            }
        }
        pending.insert(key, (now, Reassembly::new(&envelope)));
    }
    let (_, reassembly) = pending.get_mut(&key)?;
    match reassembly.add(envelope.sequence, &datagram[ENVELOPE_LEN..]) {
        Ok(Some(message)) => {
            pending.remove(&key);
            let mut unit = Vec::with_capacity(ENVELOPE_LEN + message.len());
            unit.extend_from_slice(&datagram[..ENVELOPE_LEN]);
            unit.extend_from_slice(&message);
            Some(unit)
        }
        Ok(None) => None,
        Err(e) => {
            tracing::debug!("dropping inconsistent multi-datagram request from {peer}: {e}");
            pending.remove(&key);
            None
        }
    }
}
