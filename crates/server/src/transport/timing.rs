//! `Server-Timing: app;dur=<ms>` on HTTP responses: the server's own time for a
//! request, shared by every HTTP service (tunnel, JSON API, domain registry).

use hyper::header::{HeaderMap, HeaderName, HeaderValue};
use std::time::Instant;

const SERVER_TIMING: HeaderName = HeaderName::from_static("server-timing");

/// Set the header for a request that started at `started`; returns the
/// milliseconds it reports (for access logs).
pub fn server_timing(headers: &mut HeaderMap, started: Instant) -> f64 {
    // Whole microseconds written as integers: this runs on every response, and
    // float formatting with a format! was ~7% of a redirect's instructions.
    let micros = u64::try_from((started.elapsed().as_nanos() + 500) / 1000).unwrap_or(u64::MAX);
    let (whole, frac) = (micros / 1000, micros % 1000);
    let mut digits = itoa::Buffer::new();
    let mut value = [0u8; 40];
    let mut len = 0;
    for part in [&b"app;dur="[..], digits.format(whole).as_bytes(), b".", &three_digits(frac)] {
        value[len..len + part.len()].copy_from_slice(part);
        len += part.len();
    }
    if let Ok(v) = HeaderValue::from_bytes(&value[..len]) {
        headers.insert(SERVER_TIMING, v);
    }
    micros as f64 / 1000.0
}

/// `n` (below 1000) zero-padded to three digits.
fn three_digits(n: u64) -> [u8; 3] {
    [b'0' + (n / 100 % 10) as u8, b'0' + (n / 10 % 10) as u8, b'0' + (n % 10) as u8]
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    #[test]
    fn header_shape() {
        let mut h = hyper::header::HeaderMap::new();
        let ms = super::server_timing(&mut h, Instant::now());
        let v = h.get("server-timing").unwrap().to_str().unwrap();
        assert!(v.starts_with("app;dur=") && v.ends_with(&format!("{ms:.3}")), "{v}");
    }

    #[test]
    fn milliseconds_with_three_decimals() {
        let mut h = hyper::header::HeaderMap::new();
        let started = Instant::now() - Duration::from_micros(12_045);
        let ms = super::server_timing(&mut h, started);
        let v = h.get("server-timing").unwrap().to_str().unwrap();
        assert!(ms >= 12.045, "{v}");
        assert_eq!(v, format!("app;dur={ms:.3}"));
        assert_eq!(super::three_digits(7), *b"007");
        assert_eq!(super::three_digits(45), *b"045");
    }
}
