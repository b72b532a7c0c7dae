//! UDP (§4.1). Each SO_REUSEPORT socket gets its own OS thread that takes
//! datagrams in batches with `recvmmsg` and answers a batch with one
//! `sendmmsg`: per-datagram syscalls and epoll wake-ups were most of the CPU
//! spent per request. Multi-datagram requests are reassembled by (peer,
//! request id); replies over 512 bytes go out in 492-byte chunks. The kernel
//! stamps each datagram's arrival, so waits in the socket count in the times.

use super::realtime::RealtimeWhileRefusing;
use super::reassembly::{Reassemblies, REASSEMBLY_TIMEOUT};
use super::udp_answers::{UdpAnswers, USE_TCP};
use crate::admission::Turn;
use crate::config::TransportConfig;
use crate::handler::{Mode, NativeHandler, Transport};
use crate::lifecycle::Stop;
use crate::metrics::Metrics;
use handled_proto::envelope::{Envelope, ENVELOPE_LEN};
use handled_proto::udp::{split_datagrams, MAX_DATAGRAM};
use handled_proto::unit::Unit;
use nix::errno::Errno;
use nix::sys::socket::{
    recvmmsg, sendmmsg, setsockopt, sockopt, ControlMessageOwned, MsgFlags, MultiHeaders, RecvMsg, SockaddrStorage,
};
use nix::sys::time::TimeSpec;
use std::collections::HashSet;
use std::io::IoSliceMut;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Datagrams taken per `recvmmsg`.
const BATCH: usize = 32;
/// Pause between receives while refusing (overload): adds at most this much to
/// a refusal's time, well under the 1 ms it may take.
const OVERLOAD_COALESCE: Duration = Duration::from_micros(400);
/// After the last refusal, keep receiving on that timer this long before
/// blocking in `recvmmsg` again.
const OVERLOAD_LINGER: Duration = Duration::from_millis(20);
/// While refusing, full batches taken back to back before a pause anyway: a
/// flood cannot keep the thread (perhaps at realtime priority) on its core
/// for more than ~1 ms at a time; the kernel drops what the socket cannot hold.
const MAX_BATCHES_WITHOUT_PAUSE: u32 = 4;
/// Larger than any datagram a Handle client sends (≤ 512), so oversized junk is
/// seen as truncated rather than silently cut to a plausible prefix.
const RECV_BUFFER: usize = 2048;
const SOCKET_BUFFER: usize = 4 << 20;
/// Longest wait in `recvmmsg` for a first datagram: how soon an idle thread
/// notices that the server is stopping.
const STOP_CHECK: Duration = Duration::from_millis(100);

/// Bind `count` blocking sockets to the same address with SO_REUSEPORT.
/// Fails with `AddrInUse` when any socket holds the port already: SO_REUSEPORT
/// would let ours join another's group (any socket of this user, e.g. a server
/// of the same process still stopping), and the kernel would then hand each
/// client's datagrams to one of them (a CI run saw a stopping root server
/// answer 301 for a prefix server's port).
pub fn bind(addr: SocketAddr, count: usize) -> std::io::Result<Vec<UdpSocket>> {
    // A socket without SO_REUSEPORT binds only to a port nobody holds; the
    // port it got (when `addr` said 0) is the one the group takes.
    let mut addr = UdpSocket::bind(addr)?.local_addr()?;
    let mut sockets = Vec::with_capacity(count);
    for _ in 0..count.max(1) {
        let s = socket2::Socket::new(
            socket2::Domain::for_address(addr),
            socket2::Type::DGRAM,
            Some(socket2::Protocol::UDP),
        )?;
        s.set_reuse_port(true)?;
        let _ = s.set_recv_buffer_size(SOCKET_BUFFER);
        let _ = s.set_send_buffer_size(SOCKET_BUFFER);
        s.bind(&addr.into())?;
        setsockopt(&s, sockopt::ReceiveTimestampns, &true)?;
        // With port 0 the first bind picks the port; the others must share it.
        addr = s.local_addr()?.as_socket().unwrap_or(addr);
        sockets.push(s.into());
    }
    Ok(sockets)
}

/// Serve one socket with `handler`: its own thread receives in batches, reads
/// each unit once ([`Unit`]). Cheap requests ([`NativeHandler::is_cheap`]:
/// plain resolution or site info) that find a free admission permit are answered
/// inline and their replies sent with one `sendmmsg`; everything else (signing,
/// administration, or no free permit) becomes a task that waits in the admission
/// queue or is refused at once. So the receiving thread never waits on slow work,
/// and under overload excess requests get RC_SERVER_TOO_BUSY instead of piling up
/// unread in the kernel buffer and timing out. The thread ends, and its tasks
/// run under `stop`, once the server stops taking work.
pub fn spawn<H: NativeHandler>(
    handler: Arc<H>,
    settings: &TransportConfig,
    metrics: Arc<Metrics>,
    socket: UdpSocket,
    runtime: tokio::runtime::Handle,
    stop: Stop,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    socket.set_read_timeout(Some(STOP_CHECK))?;
    let socket = Arc::new(socket);
    let alive = stop.alive();
    let settings = settings.clone();
    let ended = RuntimeEnded::watch(&runtime, &stop);
    std::thread::Builder::new().name("handled-udp".into()).spawn(move || {
        let _alive = alive;
        let receiving = Receiving { handler, settings, metrics, socket, runtime, stop, ended };
        receive_loop(&receiving)
    })
}

/// Set once the runtime of the server's tasks has ended. A server dropped
/// without a shutdown serves on until then (its TCP tasks do), and so does
/// the thread; without this it would outlive the runtime, holding a UDP port
/// whose TCP half is free again (a dropped test server's did, and answered
/// for the next server given that port).
#[derive(Clone, Default)]
struct RuntimeEnded(Arc<AtomicBool>);

impl RuntimeEnded {
    /// A task on `runtime` holding a guard until draining starts, or until the
    /// runtime drops it as it ends.
    fn watch(runtime: &tokio::runtime::Handle, stop: &Stop) -> RuntimeEnded {
        struct Guard(RuntimeEnded);
        impl Drop for Guard {
            fn drop(&mut self) {
                (self.0).0.store(true, Ordering::Relaxed);
            }
        }
        let ended = RuntimeEnded::default();
        let (guard, stop) = (Guard(ended.clone()), stop.clone());
        runtime.spawn(async move {
            let _guard = guard;
            stop.draining().await;
        });
        ended
    }

    fn now(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// What a receiving thread works with.
struct Receiving<H> {
    handler: Arc<H>,
    settings: TransportConfig,
    metrics: Arc<Metrics>,
    socket: Arc<UdpSocket>,
    runtime: tokio::runtime::Handle,
    stop: Stop,
    ended: RuntimeEnded,
}

/// One received datagram, copied out of the batch buffers.
pub struct Datagram {
    pub peer: SocketAddr,
    pub bytes: Vec<u8>,
    /// When the kernel received it.
    pub arrived: Instant,
}

fn receive_loop<H: NativeHandler>(receiving: &Receiving<H>) {
    let Receiving { handler, settings, metrics, socket, runtime, stop, ended } = receiving;
    let mut receiver = BatchReceiver::new(socket);
    let mut pending = Reassemblies::new(crate::quota::Quota {
        max_bytes: settings.udp_reassembly_mb << 20,
        per_peer: settings.udp_reassembly_per_peer,
    });
    // While refusing, receive on a timer instead of blocking, and at realtime
    // priority if the process may (`realtime.rs`). A thread woken by a
    // datagram moments after it last ran has not yet earned the right (EEVDF
    // eligibility) to preempt a worker busy signing, so it waited for the next
    // scheduler tick: up to 4 ms at HZ=250, for 2.5% of refusals. A timed
    // pause mostly avoids that; realtime priority always does.
    let mut refusing_until = Instant::now();
    let mut realtime = RealtimeWhileRefusing::new(settings.udp_realtime_refusals);
    let mut batches_without_pause = 0;
    let in_progress = InProgress::default();
    let answers = Arc::new(UdpAnswers::new(settings.udp_max_response_bytes, settings.udp_rate_limit_kb << 10));
    while !stop.is_draining() && !ended.now() {
        let mut cheap = Vec::new();
        let mut refused = Vec::new();
        let refusing = Instant::now() < refusing_until;
        realtime.set_refusing(refusing);
        let received = match receiver.receive(!refusing) {
            Ok(batch) => batch,
            Err(Errno::EAGAIN) => {
                std::thread::sleep(OVERLOAD_COALESCE);
                batches_without_pause = 0;
                continue;
            }
            Err(e) => {
                // ICMP errors from earlier sends surface here; they concern one peer only.
                tracing::debug!("udp recvmmsg: {e}");
                continue;
            }
        };
        for d in received {
            let Ok(envelope) = Envelope::parse(&d.bytes) else { continue };
            // A multi-datagram unit is the completing datagram's envelope and the whole message.
            let bytes = match envelope.truncated {
                true => match pending.add(d.peer, &envelope, &d.bytes, Instant::now()) {
                    Some(unit) => unit,
                    None => continue,
                },
                false => d.bytes,
            };
            let key = (d.peer, envelope.request_id);
            if in_progress.contains(&key) {
                metrics.udp_duplicate_dropped();
                continue;
            }
            let unit = Unit::with_envelope(envelope, bytes);
            // Admission is decided here, before any task exists: a backlog of
            // spawned tasks would be an unbounded queue of its own.
            let (peer, arrived) = (d.peer, d.arrived);
            match handler.admission().request() {
                Ok(Turn::Now(permit)) if handler.is_cheap(&unit) => cheap.push((peer, unit, permit)),
                Ok(turn) => {
                    let claim = in_progress.claim(key);
                    let (handler2, socket2, answers2) = (handler.clone(), socket.clone(), answers.clone());
                    stop.spawn_on(runtime, async move {
                        let replies = match turn.permit().await {
                            Ok(permit) => {
                                let replies = handler2.serve(&unit, Transport::Udp, peer, Mode::Worker).await.units;
                                drop(permit);
                                fit_for_udp(&*handler2, &answers2, peer, &unit, replies)
                            }
                            Err(why) => handler2.refuse(&unit, Transport::Udp, why, arrived),
                        };
                        send_batch(&socket2, &replies.into_iter().map(|r| (peer, r)).collect::<Vec<_>>());
                        drop(claim);
                    });
                }
                Err(why) => {
                    refused.extend(handler.refuse(&unit, Transport::Udp, why, arrived).into_iter().map(|r| (peer, r)))
                }
            }
        }
        // Unfinished requests go by age even while only single datagrams arrive.
        pending.sweep(Instant::now());
        let refused_some = !refused.is_empty();
        if refused_some {
            refusing_until = Instant::now() + OVERLOAD_LINGER;
        }
        send_batch(socket, &refused);
        if !cheap.is_empty() {
            // Boxed: the future holds the handler's whole state machine, and
            // block_on moves its argument; under light load (a request or two per
            // batch) copying it was a third of the server's instructions (callgrind).
            // Inline: a REC resolution is here because the resolver's cache
            // held its answer; this thread never waits on upstream.
            let replies = runtime.block_on(Box::pin(async {
                let mut replies = Vec::with_capacity(cheap.len());
                for (peer, unit, permit) in cheap.drain(..) {
                    let answer = handler.serve(&unit, Transport::Udp, peer, Mode::Inline).await.units;
                    replies
                        .extend(fit_for_udp(&**handler, &answers, peer, &unit, answer).into_iter().map(|r| (peer, r)));
                    drop(permit);
                }
                replies
            }));
            send_batch(socket, &replies);
        }
        if pause_after_batch(refusing || refused_some, receiver.filled(), &mut batches_without_pause) {
            std::thread::sleep(OVERLOAD_COALESCE);
        }
    }
}

/// While refusing, pause after a batch to let datagrams gather instead of
/// waking for every one or two: each wake-up preempts the workers doing
/// admitted work, and fuller batches make each refusal cheaper. Not while a
/// burst is still queued (a full batch), or its tail would wait one pause per
/// batch; but at least every `MAX_BATCHES_WITHOUT_PAUSE` batches.
fn pause_after_batch(overloaded: bool, filled: bool, batches_without_pause: &mut u32) -> bool {
    if !overloaded {
        *batches_without_pause = 0;
        return false;
    }
    if filled && *batches_without_pause + 1 < MAX_BATCHES_WITHOUT_PAUSE {
        *batches_without_pause += 1;
        return false;
    }
    *batches_without_pause = 0;
    true
}

/// This socket's requests that are queued or being served off the receiving
/// thread, by (peer, request id). A client that hears nothing for a while
/// sends the same request again. Refusing the copy made it give up on an
/// answer already on its way (at 10× overload of the default throttle, 83% of
/// the admitted work went to clients that had given up); queueing it would do
/// the work twice. So the copy is dropped.
#[derive(Clone, Default)]
struct InProgress(Arc<Mutex<HashSet<(SocketAddr, i32)>>>);

/// Held while a request is queued or served; dropping it (the reply sent, or
/// the task gone) lets the same (peer, request id) in again.
struct Claim {
    in_progress: InProgress,
    key: (SocketAddr, i32),
}

impl InProgress {
    fn contains(&self, key: &(SocketAddr, i32)) -> bool {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).contains(key)
    }

    /// Only the receiving thread claims, after `contains` said no: tasks only
    /// release, so nothing can claim the same key in between.
    fn claim(&self, key: (SocketAddr, i32)) -> Claim {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).insert(key);
        Claim { in_progress: self.clone(), key }
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        self.in_progress.0.lock().unwrap_or_else(PoisonError::into_inner).remove(&self.key);
    }
}

/// The answers to `unit`, or an "ask over TCP" answer when they are too large
/// for UDP or beyond the peer's budget of answer bytes ([`UdpAnswers`]).
fn fit_for_udp(
    handler: &impl NativeHandler,
    answers: &UdpAnswers,
    peer: SocketAddr,
    unit: &Unit<Vec<u8>>,
    replies: Vec<Vec<u8>>,
) -> Vec<Vec<u8>> {
    let bytes = replies.iter().map(Vec::len).sum();
    match answers.check(peer.ip(), bytes, Instant::now()) {
        Ok(()) => replies,
        Err(why) => {
            tracing::debug!("udp answer to {peer} not sent: {why:?}");
            vec![handler.unhandled_error(unit, USE_TCP, &why.message())]
        }
    }
}

/// Batch receiving state for one socket.
pub struct BatchReceiver<'s> {
    socket: &'s UdpSocket,
    headers: MultiHeaders<SockaddrStorage>,
    buffers: Vec<[u8; RECV_BUFFER]>,
    /// The last receive took a whole batch, so more may be queued.
    filled: bool,
}

impl<'s> BatchReceiver<'s> {
    pub fn new(socket: &'s UdpSocket) -> Self {
        let headers = MultiHeaders::preallocate(BATCH, Some(nix::cmsg_space!(TimeSpec)));
        BatchReceiver { socket, headers, buffers: vec![[0u8; RECV_BUFFER]; BATCH], filled: false }
    }

    /// Take up to a batch of what is queued: when `block`, wait for at least
    /// one datagram; otherwise fail with EAGAIN if there is none.
    pub fn receive(&mut self, block: bool) -> nix::Result<Vec<Datagram>> {
        let fd = self.socket.as_raw_fd();
        let flags = if block { MsgFlags::MSG_WAITFORONE } else { MsgFlags::MSG_DONTWAIT };
        let meta: Vec<(Option<SockaddrStorage>, usize, bool, Option<TimeSpec>)> = {
            let mut slices: Vec<[IoSliceMut<'_>; 1]> =
                self.buffers.iter_mut().map(|b| [IoSliceMut::new(&mut b[..])]).collect();
            recvmmsg(fd, &mut self.headers, slices.iter_mut(), flags, None)?
                .map(|m| (m.address, m.bytes, m.flags.contains(MsgFlags::MSG_TRUNC), arrival_stamp(&m)))
                .collect()
        };
        self.filled = meta.len() == BATCH;
        let clocks = (SystemTime::now(), Instant::now());
        let mut out = Vec::with_capacity(meta.len());
        for ((address, len, truncated, stamp), buffer) in meta.into_iter().zip(self.buffers.iter()) {
            // Larger than any Handle datagram: junk.
            let Some(peer) = address.and_then(|a| to_socket_addr(&a)).filter(|_| !truncated) else { continue };
            out.push(Datagram { peer, bytes: buffer[..len].to_vec(), arrived: arrival_instant(stamp, clocks) });
        }
        Ok(out)
    }

    /// Whether the last receive took a whole batch (more may be waiting).
    pub fn filled(&self) -> bool {
        self.filled
    }
}

fn arrival_stamp<S>(m: &RecvMsg<'_, '_, S>) -> Option<TimeSpec> {
    m.cmsgs().ok()?.find_map(|c| match c {
        ControlMessageOwned::ScmTimestampns(stamp) => Some(stamp),
        _ => None,
    })
}

/// The kernel stamps arrival on the wall clock; `clocks` reads both clocks
/// after the receive, so the datagram's age carries over to `Instant`.
fn arrival_instant(stamp: Option<TimeSpec>, (wall_now, now): (SystemTime, Instant)) -> Instant {
    let Some(stamp) = stamp else { return now };
    let stamped =
        UNIX_EPOCH + Duration::new(stamp.tv_sec().max(0) as u64, stamp.tv_nsec().clamp(0, 999_999_999) as u32);
    // A wall clock stepped since the stamp could claim any age; none is older
    // than an unfinished request may be kept.
    let age = wall_now.duration_since(stamped).unwrap_or_default().min(REASSEMBLY_TIMEOUT);
    now.checked_sub(age).unwrap_or(now)
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
    let chunks: Vec<(SockaddrStorage, Vec<u8>)> = replies
        .iter()
        .filter(|(_, unit)| unit.len() > MAX_DATAGRAM)
        .filter_map(|(peer, unit)| Some((SockaddrStorage::from(*peer), Envelope::parse(unit).ok()?, unit)))
        .flat_map(|(addr, envelope, unit)| {
            split_datagrams(&envelope, &unit[ENVELOPE_LEN..], false).into_iter().map(move |d| (addr, d))
        })
        .collect();
    let datagrams: Vec<(SockaddrStorage, &[u8])> = replies
        .iter()
        .filter(|(_, unit)| unit.len() <= MAX_DATAGRAM)
        .map(|(peer, unit)| (SockaddrStorage::from(*peer), unit.as_slice()))
        .chain(chunks.iter().map(|(addr, d)| (*addr, d.as_slice())))
        .collect();
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Never a share of another group's datagrams: a port held by another
    /// SO_REUSEPORT socket is refused, not joined.
    #[test]
    fn a_port_held_by_another_group_is_refused() {
        let held = bind("127.0.0.1:0".parse().unwrap(), 2).unwrap();
        let at = held[0].local_addr().unwrap();
        assert_eq!(bind(at, 1).unwrap_err().kind(), std::io::ErrorKind::AddrInUse);
        let group = bind("127.0.0.1:0".parse().unwrap(), 3).unwrap();
        let port = group[0].local_addr().unwrap().port();
        assert!(port != at.port() && group.iter().all(|s| s.local_addr().unwrap().port() == port));
    }

    #[test]
    fn arrival_is_the_kernel_stamp_not_the_read() {
        let server = bind("127.0.0.1:0".parse().unwrap(), 1).unwrap().remove(0);
        let client = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut receiver = BatchReceiver::new(&server);
        // The kernel turns receive stamping on shortly after the first socket
        // asks (a deferred switch); until then it stamps at the read.
        let mut waited = Duration::ZERO;
        for _ in 0..50 {
            client.send_to(b"hello", server.local_addr().unwrap()).unwrap();
            std::thread::sleep(Duration::from_millis(30));
            let batch = receiver.receive(true).unwrap();
            assert_eq!((batch.len(), batch[0].bytes.as_slice()), (1, &b"hello"[..]));
            waited = batch[0].arrived.elapsed();
            if waited >= Duration::from_millis(25) {
                break;
            }
        }
        assert!(waited >= Duration::from_millis(25) && waited < Duration::from_secs(5), "waited {waited:?}");
        assert!(!receiver.filled());
        assert_eq!(receiver.receive(false).err(), Some(Errno::EAGAIN), "nothing queued: a poll must not block");
    }

    #[test]
    fn a_flood_of_full_batches_still_pauses() {
        let mut n = 0;
        assert!(!pause_after_batch(false, true, &mut n), "not refusing: never pause");
        assert!(pause_after_batch(true, false, &mut n), "refusing, socket drained: pause");
        let pauses: Vec<bool> = (0..8).map(|_| pause_after_batch(true, true, &mut n)).collect();
        assert_eq!(pauses, [false, false, false, true, false, false, false, true]);
        assert!(!pause_after_batch(true, true, &mut n) && !pause_after_batch(false, false, &mut n));
        assert_eq!(n, 0, "leaving overload starts the count afresh");
    }

    #[test]
    fn arrival_survives_missing_or_stepped_clocks() {
        let (wall, now) = (SystemTime::now(), Instant::now());
        let at = |d: Duration| {
            let t = wall.duration_since(UNIX_EPOCH).unwrap().checked_sub(d).unwrap();
            Some(TimeSpec::new(t.as_secs() as i64, t.subsec_nanos() as i64))
        };
        assert_eq!(arrival_instant(None, (wall, now)), now);
        let age = now - arrival_instant(at(Duration::from_millis(3)), (wall, now));
        assert!(age.abs_diff(Duration::from_millis(3)) < Duration::from_micros(2), "{age:?}");
        // Stamped "after" the read (the wall clock stepped back): no wait.
        let future = wall.duration_since(UNIX_EPOCH).unwrap() + Duration::from_secs(60);
        assert_eq!(arrival_instant(Some(TimeSpec::new(future.as_secs() as i64, 0)), (wall, now)), now);
        // Stepped forward by an hour: capped.
        assert!(now - arrival_instant(at(Duration::from_secs(3600)), (wall, now)) <= REASSEMBLY_TIMEOUT);
    }
}
