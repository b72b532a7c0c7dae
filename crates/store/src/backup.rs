//! Backups: a consistent export of a store ([`StoreExport`], read in bounded
//! steps while the store serves) and the backup file format, which does not
//! depend on how a backend lays its data out.
//!
//! File: `MAGIC`, then frames, each a tag byte and its body:
//! * `M` manifest: `len: u32 LE | JSON` (first frame: format, time, server version);
//! * `F` file of the data directory: `name_len: u16 LE | name | len: u32 LE | bytes`;
//! * `E` store entry: `table: u8 | key_len: u32 LE | key | len: u32 LE | payload`;
//! * `Z` end: `entries: u64 LE | files: u64 LE | sha256` of every byte before the digest.
//!
//! Payloads are the values as the store's API sees them (no backend checksums),
//! so a backup of one backend version restores into the next.

use sha2::{Digest, Sha256};
use std::io::Read;

use crate::StoreError;

/// First bytes of every backup file (the digit is the format version).
pub const MAGIC: &[u8; 8] = b"HDLBKUP1";
/// Largest manifest, file, key and payload a reader accepts (a damaged length
/// field must not make it allocate gigabytes).
const MAX_MANIFEST: u32 = 64 << 10;
const MAX_FILE: u32 = 1 << 20;
const MAX_KEY: u32 = 1 << 20;
const MAX_PAYLOAD: u32 = 256 << 20;

/// The tables of a store, as named in a backup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackupTable {
    Handles = 0,
    Meta = 1,
    Docs = 2,
    DocIndex = 3,
    /// The transaction log (replication): entries and counters, so that ids
    /// go on from where the backup left them.
    TxnLog = 4,
    TxnState = 5,
}

impl BackupTable {
    pub const ALL: [BackupTable; 6] = [
        BackupTable::Handles,
        BackupTable::Meta,
        BackupTable::Docs,
        BackupTable::DocIndex,
        BackupTable::TxnLog,
        BackupTable::TxnState,
    ];

    fn from_byte(b: u8) -> Option<BackupTable> {
        Self::ALL.into_iter().find(|t| *t as u8 == b)
    }
}

/// One entry of a store: key and payload of one table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportEntry {
    pub table: BackupTable,
    pub key: Vec<u8>,
    pub payload: Vec<u8>,
}

/// A consistent view of everything a store holds (one point in time), read in
/// steps so that no step holds up the store's readers or writer for long.
pub trait StoreExport: Send {
    /// The next entries, about `max_bytes` of them (at least one while any is
    /// left), in table then key order; empty when the export is complete.
    fn next_entries(&mut self, max_bytes: usize) -> Result<Vec<ExportEntry>, StoreError>;
}

/// Writes a backup frame by frame into caller-owned buffers, keeping the digest.
pub struct BackupEncoder {
    hash: Sha256,
    entries: u64,
    files: u64,
}

impl BackupEncoder {
    /// Start a backup: `out` gets the magic and the manifest.
    pub fn start(manifest: &serde_json::Value, out: &mut Vec<u8>) -> BackupEncoder {
        let mut e = BackupEncoder { hash: Sha256::new(), entries: 0, files: 0 };
        let json = manifest.to_string();
        e.emit(out, |o| {
            o.extend_from_slice(MAGIC);
            o.push(b'M');
            put_bytes(o, json.as_bytes());
        });
        e
    }

    /// A file of the data directory (a plain name, no directories).
    pub fn file(&mut self, out: &mut Vec<u8>, name: &str, bytes: &[u8]) {
        self.files += 1;
        self.emit(out, |o| {
            o.push(b'F');
            o.extend_from_slice(&(name.len() as u16).to_le_bytes());
            o.extend_from_slice(name.as_bytes());
            put_bytes(o, bytes);
        });
    }

    pub fn entry(&mut self, out: &mut Vec<u8>, e: &ExportEntry) {
        self.entries += 1;
        self.emit(out, |o| {
            o.push(b'E');
            o.push(e.table as u8);
            put_bytes(o, &e.key);
            put_bytes(o, &e.payload);
        });
    }

    /// The end frame: counts and the digest of everything before it.
    pub fn finish(mut self, out: &mut Vec<u8>) {
        let (entries, files) = (self.entries, self.files);
        self.emit(out, |o| {
            o.push(b'Z');
            o.extend_from_slice(&entries.to_le_bytes());
            o.extend_from_slice(&files.to_le_bytes());
        });
        out.extend_from_slice(&self.hash.finalize());
    }

    fn emit(&mut self, out: &mut Vec<u8>, write: impl FnOnce(&mut Vec<u8>)) {
        let start = out.len();
        write(out);
        self.hash.update(&out[start..]);
    }
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len() as u32).to_le_bytes());
    out.extend_from_slice(b);
}

/// What a backup holds, frame by frame.
#[derive(Debug, PartialEq, Eq)]
pub enum BackupItem {
    File { name: String, bytes: Vec<u8> },
    Entry(ExportEntry),
}

/// The totals of a complete, verified backup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackupTotals {
    pub entries: u64,
    pub files: u64,
}

/// Reads a backup, checking every frame; the digest is checked at the end, so
/// nothing read is trusted before [`BackupReader::next`] has returned `None`.
pub struct BackupReader<R: Read> {
    input: R,
    hash: Sha256,
    manifest: serde_json::Value,
    entries: u64,
    files: u64,
    offset: u64,
    done: Option<BackupTotals>,
}

fn damaged(offset: u64, what: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(format!("backup damaged or incomplete at byte {offset}: {what}"))
}

impl<R: Read> BackupReader<R> {
    /// Check the magic and read the manifest.
    pub fn new(input: R) -> Result<Self, StoreError> {
        let mut r = BackupReader {
            input,
            hash: Sha256::new(),
            manifest: serde_json::Value::Null,
            entries: 0,
            files: 0,
            offset: 0,
            done: None,
        };
        let magic = r.read_exact(MAGIC.len(), "magic")?;
        if magic.as_slice() != MAGIC {
            let hint = if magic.starts_with(b"HDLBKUP") { " (a newer backup format?)" } else { "" };
            return Err(StoreError::Corrupt(format!("not a handled backup file{hint}")));
        }
        if r.read_exact(1, "manifest")?[0] != b'M' {
            return Err(damaged(r.offset, "no manifest"));
        }
        let json = r.read_sized(MAX_MANIFEST, "manifest")?;
        r.manifest = serde_json::from_slice(&json).map_err(|e| damaged(r.offset, format!("manifest: {e}")))?;
        Ok(r)
    }

    pub fn manifest(&self) -> &serde_json::Value {
        &self.manifest
    }

    /// The next item; `None` once the end frame and its digest checked out.
    pub fn next_item(&mut self) -> Result<Option<BackupItem>, StoreError> {
        if self.done.is_some() {
            return Ok(None);
        }
        let tag = self.read_exact(1, "frame")?[0];
        match tag {
            b'F' => {
                let len = u16::from_le_bytes(self.read_exact(2, "file name")?.try_into().expect("2 bytes"));
                let name = self.read_exact(len as usize, "file name")?;
                let name = String::from_utf8(name).map_err(|_| damaged(self.offset, "file name not UTF-8"))?;
                if !is_state_file_name(&name) {
                    return Err(damaged(
                        self.offset,
                        format!("file name {name:?} is not one a backup holds (the server key, admin-PREFIX.json)"),
                    ));
                }
                let bytes = self.read_sized(MAX_FILE, "file")?;
                self.files += 1;
                Ok(Some(BackupItem::File { name, bytes }))
            }
            b'E' => {
                let t = self.read_exact(1, "entry")?[0];
                let table = BackupTable::from_byte(t).ok_or_else(|| damaged(self.offset, format!("table {t}")))?;
                let key = self.read_sized(MAX_KEY, "key")?;
                let payload = self.read_sized(MAX_PAYLOAD, "value")?;
                self.entries += 1;
                Ok(Some(BackupItem::Entry(ExportEntry { table, key, payload })))
            }
            b'Z' => {
                let counts = self.read_exact(16, "end")?;
                let entries = u64::from_le_bytes(counts[..8].try_into().expect("8 bytes"));
                let files = u64::from_le_bytes(counts[8..].try_into().expect("8 bytes"));
                let expected = std::mem::take(&mut self.hash).finalize();
                let mut digest = [0u8; 32];
                self.input.read_exact(&mut digest).map_err(|e| self.read_error(e, "checksum"))?;
                if digest[..] != expected[..] {
                    return Err(StoreError::Corrupt("backup checksum mismatch: the file is damaged".into()));
                }
                if (entries, files) != (self.entries, self.files) {
                    return Err(damaged(self.offset, "frame counts disagree with the end frame"));
                }
                let mut extra = [0u8; 1];
                if self.input.read(&mut extra)? != 0 {
                    return Err(damaged(self.offset + 32, "bytes after the end of the backup"));
                }
                self.done = Some(BackupTotals { entries, files });
                Ok(None)
            }
            other => Err(damaged(self.offset - 1, format!("unknown frame tag {other:#04x}"))),
        }
    }

    /// Totals, once the whole backup has been read and checked.
    pub fn totals(&self) -> Option<BackupTotals> {
        self.done
    }

    fn read_error(&self, e: std::io::Error, what: &str) -> StoreError {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            damaged(self.offset, format!("ends inside the {what} (truncated)"))
        } else {
            StoreError::Io(e)
        }
    }

    fn read_exact(&mut self, n: usize, what: &str) -> Result<Vec<u8>, StoreError> {
        let mut buf = vec![0u8; n];
        self.input.read_exact(&mut buf).map_err(|e| self.read_error(e, what))?;
        self.hash.update(&buf);
        self.offset += n as u64;
        Ok(buf)
    }

    fn read_sized(&mut self, max: u32, what: &str) -> Result<Vec<u8>, StoreError> {
        let len = u32::from_le_bytes(self.read_exact(4, what)?.try_into().expect("4 bytes"));
        if len > max {
            return Err(damaged(self.offset, format!("{what} of {len} bytes (at most {max})")));
        }
        self.read_exact(len as usize, what)
    }
}

/// A name that stays inside the directory it is written to.
pub fn is_plain_file_name(name: &str) -> bool {
    !name.is_empty() && name.len() <= 255 && !name.starts_with('.') && !name.contains(['/', '\\', '\0'])
}

/// The server key's file in a data directory.
pub const SERVER_KEY_FILE_NAME: &str = "server_key.pk8";

/// The files a backup holds beside the store: the server key and the admin
/// credentials `serve` writes (`admin-PREFIX.json`). A restore creates these
/// names and prints them, so nothing else is taken (no `handled.toml`, no
/// control characters, no white space).
pub fn is_state_file_name(name: &str) -> bool {
    if name == SERVER_KEY_FILE_NAME {
        return true;
    }
    let Some(prefix) = name.strip_prefix("admin-").and_then(|n| n.strip_suffix(".json")) else { return false };
    is_plain_file_name(name) && !prefix.is_empty() && !prefix.chars().any(|c| c.is_control() || c.is_whitespace())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<u8> {
        let mut out = Vec::new();
        let mut e = BackupEncoder::start(&serde_json::json!({"format": 1}), &mut out);
        e.file(&mut out, "server_key.pk8", b"key");
        for (table, key) in [(BackupTable::Handles, "TEST/1"), (BackupTable::Meta, "site/serial")] {
            e.entry(&mut out, &ExportEntry { table, key: key.into(), payload: b"v".to_vec() });
        }
        e.finish(&mut out);
        out
    }

    fn read_all(bytes: &[u8]) -> Result<(Vec<BackupItem>, BackupTotals), StoreError> {
        let mut r = BackupReader::new(bytes)?;
        let mut items = Vec::new();
        while let Some(i) = r.next_item()? {
            items.push(i);
        }
        Ok((items, r.totals().unwrap()))
    }

    #[test]
    fn round_trip() {
        let bytes = sample();
        assert_eq!(BackupReader::new(&bytes[..]).unwrap().manifest()["format"], 1);
        let (items, totals) = read_all(&bytes).unwrap();
        assert_eq!(totals, BackupTotals { entries: 2, files: 1 });
        assert_eq!(items[0], BackupItem::File { name: "server_key.pk8".into(), bytes: b"key".to_vec() });
        assert!(matches!(&items[2], BackupItem::Entry(e) if e.table == BackupTable::Meta && e.key == b"site/serial"));
    }

    #[test]
    fn every_flipped_byte_and_every_truncation_is_refused() {
        let good = sample();
        for i in 0..good.len() {
            let mut bad = good.clone();
            bad[i] ^= 0x20;
            assert!(read_all(&bad).is_err(), "flipped byte {i} accepted");
            assert!(read_all(&good[..i]).is_err(), "truncation at {i} accepted");
        }
        let mut longer = good.clone();
        longer.push(0);
        assert!(read_all(&longer).is_err());
    }

    #[test]
    fn names_that_leave_the_directory_are_refused() {
        for bad in ["", "../x", "a/b", ".hidden", "a\\b"] {
            assert!(!is_plain_file_name(bad), "{bad:?}");
        }
        assert!(is_plain_file_name("admin-TEST.json"));
        for good in ["server_key.pk8", "admin-TEST.json", "admin-20.5000.json"] {
            assert!(is_state_file_name(good), "{good:?}");
        }
        for bad in
            ["handled.toml", "admin-.json", "admin-a\nb.json", "admin-\u{1b}]0;x\u{7}.json", "admin-a b.json", "x.json"]
        {
            assert!(!is_state_file_name(bad), "{bad:?}");
        }
    }
}
