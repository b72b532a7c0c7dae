//! The accept loop every TCP listener shares: connections beyond the
//! [`ConnectionLimits`] are refused at once (with a short answer, when the
//! protocol has one), accept errors (EMFILE when descriptors run out) back off
//! exponentially instead of spinning, and both are logged at most once a second
//! with a count (F2: ~17,000 "Too many open files" lines a minute).

use super::limits::{ConnectionLimits, ConnectionSlot, Refusal};
use crate::logging::ThrottledWarning;
use parking_lot::Mutex;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};

const FIRST_BACKOFF: Duration = Duration::from_millis(10);
const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// Told of every refused connection (listener name, why): the metrics.
pub type RefusalHook = Arc<dyn Fn(&'static str, Refusal) + Send + Sync>;

pub struct Acceptor {
    /// Shared by the accept loops of one port ([`Acceptor::another`]).
    listener: Arc<TcpListener>,
    /// Listener name in log lines.
    name: &'static str,
    limits: Arc<ConnectionLimits>,
    /// Bytes written (without waiting) to a refused connection before it is closed.
    refusal: fn(Refusal) -> Option<Vec<u8>>,
    on_refusal: RefusalHook,
    backoff: Duration,
    /// Shared by a port's accept loops, so that the port logs as one.
    errors: Arc<Mutex<ThrottledWarning>>,
    refusals: Arc<Mutex<ThrottledWarning>>,
}

impl Acceptor {
    pub fn new(
        listener: TcpListener,
        name: &'static str,
        limits: Arc<ConnectionLimits>,
        refusal: fn(Refusal) -> Option<Vec<u8>>,
        on_refusal: RefusalHook,
    ) -> Acceptor {
        let second = Duration::from_secs(1);
        Acceptor {
            listener: Arc::new(listener),
            name,
            limits,
            refusal,
            on_refusal,
            backoff: Duration::ZERO,
            errors: Arc::new(Mutex::new(ThrottledWarning::new(second))),
            refusals: Arc::new(Mutex::new(ThrottledWarning::new(second))),
        }
    }

    /// A further accept loop on the same listener, limits and log throttling
    /// (its own backoff), for another task.
    pub fn another(&self) -> Acceptor {
        Acceptor {
            listener: self.listener.clone(),
            name: self.name,
            limits: self.limits.clone(),
            refusal: self.refusal,
            on_refusal: self.on_refusal.clone(),
            backoff: Duration::ZERO,
            errors: self.errors.clone(),
            refusals: self.refusals.clone(),
        }
    }

    pub fn limits(&self) -> &Arc<ConnectionLimits> {
        &self.limits
    }

    /// The next connection within the limits, with its slot (hold it while the
    /// connection is open).
    pub async fn next(&mut self) -> (TcpStream, SocketAddr, ConnectionSlot) {
        loop {
            match self.listener.accept().await {
                Ok((stream, peer)) => {
                    self.backoff = Duration::ZERO;
                    match self.limits.try_open(peer.ip()) {
                        Ok(slot) => return (stream, peer, slot),
                        Err(why) => self.refuse(stream, peer, why),
                    }
                }
                Err(e) => {
                    self.backoff = (self.backoff * 2).clamp(FIRST_BACKOFF, MAX_BACKOFF);
                    let name = self.name;
                    self.errors.lock().warn(format_args!("{name} accept: {e}; retrying in {:?}", self.backoff));
                    tokio::time::sleep(self.backoff).await;
                }
            }
        }
    }

    fn refuse(&mut self, stream: TcpStream, peer: SocketAddr, why: Refusal) {
        if let (Some(answer), Ok(mut socket)) = ((self.refusal)(why), stream.into_std()) {
            use std::io::{Read, Write};
            // Straight to the (non-blocking) socket, never waiting: read what
            // already arrived, so that closing sends FIN after the answer, not
            // a reset that could destroy it.
            let mut sink = [0u8; 4096];
            let _ = socket.read(&mut sink);
            let _ = socket.write(&answer);
        }
        let name = self.name;
        (self.on_refusal)(name, why);
        self.refusals.lock().warn(format_args!("{name}: refused a connection from {peer}: {}", why.as_str()));
    }
}

/// The refusal on the HTTP ports: 503 with `Retry-After`, then close.
pub fn http_refusal(why: Refusal) -> Option<Vec<u8>> {
    let body = serde_json::json!({ "responseCode": 3, "message": format!("Server too busy ({})", why.as_str()) });
    let body = body.to_string();
    Some(
        format!(
            "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\n\
             Connection: close\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .into_bytes(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn refused_connections_get_the_answer_and_are_closed() {
        use tokio::io::AsyncReadExt;
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let limits = ConnectionLimits::new(1, 0, 1 << 20);
        let refused = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let count = refused.clone();
        let hook: RefusalHook = Arc::new(move |_, _| {
            count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        });
        let mut acceptor = Acceptor::new(listener, "test", limits.clone(), http_refusal, hook);
        let _first = TcpStream::connect(addr).await.unwrap();
        let (stream, _, slot) = acceptor.next().await;
        let mut second = TcpStream::connect(addr).await.unwrap();
        // next() refuses the second, then waits for one within the limits.
        let waiting = tokio::spawn(async move {
            let (_s, peer, _slot) = acceptor.next().await;
            peer
        });
        let mut answer = String::new();
        second.read_to_string(&mut answer).await.unwrap();
        assert!(answer.starts_with("HTTP/1.1 503 ") && answer.contains("too many open connections"), "{answer}");
        drop((stream, slot));
        let third = TcpStream::connect(addr).await.unwrap();
        assert_eq!(waiting.await.unwrap(), third.local_addr().unwrap(), "a freed slot serves the next one");
        assert_eq!(limits.open(), 0);
        assert_eq!(refused.load(std::sync::atomic::Ordering::Relaxed), 1, "the hook heard of the refusal");
    }
}
