//! The stored forms of the transaction log's entries (`txnlog.v1`), each under
//! the id of the last change it holds (u64 big-endian), so that a forward range
//! from any id starts at the entry holding it:
//!
//! - one change: `date_ms: u64 BE ‖ action ‖ handle`;
//! - a run of changes an import made (format version 4): consecutive ids ending
//!   at the key, of one action and one date: `date_ms ‖ action | RUN ‖` per
//!   handle `shared: u8 ‖ suffix`, `shared` being how many leading bytes it has
//!   of the handle before it (at most 255) and `suffix` the rest (a length as
//!   in `record_compact`, then the bytes). An import logged an entry a handle,
//!   ~41 B/handle of the store file at 3M (issue 45), where a run of sorted
//!   handles takes a few bytes each.

use handled_proto::Reader;

use crate::record_compact::{put_bytes, read_bytes};
use crate::{StoreError, TxnAction, TxnEntry};

/// Set in the action byte of a run.
const RUN: u8 = 0x80;
/// Most handle bytes one run lists, so that a few runs share a 4 KiB page (a
/// handle longer than that is an entry of its own). The decoder holds runs to
/// it too: a damaged or hostile run (a restored backup) cannot make it expand
/// a few bytes into many.
const RUN_BYTES: usize = 1024;

/// The stored form of one change.
pub(super) fn encode_one(entry: &TxnEntry) -> Vec<u8> {
    let mut out = Vec::with_capacity(9 + entry.handle.len());
    out.extend_from_slice(&entry.date_ms.to_be_bytes());
    out.push(entry.action.code());
    out.extend_from_slice(&entry.handle);
    out
}

/// The stored form of a run: `handles`' changes, all `action` at `date_ms`.
pub fn encode_run(date_ms: u64, action: TxnAction, handles: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::with_capacity(9 + handles.iter().map(|h| h.len() + 2).sum::<usize>());
    out.extend_from_slice(&date_ms.to_be_bytes());
    out.push(action.code() | RUN);
    let mut before: &[u8] = &[];
    for h in handles {
        let shared = h.iter().zip(before).take_while(|(a, b)| a == b).count().min(u8::MAX as usize);
        out.push(shared as u8);
        put_bytes(&mut out, &h[shared..]);
        before = h;
    }
    out
}

/// `changes` cut into runs to log: consecutive changes of one action, up to
/// [`RUN_BYTES`] of handles each (and at least one change).
pub(super) fn runs<'a>(changes: &'a [(TxnAction, &'a [u8])]) -> Vec<&'a [(TxnAction, &'a [u8])]> {
    let mut out = Vec::new();
    let (mut start, mut bytes) = (0, 0);
    for (i, (action, handle)) in changes.iter().enumerate() {
        if i > start && (*action != changes[start].0 || bytes + handle.len() > RUN_BYTES) {
            out.push(&changes[start..i]);
            (start, bytes) = (i, 0);
        }
        bytes += handle.len();
    }
    if start < changes.len() {
        out.push(&changes[start..]);
    }
    out
}

/// The changes a stored entry under `last` holds, by id.
pub fn decode(last: u64, body: &[u8]) -> Result<Vec<TxnEntry>, StoreError> {
    let bad = |detail: &str| StoreError::Corrupt(format!("transaction log entry {last}: {detail}"));
    if body.len() < 9 {
        return Err(bad("malformed"));
    }
    let date_ms = u64::from_be_bytes(body[..8].try_into().expect("8 bytes"));
    let action = TxnAction::from_code(body[8] & !RUN).ok_or_else(|| bad("malformed"))?;
    if body[8] & RUN == 0 {
        return Ok(vec![TxnEntry { id: last, date_ms, action, handle: body[9..].to_vec() }]);
    }
    let mut r = Reader::new(&body[9..]);
    let (mut handles, mut bytes): (Vec<Vec<u8>>, usize) = (Vec::new(), 0);
    while r.remaining() > 0 {
        let shared = r.u8("shared prefix").map_err(|e| bad(&e.to_string()))? as usize;
        let suffix = read_bytes(&mut r, "handle suffix").map_err(|e| bad(&e.to_string()))?;
        let before = handles.last().map_or(&[][..], Vec::as_slice);
        if shared > before.len() {
            return Err(bad("a handle shares more bytes than the one before it has"));
        }
        bytes += shared + suffix.len();
        if bytes > RUN_BYTES {
            return Err(bad(&format!("a run lists more than {RUN_BYTES} bytes of handles")));
        }
        handles.push([&before[..shared], suffix].concat());
    }
    let n = handles.len() as u64;
    if n == 0 || n > last {
        return Err(bad(&format!("a run of {n} changes cannot end at this id")));
    }
    Ok(handles
        .into_iter()
        .zip(last - n + 1..=last)
        .map(|(handle, id)| TxnEntry { id, date_ms, action, handle })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_of<'a>(handles: &[&'a str]) -> Vec<&'a [u8]> {
        handles.iter().map(|h| h.as_bytes()).collect()
    }

    #[test]
    fn a_run_decodes_to_its_changes() {
        let long = "P/".to_owned() + &"x".repeat(300);
        let longer = long.clone() + "y";
        let handles = run_of(&["P/100", "P/101", "P/1010", "P/2", "Q/2", "", &long, &longer, "P/100"]);
        let body = encode_run(7, TxnAction::Create, &handles);
        let entries = decode(20, &body).unwrap();
        let ids: Vec<u64> = entries.iter().map(|e| e.id).collect();
        assert_eq!(ids, (12..=20).collect::<Vec<_>>());
        // Up to the last id there is (found by the fuzz target `txn_log_entry`).
        assert_eq!(decode(u64::MAX, &body).unwrap().last().map(|e| e.id), Some(u64::MAX));
        for (e, h) in entries.iter().zip(&handles) {
            assert_eq!((e.date_ms, e.action, e.handle.as_slice()), (7, TxnAction::Create, *h));
        }
        // Sorted handles cost a few bytes each.
        let sorted: Vec<String> = (0..100).map(|i| format!("30M/{:09}", 123_400 + i)).collect();
        let sorted: Vec<&[u8]> = sorted.iter().map(|h| h.as_bytes()).collect();
        assert!(encode_run(1, TxnAction::Create, &sorted).len() < 9 + 100 * 5);
    }

    #[test]
    fn one_change_reads_as_before() {
        let e = TxnEntry { id: 5, date_ms: 9, action: TxnAction::HomeNa, handle: b"0.NA/P".to_vec() };
        assert_eq!(decode(5, &encode_one(&e)).unwrap(), vec![e]);
    }

    #[test]
    fn damaged_entries_are_errors() {
        let body = encode_run(7, TxnAction::Update, &run_of(&["P/1", "P/2", "P/3"]));
        for cut in 0..body.len() {
            let r = decode(9, &body[..cut]);
            assert!(r.is_err() || r.as_ref().unwrap().len() < 3, "cut at {cut}: {r:?}");
        }
        // More changes than ids below the key.
        assert!(decode(2, &body).is_err());
        // A handle sharing more than the one before it.
        let mut lying = body.clone();
        lying[9] = 1;
        assert!(decode(9, &lying).is_err());
        // An unknown action, alone or in a run.
        for code in [0u8, 9, RUN, RUN | 9] {
            let mut b = body.clone();
            b[8] = code;
            assert!(decode(9, &b).is_err(), "{code}");
        }
        // A run listing nothing.
        assert!(decode(9, &body[..9]).is_err());
        // A run expanding past what the writer puts in one: handles of 200
        // bytes, each after the first sharing all of the one before.
        let mut big = body[..9].to_vec();
        big.extend([0, 200].iter().chain(&[b'x'; 200]));
        big.extend([200u8, 0].repeat(5));
        assert_eq!(decode(9, &big[..big.len() - 2]).unwrap().len(), 5, "1,000 bytes of handles");
        assert!(decode(9, &big).is_err(), "1,200 bytes of handles");
    }

    #[test]
    fn runs_keep_one_action_and_a_bounded_size() {
        let big = vec![b'h'; 600];
        let changes: Vec<(TxnAction, &[u8])> = vec![
            (TxnAction::Create, b"a"),
            (TxnAction::Create, b"b"),
            (TxnAction::Update, b"c"),
            (TxnAction::Update, &big),
            (TxnAction::Update, &big),
            (TxnAction::Create, &big),
        ];
        let lens: Vec<usize> = runs(&changes).iter().map(|r| r.len()).collect();
        assert_eq!(lens, [2, 2, 1, 1]);
        assert!(runs(&[]).is_empty());
    }
}
