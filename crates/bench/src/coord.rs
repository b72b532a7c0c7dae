//! Green flag: several `handled bench` processes (on one or many machines)
//! connect to a coordinator, wait until all are there, start together, and send
//! back their figures (histograms as HdrHistogram V2) to be merged into one report.
//!
//! Line protocol over TCP: client `READY <label>`; coordinator `GO <delay ms>`
//! when all expected clients are ready; client `RESULT <json array of Stats>`.

use crate::stats::Stats;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

/// Wait for `expect` clients, release them together, collect their runs.
/// Returns each client's label and runs, in arrival order.
pub async fn coordinate(
    listener: TcpListener,
    expect: usize,
    lead: Duration,
    deadline: Duration,
) -> Result<Vec<(String, Vec<Stats>)>, String> {
    let mut clients = Vec::new();
    let gather = async {
        while clients.len() < expect {
            let (stream, peer) = listener.accept().await.map_err(|e| e.to_string())?;
            let mut stream = BufReader::new(stream);
            let mut line = String::new();
            stream.read_line(&mut line).await.map_err(|e| e.to_string())?;
            let label = line
                .trim()
                .strip_prefix("READY")
                .map(|l| l.trim().to_string())
                .ok_or(format!("{peer}: expected READY, got {line:?}"))?;
            clients.push((if label.is_empty() { peer.to_string() } else { label }, stream));
        }
        Ok::<_, String>(())
    };
    tokio::time::timeout(deadline, gather)
        .await
        .map_err(|_| format!("only {} of {expect} clients arrived in time", clients.len()))??;
    // One GO line each, sent back to back: they start within the lead time of each other.
    for (_, s) in &mut clients {
        s.get_mut().write_all(format!("GO {}\n", lead.as_millis()).as_bytes()).await.map_err(|e| e.to_string())?;
    }
    let mut out = Vec::new();
    for (label, mut s) in clients {
        let mut line = String::new();
        tokio::time::timeout(deadline, s.read_line(&mut line))
            .await
            .map_err(|_| format!("{label}: no result in time"))?
            .map_err(|e| e.to_string())?;
        let json = line.trim().strip_prefix("RESULT ").ok_or(format!("{label}: expected RESULT"))?;
        let runs: Vec<Stats> = serde_json::from_str(json).map_err(|e| format!("{label}: {e}"))?;
        out.push((label, runs));
    }
    Ok(out)
}

/// Merge the clients' runs position by position (run i of every client into one).
pub fn merge(results: &[(String, Vec<Stats>)]) -> Vec<Stats> {
    let mut merged: Vec<Stats> = Vec::new();
    for (_, runs) in results {
        for (i, s) in runs.iter().enumerate() {
            match merged.get_mut(i) {
                Some(m) => m.merge(s),
                None => {
                    let mut m = s.clone();
                    m.label = format!("all {} clients: {}", results.len(), s.label);
                    merged.push(m);
                }
            }
        }
    }
    merged
}

/// A bench process's side.
pub struct GreenFlag {
    stream: BufReader<TcpStream>,
}

impl GreenFlag {
    /// Announce ourselves and wait for the flag (then the coordinator's delay).
    pub async fn wait(coordinator: &str, label: &str) -> Result<GreenFlag, String> {
        let stream = TcpStream::connect(coordinator).await.map_err(|e| format!("coordinator {coordinator}: {e}"))?;
        let mut stream = BufReader::new(stream);
        stream.get_mut().write_all(format!("READY {label}\n").as_bytes()).await.map_err(|e| e.to_string())?;
        let mut line = String::new();
        stream.read_line(&mut line).await.map_err(|e| e.to_string())?;
        let delay: u64 =
            line.trim().strip_prefix("GO ").and_then(|d| d.parse().ok()).ok_or(format!("expected GO, got {line:?}"))?;
        tokio::time::sleep(Duration::from_millis(delay)).await;
        Ok(GreenFlag { stream })
    }

    pub async fn report(mut self, runs: &[Stats]) -> Result<(), String> {
        let json = serde_json::to_string(runs).map_err(|e| e.to_string())?;
        let s = self.stream.get_mut();
        s.write_all(format!("RESULT {json}\n").as_bytes()).await.map_err(|e| e.to_string())?;
        s.flush().await.map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[tokio::test]
    async fn clients_start_together_and_merge() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let coord = tokio::spawn(coordinate(listener, 3, Duration::from_millis(50), Duration::from_secs(10)));
        let mut clients = Vec::new();
        for i in 0..3u64 {
            let addr = addr.clone();
            clients.push(tokio::spawn(async move {
                // Arrive at different times; the flag must wait for the last one.
                tokio::time::sleep(Duration::from_millis(100 * i)).await;
                let flag = GreenFlag::wait(&addr, &format!("c{i}")).await.unwrap();
                let started = Instant::now();
                let mut s = Stats::empty("resolve");
                s.ok = 10 * (i + 1);
                s.latency_us.record(1000 * (i + 1)).unwrap();
                flag.report(&[s]).await.unwrap();
                started
            }));
        }
        let mut starts = Vec::new();
        for c in clients {
            starts.push(c.await.unwrap());
        }
        let results = coord.await.unwrap().unwrap();
        let spread = starts.iter().max().unwrap().duration_since(*starts.iter().min().unwrap());
        assert!(spread < Duration::from_millis(40), "{spread:?}");
        let merged = merge(&results);
        assert_eq!(merged.len(), 1);
        assert_eq!(merged[0].ok, 60);
        assert_eq!(merged[0].latency_us.len(), 3);
        assert!(merged[0].latency_us.equivalent(merged[0].latency_us.max(), 3000));
    }
}
