//! Sorted runs on disk, for imports larger than one in-memory sort group.
//!
//! A B-tree store takes records fastest in key order: a chunk of sorted keys
//! fills fresh leaves one after another. Sorting each group of a large input
//! on its own is not enough: every later group's keys land all over the tree
//! built so far, so each chunk rewrites leaves already written (copy on
//! write), and a 3M-handle import took 201 s and 591 bytes per handle on disk,
//! against 96 s and 479 through runs (BENCHMARKS.md, "Capacity"). So groups are
//! sorted in memory, written out as runs, and merged: the store then sees
//! the whole input in key order, as if it were one group.
//!
//! Not the `extsort` crate: it builds `skeptic` (a markdown test harness) as a
//! build dependency of every user and sorts through rayon; the merge here is a
//! heap over buffered files.

use handled_store::HandleRecord;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{sync_channel, SyncSender};
use std::thread::JoinHandle;

/// Runs merged at once; more are first merged into one run (each open run
/// holds a file descriptor and a read buffer).
const MAX_OPEN_RUNS: usize = 128;
const READ_BUFFER: usize = 256 << 10;

type Keyed = (Vec<u8>, HandleRecord);

/// Sorted runs in a temporary directory, removed when this is dropped. Each
/// group is sorted and written on a thread of its own while the check parses
/// the next one (the sort and the write took a third of a check's time, on the
/// thread that also parses); a group waits while the one before is written, so
/// at most two are held.
pub struct Runs {
    dir: Option<tempfile::TempDir>,
    queue: Option<SyncSender<Vec<Keyed>>>,
    writing: Option<JoinHandle<io::Result<Vec<PathBuf>>>>,
}

impl Runs {
    /// A directory for runs inside `parent` (the store's own filesystem).
    pub fn new(parent: &Path) -> io::Result<Runs> {
        std::fs::create_dir_all(parent)?;
        let dir = tempfile::Builder::new().prefix(".import-runs-").tempdir_in(parent)?;
        let mut writer = RunWriter { dir: dir.path().to_path_buf(), files: Vec::new(), written: 0 };
        let (queue, groups) = sync_channel::<Vec<Keyed>>(0);
        let writing = std::thread::Builder::new().name("import-runs".into()).spawn(move || {
            for mut group in groups {
                writer.spill(&mut group)?;
            }
            Ok(writer.files)
        })?;
        Ok(Runs { dir: Some(dir), queue: Some(queue), writing: Some(writing) })
    }

    /// Write `group`, sorted by key (stably: of equal keys the later stays
    /// later), as one run, and empty it.
    pub fn spill(&mut self, group: &mut Vec<Keyed>) -> io::Result<()> {
        match self.queue.as_ref().map(|q| q.send(std::mem::take(group))) {
            Some(Ok(())) => Ok(()),
            // The writing thread stopped: its error says why.
            _ => Err(self.finish().err().unwrap_or_else(|| io::Error::other("the run writer stopped"))),
        }
    }

    /// Wait until every group is written: the runs' files.
    fn finish(&mut self) -> io::Result<Vec<PathBuf>> {
        self.queue = None;
        match self.writing.take() {
            Some(w) => w.join().unwrap_or_else(|_| Err(io::Error::other("the run writer panicked"))),
            None => Err(io::Error::other("the runs were already finished")),
        }
    }

    /// Where the runs are.
    pub fn dir(&self) -> &Path {
        self.dir.as_ref().expect("the directory is kept until merged").path()
    }

    /// Every entry of every run in key order (equal keys in the order they
    /// were spilled), as (key, encoded record).
    pub fn merge(mut self) -> io::Result<MergedRuns> {
        let merge = Merge::open(self.finish()?)?;
        Ok(MergedRuns { merge, _dir: self.dir.take() })
    }
}

impl Drop for Runs {
    /// The writing thread ends before the directory goes.
    fn drop(&mut self) {
        let _ = self.finish();
    }
}

/// Writes groups as sorted runs, on [`Runs`]' thread.
struct RunWriter {
    dir: PathBuf,
    files: Vec<PathBuf>,
    written: usize,
}

impl RunWriter {
    fn spill(&mut self, group: &mut Vec<Keyed>) -> io::Result<()> {
        group.sort_by(|a, b| a.0.cmp(&b.0));
        let entries = group.drain(..).map(|(k, r)| Ok((k, r.encode())));
        self.write_run(entries)?;
        if self.files.len() >= MAX_OPEN_RUNS {
            let merged = Merge::open(std::mem::take(&mut self.files))?;
            self.write_run(merged)?;
        }
        Ok(())
    }

    fn write_run(&mut self, entries: impl Iterator<Item = io::Result<(Vec<u8>, Vec<u8>)>>) -> io::Result<()> {
        let path = self.dir.join(format!("run-{}", self.written));
        self.written += 1;
        let mut out = BufWriter::with_capacity(READ_BUFFER, File::create(&path)?);
        for entry in entries {
            let (key, record) = entry?;
            for part in [&key, &record] {
                out.write_all(&(part.len() as u32).to_le_bytes())?;
                out.write_all(part)?;
            }
        }
        out.into_inner().map_err(|e| e.into_error())?;
        self.files.push(path);
        Ok(())
    }
}

/// [`Runs::merge`]: keeps the directory until the last entry is read.
pub struct MergedRuns {
    merge: Merge,
    _dir: Option<tempfile::TempDir>,
}

impl Iterator for MergedRuns {
    type Item = io::Result<(Vec<u8>, HandleRecord)>;

    fn next(&mut self) -> Option<Self::Item> {
        Some(self.merge.next()?.and_then(|(key, bytes)| {
            HandleRecord::decode(&bytes)
                .map(|r| (key, r))
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("import run damaged: {e}")))
        }))
    }
}

/// A k-way merge of run files: a heap of each run's next key, ties broken by
/// run number so that the earlier run comes first.
struct Merge {
    readers: Vec<BufReader<File>>,
    heap: BinaryHeap<Reverse<(Vec<u8>, usize)>>,
    heads: Vec<Option<Vec<u8>>>,
    failed: bool,
}

impl Merge {
    fn open(files: Vec<PathBuf>) -> io::Result<Merge> {
        let mut merge = Merge { readers: Vec::new(), heap: BinaryHeap::new(), heads: Vec::new(), failed: false };
        for (i, path) in files.iter().enumerate() {
            merge.readers.push(BufReader::with_capacity(READ_BUFFER, File::open(path)?));
            // Unlinked now: the open file stays readable and its space goes with it.
            std::fs::remove_file(path)?;
            merge.heads.push(None);
            merge.advance(i)?;
        }
        Ok(merge)
    }

    /// Read run `i`'s next entry into the heap (nothing at its end).
    fn advance(&mut self, i: usize) -> io::Result<()> {
        let reader = &mut self.readers[i];
        let Some(key) = read_part(reader, true)? else { return Ok(()) };
        let record = read_part(reader, false)?.expect("read_part errs at a cut entry");
        self.heads[i] = Some(record);
        self.heap.push(Reverse((key, i)));
        Ok(())
    }
}

impl Iterator for Merge {
    type Item = io::Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let Reverse((key, i)) = self.heap.pop()?;
        let record = self.heads[i].take().expect("a run in the heap has its head");
        if let Err(e) = self.advance(i) {
            self.failed = true;
            return Some(Err(e));
        }
        Some(Ok((key, record)))
    }
}

/// One length-prefixed part; `None` only at a clean end of the file where a
/// key may start (`at_entry`).
fn read_part(reader: &mut impl Read, at_entry: bool) -> io::Result<Option<Vec<u8>>> {
    let mut len = [0u8; 4];
    match reader.read_exact(&mut len) {
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof && at_entry => return Ok(None),
        other => other?,
    }
    let mut part = vec![0u8; u32::from_le_bytes(len) as usize];
    reader.read_exact(&mut part)?;
    Ok(Some(part))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(tag: u8) -> HandleRecord {
        HandleRecord { values: Vec::new(), name: Some(vec![tag]) }
    }

    #[test]
    fn merges_runs_in_key_order_with_the_later_of_equal_keys_last() {
        let dir = tempfile::tempdir().unwrap();
        let mut runs = Runs::new(dir.path()).unwrap();
        let mut group: Vec<(Vec<u8>, HandleRecord)> =
            vec![(b"c".to_vec(), record(1)), (b"a".to_vec(), record(1)), (b"b".to_vec(), record(1))];
        runs.spill(&mut group).unwrap();
        assert!(group.is_empty());
        group = vec![(b"b".to_vec(), record(2)), (b"d".to_vec(), record(2)), (b"b".to_vec(), record(3))];
        runs.spill(&mut group).unwrap();
        let got: Vec<(Vec<u8>, u8)> =
            runs.merge().unwrap().map(|e| e.unwrap()).map(|(k, r)| (k, r.name.unwrap()[0])).collect();
        let want = [("a", 1), ("b", 1), ("b", 2), ("b", 3), ("c", 1), ("d", 2)];
        assert_eq!(got, want.map(|(k, t)| (k.as_bytes().to_vec(), t)));
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "runs removed once merged");
    }

    #[test]
    fn many_runs_are_merged_in_steps() {
        let dir = tempfile::tempdir().unwrap();
        let n = MAX_OPEN_RUNS * 2 + 3;
        let group = |i: usize| vec![(format!("{i:05}").into_bytes(), record((i % 251) as u8))];
        let mut writer = RunWriter { dir: dir.path().to_path_buf(), files: Vec::new(), written: 0 };
        for i in (0..n).rev() {
            writer.spill(&mut group(i)).unwrap();
            assert!(writer.files.len() <= MAX_OPEN_RUNS);
        }
        let mut runs = Runs::new(dir.path()).unwrap();
        for i in (0..n).rev() {
            runs.spill(&mut group(i)).unwrap();
        }
        let keys: Vec<Vec<u8>> = runs.merge().unwrap().map(|e| e.unwrap().0).collect();
        assert_eq!(keys.len(), n);
        assert!(keys.windows(2).all(|w| w[0] < w[1]));
    }

    /// A run that cannot be written fails the next spill (or the merge), and
    /// dropping the runs waits for their thread.
    #[test]
    fn a_failed_run_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let mut runs = Runs::new(dir.path()).unwrap();
        std::fs::remove_dir_all(runs.dir()).unwrap();
        let _ = runs.spill(&mut vec![(b"a".to_vec(), record(1))]);
        let failed = runs.spill(&mut vec![(b"b".to_vec(), record(1))]).err().or_else(|| runs.merge().err());
        assert!(failed.is_some(), "a run written into a removed directory fails");
    }

    #[test]
    fn a_cut_run_is_an_error_not_a_panic() {
        let mut cut = Vec::new();
        cut.extend_from_slice(&3u32.to_le_bytes());
        cut.extend_from_slice(b"key");
        cut.extend_from_slice(&9u32.to_le_bytes());
        cut.extend_from_slice(b"shor");
        let mut r = &cut[..];
        assert!(read_part(&mut r, true).unwrap().is_some());
        assert!(read_part(&mut r, false).is_err());
        let mut empty = &b""[..];
        assert!(read_part(&mut empty, true).unwrap().is_none());
        assert!(read_part(&mut empty, false).is_err());
    }
}
