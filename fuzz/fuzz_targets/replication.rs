//! Bytes → the replication streams a mirror reads after RETRIEVE_TXN_LOG and
//! DUMP_HANDLES (transaction log entries, dump pages), from their preamble on;
//! the first byte picks the stream, the second how the rest arrives in
//! pieces. Signed blocks are framed as read, their signatures taken as good
//! (the key check is the verifier's, not the parser's).
//! Nothing may panic or buffer past the item cap; what decodes re-encodes to
//! a stream that decodes to the same items.

#![no_main]

use handled_proto::replication::framing::StreamItem;
use handled_proto::replication::{
    BlockVerifier, DumpStreamDecoder, DumpStreamItem, Framing, Preamble, StreamDecoder, StreamGrammar,
    TxnStreamDecoder, TxnStreamItem,
};
use libfuzzer_sys::fuzz_target;

const MAX_ITEM: usize = 64 * 1024;
const MAX_ITEMS: usize = 10_000;

/// Feeds `bytes` in pieces of `piece` bytes, taking items as they complete.
fn read<G: StreamGrammar, V: BlockVerifier>(mut d: StreamDecoder<G, V>, bytes: &[u8], piece: usize) -> Vec<G::Item> {
    let mut items = Vec::new();
    for chunk in bytes.chunks(piece.max(1)) {
        d.feed(chunk);
        loop {
            match d.next_item() {
                Ok(Some(item)) if items.len() < MAX_ITEMS => items.push(item),
                Ok(_) => break,
                Err(_) => return items,
            }
        }
    }
    items
}

struct AnySignature;

impl BlockVerifier for AnySignature {
    fn update(&mut self, _data: &[u8]) {}
    fn verify(&mut self, _signature: &[u8]) -> bool {
        true
    }
}

/// The framing the preamble announces and the bytes after it.
fn framing(stream: &[u8]) -> Option<(Framing<AnySignature>, &[u8])> {
    match Preamble::decode(stream) {
        Ok(Some((Preamble::Unsigned, n))) => Some((Framing::Plain, &stream[n..])),
        Ok(Some((Preamble::Signed { .. }, n))) => Some((Framing::Signed(AnySignature), &stream[n..])),
        _ => None,
    }
}

fn txn(bytes: &[u8], piece: usize) -> Vec<TxnStreamItem> {
    let Some((framing, bytes)) = framing(bytes) else { return Vec::new() };
    read(TxnStreamDecoder::new(framing, MAX_ITEM), bytes, piece)
}

fn dump(bytes: &[u8], piece: usize) -> Vec<DumpStreamItem> {
    let Some((framing, bytes)) = framing(bytes) else { return Vec::new() };
    read(DumpStreamDecoder::new(framing, MAX_ITEM), bytes, piece)
}

/// An unsigned stream of these items.
fn encoded<I: StreamItem>(items: &[I]) -> Vec<u8> {
    let mut out = Vec::new();
    Preamble::Unsigned.encode(&mut out);
    for item in items {
        item.encode(&mut out);
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let [kind, piece, rest @ ..] = data else { return };
    let piece = usize::from(*piece) + 1;
    if kind & 1 == 0 {
        let items = txn(rest, piece);
        // Decoding is a normal form: once more changes nothing.
        let again = txn(&encoded(&items), usize::MAX);
        assert_eq!(txn(&encoded(&again), usize::MAX), again, "txn items re-encode stably");
        assert_eq!(again.len(), items.len(), "every txn item decoded re-encodes to one item");
    } else {
        let items = dump(rest, piece);
        let again = dump(&encoded(&items), usize::MAX);
        assert_eq!(again, items, "dump items re-encode to the same items");
    }
});
