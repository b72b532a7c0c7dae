//! Bytes → a backup file as `handled restore` and `verify` read it (magic,
//! manifest, framed entries and files, digest at the end). Nothing may panic;
//! nothing read counts as verified unless the reader reached the digest; a
//! verified backup's items, written again, verify with the same totals.

#![no_main]

use handled_store::backup::{BackupEncoder, BackupItem, BackupReader};
use libfuzzer_sys::fuzz_target;

const MAX_ITEMS: usize = 10_000;

fuzz_target!(|data: &[u8]| {
    let Ok(mut reader) = BackupReader::new(data) else { return };
    let manifest = reader.manifest().clone();
    let mut items = Vec::new();
    loop {
        match reader.next_item() {
            Ok(Some(item)) if items.len() < MAX_ITEMS => items.push(item),
            Ok(Some(_)) | Err(_) => return,
            Ok(None) => break,
        }
    }
    let totals = reader.totals().expect("the end of a backup is verified totals");
    let mut out = Vec::new();
    let mut writer = BackupEncoder::start(&manifest, &mut out);
    for item in &items {
        match item {
            BackupItem::File { name, bytes } => writer.file(&mut out, name, bytes),
            BackupItem::Entry(e) => writer.entry(&mut out, e),
        }
    }
    writer.finish(&mut out);
    let mut again = BackupReader::new(out.as_slice()).expect("a written backup opens");
    while again.next_item().expect("a written backup reads").is_some() {}
    assert_eq!(again.totals(), Some(totals), "the same totals");
});
