//! Bytes → a stored handle record as the embedded store and a restored backup read
//! it (`handled_store::HandleRecord::decode`): the compact form or the wire form
//! written before it. Nothing may panic; what decodes writes a compact form that
//! decodes to the same record, and a compact input is that form already (the writer's
//! compare-and-set compares stored bytes, so there is one per record).

#![no_main]

use handled_store::HandleRecord;
use libfuzzer_sys::fuzz_target;

/// First byte of the compact form (`crates/store/src/record_compact.rs`).
const COMPACT: u8 = 0xC5;

fuzz_target!(|data: &[u8]| {
    let Ok(record) = HandleRecord::decode(data) else { return };
    let compact = record.encode();
    assert_eq!(compact[0], COMPACT);
    assert_eq!(HandleRecord::decode(&compact).as_ref(), Ok(&record));
    if data[0] == COMPACT {
        assert_eq!(compact, data, "a compact record has one form");
    } else {
        assert_eq!(record.encode_wire(), data, "the wire form has one form too");
    }
    assert!(record.validate().is_ok(), "what decodes can be stored");
});
