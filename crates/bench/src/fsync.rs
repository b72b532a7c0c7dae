//! The disk's raw fsync rate, measured beside a run of durable writes so the
//! result reads as "writes per fsync" (group commit at work) rather than as a
//! bare figure that depends on whichever disk the server had.

use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

/// How long the probe runs by default (the figure settles within a second).
pub const PROBE_TIME: Duration = Duration::from_secs(2);

/// fsyncs per second over [`PROBE_TIME`]: a 4 KiB write then `fsync` in a
/// loop on one file in `dir` (put it on the server's data filesystem).
pub async fn probe(dir: &Path) -> Result<f64, String> {
    probe_for(dir, PROBE_TIME).await
}

pub async fn probe_for(dir: &Path, time: Duration) -> Result<f64, String> {
    let dir = dir.to_path_buf();
    tokio::task::spawn_blocking(move || fsync_rate(&dir, time)).await.map_err(|e| format!("fsync probe: {e}"))?
}

fn fsync_rate(dir: &Path, time: Duration) -> Result<f64, String> {
    // Unique per process: several bench processes may probe one directory.
    let path = dir.join(format!(".handled-bench-fsync-probe-{}", std::process::id()));
    let failed = |what: &str, e: std::io::Error| format!("fsync probe in {}: {what}: {e}", dir.display());
    let mut file = File::create(&path).map_err(|e| failed("cannot create the probe file", e))?;
    let block = [0x5au8; 4096];
    let start = Instant::now();
    let mut syncs = 0u64;
    let result = loop {
        if let Err(e) = file.write_all(&block).and_then(|()| file.sync_all()) {
            break Err(failed("write + fsync", e));
        }
        syncs += 1;
        if start.elapsed() >= time {
            break Ok(syncs as f64 / start.elapsed().as_secs_f64());
        }
    };
    drop(file);
    let _ = std::fs::remove_file(&path);
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn probe_counts_syncs_and_cleans_up() {
        let dir = tempfile::tempdir().unwrap();
        let rate = probe_for(dir.path(), Duration::from_millis(100)).await.unwrap();
        assert!(rate > 0.0);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        let missing = dir.path().join("missing");
        assert!(probe_for(&missing, Duration::from_millis(10)).await.unwrap_err().contains("cannot create"));
    }
}
