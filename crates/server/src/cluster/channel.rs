//! The cluster channel: how a writer tells its peers what to drop from their
//! caches, and learns that they did. TCP, one frame per message:
//! `u32 length ‖ body ‖ HMAC-SHA256(key, body)`, body = `kind ‖ seq u64 ‖
//! payload`; each message (an invalidation; a write's pending mark before it
//! runs, and its settlement after) is answered by an ack carrying its seq. The key is
//! derived from the site key (every node has it, no one outside the site), so
//! nothing else can drop caches or fake acknowledgements; a frame with a bad
//! tag closes the connection and drops nothing. Frames are bounded in bytes and
//! keys, every read has a timeout, connections in are bounded in count, per
//! address, and apart for those that have not yet sent a frame that verified
//! ([`super::channel_slots`]).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hmac::{Hmac, Mac};
use parking_lot::Mutex;
use sha2::Sha256;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::channel_slots::{Slots, FIRST_FRAME};
use crate::cache::{Change, RecordCache};

type HmacSha256 = Hmac<Sha256>;

const TAG: usize = 32;
/// Largest frame body accepted (keys are handle names and index values); a
/// change that does not fit is sent as "everything". With the pending
/// connections' budget, bounds what peers without the key can make a node
/// hold (8 MiB).
pub const MAX_FRAME: usize = 256 << 10;
/// Most keys in one frame; a larger change is sent as "everything".
pub const MAX_KEYS: usize = 4096;
/// What a frame asks of its peer (an ack answers each of the others).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// Drop a change.
    Invalidate = 1,
    Ack = 2,
    /// A write may change these keys: neither answer nor fill them until settled.
    MarkPending = 3,
    /// That write ran: lift its mark, drop what it changed.
    Settle = 4,
}
/// An idle connection from a peer is closed after this long.
const IDLE: Duration = Duration::from_secs(120);
/// Kept connections per peer.
const POOL_PER_PEER: usize = 8;

/// The channel's key, from the site's private key.
pub fn channel_key(site_secret: &[u8]) -> [u8; 32] {
    let mut mac = HmacSha256::new_from_slice(b"handled cluster channel").expect("any key length");
    mac.update(site_secret);
    mac.finalize().into_bytes().into()
}

fn tag(key: &[u8; 32], body: &[u8]) -> [u8; TAG] {
    let mut mac = HmacSha256::new_from_slice(key).expect("any key length");
    mac.update(body);
    mac.finalize().into_bytes().into()
}

fn frame(key: &[u8; 32], kind: u8, seq: u64, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + 9 + payload.len() + TAG);
    out.extend_from_slice(&((9 + payload.len() + TAG) as u32).to_be_bytes());
    out.push(kind);
    out.extend_from_slice(&seq.to_be_bytes());
    out.extend_from_slice(payload);
    let t = tag(key, &out[4..]);
    out.extend_from_slice(&t);
    out
}

/// A change as an invalidation's or a mark's payload: `u8 all ‖ u32 count ‖
/// (u32 len ‖ key)*`; "everything" when it does not fit half a frame (so that
/// a settlement's two fit one, and a mark and its lift read alike).
pub fn encode_change(change: &Change) -> Vec<u8> {
    let fits = |keys: &[Vec<u8>]| {
        keys.len() <= MAX_KEYS && 5 + keys.iter().map(|k| 4 + k.len()).sum::<usize>() + 4 <= (MAX_FRAME - 9 - TAG) / 2
    };
    match change {
        Change::Keys(keys) if fits(keys) => {
            let mut out = vec![0];
            out.extend_from_slice(&(keys.len() as u32).to_be_bytes());
            for k in keys {
                out.extend_from_slice(&(k.len() as u32).to_be_bytes());
                out.extend_from_slice(k);
            }
            out
        }
        _ => vec![1, 0, 0, 0, 0],
    }
}

fn decode_change(mut b: &[u8]) -> Option<Change> {
    fn take<'a>(b: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
        (b.len() >= n).then(|| {
            let (h, t) = b.split_at(n);
            *b = t;
            h
        })
    }
    let all = take(&mut b, 1)?[0];
    let count = u32::from_be_bytes(take(&mut b, 4)?.try_into().ok()?) as usize;
    if all == 1 {
        return b.is_empty().then_some(Change::All);
    }
    if all != 0 || count > MAX_KEYS {
        return None;
    }
    let mut keys = Vec::with_capacity(count);
    for _ in 0..count {
        let n = u32::from_be_bytes(take(&mut b, 4)?.try_into().ok()?) as usize;
        keys.push(take(&mut b, n)?.to_vec());
    }
    b.is_empty().then_some(Change::Keys(keys))
}

/// A settlement's payload: `u32 len ‖ the mark lifted ‖ the change dropped`.
pub fn encode_settle(pending: &Change, change: &Change) -> Vec<u8> {
    let lifted = encode_change(pending);
    let mut out = (lifted.len() as u32).to_be_bytes().to_vec();
    out.extend_from_slice(&lifted);
    out.extend_from_slice(&encode_change(change));
    out
}

fn decode_settle(b: &[u8]) -> Option<(Change, Change)> {
    let n = u32::from_be_bytes(b.get(..4)?.try_into().ok()?) as usize;
    let lifted = b.get(4..4usize.checked_add(n)?)?;
    Some((decode_change(lifted)?, decode_change(&b[4 + n..])?))
}

/// Why no frame was read.
enum NoFrame {
    /// Closed or timed out.
    Gone,
    /// A bad length or tag.
    Refused,
}

/// Read one frame: (kind, seq, payload).
async fn read_frame(s: &mut TcpStream, key: &[u8; 32], first_byte: Duration) -> Result<(u8, u64, Vec<u8>), NoFrame> {
    let mut len = [0u8; 4];
    match tokio::time::timeout(first_byte, s.read_exact(&mut len)).await {
        Ok(Ok(_)) => {}
        _ => return Err(NoFrame::Gone),
    }
    let len = u32::from_be_bytes(len) as usize;
    if !(9 + TAG..=MAX_FRAME).contains(&len) {
        return Err(NoFrame::Refused);
    }
    let mut body = vec![0u8; len];
    match tokio::time::timeout(Duration::from_secs(2), s.read_exact(&mut body)).await {
        Ok(Ok(_)) => {}
        _ => return Err(NoFrame::Gone),
    }
    let (msg, t) = body.split_at(len - TAG);
    let mut mac = HmacSha256::new_from_slice(key).expect("any key length");
    mac.update(msg);
    mac.verify_slice(t).map_err(|_| NoFrame::Refused)?;
    let seq = u64::from_be_bytes(msg[1..9].try_into().expect("8 bytes"));
    Ok((msg[0], seq, msg[9..].to_vec()))
}

/// A message a peer acts on.
enum Message {
    Invalidate(Change),
    MarkPending(Change),
    Settle(Change, Change),
}

impl Message {
    fn decode(kind: u8, payload: &[u8]) -> Option<Message> {
        match kind {
            k if k == Kind::Invalidate as u8 => decode_change(payload).map(Message::Invalidate),
            k if k == Kind::MarkPending as u8 => decode_change(payload).map(Message::MarkPending),
            k if k == Kind::Settle as u8 => decode_settle(payload).map(|(p, c)| Message::Settle(p, c)),
            _ => None,
        }
    }
}

/// Counters of the channel (metrics).
#[derive(Default)]
pub struct ChannelStats {
    pub received: std::sync::atomic::AtomicU64,
    pub refused_frames: std::sync::atomic::AtomicU64,
}

/// Serve peers' invalidations for `cache` on `listener` until dropped.
pub async fn serve(listener: TcpListener, key: [u8; 32], cache: Arc<RecordCache>, stats: Arc<ChannelStats>) {
    // Connections end with this task (a JoinSet aborts what it holds when dropped).
    let mut connections = tokio::task::JoinSet::new();
    let slots = Slots::default();
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            Some(_) = connections.join_next() => continue,
        };
        let Ok((mut stream, peer)) = accepted else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let Some(mut slot) = slots.pending(peer.ip()) else {
            tracing::debug!(%peer, "cluster channel: no slot for another connection from this address");
            continue;
        };
        let (cache, stats) = (cache.clone(), stats.clone());
        connections.spawn(async move {
            let _ = stream.set_nodelay(true);
            loop {
                // A stranger gets a short deadline for its first frame; a peer may idle.
                let wait = if slot.is_authenticated() { IDLE } else { FIRST_FRAME };
                let message = match read_frame(&mut stream, &key, wait).await {
                    Ok((kind, seq, payload)) => Message::decode(kind, &payload).map(|m| (seq, m)),
                    Err(NoFrame::Refused) => None,
                    Err(NoFrame::Gone) => break,
                };
                let Some((seq, message)) = message else {
                    stats.refused_frames.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    tracing::warn!(%peer, "cluster channel: a frame that is not a valid message; closing");
                    break;
                };
                if !slot.authenticate() {
                    tracing::warn!(%peer, "cluster channel: every authenticated slot is taken; closing");
                    break;
                }
                match message {
                    Message::Invalidate(change) => cache.invalidate(&change),
                    Message::MarkPending(pending) => cache.mark_pending(&pending),
                    Message::Settle(pending, change) => cache.settle(&pending, &change),
                }
                stats.received.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if stream.write_all(&frame(&key, Kind::Ack as u8, seq, &[])).await.is_err() {
                    break;
                }
            }
        });
    }
}

/// The sending side: kept connections per peer.
pub struct Peers {
    key: [u8; 32],
    idle: Mutex<HashMap<SocketAddr, Vec<TcpStream>>>,
    seq: std::sync::atomic::AtomicU64,
}

impl Peers {
    pub fn new(key: [u8; 32]) -> Self {
        Peers { key, idle: Mutex::new(HashMap::new()), seq: std::sync::atomic::AtomicU64::new(rand::random()) }
    }

    /// Send a message of `kind` (its payload encoded by [`encode_change`] or
    /// [`encode_settle`]) to `addr` and wait for its ack, within `timeout` in
    /// all. `false`: no ack.
    pub async fn send(&self, addr: SocketAddr, kind: Kind, payload: &[u8], timeout: Duration) -> bool {
        let seq = self.seq.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let msg = frame(&self.key, kind as u8, seq, payload);
        let exchange = async {
            let kept = self.idle.lock().get_mut(&addr).and_then(Vec::pop);
            // A kept connection may have been closed by the peer: one fresh try then.
            for stream in [kept, None] {
                let was_kept = stream.is_some();
                let mut stream = match stream {
                    Some(s) => s,
                    None => match TcpStream::connect(addr).await {
                        Ok(s) => s,
                        Err(_) => return false,
                    },
                };
                let _ = stream.set_nodelay(true);
                if stream.write_all(&msg).await.is_ok() {
                    match read_frame(&mut stream, &self.key, timeout).await {
                        Ok((k, s, _)) if k == Kind::Ack as u8 && s == seq => {
                            let mut idle = self.idle.lock();
                            let pool = idle.entry(addr).or_default();
                            if pool.len() < POOL_PER_PEER {
                                pool.push(stream);
                            }
                            return true;
                        }
                        _ if !was_kept => return false,
                        _ => {}
                    }
                }
            }
            false
        };
        tokio::time::timeout(timeout, exchange).await.unwrap_or(false)
    }

    /// Forget the kept connections of peers no longer in `live`.
    pub fn retain(&self, live: &[SocketAddr]) {
        self.idle.lock().retain(|a, _| live.contains(a));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use handled_store::{DocumentStore, IndexMatch, MemoryStore};

    /// A frame under another key is refused: the connection closes, nothing
    /// is dropped and no ack comes back; the right key drops and acks.
    #[tokio::test]
    async fn a_frame_with_a_bad_hmac_is_refused_and_drops_nothing() {
        let cache = crate::cache::CachingStore::new(Arc::new(MemoryStore::new()), 1 << 20);
        cache.docs.doc_lookup("reg", "user", IndexMatch::Exact(b"a"), None, 10).await.unwrap();
        assert_eq!(cache.cache_stats().entries, 1);
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let stats = Arc::new(ChannelStats::default());
        let key = channel_key(b"site key");
        let server = tokio::spawn(serve(listener, key, cache.cache.clone(), stats.clone()));
        let payload = encode_change(&Change::All);
        let forger = Peers::new(channel_key(b"another site"));
        assert!(
            !forger.send(addr, Kind::Invalidate, &payload, Duration::from_millis(500)).await,
            "no ack to a forged frame"
        );
        assert_eq!(cache.cache_stats().entries, 1, "a forged frame drops nothing");
        // A truncated or oversized frame: refused too.
        let mut raw = TcpStream::connect(addr).await.unwrap();
        raw.write_all(&(u32::MAX).to_be_bytes()).await.unwrap();
        let mut buf = [0u8; 1];
        assert_eq!(raw.read(&mut buf).await.unwrap_or(0), 0, "closed");
        assert_eq!(cache.cache_stats().entries, 1);
        let site = Peers::new(key);
        assert!(site.send(addr, Kind::Invalidate, &payload, Duration::from_millis(500)).await);
        assert_eq!(cache.cache_stats().entries, 0, "the site's frame drops");
        assert!(
            site.send(addr, Kind::Invalidate, &payload, Duration::from_millis(500)).await,
            "over the kept connection"
        );
        assert_eq!(stats.received.load(std::sync::atomic::Ordering::Relaxed), 2);
        assert_eq!(stats.refused_frames.load(std::sync::atomic::Ordering::Relaxed), 2, "the forged and the oversized");
        server.abort();
    }

    /// Issue 25 R7: 64 idle connections from strangers made the node drop
    /// its peers' connections (peers then fenced it). Now strangers hold only
    /// the pending budget, for a short while; the site's frames still go through.
    #[tokio::test]
    async fn idle_strangers_neither_crowd_out_peers_nor_stay() {
        let cache = crate::cache::CachingStore::new(Arc::new(MemoryStore::new()), 1 << 20);
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let key = channel_key(b"site key");
        let server = tokio::spawn(serve(listener, key, cache.cache.clone(), Arc::new(ChannelStats::default())));
        let site = Peers::new(key);
        let payload = encode_change(&Change::All);
        assert!(
            site.send(addr, Kind::Invalidate, &payload, Duration::from_millis(500)).await,
            "a pooled connection first"
        );
        let mut strangers = Vec::new();
        for i in 0..80u8 {
            let s = tokio::net::TcpSocket::new_v4().unwrap();
            s.bind(SocketAddr::from(([127, 0, 9, i], 0))).unwrap();
            strangers.push(s.connect(addr).await.unwrap());
        }
        for _ in 0..20 {
            assert!(
                site.send(addr, Kind::Invalidate, &payload, Duration::from_millis(500)).await,
                "the peer still gets through"
            );
        }
        // Past the first-frame deadline every stranger has been closed.
        tokio::time::sleep(FIRST_FRAME + Duration::from_millis(500)).await;
        for s in &mut strangers {
            let mut buf = [0u8; 1];
            let read = tokio::time::timeout(Duration::from_secs(1), s.read(&mut buf)).await;
            assert!(matches!(read, Ok(Ok(0)) | Ok(Err(_))), "a stranger's connection is still open: {read:?}");
        }
        assert!(site.send(addr, Kind::Invalidate, &payload, Duration::from_millis(500)).await);
        server.abort();
    }

    #[test]
    fn changes_round_trip_and_bad_payloads_are_refused() {
        let keys = Change::Keys(vec![b"habc".to_vec(), Vec::new()]);
        assert_eq!(decode_change(&encode_change(&keys)), Some(keys.clone()));
        assert_eq!(decode_change(&encode_change(&Change::All)), Some(Change::All));
        let many = Change::Keys(vec![b"k".to_vec(); MAX_KEYS + 1]);
        assert_eq!(decode_change(&encode_change(&many)), Some(Change::All), "too many keys: everything");
        let big = Change::Keys(vec![vec![b'k'; 64 << 10]; 4]);
        let payload = encode_change(&big);
        assert!(payload.len() + 9 + TAG <= MAX_FRAME && decode_change(&payload) == Some(Change::All), "too big");
        let fits = Change::Keys(vec![vec![b'k'; 60 << 10]; 2]);
        assert_eq!(decode_change(&encode_change(&fits)), Some(fits.clone()));
        // A settlement carries two changes of up to half a frame each.
        let settle = encode_settle(&fits, &fits);
        assert!(settle.len() + 9 + TAG <= MAX_FRAME);
        assert_eq!(decode_settle(&settle), Some((fits.clone(), fits)));
        assert_eq!(decode_settle(&encode_settle(&keys, &Change::All)), Some((keys, Change::All)));
        assert_eq!(decode_settle(&[0, 0, 0, 9, 0]), None, "a lift longer than the payload");
        assert_eq!(decode_change(&[0, 0, 0, 0, 1, 0, 0, 0, 9, 1]), None, "truncated");
        assert_eq!(decode_change(&[2, 0, 0, 0, 0]), None);
    }
}
