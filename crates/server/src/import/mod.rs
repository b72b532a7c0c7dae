//! Bulk loading of handle records from JSON lines:
//! `{"handle": "TEST/1", "values": [<Handle.Net JSON value>, ...]}` per line.
//! Records are loaded in key order, in chunks with one large transaction each,
//! which is what makes redb fast at this (random-order loads are ~10x slower).
//! An input larger than one in-memory sort group is sorted through runs on
//! disk ([`runs`]) so that the store still sees one ordered stream.
//!
//! [`check`] reads the whole input first and writes nothing, so that a bad
//! line, a handle that exists (without `replace`) or a prefix not homed here
//! (with `strict`) stops the import before anything is stored. It keeps what
//! it parsed ([`Parsed`]: in memory, or sorted into runs on disk), and
//! [`load`] stores that: each line is parsed once. While the store's writer
//! commits one chunk, the next is encoded and indexed ([`store_sorted`]).

use crate::config::Config;
use futures_util::StreamExt;
use handled_proto::handle;
use handled_proto::json::value_from_json;
use handled_store::{HandleRecord, RecordStore, StoreError};
use std::collections::HashSet;
use std::io::{BufRead, Read};
use std::iter::Peekable;
use std::path::Path;

mod check;
mod runs;

pub use check::{check, Checked, Parsed};

/// A record and its key (the handle, normalized).
type Keyed = (Vec<u8>, HandleRecord);

/// Records sorted together in memory; a larger input is sorted in runs of
/// this many on disk, then merged.
pub const SORT_GROUP: usize = 1_000_000;
/// Records per transaction.
pub const CHUNK: usize = 50_000;
/// Longest line read: far above any real record (a value holds at most 1 MiB),
/// and what one line may cost in memory before it is refused.
pub const MAX_LINE_BYTES: usize = 8 << 20;

#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("line {line}: {message}")]
    Line { line: u64, message: String },
    #[error("reading input: {0}")]
    Io(#[from] std::io::Error),
    #[error("store: {0}")]
    Store(#[from] StoreError),
}

/// The lines of `input`, numbered from 1, each at most [`MAX_LINE_BYTES`]:
/// a longer one is an error naming it, read no further than the limit.
fn lines(mut input: impl BufRead) -> impl Iterator<Item = Result<(u64, String), ImportError>> {
    let mut number = 0u64;
    let mut done = false;
    std::iter::from_fn(move || {
        if done {
            return None;
        }
        number += 1;
        let mut bytes = Vec::new();
        let read = (&mut input).take(MAX_LINE_BYTES as u64 + 1).read_until(b'\n', &mut bytes);
        let mut fail = |e: ImportError| {
            done = true;
            Some(Err(e))
        };
        match read {
            Err(e) => return fail(e.into()),
            Ok(0) => return None,
            Ok(_) => {}
        }
        if bytes.last() == Some(&b'\n') {
            bytes.pop();
            if bytes.last() == Some(&b'\r') {
                bytes.pop();
            }
        } else if bytes.len() > MAX_LINE_BYTES {
            let message = format!(
                "longer than {} MiB: not a handle record (one value holds at most 1 MiB)",
                MAX_LINE_BYTES >> 20
            );
            return fail(ImportError::Line { line: number, message });
        }
        match String::from_utf8(bytes) {
            Ok(text) => Some(Ok((number, text))),
            Err(_) => fail(ImportError::Line { line: number, message: "not UTF-8 text".into() }),
        }
    })
}

/// Parse one line into (original handle, record).
pub fn parse_line(text: &str, now: i32) -> Result<(Vec<u8>, HandleRecord), String> {
    let json: serde_json::Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let handle = json.get("handle").and_then(|h| h.as_str()).ok_or("missing \"handle\" string")?;
    if handle.is_empty() || !handle.contains('/') {
        return Err(format!("handle {handle:?} must look like PREFIX/SUFFIX"));
    }
    let values = json.get("values").and_then(|v| v.as_array()).ok_or("missing \"values\" array")?;
    let mut record = HandleRecord::default();
    for (i, v) in values.iter().enumerate() {
        let mut value = value_from_json(v).map_err(|e| format!("value {i}: {e}"))?;
        if value.index <= 0 {
            return Err(format!("value {i}: index must be positive"));
        }
        if record.values.iter().any(|x| x.index == value.index) {
            return Err(format!("value {i}: duplicate index {}", value.index));
        }
        if value.timestamp == 0 {
            value.timestamp = now;
        }
        record.values.push(value);
    }
    Ok((handle.as_bytes().to_vec(), record))
}

/// How an import treats what is already there and what is not ours.
#[derive(Debug, Clone, Default)]
pub struct ImportOptions {
    pub case_sensitive: bool,
    /// Normalized prefix handles (`0.NA/X`) homed here.
    pub homed: HashSet<Vec<u8>>,
    /// Refuse records of prefixes not homed here (else they are counted).
    pub strict: bool,
    /// Overwrite handles that exist (else one that exists stops the import).
    pub replace: bool,
}

impl ImportOptions {
    /// Options for `config`'s server: the prefixes it homes (configured, or
    /// homed at run time and kept in the store).
    pub async fn for_server(config: &Config, store: &dyn RecordStore) -> Result<ImportOptions, StoreError> {
        let mut homed: std::collections::HashSet<Vec<u8>> = store.homed_prefixes().await?.into_iter().collect();
        homed.extend(config.prefixes.iter().map(|p| handle::normalize(format!("0.NA/{p}").as_bytes(), false)));
        Ok(ImportOptions { case_sensitive: config.case_sensitive, homed, ..ImportOptions::default() })
    }
}

fn spill_error(dir: &Path, e: std::io::Error) -> ImportError {
    ImportError::Io(std::io::Error::new(e.kind(), format!("sorting through runs in {}: {e}", dir.display())))
}

/// Store what [`check`] parsed; `reread` opens the input again for
/// [`Parsed::Reread`] (loaded then by [`import`], with `case_sensitive`).
/// `progress` gets the records stored so far. Returns the number loaded.
pub async fn load<R: BufRead>(
    store: &dyn RecordStore,
    parsed: Parsed,
    reread: impl FnOnce() -> std::io::Result<R>,
    case_sensitive: bool,
    mut progress: impl FnMut(u64),
) -> Result<u64, ImportError> {
    let mut loaded = 0u64;
    match parsed {
        Parsed::Group(mut group) => store_sorted(store, sorted(&mut group), &mut loaded, &mut progress).await?,
        Parsed::Runs(runs) => {
            let dir = runs.dir().to_path_buf();
            let merged = runs.merge().map_err(|e| spill_error(&dir, e))?;
            store_sorted(store, merged.map(|e| e.map_err(|e| spill_error(&dir, e))), &mut loaded, &mut progress)
                .await?;
        }
        Parsed::Reread => return import(store, reread()?, case_sensitive, progress).await,
    }
    Ok(loaded)
}

/// Where [`check`] sorts a large input for `config`'s store: beside the
/// embedded store file (whose B-tree is what wants key order; the other
/// backends take records one by one).
pub fn spill_dir(config: &Config) -> Option<&Path> {
    config.storage.store.in_data_dir().then_some(config.data_dir.as_path())
}

/// Load every line of `input` ([`check`] it first), a sort group at a time,
/// each group stored as it fills: what [`load`] does with an input larger
/// than one group that [`check`] had nowhere to sort. `progress` gets the
/// records stored so far. Returns the number of records loaded. A bad line
/// stops the import before its group is written, naming the line.
pub async fn import(
    store: &dyn RecordStore,
    input: impl BufRead,
    case_sensitive: bool,
    mut progress: impl FnMut(u64),
) -> Result<u64, ImportError> {
    let now = handled_store::clock::now_secs_i32();
    let mut group = Vec::with_capacity(CHUNK);
    let mut loaded = 0u64;
    for line in lines(input) {
        let (n, line) = line?;
        if line.trim().is_empty() {
            continue;
        }
        let (h, record) = parse_line(&line, now).map_err(|message| ImportError::Line { line: n, message })?;
        let key = handle::normalize(&h, case_sensitive);
        group.push((key.clone(), HandleRecord::named(record.values, &h, &key)));
        if group.len() == SORT_GROUP {
            store_sorted(store, sorted(&mut group), &mut loaded, &mut progress).await?;
        }
    }
    store_sorted(store, sorted(&mut group), &mut loaded, &mut progress).await?;
    Ok(loaded)
}

/// `group` sorted by key, stably (of two records of one handle the later
/// stays later, and the store keeps it), and emptied.
fn sorted(group: &mut Vec<Keyed>) -> impl Iterator<Item = Result<Keyed, ImportError>> {
    group.sort_by(|a, b| a.0.cmp(&b.0));
    std::mem::take(group).into_iter().map(Ok)
}

/// Store records given in key order, in transactions of about `CHUNK`
/// records. Two chunks are in flight: the next is encoded and indexed here
/// (the store's `put_many` does that on its caller) while the store's writer
/// commits the one before.
async fn store_sorted(
    store: &dyn RecordStore,
    records: impl Iterator<Item = Result<Keyed, ImportError>>,
    loaded: &mut u64,
    progress: &mut impl FnMut(u64),
) -> Result<(), ImportError> {
    let mut records = records.peekable();
    let chunks = std::iter::from_fn(move || next_chunk(&mut records).transpose());
    let mut stored = futures_util::stream::iter(chunks)
        .map(|chunk| async move {
            let chunk = chunk?;
            let n = chunk.len() as u64;
            store.put_many(chunk).await?;
            Ok::<u64, ImportError>(n)
        })
        .buffered(2);
    while let Some(n) = stored.next().await {
        *loaded += n?;
        progress(*loaded);
    }
    Ok(())
}

/// `CHUNK` records, and more while they have the last one's key: a handle's
/// records are all in one chunk, so two chunks in flight never race on one.
fn next_chunk(
    records: &mut Peekable<impl Iterator<Item = Result<Keyed, ImportError>>>,
) -> Result<Option<Vec<Keyed>>, ImportError> {
    let mut chunk: Vec<Keyed> = Vec::with_capacity(CHUNK);
    while let Some(next) = records.next() {
        chunk.push(next?);
        if chunk.len() >= CHUNK {
            let last = &chunk[chunk.len() - 1].0;
            if !matches!(records.peek(), Some(Ok((key, _))) if key == last) {
                break;
            }
        }
    }
    Ok((!chunk.is_empty()).then_some(chunk))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_rejects() {
        let (h, r) = parse_line(
            r#"{"handle":"TEST/1","values":[{"index":1,"type":"URL","data":{"format":"string","value":"https://x"}}]}"#,
            5,
        )
        .unwrap();
        assert_eq!(h, b"TEST/1");
        assert_eq!(r.values[0].data, b"https://x");
        assert_eq!(r.values[0].timestamp, 5);
        assert!(parse_line("{", 0).unwrap_err().contains("not JSON"));
        assert!(parse_line(r#"{"handle":"nослэш","values":[]}"#, 0).is_err());
        let dup =
            r#"{"handle":"T/1","values":[{"index":1,"type":"URL","data":"a"},{"index":1,"type":"URL","data":"b"}]}"#;
        assert!(parse_line(dup, 0).unwrap_err().contains("duplicate"));
    }

    /// A chunk ends after `CHUNK` records, but never between two records of
    /// one handle: two chunks are in flight at once.
    #[test]
    fn chunks_never_split_a_handle() {
        let key = |i: usize| format!("T/{i:06}").into_bytes();
        let mut keys: Vec<Vec<u8>> = (0..CHUNK - 1).map(key).collect();
        keys.extend([key(CHUNK), key(CHUNK), key(CHUNK)]);
        keys.push(key(CHUNK + 1));
        let mut records = keys.into_iter().map(|k| Ok((k, HandleRecord::default()))).peekable();
        let first = next_chunk(&mut records).unwrap().unwrap();
        assert_eq!(first.len(), CHUNK + 2);
        let second = next_chunk(&mut records).unwrap().unwrap();
        assert_eq!(second.len(), 1);
        assert!(next_chunk(&mut records).unwrap().is_none());
    }

    /// Issue 25 R12: a line of any length was read whole (a 300 MB line cost
    /// 936 MB) before being refused; now reading stops at the limit.
    #[test]
    fn lines_are_bounded_and_numbered() {
        let text = "a\r\n\nb";
        let got: Vec<_> = lines(text.as_bytes()).map(|l| l.unwrap()).collect();
        assert_eq!(got, [(1, "a".to_owned()), (2, String::new()), (3, "b".to_owned())]);
        let mut long = b"ok\n".to_vec();
        long.resize(long.len() + MAX_LINE_BYTES + 10, b'x');
        long.extend_from_slice(b"\nnever read\n");
        let mut it = lines(&long[..]);
        assert_eq!(it.next().unwrap().unwrap(), (1, "ok".to_owned()));
        match it.next() {
            Some(Err(ImportError::Line { line: 2, message })) => assert!(message.contains("MiB"), "{message}"),
            other => panic!("{other:?}"),
        }
        assert!(it.next().is_none(), "nothing after the refusal");
        let exact = vec![b'y'; MAX_LINE_BYTES];
        assert_eq!(lines(&exact[..]).next().unwrap().unwrap().1.len(), MAX_LINE_BYTES);
    }
}
