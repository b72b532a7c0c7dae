//! The RETRIEVE_TXN_LOG stream (Java `RetrieveTxnResponse.streamResponse` /
//! `processStreamedPart`), after the framing preamble:
//!
//! `i32 dataFormatVersion ‖ i32 status` (one block), then records, each one block
//! that starts with a **`u8`** record type:
//! * `0` END: in format 1 followed by `u64 date` (the mirror's next
//!   `lastQueryDate`); nothing in format 2. Last block of the stream.
//! * `1` HANDLE_RECORD: `u64 txnId ‖ bytes handle ‖ u8 action ‖ u64 date`, and for
//!   CREATE/UPDATE `i32 n ‖ n × bytes value` (raw value records, current at send time).
//! * `2` NAME_OF_QUEUE (format 2): `bytes queueName` (UTF-8).
//! * `3` END_OF_QUEUE_LAST_TIMESTAMP (format 2): `u64 date`.

use super::framing::{BlockVerifier, FrameReader, Framing, StreamError, StreamItem};
use crate::codec::{put_bytes, put_i32, put_u64, put_u8, Codec, DecodeError, DecodeResult, Reader};
use crate::request::MAX_HANDLE_LEN;
use crate::value::HandleValue;

/// `dataFormatVersion` of a single-queue answer.
pub const FORMAT_ONE_QUEUE: i32 = 1;
/// `dataFormatVersion` of an all-queues answer.
pub const FORMAT_ALL_QUEUES: i32 = 2;
/// Status: the mirror is too far behind and must be dumped again.
pub const STATUS_NEED_TO_REDUMP: i32 = 1;
/// Status: records follow.
pub const STATUS_SENDING: i32 = 2;

const RECORD_END: u8 = 0;
const RECORD_HANDLE: u8 = 1;
const RECORD_QUEUE_NAME: u8 = 2;
const RECORD_QUEUE_END: u8 = 3;

/// Longest queue name we read (`"<n>:<index>:<handle>"`).
const MAX_QUEUE_NAME_LEN: usize = 4096;

/// The action byte of a transaction record, kept raw so unknown actions pass through.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TxnAction(pub u8);

impl TxnAction {
    pub const PLACEHOLDER: TxnAction = TxnAction(0);
    pub const CREATE: TxnAction = TxnAction(1);
    pub const DELETE: TxnAction = TxnAction(2);
    pub const UPDATE: TxnAction = TxnAction(3);
    pub const HOME_NA: TxnAction = TxnAction(4);
    pub const UNHOME_NA: TxnAction = TxnAction(5);
    pub const DELETE_ALL: TxnAction = TxnAction(6);

    /// CREATE and UPDATE records carry the handle's values.
    pub fn carries_values(self) -> bool {
        self == Self::CREATE || self == Self::UPDATE
    }
}

/// One HANDLE_RECORD.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TxnRecord {
    pub txn_id: u64,
    /// The handle, or the prefix handle (`0.NA/X`) for HOME/UNHOME.
    pub handle: Vec<u8>,
    pub action: TxnAction,
    pub date_ms: u64,
    /// `Some` exactly for actions that [`TxnAction::carries_values`]; empty when
    /// the handle no longer exists at send time.
    pub values: Option<Vec<HandleValue>>,
}

/// One block of the transaction stream.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum TxnStreamItem {
    /// First block: `format` is [`FORMAT_ONE_QUEUE`] or [`FORMAT_ALL_QUEUES`],
    /// `status` [`STATUS_SENDING`] or [`STATUS_NEED_TO_REDUMP`].
    Header {
        format: i32,
        status: i32,
    },
    Record(TxnRecord),
    /// Format 2: the records that follow belong to this queue.
    QueueName(Vec<u8>),
    /// Format 2: end of the current queue; the source's last timestamp for it.
    QueueEnd {
        date_ms: u64,
    },
    /// Last block; `date_ms` is present exactly in format 1.
    End {
        date_ms: Option<u64>,
    },
}

impl StreamItem for TxnStreamItem {
    fn encode(&self, out: &mut Vec<u8>) {
        match self {
            TxnStreamItem::Header { format, status } => {
                put_i32(out, *format);
                put_i32(out, *status);
            }
            TxnStreamItem::Record(rec) => encode_record(
                rec.txn_id,
                &rec.handle,
                rec.action,
                rec.date_ms,
                rec.values.as_ref().map(|v| v.iter().map(Codec::to_bytes)),
                out,
            ),
            TxnStreamItem::QueueName(name) => {
                put_u8(out, RECORD_QUEUE_NAME);
                put_bytes(out, name);
            }
            TxnStreamItem::QueueEnd { date_ms } => {
                put_u8(out, RECORD_QUEUE_END);
                put_u64(out, *date_ms);
            }
            TxnStreamItem::End { date_ms } => {
                put_u8(out, RECORD_END);
                if let Some(d) = date_ms {
                    put_u64(out, *d);
                }
            }
        }
    }
}

/// A HANDLE_RECORD from values already in wire form (each a complete value
/// record), for sources that keep values encoded; `None` for actions without values.
pub fn encode_record<B: AsRef<[u8]>>(
    txn_id: u64,
    handle: &[u8],
    action: TxnAction,
    date_ms: u64,
    encoded_values: Option<impl ExactSizeIterator<Item = B>>,
    out: &mut Vec<u8>,
) {
    put_u8(out, RECORD_HANDLE);
    put_u64(out, txn_id);
    put_bytes(out, handle);
    put_u8(out, action.0);
    put_u64(out, date_ms);
    if let Some(values) = encoded_values {
        put_i32(out, values.len() as i32);
        for v in values {
            put_bytes(out, v.as_ref());
        }
    }
}

/// `bytes` holding a handle, at most [`MAX_HANDLE_LEN`].
pub(crate) fn read_handle(r: &mut Reader<'_>, what: &'static str) -> DecodeResult<Vec<u8>> {
    let n = r.len(what)?;
    if n > MAX_HANDLE_LEN {
        return Err(DecodeError::BadLength { what, len: n as i64 });
    }
    Ok(r.take(n, what)?.to_vec())
}

/// `i32 n ‖ n × bytes value`, each a whole value record. The count is bounded by
/// the item cap of the reader (each value takes at least its length word).
pub(crate) fn read_value_list(r: &mut Reader<'_>) -> DecodeResult<Vec<HandleValue>> {
    let n = r.len("value count")?;
    let mut values = Vec::with_capacity(n.min(r.remaining() / 4));
    for _ in 0..n {
        values.push(HandleValue::from_bytes(r.bytes("value")?)?);
    }
    Ok(values)
}

fn read_item(r: &mut Reader<'_>, format: Option<i32>) -> DecodeResult<TxnStreamItem> {
    let Some(format) = format else {
        let format = r.i32("transaction stream format")?;
        if format != FORMAT_ONE_QUEUE && format != FORMAT_ALL_QUEUES {
            return Err(DecodeError::Invalid { what: "transaction stream format", detail: format.to_string() });
        }
        return Ok(TxnStreamItem::Header { format, status: r.i32("transaction stream status")? });
    };
    Ok(match r.u8("transaction record type")? {
        RECORD_END => {
            TxnStreamItem::End { date_ms: if format == FORMAT_ONE_QUEUE { Some(r.u64("end date")?) } else { None } }
        }
        RECORD_HANDLE => {
            let txn_id = r.u64("transaction id")?;
            let handle = read_handle(r, "transaction handle")?;
            let action = TxnAction(r.u8("transaction action")?);
            let date_ms = r.u64("transaction date")?;
            let values = if action.carries_values() { Some(read_value_list(r)?) } else { None };
            TxnStreamItem::Record(TxnRecord { txn_id, handle, action, date_ms, values })
        }
        RECORD_QUEUE_NAME => {
            let n = r.len("queue name")?;
            if n > MAX_QUEUE_NAME_LEN {
                return Err(DecodeError::BadLength { what: "queue name", len: n as i64 });
            }
            TxnStreamItem::QueueName(r.take(n, "queue name")?.to_vec())
        }
        RECORD_QUEUE_END => TxnStreamItem::QueueEnd { date_ms: r.u64("queue last timestamp")? },
        other => return Err(DecodeError::Invalid { what: "transaction record type", detail: other.to_string() }),
    })
}

/// Incremental decoder of the transaction stream's blocks (after the preamble).
pub struct TxnStreamDecoder<V> {
    frames: FrameReader<V>,
    format: Option<i32>,
    done: bool,
}

impl<V: BlockVerifier> TxnStreamDecoder<V> {
    /// `max_item` caps one block with its signature (see `DEFAULT_MAX_ITEM_LEN`).
    pub fn new(framing: Framing<V>, max_item: usize) -> Self {
        TxnStreamDecoder { frames: FrameReader::new(framing, max_item), format: None, done: false }
    }

    /// Add bytes read from the connection. Take the items out with
    /// [`TxnStreamDecoder::next_item`] before feeding more, so at most one item
    /// and one chunk are buffered.
    pub fn feed(&mut self, data: &[u8]) {
        self.frames.feed(data);
    }

    /// The next whole item; `Ok(None)` = feed more bytes (or, once
    /// [`TxnStreamDecoder::is_done`], nothing follows).
    pub fn next_item(&mut self) -> Result<Option<TxnStreamItem>, StreamError> {
        if self.done {
            return match self.frames.pending().len() {
                0 => Ok(None),
                count => Err(StreamError::AfterEnd { count }),
            };
        }
        let format = self.format;
        let item = self.frames.next(|r| read_item(r, format), |_| true)?;
        match &item {
            Some(TxnStreamItem::Header { format, .. }) => self.format = Some(*format),
            Some(TxnStreamItem::End { .. }) => self.done = true,
            _ => {}
        }
        Ok(item)
    }

    /// True once END was taken.
    pub fn is_done(&self) -> bool {
        self.done
    }
}
