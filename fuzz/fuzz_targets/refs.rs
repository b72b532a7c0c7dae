//! Text → Handle.Net's `refs` column (the references of an HS_VALUE row, as
//! Handle.Net 9 escapes them), read from a database other programs write too.
//! Nothing may panic; what reads back as references writes and reads back to
//! the same references.

#![no_main]

use handled_store::sql::fuzz_refs::{decode_refs, encode_refs};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let refs = decode_refs(text);
    if let Ok(column) = encode_refs(&refs) {
        assert_eq!(decode_refs(&column), refs, "written references read back: {column:?}");
    }
});
