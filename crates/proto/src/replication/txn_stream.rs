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

use super::decoder::{StreamDecoder, StreamGrammar};
use super::framing::StreamItem;
use crate::codec::{put_bytes, put_i32, put_u32, put_u64, put_u8, Codec, DecodeError, DecodeResult, Reader};
use crate::handle::MAX_HANDLE_LEN;
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
    /// `Some` exactly for actions that [`TxnAction::carries_values`] when decoded;
    /// empty when the handle no longer exists at send time. The encoder writes a
    /// list (empty for `None`) for those actions and none for the others.
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
            TxnStreamItem::Record(rec) => {
                put_u8(out, RECORD_HANDLE);
                put_u64(out, rec.txn_id);
                put_bytes(out, &rec.handle);
                put_u8(out, rec.action.0);
                put_u64(out, rec.date_ms);
                // The action decides whether a value list follows (as Java's reader
                // does), so a record can't desynchronise the stream.
                if rec.action.carries_values() {
                    put_value_list(rec.values.as_deref().unwrap_or_default(), out);
                }
            }
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

/// `i32 n ‖ n × bytes value`.
pub(crate) fn put_value_list(values: &[HandleValue], out: &mut Vec<u8>) {
    put_i32(out, values.len() as i32);
    for v in values {
        put_u32(out, v.encoded_len() as u32);
        v.encode(out);
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

/// The transaction stream's grammar: the header fixes the format, END ends it.
#[derive(Default)]
pub struct TxnGrammar {
    format: Option<i32>,
}

impl StreamGrammar for TxnGrammar {
    type Item = TxnStreamItem;

    fn read(&self, r: &mut Reader<'_>) -> DecodeResult<TxnStreamItem> {
        read_item(r, self.format)
    }

    fn is_signed(_: &TxnStreamItem) -> bool {
        true
    }

    fn advance(&mut self, item: &TxnStreamItem) -> bool {
        match item {
            TxnStreamItem::Header { format, .. } => self.format = Some(*format),
            TxnStreamItem::End { .. } => return true,
            _ => {}
        }
        false
    }
}

/// Incremental decoder of the transaction stream's blocks (after the preamble).
pub type TxnStreamDecoder<V> = StreamDecoder<TxnGrammar, V>;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replication::framing::{Framing, StreamError};

    fn record(action: TxnAction, values: Option<Vec<HandleValue>>) -> TxnStreamItem {
        TxnStreamItem::Record(TxnRecord { txn_id: 1, handle: b"a/b".to_vec(), action, date_ms: 2, values })
    }

    /// Whatever `values` says, the action decides the layout, so the next
    /// record still reads right.
    #[test]
    fn action_decides_the_value_list() {
        let v = vec![HandleValue::new(1, "URL", "x")];
        let cases = [
            (record(TxnAction::CREATE, None), record(TxnAction::CREATE, Some(vec![]))),
            (record(TxnAction::DELETE, Some(v.clone())), record(TxnAction::DELETE, None)),
            (record(TxnAction::UPDATE, Some(v.clone())), record(TxnAction::UPDATE, Some(v))),
        ];
        for (written, read) in cases {
            let mut bytes = Vec::new();
            for item in [
                &TxnStreamItem::Header { format: 2, status: STATUS_SENDING },
                &written,
                &TxnStreamItem::End { date_ms: None },
            ] {
                item.encode(&mut bytes);
            }
            let mut d = TxnStreamDecoder::new(Framing::plain(), 1024);
            d.feed(&bytes);
            assert!(matches!(d.next_item(), Ok(Some(TxnStreamItem::Header { .. }))));
            assert_eq!(d.next_item(), Ok(Some(read)));
            assert_eq!(d.next_item(), Ok(Some(TxnStreamItem::End { date_ms: None })));
            assert!(d.is_done());
        }
    }

    #[test]
    fn header_then_end_by_format() {
        for (format, end) in [(FORMAT_ONE_QUEUE, Some(7)), (FORMAT_ALL_QUEUES, None)] {
            let mut bytes = Vec::new();
            TxnStreamItem::Header { format, status: STATUS_NEED_TO_REDUMP }.encode(&mut bytes);
            TxnStreamItem::End { date_ms: end }.encode(&mut bytes);
            let mut d = TxnStreamDecoder::new(Framing::plain(), 1024);
            d.feed(&bytes);
            d.next_item().unwrap();
            assert_eq!(d.next_item(), Ok(Some(TxnStreamItem::End { date_ms: end })));
            d.feed(&[0]);
            assert_eq!(d.next_item(), Err(StreamError::AfterEnd { count: 1 }));
        }
        let mut d = TxnStreamDecoder::new(Framing::plain(), 1024);
        d.feed(&[0, 0, 0, 3, 0, 0, 0, 2]);
        assert!(matches!(d.next_item(), Err(StreamError::Decode(DecodeError::Invalid { .. }))));
    }
}
