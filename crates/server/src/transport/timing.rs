//! `Server-Timing: app;dur=<ms>` on HTTP responses: the server's own time for a
//! request, shared by every HTTP service (tunnel, JSON API, domain registry).

use hyper::header::{HeaderMap, HeaderValue};
use std::time::Instant;

/// Set the header for a request that started at `started`; returns the
/// milliseconds it reports (for access logs).
pub fn server_timing(headers: &mut HeaderMap, started: Instant) -> f64 {
    let millis = started.elapsed().as_secs_f64() * 1000.0;
    if let Ok(v) = HeaderValue::from_str(&format!("app;dur={millis:.3}")) {
        headers.insert("server-timing", v);
    }
    millis
}

#[cfg(test)]
mod tests {
    #[test]
    fn header_shape() {
        let mut h = hyper::header::HeaderMap::new();
        let ms = super::server_timing(&mut h, std::time::Instant::now());
        let v = h.get("server-timing").unwrap().to_str().unwrap();
        assert!(v.starts_with("app;dur=") && v.ends_with(&format!("{ms:.3}")), "{v}");
    }
}
