//! What one UDP request may make the server send. A 71-byte resolution
//! request had brought back 257 KB (3,624 datagrams) for a 240-value record,
//! to whatever source address the request claimed: an amplifier. So an answer
//! over `udp_max_response_bytes`, or beyond a source's share of answer bytes
//! per second (like DNS response-rate limiting), is replaced by a short
//! refusal that sends the client to TCP.
//!
//! The refusal is RC_SESSION_TIMEOUT (500) with a message saying why. The
//! stock Java client (9.x `HandleResolver.sendRequestToServerByProtocol`)
//! treats a 500 to a request without a session as a failure of that protocol
//! and tries the next one, TCP; in a session it first drops the session and
//! asks again, then does the same. There is no "truncated, use TCP" code in
//! the protocol (docs/handle-protocol.md §4.1).

use handled_proto::header::ResponseCode;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::Instant;

/// Sources whose answer budgets are remembered per socket; beyond it budgets
/// back to full are forgotten, and if that is not enough, all are.
const MAX_SOURCES: usize = 8192;

/// The code of the "ask over TCP" answer (see the module comment).
pub const USE_TCP: ResponseCode = ResponseCode::SESSION_TIMEOUT;

/// Why an answer is not sent over UDP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotOverUdp {
    TooLarge { bytes: usize, limit: usize },
    RateLimited,
}

impl NotOverUdp {
    pub fn message(&self) -> String {
        match self {
            NotOverUdp::TooLarge { bytes, limit } => {
                format!("Response of {bytes} bytes is over this server's UDP limit of {limit}: ask over TCP")
            }
            NotOverUdp::RateLimited => "Too many UDP response bytes for this address: ask over TCP".into(),
        }
    }
}

struct Budget {
    bytes: f64,
    at: Instant,
}

/// Per socket: the size limit and each source's budget of answer bytes.
pub struct UdpAnswers {
    max_response: usize,
    /// Answer bytes per second per source address (also the burst); 0 = no limit.
    rate: f64,
    budgets: Mutex<HashMap<IpAddr, Budget>>,
}

impl UdpAnswers {
    pub fn new(max_response: usize, rate_bytes_per_sec: usize) -> Self {
        UdpAnswers { max_response, rate: rate_bytes_per_sec as f64, budgets: Mutex::new(HashMap::new()) }
    }

    /// May answers of `bytes` in all go to `peer` over UDP now? Charges them if so.
    /// Loopback sources are not rate-limited: nobody outside the host can
    /// send datagrams claiming them, so they cannot be used to reflect.
    pub fn check(&self, peer: IpAddr, bytes: usize, now: Instant) -> Result<(), NotOverUdp> {
        if bytes > self.max_response {
            return Err(NotOverUdp::TooLarge { bytes, limit: self.max_response });
        }
        if self.rate <= 0.0 || peer.is_loopback() || peer.to_canonical().is_loopback() {
            return Ok(());
        }
        let mut budgets = self.budgets.lock().unwrap_or_else(|e| e.into_inner());
        if budgets.len() >= MAX_SOURCES && !budgets.contains_key(&peer) {
            let (rate, full_after) = (self.rate, 1.0);
            budgets
                .retain(|_, b| b.bytes + now.saturating_duration_since(b.at).as_secs_f64() * rate < rate * full_after);
            if budgets.len() >= MAX_SOURCES {
                budgets.clear();
            }
            budgets.shrink_to_fit();
        }
        let budget = budgets.entry(peer).or_insert(Budget { bytes: self.rate, at: now });
        budget.bytes =
            (budget.bytes + now.saturating_duration_since(budget.at).as_secs_f64() * self.rate).min(self.rate);
        budget.at = now;
        if budget.bytes < bytes as f64 {
            return Err(NotOverUdp::RateLimited);
        }
        budget.bytes -= bytes as f64;
        Ok(())
    }

    #[cfg(test)]
    fn sources(&self) -> usize {
        self.budgets.lock().unwrap().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// F15: large answers are refused over UDP, and each source gets a
    /// bounded budget of answer bytes per second, kept in bounded state.
    #[test]
    fn udp_answers_are_bounded_in_size_and_rate_per_source() {
        let a = UdpAnswers::new(4096, 10_000);
        let t0 = Instant::now();
        let source = |n: u32| IpAddr::from(std::net::Ipv4Addr::from(0x0a00_0000 + n));
        assert_eq!(a.check(source(1), 257_000, t0), Err(NotOverUdp::TooLarge { bytes: 257_000, limit: 4096 }));
        for _ in 0..3 {
            a.check(source(1), 3000, t0).unwrap();
        }
        assert_eq!(a.check(source(1), 3000, t0), Err(NotOverUdp::RateLimited), "10,000 bytes a second");
        a.check(source(2), 3000, t0).expect("other sources have their own budget");
        a.check(source(1), 3000, t0 + Duration::from_millis(300)).expect("the budget refills");
        let localhost = IpAddr::from([127, 0, 0, 1]);
        for _ in 0..10 {
            a.check(localhost, 4000, t0).expect("loopback cannot be spoofed from outside: not limited");
        }
        for n in 0..3 * MAX_SOURCES as u32 {
            let _ = a.check(source(n), 100, t0 + Duration::from_secs(5));
        }
        assert!(a.sources() <= MAX_SOURCES, "per-source state is bounded");
    }
}
