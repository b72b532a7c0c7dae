//! `handled import FILE --online`: load records through a running server, as an
//! administrator in several sessions at once, resumable. The offline import
//! writes the store file directly (fast, for bootstrapping a data directory no
//! server has open); this one goes through the server's own create path, so
//! the server keeps serving, and everything it checks is checked.
//!
//! The file is checked whole first (nothing sent for a bad line). Progress goes
//! to `FILE.progress`: the records done without a gap, those done or refused
//! beyond them, and a limit written before any record past it is sent. A rerun
//! skips what was done, sends what was refused as before, and sends the rest
//! up to the limit with overwrite (a crash may have left them created; the data
//! is the same). The file is removed when the import completes.

use crate::admin::Connect;
use anyhow::{bail, Context};
use handled_client::{AdminError, AdminSession};
use handled_proto::header::ResponseCode;
use handled_proto::value::HandleValue;
use handled_server::import::parse_line;
use indicatif::ProgressBar;
use serde_json::json;
use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, Mutex};

/// Records past the saved limit are only sent after a new limit is saved.
const LIMIT_STEP: u64 = 1_000;
/// Tries of one record while the server is too busy (about a minute, paced).
const BUSY_TRIES: usize = 64;

/// What a rerun needs (records are numbered from 1 in file order).
#[derive(Debug, Default, PartialEq)]
struct Progress {
    /// Records `1..=done` are in.
    done: u64,
    /// Beyond `done`: records that are in, and records the server refused.
    confirmed: BTreeSet<u64>,
    refused: BTreeSet<u64>,
    /// No record past this was sent.
    limit: u64,
    /// The file's size when the import started: a changed file does not resume.
    bytes: u64,
}

impl Progress {
    /// Whether record `n` is sent, and with overwrite; `crashed_limit` is the
    /// limit the progress file held when this run started.
    fn plan(&self, n: u64, replace: bool, crashed_limit: u64) -> Option<bool> {
        if n <= self.done || self.confirmed.contains(&n) {
            None
        } else if self.refused.contains(&n) || n > crashed_limit {
            Some(replace)
        } else {
            Some(true)
        }
    }

    fn confirm(&mut self, n: u64) {
        self.refused.remove(&n);
        self.confirmed.insert(n);
        while self.confirmed.remove(&(self.done + 1)) {
            self.done += 1;
        }
    }
}

fn progress_path(file: &Path) -> PathBuf {
    let mut name = file.as_os_str().to_owned();
    name.push(".progress");
    PathBuf::from(name)
}

fn read_progress(path: &Path) -> anyhow::Result<Option<Progress>> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    let v: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))?;
    let field = |k: &str| v[k].as_u64().with_context(|| format!("{} lacks {k}", path.display()));
    let set = |k: &str| -> anyhow::Result<BTreeSet<u64>> {
        let list = v[k].as_array().with_context(|| format!("{} lacks {k}", path.display()))?;
        list.iter().map(|n| n.as_u64().with_context(|| format!("{}: {k} holds a non-number", path.display()))).collect()
    };
    Ok(Some(Progress {
        done: field("done")?,
        confirmed: set("confirmed")?,
        refused: set("refused")?,
        limit: field("limit")?,
        bytes: field("bytes")?,
    }))
}

fn write_progress(path: &Path, p: &Progress) -> anyhow::Result<()> {
    let text =
        json!({ "done": p.done, "confirmed": p.confirmed, "refused": p.refused, "limit": p.limit, "bytes": p.bytes });
    // Written beside and renamed: a crash leaves the old or the new one, whole.
    let partial = progress_path(path);
    std::fs::write(&partial, text.to_string()).with_context(|| format!("cannot write {}", partial.display()))?;
    std::fs::rename(&partial, path).with_context(|| format!("cannot write {}", path.display()))
}

/// Every line parses (nothing is sent otherwise); the number of records.
fn check_lines(file: &Path) -> anyhow::Result<u64> {
    let reader = BufReader::new(std::fs::File::open(file).with_context(|| format!("cannot open {}", file.display()))?);
    let mut records = 0;
    for (i, line) in reader.lines().enumerate() {
        let line = line.with_context(|| format!("cannot read {}", file.display()))?;
        if line.trim().is_empty() {
            continue;
        }
        if let Err(e) = parse_line(&line, 0) {
            bail!("{}: line {}: {e}; nothing imported", file.display(), i + 1);
        }
        records += 1;
    }
    Ok(records)
}

/// One record to send: its number in the file, handle, values, and whether it may overwrite.
struct Job {
    n: u64,
    handle: Vec<u8>,
    values: Vec<HandleValue>,
    overwrite: bool,
}

type Done = (u64, Vec<u8>, Result<(), AdminError>);

/// `parallel` sessions taking jobs until the channel closes; answers go to `done`.
async fn start_workers(
    connect: &Connect,
    parallel: usize,
    done: mpsc::UnboundedSender<Done>,
) -> anyhow::Result<mpsc::Sender<Job>> {
    let params = connect.params()?;
    let creds = connect.credentials(None)?;
    // Every session opens before anything is sent: a wrong key stops here.
    let mut sessions = Vec::new();
    for _ in 0..parallel {
        let session = AdminSession::open(params.clone(), creds.clone())
            .await
            .map_err(|e| anyhow::anyhow!("cannot open an admin session with {}: {e}", params.addr))?;
        sessions.push(session);
    }
    let (jobs_tx, jobs_rx) = mpsc::channel::<Job>(parallel * 2);
    let jobs_rx = Arc::new(Mutex::new(jobs_rx));
    for mut session in sessions {
        let (jobs_rx, done) = (jobs_rx.clone(), done.clone());
        tokio::spawn(async move {
            loop {
                let job = jobs_rx.lock().await.recv().await;
                let Some(job) = job else { break };
                let result = create_patiently(&mut session, &job).await;
                if done.send((job.n, job.handle, result)).is_err() {
                    break;
                }
            }
            let _ = session.close().await;
        });
    }
    Ok(jobs_tx)
}

/// Create `job`'s handle, waiting and trying again while the server says it is
/// too busy (it refuses at once rather than queue without bound): a load of
/// many sessions meets that, and it is no reason to stop.
async fn create_patiently(session: &mut AdminSession, job: &Job) -> Result<(), AdminError> {
    let mut pause = Duration::from_millis(20);
    for _ in 0..BUSY_TRIES {
        match session.create_with(&job.handle, &job.values, job.overwrite, false).await {
            Err(e) if e.code() == Some(ResponseCode::SERVER_TOO_BUSY) => {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(1));
            }
            other => return other.map(|_| ()),
        }
    }
    session.create_with(&job.handle, &job.values, job.overwrite, false).await.map(|_| ())
}

pub async fn run(file: &Path, connect: &Connect, replace: bool, parallel: usize) -> anyhow::Result<ExitCode> {
    let parallel = parallel.max(1);
    let records = check_lines(file)?;
    let bytes = std::fs::metadata(file).with_context(|| format!("cannot read {}", file.display()))?.len();
    let progress_file = progress_path(file);
    let mut progress = match read_progress(&progress_file)? {
        Some(p) if p.bytes != bytes => bail!(
            "{} is from another version of {} ({} bytes then, {bytes} now); remove it to start over",
            progress_file.display(),
            file.display(),
            p.bytes
        ),
        Some(p) => {
            eprintln!("resuming: {} of {records} handles were imported before", p.done + p.confirmed.len() as u64);
            p
        }
        None => Progress { bytes, ..Progress::default() },
    };
    let resumed = progress.done + progress.confirmed.len() as u64;
    let crashed_limit = progress.limit;
    let (done_tx, mut done_rx) = mpsc::unbounded_channel::<Done>();
    let jobs = start_workers(connect, parallel, done_tx).await?;
    let addr = connect.params()?.addr;

    let bar = ProgressBar::new(records);
    bar.set_style(crate::bar::style("{pos}/{len} handles ({percent}%) {rate} eta {eta}"));
    let mut lines = BufReader::new(std::fs::File::open(file)?).lines();
    let (mut n, mut in_flight, mut jobs, mut failure) = (0u64, 0usize, Some(jobs), None);
    let mut next: Option<Job> = None;
    let mut saved = Instant::now();
    let started = saved;
    loop {
        bar.set_position(progress.done + progress.confirmed.len() as u64);
        // The next record to send, unless stopping or the file is read.
        while next.is_none() && jobs.is_some() && failure.is_none() {
            let Some(line) = lines.next() else { break };
            let line = line.with_context(|| format!("cannot read {}", file.display()))?;
            if line.trim().is_empty() {
                continue;
            }
            n += 1;
            if let Some(overwrite) = progress.plan(n, replace, crashed_limit) {
                if n > progress.limit {
                    progress.limit = n + LIMIT_STEP;
                    write_progress(&progress_file, &progress)?;
                }
                let (handle, record) =
                    parse_line(&line, handled_store::clock::now_secs_i32()).map_err(anyhow::Error::msg)?;
                next = Some(Job { n, handle, values: record.values, overwrite });
            }
        }
        if next.is_none() {
            jobs = None; // closes the channel: the workers end when it is empty
        }
        tokio::select! {
            // reserve() first: a send cancelled by an answer would lose its job.
            permit = async { jobs.as_ref().expect("a job implies a channel").reserve().await }, if next.is_some() => {
                let permit = permit.map_err(|_| anyhow::anyhow!("the import sessions ended"))?;
                permit.send(next.take().expect("a job"));
                in_flight += 1;
            }
            answer = done_rx.recv(), if in_flight > 0 || next.is_none() => {
                let Some((n, handle, result)) = answer else { break };
                in_flight = in_flight.saturating_sub(1);
                match result {
                    Ok(()) => progress.confirm(n),
                    Err(e) => {
                        progress.refused.insert(n);
                        failure.get_or_insert((n, String::from_utf8_lossy(&handle).into_owned(), e));
                    }
                }
            }
        }
        if saved.elapsed() > Duration::from_secs(1) {
            write_progress(&progress_file, &progress)?;
            saved = Instant::now();
        }
    }
    bar.finish_and_clear();
    if let Some((n, handle, e)) = failure {
        write_progress(&progress_file, &progress)?;
        eprintln!(
            "error: record {n} ({handle}): {e}; {} of {records} handles imported, progress in {}: run the same \
             command again to resume",
            progress.done + progress.confirmed.len() as u64,
            progress_file.display()
        );
        return Ok(ExitCode::from(e.code().map_or(1, crate::admin::exit_for)));
    }
    let _ = std::fs::remove_file(&progress_file);
    // The offline import's words ("imported 1 handle from FILE"), then where through.
    eprintln!(
        "imported {} from {} through {addr} in {:.1} s ({})",
        crate::counted::plural(records - resumed, "handle"),
        file.display(),
        started.elapsed().as_secs_f64(),
        crate::counted::plural(parallel as u64, "session")
    );
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_survives_a_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let path = progress_path(&dir.path().join("r.jsonl"));
        assert_eq!(read_progress(&path).unwrap(), None);
        let mut p = Progress { limit: 1000, bytes: 999, ..Progress::default() };
        for n in [1, 2, 4] {
            p.confirm(n);
        }
        p.refused.insert(3);
        write_progress(&path, &p).unwrap();
        assert_eq!(read_progress(&path).unwrap(), Some(p));
        std::fs::write(&path, "{}").unwrap();
        assert!(read_progress(&path).is_err(), "a damaged progress file is an error, not a fresh start");
    }

    #[test]
    fn a_rerun_skips_what_is_in_and_overwrites_only_what_a_crash_may_have_left() {
        let mut p = Progress { limit: 10, ..Progress::default() };
        for n in [1, 2, 5] {
            p.confirm(n);
        }
        p.refused.insert(3);
        assert_eq!((p.done, p.plan(1, false, 10), p.plan(5, false, 10)), (2, None, None), "in: skipped");
        assert_eq!(p.plan(3, false, 10), Some(false), "refused: sent as before");
        assert_eq!(p.plan(4, false, 10), Some(true), "maybe in: overwritten with the same data");
        assert_eq!(p.plan(11, false, 10), Some(false), "never sent: as asked");
        assert_eq!(p.plan(11, true, 10), Some(true));
        assert_eq!(Progress::default().plan(4, false, 0), Some(false), "a first run overwrites nothing");
    }
}
