//! Upstream latency by server asked, for a resolver's metrics: how long each
//! exchange with a site's responsible server took, and how many failed. The
//! servers come from site records that whoever controls a prefix writes, so
//! the table holds at most [`MAX_SERVERS`]; later ones are counted together
//! under [`OTHER`], keeping the metric's label count bounded.

use handled_proto::data::site::SiteInfo;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

pub const MAX_SERVERS: usize = 64;
/// The label of the servers past the bound.
pub const OTHER: &str = "other";

/// One server's exchanges so far.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ServerLatency {
    pub queries: u64,
    /// Exchanges that gave no usable answer (none in time, unverifiable).
    pub failures: u64,
    pub total: Duration,
}

#[derive(Default)]
pub(super) struct Latencies {
    servers: Mutex<HashMap<String, ServerLatency>>,
}

impl Latencies {
    pub(super) fn record(&self, server: String, took: Duration, failed: bool) {
        let mut servers = self.servers.lock().unwrap_or_else(|e| e.into_inner());
        let key = if servers.len() < MAX_SERVERS || servers.contains_key(&server) { server } else { OTHER.into() };
        let stat = servers.entry(key).or_default();
        stat.queries += 1;
        stat.failures += u64::from(failed);
        stat.total += took;
    }

    pub(super) fn snapshot(&self) -> Vec<(String, ServerLatency)> {
        let servers = self.servers.lock().unwrap_or_else(|e| e.into_inner());
        let mut all: Vec<_> = servers.iter().map(|(k, v)| (k.clone(), *v)).collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all
    }
}

/// The label of the server of `site` that `handle` goes to: its address and
/// first query port (servers of one host differ by port).
pub(super) fn label(site: &SiteInfo, handle: &[u8]) -> String {
    match site.servers.get(site.server_index(handle)) {
        Some(server) => match super::exchange::protocols(server, true).first() {
            Some((_, port)) => std::net::SocketAddr::new(server.ip_addr(), *port).to_string(),
            None => server.ip_addr().to_string(),
        },
        None => OTHER.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_in_labels() {
        let l = Latencies::default();
        for n in 0..200 {
            l.record(format!("192.0.2.{n}:2641"), Duration::from_millis(2), n % 2 == 0);
        }
        l.record("192.0.2.0:2641".into(), Duration::from_millis(4), false);
        let all = l.snapshot();
        assert_eq!(all.len(), MAX_SERVERS + 1, "{all:?}");
        let first = all.iter().find(|(k, _)| k == "192.0.2.0:2641").unwrap().1;
        assert_eq!((first.queries, first.failures, first.total), (2, 1, Duration::from_millis(6)));
        let other = all.iter().find(|(k, _)| k == OTHER).unwrap().1;
        assert_eq!(other.queries, 200 - MAX_SERVERS as u64);
    }
}
