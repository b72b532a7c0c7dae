//! The DUMP_HANDLES stream (Java `DumpHandlesResponse.streamResponse` /
//! `processStreamedPart`), after the framing preamble:
//!
//! `i32 version` (2; one block), then records, each one block that starts with a
//! **`u8`** record type:
//! * `5` OTHER_SITE_REPLICATION_INFO: `bytes` StreamTable text (the source's view of other queues).
//! * `0` THIS_SERVER_REPLICATION_INFO: `u64 date ‖ u64 lastTxnId` (where the mirror
//!   resumes pulling). In a version-1 stream this is the last record.
//! * `3` HANDLE_DATE / `4` NA_DATE: `bytes handle ‖ u64 date ‖ i32 priority`.
//! * `1` HANDLE: `bytes handle ‖ i32 n ‖ n × bytes value`.
//! * `2` HOMED_PREFIX: `bytes prefix`.
//! * `-1` (0xFF) ABSOLUTELY_DONE: the only block **without** a signature after it.
//!
//! Order sent by Java: 5, 0, all 3s, all 4s, the handle scan (1s), the prefix scan
//! (2s), -1. A resumed dump (request with a starting point) skips 5 and 0.

use super::framing::{BlockVerifier, FrameReader, Framing, StreamError, StreamItem};
use super::txn_stream::{read_handle, read_value_list};
use crate::codec::{put_bytes, put_i32, put_u64, put_u8, Codec, DecodeError, DecodeResult, Reader};
use crate::value::HandleValue;

/// The dump stream version Java 9 sends.
pub const DUMP_STREAM_VERSION: i32 = 2;

const RECORD_THIS_SERVER: u8 = 0;
const RECORD_HANDLE: u8 = 1;
const RECORD_HOMED_PREFIX: u8 = 2;
const RECORD_HANDLE_DATE: u8 = 3;
const RECORD_NA_DATE: u8 = 4;
const RECORD_OTHER_SITES: u8 = 5;
const RECORD_DONE: u8 = 0xFF;

/// Longest StreamTable text we read (one line per queue).
const MAX_OTHER_SITES_LEN: usize = 1024 * 1024;

/// One block of the dump stream.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum DumpStreamItem {
    /// First block; [`DUMP_STREAM_VERSION`].
    Header {
        version: i32,
    },
    /// StreamTable text of the source's other queues (`txnstat.dct` form).
    OtherSites(Vec<u8>),
    ThisServer {
        date_ms: u64,
        last_txn_id: u64,
    },
    /// Last create/delete date of a handle (multi-primary conflict rule).
    HandleDate {
        handle: Vec<u8>,
        date_ms: u64,
        priority: i32,
    },
    /// Last home/unhome date of a prefix.
    NaDate {
        prefix: Vec<u8>,
        date_ms: u64,
        priority: i32,
    },
    Handle {
        handle: Vec<u8>,
        values: Vec<HandleValue>,
    },
    HomedPrefix(Vec<u8>),
    /// ABSOLUTELY_DONE: last block, never signed.
    Done,
}

impl StreamItem for DumpStreamItem {
    fn encode(&self, out: &mut Vec<u8>) {
        match self {
            DumpStreamItem::Header { version } => put_i32(out, *version),
            DumpStreamItem::OtherSites(text) => {
                put_u8(out, RECORD_OTHER_SITES);
                put_bytes(out, text);
            }
            DumpStreamItem::ThisServer { date_ms, last_txn_id } => {
                put_u8(out, RECORD_THIS_SERVER);
                put_u64(out, *date_ms);
                put_u64(out, *last_txn_id);
            }
            DumpStreamItem::HandleDate { handle, date_ms, priority } => {
                encode_date(RECORD_HANDLE_DATE, handle, *date_ms, *priority, out)
            }
            DumpStreamItem::NaDate { prefix, date_ms, priority } => {
                encode_date(RECORD_NA_DATE, prefix, *date_ms, *priority, out)
            }
            DumpStreamItem::Handle { handle, values } => encode_handle(handle, values.iter().map(Codec::to_bytes), out),
            DumpStreamItem::HomedPrefix(prefix) => {
                put_u8(out, RECORD_HOMED_PREFIX);
                put_bytes(out, prefix);
            }
            DumpStreamItem::Done => put_u8(out, RECORD_DONE),
        }
    }

    fn is_signed(&self) -> bool {
        *self != DumpStreamItem::Done
    }
}

fn encode_date(kind: u8, handle: &[u8], date_ms: u64, priority: i32, out: &mut Vec<u8>) {
    put_u8(out, kind);
    put_bytes(out, handle);
    put_u64(out, date_ms);
    put_i32(out, priority);
}

/// A HANDLE record from values already in wire form (each a complete value record).
pub fn encode_handle<B: AsRef<[u8]>>(
    handle: &[u8],
    encoded_values: impl ExactSizeIterator<Item = B>,
    out: &mut Vec<u8>,
) {
    put_u8(out, RECORD_HANDLE);
    put_bytes(out, handle);
    put_i32(out, encoded_values.len() as i32);
    for v in encoded_values {
        put_bytes(out, v.as_ref());
    }
}

fn read_item(r: &mut Reader<'_>, version: Option<i32>) -> DecodeResult<DumpStreamItem> {
    if version.is_none() {
        let version = r.i32("dump stream version")?;
        if !(1..=DUMP_STREAM_VERSION).contains(&version) {
            return Err(DecodeError::Invalid { what: "dump stream version", detail: version.to_string() });
        }
        return Ok(DumpStreamItem::Header { version });
    }
    Ok(match r.u8("dump record type")? {
        RECORD_OTHER_SITES => {
            let n = r.len("other sites' replication info")?;
            if n > MAX_OTHER_SITES_LEN {
                return Err(DecodeError::BadLength { what: "other sites' replication info", len: n as i64 });
            }
            DumpStreamItem::OtherSites(r.take(n, "other sites' replication info")?.to_vec())
        }
        RECORD_THIS_SERVER => {
            DumpStreamItem::ThisServer { date_ms: r.u64("dump date")?, last_txn_id: r.u64("dump last transaction id")? }
        }
        RECORD_HANDLE_DATE => DumpStreamItem::HandleDate {
            handle: read_handle(r, "dated handle")?,
            date_ms: r.u64("handle date")?,
            priority: r.i32("handle date priority")?,
        },
        RECORD_NA_DATE => DumpStreamItem::NaDate {
            prefix: read_handle(r, "dated prefix")?,
            date_ms: r.u64("prefix date")?,
            priority: r.i32("prefix date priority")?,
        },
        RECORD_HANDLE => {
            DumpStreamItem::Handle { handle: read_handle(r, "dumped handle")?, values: read_value_list(r)? }
        }
        RECORD_HOMED_PREFIX => DumpStreamItem::HomedPrefix(read_handle(r, "homed prefix")?),
        RECORD_DONE => DumpStreamItem::Done,
        other => return Err(DecodeError::Invalid { what: "dump record type", detail: other.to_string() }),
    })
}

/// Incremental decoder of the dump stream's blocks (after the preamble).
pub struct DumpStreamDecoder<V> {
    frames: FrameReader<V>,
    version: Option<i32>,
    done: bool,
}

impl<V: BlockVerifier> DumpStreamDecoder<V> {
    /// `max_item` caps one block with its signature (see `DEFAULT_MAX_ITEM_LEN`).
    pub fn new(framing: Framing<V>, max_item: usize) -> Self {
        DumpStreamDecoder { frames: FrameReader::new(framing, max_item), version: None, done: false }
    }

    /// Add bytes read from the connection; take the items out before feeding more.
    pub fn feed(&mut self, data: &[u8]) {
        self.frames.feed(data);
    }

    /// The next whole item; `Ok(None)` = feed more bytes (or, once
    /// [`DumpStreamDecoder::is_done`], nothing follows).
    pub fn next_item(&mut self) -> Result<Option<DumpStreamItem>, StreamError> {
        if self.done {
            return match self.frames.pending().len() {
                0 => Ok(None),
                count => Err(StreamError::AfterEnd { count }),
            };
        }
        let version = self.version;
        let item = self.frames.next(|r| read_item(r, version), DumpStreamItem::is_signed)?;
        match &item {
            Some(DumpStreamItem::Header { version }) => self.version = Some(*version),
            Some(DumpStreamItem::Done) => self.done = true,
            // A version-1 stream ends after this server's info (Java returns there).
            Some(DumpStreamItem::ThisServer { .. }) if self.version < Some(DUMP_STREAM_VERSION) => self.done = true,
            _ => {}
        }
        Ok(item)
    }

    /// True once ABSOLUTELY_DONE (or a version-1 stream's last record) was taken.
    pub fn is_done(&self) -> bool {
        self.done
    }
}
