//! The closed loop over UDP without the async runtime, so that the bench costs
//! less CPU per request than the server it measures: each bench thread (one
//! per core it may use) carries many clients' outstanding requests over a few
//! connected sockets, waits for all of them with one `poll`, and receives and
//! sends in batches (`recvmmsg`, `sendmmsg`). A client is a slot: one request
//! outstanding at a time, the next sent when the answer comes, as in the async
//! loop. Replies find their slot through the request id (slot number in the
//! low bits), so a late or foreign reply is never counted; a request is
//! re-sent after `retry_after` and is a timeout after the run's timeout.

use crate::recorder::{Outcome, Recorder};
use crate::target::Target;
use crate::wire::{judge, ReplyCheck, UnitCache};
use crate::workload::{ClientState, KeySet, Op, OpKind, Workload};
use handled_client::Protocol;
use handled_proto::envelope::{Envelope, ENVELOPE_LEN};
use handled_proto::udp::{Reassembly, MAX_DATAGRAM};
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Slot number bits of a request id; the rest counts the slot's requests.
const SLOT_BITS: u32 = 12;
const MAX_SLOTS_PER_THREAD: usize = 1 << SLOT_BITS;
/// Sockets per thread, at most: several source ports spread the load over a
/// server's `SO_REUSEPORT` sockets (the kernel picks one by address hash).
const MAX_SOCKETS_PER_THREAD: usize = 8;
/// Datagrams per `recvmmsg`.
const BATCH: usize = 32;
/// Handle datagrams are at most 512 bytes; room for larger ones from other servers.
const DATAGRAM_BUFFER: usize = 4096;
/// A resolution request's bytes besides the handle (envelope, header, lengths).
const LONGEST_REQUEST_WITHOUT_HANDLE: usize = 64;
/// How often outstanding requests are checked for re-send and timeout.
const SCAN_EVERY: Duration = Duration::from_millis(5);

/// A closed loop's shape: clients, when each stops, the warm-up.
pub struct ClosedLoop {
    pub clients: usize,
    pub requests_per_client: Option<u64>,
    pub duration: Option<Duration>,
    pub warmup: Duration,
}

/// The settings of a run this engine carries.
pub struct BatchedRun {
    addr: SocketAddr,
    check: ReplyCheck,
    clients: usize,
    requests_per_client: Option<u64>,
    duration: Option<Duration>,
    warmup: Duration,
    timeout: Duration,
    retry_after: Duration,
}

impl BatchedRun {
    /// Plain UDP resolution or site info to one address, closed loop without
    /// pause (the caller checks the loop); None for anything else.
    pub fn new(target: &Target, workload: &Workload, loop_: ClosedLoop, timeout: Duration) -> Option<BatchedRun> {
        let Target::Native { protocol: Protocol::Udp, addrs, check, .. } = target else { return None };
        let simple =
            workload.ops.iter().all(|k| matches!(k, OpKind::Resolve | OpKind::ResolveCertified | OpKind::SiteInfo));
        // Requests must fit one datagram (the async loop splits longer ones).
        let longest = match &workload.keys {
            KeySet::One(h) => h.len(),
            KeySet::Uniform { prefix, .. } | KeySet::Zipf { prefix, .. } => prefix.len() + 21,
        };
        let fits = longest + LONGEST_REQUEST_WITHOUT_HANDLE <= MAX_DATAGRAM;
        if addrs.len() != 1 || !simple || !fits {
            return None;
        }
        Some(BatchedRun {
            addr: addrs[0],
            check: *check,
            clients: loop_.clients.max(1),
            requests_per_client: loop_.requests_per_client,
            duration: loop_.duration,
            warmup: loop_.warmup,
            timeout,
            // As the async loop: the Java client's 0.5 s, or a third of the timeout.
            retry_after: (timeout / 3).max(Duration::from_millis(500)),
        })
    }

    /// Bench threads: one per core this process may use, and no more than clients.
    pub fn threads(&self) -> usize {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        cores.min(self.clients).max(self.clients.div_ceil(MAX_SLOTS_PER_THREAD))
    }

    /// Run the clients on [`threads`](Self::threads) threads, recording into
    /// `recorder` (whose start is `start`, after the warm-up from `origin`).
    pub async fn run(&self, clients: Vec<ClientState>, recorder: Arc<Recorder>, origin: Instant) -> Result<(), String> {
        let threads = self.threads();
        let start = origin + self.warmup;
        let deadline = self.duration.map(|d| start + d);
        let mut groups: Vec<Vec<ClientState>> = (0..threads).map(|_| Vec::new()).collect();
        for (i, c) in clients.into_iter().enumerate() {
            groups[i % threads].push(c);
        }
        let mut handles = Vec::new();
        for (t, group) in groups.into_iter().enumerate() {
            let sockets = group.len().min(MAX_SOCKETS_PER_THREAD);
            let mut thread = BenchThread::new(self, t, group, sockets, start, deadline, recorder.clone())
                .map_err(|e| format!("cannot open a UDP socket to {}: {e}", self.addr))?;
            handles.push(tokio::task::spawn_blocking(move || thread.run()));
        }
        for h in handles {
            h.await.map_err(|e| format!("bench thread: {e}"))?;
        }
        Ok(())
    }
}

struct Slot {
    client: ClientState,
    units: UnitCache,
    socket: usize,
    /// Requests this slot sent (for the next request id).
    sequence: u32,
    /// Requests sent after the warm-up (the per-client limit counts these).
    measured: u64,
    pending: Option<Pending>,
    finished: bool,
}

struct Pending {
    id: i32,
    op: Op,
    sent: Instant,
    last_send: Instant,
    reassembly: Option<Reassembly>,
}

struct BenchThread {
    index: usize,
    sockets: Vec<UdpSocket>,
    slots: Vec<Slot>,
    /// Slots with a request to send, by socket.
    outbox: Vec<Vec<usize>>,
    buffers: Vec<u8>,
    check: ReplyCheck,
    requests_per_client: Option<u64>,
    start: Instant,
    deadline: Option<Instant>,
    timeout: Duration,
    retry_after: Duration,
    recorder: Arc<Recorder>,
    rng: rand::rngs::StdRng,
}

impl BenchThread {
    fn new(
        run: &BatchedRun,
        index: usize,
        clients: Vec<ClientState>,
        sockets: usize,
        start: Instant,
        deadline: Option<Instant>,
        recorder: Arc<Recorder>,
    ) -> std::io::Result<BenchThread> {
        let local: SocketAddr = if run.addr.is_ipv4() { ([0, 0, 0, 0], 0).into() } else { ([0u16; 8], 0).into() };
        let mut opened = Vec::new();
        for _ in 0..sockets.max(1) {
            let s = UdpSocket::bind(local)?;
            s.connect(run.addr)?;
            s.set_nonblocking(true)?;
            recorder.sockets.open();
            opened.push(s);
        }
        let slots = clients
            .into_iter()
            .enumerate()
            .map(|(i, client)| Slot {
                client,
                units: UnitCache::default(),
                socket: i % opened.len(),
                sequence: 0,
                measured: 0,
                pending: None,
                finished: false,
            })
            .collect();
        Ok(BenchThread {
            index,
            outbox: vec![Vec::new(); opened.len()],
            sockets: opened,
            slots,
            buffers: vec![0u8; BATCH * DATAGRAM_BUFFER],
            check: run.check,
            requests_per_client: run.requests_per_client,
            start,
            deadline,
            timeout: run.timeout,
            retry_after: run.retry_after,
            recorder,
            rng: <rand::rngs::StdRng as rand::SeedableRng>::from_rng(&mut rand::rng()),
        })
    }

    fn run(&mut self) {
        let now = Instant::now();
        for s in 0..self.slots.len() {
            self.next_request(s, now);
        }
        let mut next_scan = now + SCAN_EVERY;
        let mut polls: Vec<libc::pollfd> =
            self.sockets.iter().map(|s| libc::pollfd { fd: s.as_raw_fd(), events: libc::POLLIN, revents: 0 }).collect();
        while self.slots.iter().any(|s| !s.finished) {
            self.flush();
            let wait = next_scan.saturating_duration_since(Instant::now()).as_millis().clamp(1, 10) as i32;
            // SAFETY: `polls` is a valid array of pollfd for its length.
            let ready = unsafe { libc::poll(polls.as_mut_ptr(), polls.len() as libc::nfds_t, wait) };
            if ready > 0 {
                for (k, p) in polls.iter().enumerate() {
                    if p.revents != 0 {
                        self.receive(k);
                    }
                }
            }
            let now = Instant::now();
            if now >= next_scan {
                self.scan(now);
                next_scan = now + SCAN_EVERY;
            }
        }
        for _ in &self.sockets {
            self.recorder.sockets.close();
        }
    }

    /// Give slot `s` its next request, or finish it.
    fn next_request(&mut self, s: usize, now: Instant) {
        let past_deadline = self.deadline.is_some_and(|d| now >= d);
        let slot = &mut self.slots[s];
        let limit_reached = self.requests_per_client.is_some_and(|r| slot.measured >= r);
        if past_deadline || limit_reached {
            slot.finished = true;
            return;
        }
        if now >= self.start {
            slot.measured += 1;
        }
        slot.sequence = slot.sequence.wrapping_add(1) & ((1 << (31 - SLOT_BITS)) - 1);
        // Never id 0: sequence 0 is skipped.
        slot.sequence = slot.sequence.max(1);
        let id = ((slot.sequence << SLOT_BITS) | s as u32) as i32;
        let op = slot.client.next(&mut self.rng);
        match slot.units.unit_with_id(&op, id) {
            Ok(_) => {
                // The unit stays in the slot's cache (its last one) until the answer.
                slot.pending = Some(Pending { id, op, sent: now, last_send: now, reassembly: None });
                self.outbox[slot.socket].push(s);
            }
            Err((kind, _)) => {
                slot.pending = None;
                self.recorder.record(self.index, Some(op.name()), now, now, now, &Outcome::Failed { kind });
                slot.finished = true; // the same operation would fail again
            }
        }
    }

    /// Send every queued request, one `sendmmsg` per socket.
    fn flush(&mut self) {
        for k in 0..self.sockets.len() {
            let queued = std::mem::take(&mut self.outbox[k]);
            for chunk in queued.chunks(BATCH) {
                let mut iovecs: Vec<libc::iovec> = Vec::with_capacity(chunk.len());
                for &s in chunk {
                    // Requests longer than one datagram (very long handles) are not batched here.
                    let unit = self.slots[s].units.last_unit().expect("queued with a request");
                    iovecs.push(libc::iovec { iov_base: unit.as_ptr() as *mut libc::c_void, iov_len: unit.len() });
                }
                // SAFETY: zeroed mmsghdr is valid (null name, no control); each points at one iovec above.
                let mut headers: Vec<libc::mmsghdr> = iovecs
                    .iter_mut()
                    .map(|iov| {
                        let mut h: libc::mmsghdr = unsafe { std::mem::zeroed() };
                        h.msg_hdr.msg_iov = iov;
                        h.msg_hdr.msg_iovlen = 1;
                        h
                    })
                    .collect();
                let fd = self.sockets[k].as_raw_fd();
                let mut sent = 0;
                while sent < headers.len() {
                    // SAFETY: headers[sent..] are valid mmsghdr pointing at live buffers.
                    let n = unsafe {
                        libc::sendmmsg(fd, headers[sent..].as_mut_ptr(), (headers.len() - sent) as libc::c_uint, 0)
                    };
                    if n <= 0 {
                        break; // buffer full or an error: the scan re-sends
                    }
                    sent += n as usize;
                }
            }
        }
    }

    /// Read every waiting datagram of socket `k`.
    fn receive(&mut self, k: usize) {
        let fd = self.sockets[k].as_raw_fd();
        loop {
            let mut iovecs: [libc::iovec; BATCH] = std::array::from_fn(|i| libc::iovec {
                iov_base: self.buffers[i * DATAGRAM_BUFFER..].as_mut_ptr() as *mut libc::c_void,
                iov_len: DATAGRAM_BUFFER,
            });
            // SAFETY: zeroed mmsghdr is valid; each points at its own iovec into `buffers`.
            let mut headers: [libc::mmsghdr; BATCH] = std::array::from_fn(|_| unsafe { std::mem::zeroed() });
            for (h, iov) in headers.iter_mut().zip(iovecs.iter_mut()) {
                h.msg_hdr.msg_iov = iov;
                h.msg_hdr.msg_iovlen = 1;
            }
            // SAFETY: `headers` and the buffers they point into live across the call.
            let n = unsafe {
                libc::recvmmsg(
                    fd,
                    headers.as_mut_ptr(),
                    BATCH as libc::c_uint,
                    libc::MSG_DONTWAIT,
                    std::ptr::null_mut(),
                )
            };
            if n <= 0 {
                return; // nothing more (EAGAIN), or an ICMP error: pending requests time out
            }
            let now = Instant::now();
            let lengths: [(usize, bool); BATCH] = std::array::from_fn(|i| {
                let h = &headers[i];
                ((h.msg_len as usize).min(DATAGRAM_BUFFER), h.msg_hdr.msg_flags & libc::MSG_TRUNC != 0)
            });
            // Taken out while the replies are handled (they need `self`), put back after.
            let buffers = std::mem::take(&mut self.buffers);
            for (i, &(len, truncated)) in lengths.iter().take(n as usize).enumerate() {
                self.reply(&buffers[i * DATAGRAM_BUFFER..i * DATAGRAM_BUFFER + len], truncated, now);
            }
            self.buffers = buffers;
            if (n as usize) < BATCH {
                return;
            }
        }
    }

    fn reply(&mut self, datagram: &[u8], truncated: bool, now: Instant) {
        let Some(id) = datagram.get(8..12).map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]])) else { return };
        let s = (id as u32 & (MAX_SLOTS_PER_THREAD as u32 - 1)) as usize;
        let check = self.check;
        let Some(pending) = self.slots.get_mut(s).and_then(|slot| slot.pending.as_mut()).filter(|p| p.id == id) else {
            return; // late (already re-sent and answered, or timed out) or not ours
        };
        let outcome = if truncated {
            Err(("malformed".to_string(), false))
        } else if check == ReplyCheck::Raw {
            judge(datagram, id, check, None)
        } else {
            match Envelope::parse(datagram).and_then(|e| e.check_message_length().map(|l| (e, l))) {
                Err(_) => Err(("malformed".to_string(), false)),
                Ok((_, length)) if pending.reassembly.is_none() && datagram.len() == ENVELOPE_LEN + length => {
                    judge(datagram, id, check, None)
                }
                Ok((envelope, _)) => {
                    // A reply in several datagrams: wait for the rest.
                    let r = pending.reassembly.get_or_insert_with(|| Reassembly::new(&envelope));
                    match r.add_datagram(&envelope, &datagram[ENVELOPE_LEN..]) {
                        Ok(None) => return,
                        Ok(Some(message)) => {
                            let mut whole = datagram[..ENVELOPE_LEN].to_vec();
                            whole.extend_from_slice(&message);
                            judge(&whole, id, check, None)
                        }
                        Err(_) => Err(("malformed".to_string(), false)),
                    }
                }
            }
        };
        let outcome = outcome.unwrap_or_else(|(kind, _)| Outcome::Failed { kind });
        let done = self.slots[s].pending.take().expect("matched above");
        self.recorder.record(self.index, Some(done.op.name()), done.sent, done.sent, now, &outcome);
        self.next_request(s, now);
    }

    /// Re-send requests unanswered for `retry_after`; fail those past the timeout.
    fn scan(&mut self, now: Instant) {
        for s in 0..self.slots.len() {
            let Some(p) = self.slots[s].pending.as_mut() else { continue };
            if now.duration_since(p.sent) >= self.timeout {
                let done = self.slots[s].pending.take().expect("checked above");
                let failed = Outcome::Failed { kind: "timeout".into() };
                self.recorder.record(self.index, Some(done.op.name()), done.sent, done.sent, now, &failed);
                self.next_request(s, now);
            } else if now.duration_since(p.last_send) >= self.retry_after {
                p.last_send = now;
                p.reassembly = None;
                let socket = self.slots[s].socket;
                self.outbox[socket].push(s);
            }
        }
    }
}
