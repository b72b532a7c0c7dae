//! The embedded store's write-ahead log.
//!
//! A durable redb commit rewrites every B-tree page a batch touched and fsyncs
//! them: with writes spread over the key space that is hundreds of random pages
//! per batch. Instead, each batch's *effects* (the table entries it set or
//! removed) are appended to a log file and that one sequential append is
//! `fdatasync`ed; redb then commits without syncing. Every so often (time or log
//! size, see [`super::EmbeddedOptions`]) a batch is committed durably instead — a
//! checkpoint — and the log starts over.
//!
//! Records are physical redo (`set key = value` / `remove key` per table), so
//! replaying one twice is harmless. Each record carries a sequence number; the
//! checkpoint stores the last one it covers in its own commit, and opening the
//! store replays the records after it, in order. Only the unacknowledged tail can
//! be torn (a batch is answered after its record is synced): a bad record with
//! nothing intact after it is dropped; one followed by intact records is damage,
//! and the store refuses to open rather than lose the acknowledged writes after it.
//!
//! Record: `len: u32 LE | crc32(payload): u32 LE | payload`, payload =
//! `seq: u64 LE | entry*`, entry = `table: u8 | key_len: u32 LE | key |
//! present: u8 | (value_len: u32 LE | value)?`.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use redb::{Database, Durability, ReadableDatabase, ReadableTable, TableDefinition, WriteTransaction};

use super::keydir::WAL_GEN_KEY;
use super::map_redb;
use super::tx::RawTables;
use crate::StoreError;

/// Called with the replay's commit before it is made: its generation and the
/// handle entries replayed (the last value of each key, `None`: removed).
pub(super) type ReplayHook<'h> = &'h mut dyn FnMut(&WriteTransaction, u64, &HandleEntries) -> Result<(), StoreError>;
pub(super) type HandleEntries = std::collections::BTreeMap<Vec<u8>, Option<Vec<u8>>>;

/// redb table holding the checkpoint: "seq" → last log record it covers.
pub(super) const WAL_STATE: TableDefinition<&str, u64> = TableDefinition::new("wal.v1");
const SEQ_KEY: &str = "seq";
const HEADER: usize = 8;
/// Bigger lengths are not ours (a torn length field): stop replay there.
const MAX_RECORD: u32 = 1 << 30;

/// The tables a redo entry can target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TableId {
    Handles = 0,
    Meta = 1,
    Docs = 2,
    DocIndex = 3,
    TxnLog = 4,
    TxnState = 5,
}

impl TableId {
    pub(super) fn from_byte(b: u8) -> Option<TableId> {
        use TableId::*;
        [Handles, Meta, Docs, DocIndex, TxnLog, TxnState].into_iter().find(|t| *t as u8 == b)
    }
}

/// The effects of one batch, encoded as they are applied.
#[derive(Default)]
pub(super) struct Redo {
    entries: Vec<u8>,
}

impl Redo {
    /// Record `key` set to `value` (`None`: removed) in `table`.
    pub(super) fn record(&mut self, table: TableId, key: &[u8], value: Option<&[u8]>) {
        self.entries.push(table as u8);
        put_bytes(&mut self.entries, key);
        match value {
            Some(v) => {
                self.entries.push(1);
                put_bytes(&mut self.entries, v);
            }
            None => self.entries.push(0),
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len() as u32).to_le_bytes());
    out.extend_from_slice(b);
}

/// One of the two log files.
struct LogFile {
    file: File,
    path: PathBuf,
    len: u64,
    /// Sequence number of the last record in it (0: none since it was emptied).
    last_seq: u64,
}

impl LogFile {
    /// Empty the file, durably: a stale record left behind could follow the new
    /// ones after a crash and read as damage.
    fn empty(&mut self) -> Result<(), StoreError> {
        self.file.set_len(0)?;
        self.file.sync_all()?;
        self.len = 0;
        self.last_seq = 0;
        Ok(())
    }
}

/// The log: two files, one taking appends. A checkpoint that runs beside the
/// writer [`Wal::rotate`]s: new records go to the other file while the durable
/// commit covers everything in the retired one, which is emptied after it
/// ([`RetiredLog::empty`]), off the write path.
pub(super) struct Wal {
    files: [LogFile; 2],
    active: usize,
    /// Sequence number of the last record appended (or covered by the checkpoint).
    last_seq: u64,
    /// The last sequence number a durable checkpoint covers.
    durable_seq: u64,
    /// A failed append may have left part of a record after `len`, and cutting
    /// it off failed too: cut before the next append, or refuse it.
    torn: bool,
}

/// A log file a running checkpoint covers: emptied once that checkpoint is durable.
pub(super) struct RetiredLog {
    file: File,
    index: usize,
    /// The checkpoint's sequence number (the file's last record).
    pub(super) seq: u64,
}

impl RetiredLog {
    pub(super) fn try_clone(&self) -> std::io::Result<RetiredLog> {
        Ok(RetiredLog { file: self.file.try_clone()?, index: self.index, seq: self.seq })
    }

    /// Empty the file, durably (on the checkpoint's thread, after its commit).
    pub(super) fn empty(&self) -> std::io::Result<()> {
        self.file.set_len(0)?;
        self.file.sync_all()
    }
}

impl Wal {
    /// The log files of the store file `db_path`: `<db>.wal` and `<db>.wal2`.
    pub(super) fn paths_for(db_path: &Path) -> [PathBuf; 2] {
        [".wal", ".wal2"].map(|ext| {
            let mut p = db_path.as_os_str().to_owned();
            p.push(ext);
            PathBuf::from(p)
        })
    }

    /// Bytes both log files beside `db_path` hold (what a replay reads).
    pub(super) fn bytes_on_disk(db_path: &Path) -> u64 {
        Wal::paths_for(db_path).iter().map(|p| std::fs::metadata(p).map_or(0, |m| m.len())).sum()
    }

    /// Open the log beside `db_path`, replay into `db` what the last checkpoint
    /// does not cover (one durable commit), and empty the log. Returns the log
    /// and the number of records replayed.
    pub(super) fn open(db: &Database, db_path: &Path, hook: ReplayHook<'_>) -> Result<(Wal, usize), StoreError> {
        let checkpoint = checkpoint_seq(db)?;
        let mut files = Vec::with_capacity(2);
        let mut contents = Vec::with_capacity(2);
        for path in Self::paths_for(db_path) {
            let mut file = OpenOptions::new().read(true).append(true).create(true).open(&path)?;
            let mut bytes = Vec::new();
            file.seek(SeekFrom::Start(0))?;
            file.read_to_end(&mut bytes)?;
            files.push(LogFile { file, path, len: bytes.len() as u64, last_seq: 0 });
            contents.push(bytes);
        }
        // The older file first: the one whose first record comes first (an empty
        // file or one without an intact first record last).
        let first = |b: &[u8]| record_at(b, 0).map_or(u64::MAX, |r| r.0);
        let order = if first(&contents[1]) < first(&contents[0]) { [1, 0] } else { [0, 1] };
        let mut records = Vec::new();
        let mut last_seq = checkpoint;
        for i in order {
            let path = &files[i].path;
            let (recs, end) =
                valid_records(&contents[i], last_seq).map_err(|d| StoreError::Corrupt(d.message(path)))?;
            if let LogEnd::TornTail { offset } = end {
                tracing::warn!(
                    path = %path.display(),
                    offset,
                    bytes = contents[i].len() - offset,
                    "store log ends in an incomplete record (a write cut short by a crash, never acknowledged): dropped"
                );
            }
            last_seq = recs.last().map_or(last_seq, |r| r.0);
            records.extend(recs.into_iter().map(|r| (r, i)));
        }
        if !records.is_empty() {
            let mut txn = db.begin_write().map_err(|e| map_redb(e.into()))?;
            txn.set_durability(Durability::Immediate).map_err(|e| StoreError::Backend(e.to_string()))?;
            txn.set_two_phase_commit(true);
            let mut handles = HandleEntries::new();
            for ((seq, entries), i) in &records {
                replay(&txn, entries, &mut handles).map_err(|e| {
                    StoreError::Corrupt(format!("log record {seq} in {}: {e}", files[*i].path.display()))
                })?;
            }
            let gen = set_checkpoint(&txn, last_seq)?;
            hook(&txn, gen, &handles)?;
            txn.commit().map_err(|e| map_redb(e.into()))?;
            tracing::warn!(records = records.len(), "store log replayed after an unclean shutdown");
        }
        let [a, b] = <[LogFile; 2]>::try_from(files).map_err(|_| StoreError::Backend("internal: log files".into()))?;
        let mut wal = Wal { files: [a, b], active: 0, last_seq, durable_seq: last_seq, torn: false };
        wal.empty_all()?;
        Ok((wal, records.len()))
    }

    /// Bytes in the file taking appends.
    pub(super) fn len(&self) -> u64 {
        self.files[self.active].len
    }

    /// Sequence number a checkpoint committed now covers.
    pub(super) fn last_seq(&self) -> u64 {
        self.last_seq
    }

    /// Append one batch's effects and sync them to disk.
    pub(super) fn append(&mut self, redo: &Redo) -> Result<(), StoreError> {
        let log = &mut self.files[self.active];
        if self.torn {
            // An intact record after a torn one would read as damage at the next open.
            log.file.set_len(log.len).map_err(|e| error(&log.path, e))?;
            self.torn = false;
        }
        let seq = self.last_seq + 1;
        let payload_len = 8 + redo.entries.len();
        let mut crc = crc32fast::Hasher::new();
        crc.update(&seq.to_le_bytes());
        crc.update(&redo.entries);
        let mut record = Vec::with_capacity(HEADER + payload_len);
        record.extend_from_slice(&(payload_len as u32).to_le_bytes());
        record.extend_from_slice(&crc.finalize().to_le_bytes());
        record.extend_from_slice(&seq.to_le_bytes());
        record.extend_from_slice(&redo.entries);
        let written = log.file.write_all(&record).and_then(|_| log.file.sync_data());
        if let Err(e) = written {
            // Part of the record may be on disk: cut it off so a later record
            // does not follow garbage.
            self.torn = log.file.set_len(log.len).is_err();
            return Err(error(&log.path, e));
        }
        log.len += record.len() as u64;
        log.last_seq = seq;
        self.last_seq = seq;
        Ok(())
    }

    /// Switch appends to the other file, for a checkpoint covering everything
    /// logged so far (the retired file). The other file must hold nothing a
    /// durable checkpoint does not cover; it is emptied here if its emptying
    /// after the last checkpoint failed.
    pub(super) fn rotate(&mut self) -> Result<RetiredLog, StoreError> {
        let next = 1 - self.active;
        if self.files[next].len > 0 {
            if self.files[next].last_seq > self.durable_seq {
                return Err(StoreError::Backend("internal: the other log file holds uncovered records".into()));
            }
            let path = self.files[next].path.clone();
            self.files[next].empty().map_err(|e| match e {
                StoreError::Io(e) => error(&path, e),
                e => e,
            })?;
        }
        if self.torn {
            // A torn tail at the end of a retired file is harmless (replay drops it).
            self.torn = false;
        }
        let retired =
            RetiredLog { file: self.files[self.active].file.try_clone()?, index: self.active, seq: self.last_seq };
        self.active = next;
        Ok(retired)
    }

    /// A checkpoint covering the retired file is durable, and the file was
    /// emptied if `emptied`.
    pub(super) fn retired_done(&mut self, retired: &RetiredLog, emptied: bool) {
        self.durable_seq = self.durable_seq.max(retired.seq);
        if emptied {
            let f = &mut self.files[retired.index];
            f.len = 0;
            f.last_seq = 0;
        }
    }

    /// After a checkpoint on the writer (everything logged is in the store
    /// file): empty both files.
    pub(super) fn reset(&mut self) -> Result<(), StoreError> {
        self.durable_seq = self.last_seq;
        self.empty_all()
    }

    fn empty_all(&mut self) -> Result<(), StoreError> {
        for f in &mut self.files {
            if f.len > 0 || f.last_seq > 0 {
                f.empty()?;
            }
        }
        self.torn = false;
        Ok(())
    }
}

fn error(path: &Path, e: std::io::Error) -> StoreError {
    StoreError::Io(std::io::Error::new(e.kind(), format!("store log {}: {e}", path.display())))
}

/// The checkpoint's sequence number in `db` (0 for a new store).
fn checkpoint_seq(db: &Database) -> Result<u64, StoreError> {
    let txn = db.begin_read().map_err(|e| map_redb(e.into()))?;
    let table = txn.open_table(WAL_STATE).map_err(|e| map_redb(e.into()))?;
    let seq = table.get(SEQ_KEY).map_err(|e| map_redb(e.into()))?.map(|g| g.value());
    Ok(seq.unwrap_or(0))
}

/// Record, in a durable commit, that the log up to `seq` is in the store file,
/// and count the checkpoint generation up (the key directory records the one
/// it matches). Returns the new generation.
pub(super) fn set_checkpoint(txn: &WriteTransaction, seq: u64) -> Result<u64, StoreError> {
    let mut table = txn.open_table(WAL_STATE).map_err(|e| map_redb(e.into()))?;
    table.insert(SEQ_KEY, seq).map_err(|e| map_redb(e.into()))?;
    let gen = table.get(WAL_GEN_KEY).map_err(|e| map_redb(e.into()))?.map_or(0, |g| g.value()) + 1;
    table.insert(WAL_GEN_KEY, gen).map_err(|e| map_redb(e.into()))?;
    Ok(gen)
}

/// One intact record: (seq, entries).
type LogRecord<'a> = (u64, &'a [u8]);

/// Where replay of the log stopped.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum LogEnd {
    /// Every byte was an intact record.
    Clean,
    /// An incomplete record from `offset` to the end: a write a crash cut short,
    /// never acknowledged (a batch is answered after its record is synced).
    TornTail { offset: usize },
}

/// The log is damaged before its end: intact records follow a bad one, so
/// acknowledged writes would be lost by stopping there.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Damage {
    offset: usize,
    seq: u64,
    reason: &'static str,
    next_intact: usize,
}

impl Damage {
    fn message(&self, path: &Path) -> String {
        let p = path.display();
        format!(
            "store log {p} is damaged at byte offset {} (record {}: {}), and intact records follow at offset {}: \
             refusing to start rather than drop acknowledged writes. To recover, restore the data directory from a \
             backup; or, accepting the loss of every write logged from that offset on, cut the log there \
             (`truncate -s {} {p}`) and start again",
            self.offset, self.seq, self.reason, self.next_intact, self.offset
        )
    }
}

/// The record at `at`, if intact: (seq, entries, length with header).
fn record_at(bytes: &[u8], at: usize) -> Result<(u64, &[u8], usize), &'static str> {
    if bytes.len() - at < HEADER {
        return Err("incomplete header");
    }
    let len = u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
    let crc = u32::from_le_bytes(bytes[at + 4..at + 8].try_into().expect("4 bytes"));
    let start = at + HEADER;
    if !(8..=MAX_RECORD).contains(&len) {
        return Err("impossible length");
    }
    if bytes.len() - start < len as usize {
        return Err("length past the end of the log");
    }
    let payload = &bytes[start..start + len as usize];
    if crc32fast::hash(payload) != crc {
        return Err("checksum mismatch");
    }
    let seq = u64::from_le_bytes(payload[..8].try_into().expect("8 bytes"));
    Ok((seq, &payload[8..], HEADER + len as usize))
}

/// The intact records after `checkpoint`, in sequence: (seq, entries), and how the
/// log ends. A bad record with nothing intact after it is a torn tail; a bad record
/// (or a break in the sequence) before intact later records is [`Damage`].
fn valid_records(bytes: &[u8], checkpoint: u64) -> Result<(Vec<LogRecord<'_>>, LogEnd), Damage> {
    let mut out = Vec::new();
    let mut at = 0usize;
    let mut expected = checkpoint + 1;
    while at < bytes.len() {
        let reason = match record_at(bytes, at) {
            // Leftovers the checkpoint covers (an emptying that did not reach the
            // disk) may precede the live records, never follow them.
            Ok((seq, _, len)) if seq <= checkpoint && out.is_empty() => {
                at += len;
                continue;
            }
            Ok((seq, entries, len)) if seq == expected => {
                out.push((seq, entries));
                expected += 1;
                at += len;
                continue;
            }
            Ok(_) => "out of sequence",
            Err(reason) => reason,
        };
        return match next_intact(bytes, at + 1, expected) {
            Some(next_intact) => Err(Damage { offset: at, seq: expected, reason, next_intact }),
            None => Ok((out, LogEnd::TornTail { offset: at })),
        };
    }
    Ok((out, LogEnd::Clean))
}

/// The first offset from `from` holding an intact record with a sequence number
/// at least `expected` (the seq is checked before the checksum, to keep the walk cheap).
fn next_intact(bytes: &[u8], from: usize, expected: u64) -> Option<usize> {
    let most = expected + (bytes.len() / HEADER) as u64;
    let last = bytes.len().checked_sub(HEADER + 8)?;
    (from..=last).find(|&at| {
        let seq = u64::from_le_bytes(bytes[at + HEADER..at + HEADER + 8].try_into().expect("8 bytes"));
        (expected..=most).contains(&seq) && record_at(bytes, at).is_ok()
    })
}

/// Apply one record's entries inside `txn`.
fn replay(txn: &WriteTransaction, mut entries: &[u8], handles: &mut HandleEntries) -> Result<(), String> {
    let mut tables = RawTables::open(txn).map_err(|e| e.to_string())?;
    while !entries.is_empty() {
        let table = TableId::from_byte(take(&mut entries, 1)?[0]).ok_or("unknown table")?;
        let key = take_bytes(&mut entries)?;
        let value = match take(&mut entries, 1)?[0] {
            0 => None,
            1 => Some(take_bytes(&mut entries)?),
            _ => return Err("bad presence flag".into()),
        };
        tables.put(table, key, value)?;
        if table == TableId::Handles {
            handles.insert(key.to_vec(), value.map(<[u8]>::to_vec));
        }
    }
    Ok(())
}

fn take<'a>(b: &mut &'a [u8], n: usize) -> Result<&'a [u8], String> {
    if b.len() < n {
        return Err("truncated entry".into());
    }
    let (head, rest) = b.split_at(n);
    *b = rest;
    Ok(head)
}

fn take_bytes<'a>(b: &mut &'a [u8]) -> Result<&'a [u8], String> {
    let len = u32::from_le_bytes(take(b, 4)?.try_into().expect("4 bytes")) as usize;
    take(b, len)
}

#[cfg(test)]
#[path = "embedded_wal_tests.rs"]
mod tests;
