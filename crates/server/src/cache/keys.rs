//! What the cache holds and what a write changes, named by the same keys: an
//! answer is cached under its dependency key, so dropping the keys a write
//! names drops exactly the answers derived from what it changed. The same keys
//! travel to the other nodes of a cluster (`crate::cluster::channel`).
//!
//! * `h ‖ handle key`: a handle record;
//! * `d ‖ coll ‖ id`: a document;
//! * `i ‖ coll ‖ index ‖ value`: the exact-match lookups of `value` in an index
//!   (any document entering or leaving that value names it).

use handled_store::{Document, HandleRecord, IndexEntry, IndexHit};

/// Collections never cached nor announced to peers: pending challenges and
/// sessions (read once, or checked at SERIAL), the site key, the node leases,
/// and the reverse-lookup index `hrls` (its documents ride along with handle
/// writes, added by a contributor: the cache is never told what they were).
pub const UNCACHED_COLLECTIONS: &[&str] =
    &["auth-challenge", "auth-session", "auth-session-counter", "http-session", "site", "hrls", CLUSTER_NODES];

/// The cluster's member rows (`crate::cluster::lease`): here, below the cluster,
/// because the cache must know to leave them alone.
pub const CLUSTER_NODES: &str = "cluster-nodes";

pub fn cached_collection(collection: &str) -> bool {
    !UNCACHED_COLLECTIONS.contains(&collection)
}

/// What a write changed, to drop here and on every peer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// Everything (homing, a write whose old state is unknown).
    All,
    /// These cache keys.
    Keys(Vec<Vec<u8>>),
}

impl Change {
    pub fn is_empty(&self) -> bool {
        matches!(self, Change::Keys(k) if k.is_empty())
    }
}

fn push_part(out: &mut Vec<u8>, part: &[u8]) {
    // Parts are short names; a length prefix keeps keys unambiguous.
    out.extend_from_slice(&(part.len() as u32).to_be_bytes());
    out.extend_from_slice(part);
}

pub fn handle_key(key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(1 + key.len());
    k.push(b'h');
    k.extend_from_slice(key);
    k
}

pub fn doc_key(collection: &str, id: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(5 + collection.len() + id.len());
    k.push(b'd');
    push_part(&mut k, collection.as_bytes());
    k.extend_from_slice(id);
    k
}

pub fn lookup_key(collection: &str, index: &str, value: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(9 + collection.len() + index.len() + value.len());
    k.push(b'i');
    push_part(&mut k, collection.as_bytes());
    push_part(&mut k, index.as_bytes());
    k.extend_from_slice(value);
    k
}

/// The keys a document write names: the document and the lookups of the
/// index values of its old and new states.
pub fn doc_change(collection: &str, id: &[u8], old: Option<&Document>, new: Option<&Document>) -> Vec<Vec<u8>> {
    let mut keys = vec![doc_key(collection, id)];
    let entries = old.into_iter().chain(new).flat_map(|d| d.index.iter());
    let mut seen: Vec<&IndexEntry> = Vec::new();
    for e in entries {
        if !seen.contains(&e) {
            seen.push(e);
            keys.push(lookup_key(collection, &e.name, &e.key));
        }
    }
    keys
}

/// A cached answer.
#[derive(Debug, Clone)]
pub enum Entry {
    Handle(Option<HandleRecord>),
    Doc(Option<Document>),
    /// The first page (no `start_after`) of an exact lookup, asked with `limit`.
    Lookup {
        limit: usize,
        hits: Vec<IndexHit>,
    },
}

/// Rough per-entry overhead on top of the encoded sizes (key copy, map slots, Vec headers).
const ENTRY_OVERHEAD: u64 = 96;

impl Entry {
    pub fn weight(&self) -> u64 {
        let bytes = match self {
            Entry::Handle(r) => r.as_ref().map_or(0, |r| r.encoded_len()),
            Entry::Doc(d) => d
                .as_ref()
                .map_or(0, |d| d.body.len() + d.index.iter().map(|e| 48 + e.name.len() + e.key.len()).sum::<usize>()),
            Entry::Lookup { hits, .. } => hits.iter().map(|h| 48 + h.key.len() + h.id.len()).sum(),
        };
        ENTRY_OVERHEAD + bytes as u64
    }
}
