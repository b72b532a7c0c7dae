//! Bytes → a stored entry of the embedded store's transaction log, as reading the
//! log decodes it (a mirror's pull, a restored backup's log): an id of 8 bytes, then
//! one change or a run of an import's changes (`crates/store/src/embedded_txnlog_entry.rs`).
//! Nothing may panic; a run's changes have consecutive ids ending at the key, one date
//! and one action; written again as a run, they decode to the same changes, in no
//! more bytes.

#![no_main]

use handled_store::{fuzz_decode_txn_log_entry, fuzz_encode_txn_log_run};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((key, body)) = data.split_first_chunk::<8>() else { return };
    let last = u64::from_be_bytes(*key);
    let Ok(changes) = fuzz_decode_txn_log_entry(last, body) else { return };
    let first = &changes[0];
    assert_eq!(changes.last().map(|c| c.id), Some(last));
    for (i, c) in changes.iter().enumerate() {
        assert_eq!((c.id, c.date_ms, c.action), (first.id + i as u64, first.date_ms, first.action));
    }
    if changes.len() > 1 {
        let handles: Vec<&[u8]> = changes.iter().map(|c| c.handle.as_slice()).collect();
        let again = fuzz_encode_txn_log_run(first.date_ms, first.action, &handles);
        assert!(again.len() <= body.len(), "the writer's form is the shortest");
        assert_eq!(fuzz_decode_txn_log_entry(last, &again).ok(), Some(changes));
    }
});
