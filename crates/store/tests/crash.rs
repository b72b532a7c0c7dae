//! Crash safety of the durable backend: a child process (this test executable,
//! re-run with an environment switch) swaps at full speed and prints every
//! acknowledged write; the parent kills it with SIGKILL after a random short delay,
//! reopens the store (redb repairs it) and checks that every acknowledged write is
//! there, with its transaction-log entry (ids gap-free across the crashes and
//! restarts). Some of the child's tasks overwrite a few handles over and over,
//! so that the key directory's rounds (small segments) merge while they are
//! killed; one of them by imports (`put_many`), whose batches the writer applies
//! straight into their commit. 4 rounds by default; set HANDLED_STORE_CRASH_RUNS
//! for more.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use handled_store::backup::BackupTable;
use handled_store::conformance::{indexed_by_url, url_record, URL_INDEX};
use handled_store::{
    DocWrite, Document, DocumentStore, EmbeddedOptions, EmbeddedStore, Expect, HandleRecord, IndexEntry, IndexMatch,
    RecordStore, StoreAdmin, SwapOutcome, TxnAction, TxnLogStore,
};
use rand::Rng;

const CHILD_DIR: &str = "HANDLED_STORE_CRASH_CHILD";
const CHILD_ROUND: &str = "HANDLED_STORE_CRASH_ROUND";
const HOT: &[u8] = b"20.5000/hot";
/// Handles overwritten over and over: `CHURN ‖ round-tN-j`, their value the
/// task's count and a pad (large, so that their dead records soon outweigh the
/// creates' live ones and the key directory's merge starts).
const CHURN: &str = "20.5000/w";
const PAD: usize = 8000;
/// The child stops by itself after this long, should the parent fail to kill it.
const CHILD_MAX: Duration = Duration::from_secs(20);

/// The child's body; a no-op test in normal runs.
#[test]
fn crash_child() {
    let Ok(dir) = std::env::var(CHILD_DIR) else { return };
    let round: u32 = std::env::var(CHILD_ROUND).unwrap().parse().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(child(Path::new(&dir), round));
    std::process::exit(0);
}

fn say(line: String) {
    let mut out = std::io::stdout().lock();
    out.write_all(line.as_bytes()).unwrap();
    out.write_all(b"\n").unwrap();
    out.flush().unwrap();
}

/// Odd rounds checkpoint every few milliseconds, so kills also land during and
/// right after checkpoints; even rounds use the default (kills land in the log).
/// Rounds 2 and 3 of every 4 run with the key directory (so kills also land
/// between a checkpoint's segment append, its commit and the directory's update,
/// and the reopen replays the log through it); the round after them opens a
/// directory that rounds without it made stale, and rewrites it. Its segments
/// are small, so that the overwrites make the merge run (and get killed).
fn options(round: u32) -> EmbeddedOptions {
    let mut o = EmbeddedOptions::default();
    if round % 2 == 1 {
        o.checkpoint_interval = Duration::from_millis(15);
    }
    o.key_directory = round % 4 >= 2;
    o.key_directory_segment_bytes = 64 << 10;
    o
}

/// The document each create carries (as the server's reverse index does).
fn derived(key: &str) -> Document {
    Document::new(key.as_bytes(), vec![IndexEntry::new("url", key.as_bytes())])
}

async fn child(dir: &Path, round: u32) {
    // Every write also keeps a derived index (documents kept as index entries only).
    let s = indexed_by_url(Arc::new(EmbeddedStore::open_dir(dir, options(round)).unwrap()));
    if s.get(HOT).await.unwrap().is_none() {
        s.swap(HOT, Expect::Absent, Some(url_record("0"))).await.unwrap();
    }
    say("READY".into());
    let start = Instant::now();
    let mut tasks = Vec::new();
    for t in 0..32u32 {
        let s = s.clone();
        tasks.push(tokio::spawn(async move {
            let mut i = 0u64;
            while start.elapsed() < CHILD_MAX {
                if t % 8 == 0 {
                    // CAS increment of the shared counter.
                    let mut cur = s.get(HOT).await.unwrap().unwrap();
                    loop {
                        let n: u64 = std::str::from_utf8(&cur.values[0].data).unwrap().parse().unwrap();
                        let next = url_record(&(n + 1).to_string());
                        match s.swap(HOT, Expect::Present(cur), Some(next)).await.unwrap() {
                            SwapOutcome::Done { .. } => {
                                say(format!("H {}", n + 1));
                                break;
                            }
                            SwapOutcome::Conflict { current } => cur = current.unwrap(),
                        }
                    }
                } else if t == 2 {
                    // Imports overwriting a few handles: each batch a checkpoint
                    // of its own, applied straight into its redb commit.
                    let keys: Vec<String> =
                        (0..8).map(|j| format!("{CHURN}{round}-imp-{}", (i * 3 + j) % 16)).collect();
                    let value = format!("{i}-imported");
                    s.put_many(keys.iter().map(|k| (k.clone().into_bytes(), url_record(&value))).collect())
                        .await
                        .unwrap();
                    for k in keys {
                        say(format!("W {k} {i}"));
                    }
                } else if t % 2 == 1 {
                    let key = format!("{CHURN}{round}-t{t}-{}", i % 4);
                    let value = format!("{i}-{}", "x".repeat(PAD));
                    s.swap(key.as_bytes(), Expect::Any, Some(url_record(&value))).await.unwrap();
                    say(format!("W {key} {i}"));
                } else {
                    let key = format!("20.5000/r{round}-t{t}-{i}");
                    let doc = DocWrite::new("idx", key.clone().into_bytes(), Some(derived(&key)));
                    let out = s
                        .swap_with_docs(key.as_bytes(), Expect::Absent, Some(url_record(&key)), vec![doc])
                        .await
                        .unwrap();
                    assert!(out.is_done());
                    say(format!("C {key}"));
                }
                i += 1;
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
}

#[test]
fn acknowledged_writes_survive_sigkill() {
    if std::env::var_os(CHILD_DIR).is_some() {
        return;
    }
    let rounds: u32 = std::env::var("HANDLED_STORE_CRASH_RUNS").ok().and_then(|v| v.parse().ok()).unwrap_or(4);
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut rng = rand::rng();
    let mut created: Vec<String> = Vec::new();
    let mut hot_acked = 0u64;
    let mut churned = std::collections::HashMap::<String, u64>::new();
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();

    for round in 0..rounds {
        let mut child = Command::new(&exe)
            .args(["--exact", "crash_child", "--nocapture", "--test-threads=1", "-q"])
            .env(CHILD_DIR, dir.path())
            .env(CHILD_ROUND, round.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel::<String>();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        // Wait until the child has opened the store, then let it run a little.
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let line =
                rx.recv_timeout(deadline.saturating_duration_since(Instant::now())).expect("child never got ready");
            if line == "READY" {
                break;
            }
        }
        // ... and acknowledge a first write (on a loaded box that can take a
        // while), so that every round has something to lose.
        let mut early = Vec::new();
        while !early.last().is_some_and(|l: &String| l.starts_with("C ")) {
            let line = rx
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
                .expect("child acknowledged nothing");
            early.push(line);
        }
        let delay = rng.random_range(20..400);
        std::thread::sleep(Duration::from_millis(delay));
        child.kill().unwrap(); // SIGKILL
        let status = child.wait().unwrap();
        reader.join().unwrap();
        // Every complete line printed before the kill is an acknowledged write.
        let (mut c, mut h, mut imported) = (0usize, 0usize, 0usize);
        for line in early.into_iter().chain(rx.try_iter()) {
            if let Some(k) = line.strip_prefix("C ") {
                created.push(k.to_owned());
                c += 1;
            } else if let Some(n) = line.strip_prefix("H ") {
                hot_acked = hot_acked.max(n.parse().unwrap());
                h += 1;
            } else if let Some((k, n)) = line.strip_prefix("W ").and_then(|w| w.split_once(' ')) {
                let n: u64 = n.parse().unwrap();
                imported += usize::from(k.contains("-imp-"));
                let acked = churned.entry(k.to_owned()).or_default();
                *acked = (*acked).max(n);
            }
        }
        assert!(c > 0, "the child acknowledged nothing in {delay} ms");

        let opened = Instant::now();
        let s = EmbeddedStore::open_dir(dir.path(), options(round)).unwrap();
        let open_time = opened.elapsed();
        rt.block_on(async {
            for k in &created {
                assert_eq!(s.get(k.as_bytes()).await.unwrap(), Some(url_record(k)), "acknowledged {k} lost");
                assert_eq!(s.doc_get("idx", k.as_bytes()).await.unwrap(), Some(derived(k)), "document of {k} lost");
            }
            for (k, acked) in &churned {
                let r = s.get(k.as_bytes()).await.unwrap().unwrap_or_else(|| panic!("overwritten {k} lost"));
                let value = std::str::from_utf8(&r.values[0].data).unwrap();
                let n: u64 = value.split('-').next().unwrap().parse().unwrap();
                assert!(n >= *acked, "{k} holds {n}, but {acked} was acknowledged");
            }
            let hot = s.get(HOT).await.unwrap().expect("counter lost");
            let n: u64 = std::str::from_utf8(&hot.values[0].data).unwrap().parse().unwrap();
            assert!(n >= hot_acked, "counter at {n}, but {hot_acked} was acknowledged");
            assert!(s.count().await.unwrap() > created.len() as u64, "the counter is one more handle");
            let last = created.last().unwrap();
            let hits = s.doc_lookup("idx", "url", IndexMatch::Exact(last.as_bytes()), None, 2).await.unwrap();
            assert_eq!(hits.len(), 1, "index entry of {last}");
            check_log(&s, &created, n).await;
            check_derived_index(&s).await;
            check_export(&s, &created).await;
            if let Some(kd) = s.key_directory_stats() {
                // Opened with every write in redb: the directory holds exactly its handles.
                assert_eq!(kd.keys, s.count().await.unwrap(), "key directory and store disagree");
            }
        });
        eprintln!(
            "round {round}: killed after {delay} ms ({status}); {c} creates + {h} increments + {imported} \
             imported acknowledged, {} total verified; reopen {open_time:?}, repaired: {}; \
             oldest key directory segment: {}",
            created.len(),
            s.was_repaired(),
            oldest_segment(dir.path()).map_or("none".into(), |id| id.to_string())
        );
    }
}

/// Every handle read again as a backup reads them, through redb (where, with
/// the key directory, values are their records' locations in its segments):
/// the same records `get` gave, as many as `count` says.
async fn check_export(s: &EmbeddedStore, created: &[String]) {
    let mut export = s.export().unwrap();
    let mut handles = std::collections::HashMap::new();
    loop {
        let entries = export.next_entries(1 << 20).unwrap();
        if entries.is_empty() {
            break;
        }
        for e in entries.into_iter().filter(|e| e.table == BackupTable::Handles) {
            let record = HandleRecord::decode_stored(&e.key, &e.payload).unwrap();
            handles.insert(e.key, record);
        }
    }
    assert_eq!(handles.len() as u64, s.count().await.unwrap(), "handles exported");
    for k in created {
        assert_eq!(handles.get(k.as_bytes()), Some(&url_record(k)), "{k} as exported");
    }
}

/// The derived index after a crash: every handle (each has one URL value)
/// found under exactly the URL its record holds: no entry of a replaced value
/// left, none missing.
async fn check_derived_index(s: &EmbeddedStore) {
    let mut hits = Vec::new();
    loop {
        let after = hits.last().cloned();
        let page = s.doc_lookup(URL_INDEX, "url", IndexMatch::Prefix(b""), after.as_ref(), 10_000).await.unwrap();
        if page.is_empty() {
            break;
        }
        hits.extend(page);
    }
    assert_eq!(hits.len() as u64, s.count().await.unwrap(), "one index entry per handle");
    for h in &hits {
        let r = s.get(&h.id).await.unwrap().unwrap_or_else(|| panic!("an entry of a handle that is gone"));
        assert_eq!(r.values[0].data, h.key, "{} found under a value it no longer has", String::from_utf8_lossy(&h.id));
    }
}

/// The id of the oldest key directory segment (above 1: the merge deleted some).
fn oldest_segment(dir: &Path) -> Option<u32> {
    let files = std::fs::read_dir(dir.join("handles.redb.keydir")).ok()?;
    let ids = files.filter_map(|f| f.ok()?.file_name().to_str()?.strip_prefix("seg-")?.parse().ok());
    ids.min()
}

/// The transaction log after a crash: ids 1..=last with no gap, one Create per
/// acknowledged create, and one entry per value the counter went through (its
/// create and `n` increments): no acknowledged change without its entry, no
/// entry without its change.
async fn check_log(s: &EmbeddedStore, created: &[String], counter: u64) {
    let entries = handled_store::conformance::read_whole_log(s).await;
    let ids: Vec<u64> = entries.iter().map(|e| e.id).collect();
    assert_eq!(ids, (1..=entries.len() as u64).collect::<Vec<_>>(), "log ids are not 1..=n without gaps");
    assert_eq!(s.txn_log_bounds().await.unwrap().last, entries.len() as u64);
    let creates: std::collections::HashSet<&[u8]> =
        entries.iter().filter(|e| e.action == TxnAction::Create).map(|e| e.handle.as_slice()).collect();
    for k in created {
        assert!(creates.contains(k.as_bytes()), "acknowledged create of {k} has no log entry");
    }
    let hot: Vec<TxnAction> = entries.iter().filter(|e| e.handle == HOT).map(|e| e.action).collect();
    assert_eq!(hot.len() as u64, counter + 1, "the counter is at {counter}: its create and {counter} updates");
    assert!(hot[0] == TxnAction::Create && hot[1..].iter().all(|a| *a == TxnAction::Update), "{hot:?}");
    // Every other entry is the create of a handle that is there (or an
    // overwrite of one of the churned handles).
    for e in entries.iter().filter(|e| e.handle != HOT) {
        let churned = e.handle.starts_with(CHURN.as_bytes());
        assert!(e.action == TxnAction::Create || churned && e.action == TxnAction::Update, "{e:?}");
        assert!(s.get(&e.handle).await.unwrap().is_some(), "logged change of a handle that is not there: {e:?}");
    }
}
