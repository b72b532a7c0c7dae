//! Other primaries' transaction queues, kept so that a proxied mirror can pull
//! every queue from this one server (Handle.Net's `replication_keep_other_transactions`,
//! its `txns/others/<queue>`; docs/multi-primary.md). Each transaction pulled from
//! a queue is kept as that queue's entry (id, action, date, handle: no values; the
//! values sent on are the ones current here at send time, as for our own log), in
//! the same commit as the change it brings, so a queue and the pull progress that
//! accounts for it never disagree.
//!
//! Kept as documents of one collection, id `queue name ‖ 0 ‖ u64 id` (so each
//! queue reads in id order); the queues kept are found by skipping from one
//! queue's last possible id to the next queue. Bounded: at most [`MAX_QUEUES`]
//! queues (queue names come from peers and sources), names of at most
//! [`MAX_NAME_LEN`] bytes, and entries pruned with `txnlog_num_days_to_keep`.

use handled_proto::replication::TxnRecord;
use handled_store::{DocWrite, Document, DocumentStore, StoreError, TxnEntry, TxnLogStore};

const COLLECTION: &str = "replication-other-queues";
/// Most queues kept (and listed in an all-queues answer).
pub const MAX_QUEUES: usize = 256;
/// Longest queue name kept (`<n>:<index>:<handle>`).
pub const MAX_NAME_LEN: usize = 512;
/// Entries read or removed per page.
pub const PAGE: usize = 256;

/// Can `name` name a kept queue? (No NUL: it ends the name in the ids.)
pub fn is_keepable(name: &str) -> bool {
    !name.is_empty() && name.len() <= MAX_NAME_LEN && !name.contains('\0')
}

fn id(queue: &str, txn_id: u64) -> Vec<u8> {
    let mut id = Vec::with_capacity(queue.len() + 9);
    id.extend_from_slice(queue.as_bytes());
    id.push(0);
    id.extend_from_slice(&txn_id.to_be_bytes());
    id
}

fn prefix(queue: &str) -> Vec<u8> {
    let mut p = queue.as_bytes().to_vec();
    p.push(0);
    p
}

/// The write that keeps `record` as an entry of `queue` (for
/// [`super::mirror::apply::Batch::mark`]); None for ids Java never keeps (≤ 0).
pub fn keep(queue: &str, record: &TxnRecord) -> Option<DocWrite> {
    if record.txn_id == 0 || !is_keepable(queue) {
        return None;
    }
    let mut body = Vec::with_capacity(9 + record.handle.len());
    body.push(record.action.0);
    body.extend_from_slice(&record.date_ms.to_be_bytes());
    body.extend_from_slice(&record.handle);
    let doc = Document::new(body, Vec::new());
    Some(DocWrite::new(COLLECTION, id(queue, record.txn_id), Some(doc)))
}

/// A kept entry: a log entry with the action's wire code (unknown codes kept raw).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptEntry {
    pub id: u64,
    pub action: u8,
    pub date_ms: u64,
    pub handle: Vec<u8>,
}

impl From<TxnEntry> for KeptEntry {
    /// An entry of our own log, in the same form.
    fn from(e: TxnEntry) -> Self {
        KeptEntry { id: e.id, action: e.action.code(), date_ms: e.date_ms, handle: e.handle }
    }
}

fn decode(queue: &str, doc_id: &[u8], doc: &Document) -> Result<KeptEntry, StoreError> {
    let bad = || StoreError::Corrupt(format!("kept transaction of queue {queue:?} is malformed"));
    let raw_id = doc_id.get(queue.len() + 1..).filter(|r| r.len() == 8).ok_or_else(bad)?;
    let body = &doc.body;
    if body.len() < 9 {
        return Err(bad());
    }
    Ok(KeptEntry {
        id: u64::from_be_bytes(raw_id.try_into().map_err(|_| bad())?),
        action: body[0],
        date_ms: u64::from_be_bytes(body[1..9].try_into().map_err(|_| bad())?),
        handle: body[9..].to_vec(),
    })
}

/// Up to `limit` entries of `queue` after id `after`, in id order.
pub async fn read(
    store: &dyn DocumentStore,
    queue: &str,
    after: u64,
    limit: usize,
) -> Result<Vec<KeptEntry>, StoreError> {
    if !is_keepable(queue) {
        return Ok(Vec::new());
    }
    let start = id(queue, after);
    let page = store.doc_scan(COLLECTION, &prefix(queue), Some(&start), limit).await?;
    page.iter().map(|(doc_id, doc)| decode(queue, doc_id, doc)).collect()
}

/// The first entry `queue` keeps (None: empty or never kept).
pub async fn first(store: &dyn DocumentStore, queue: &str) -> Result<Option<KeptEntry>, StoreError> {
    Ok(read(store, queue, 0, 1).await?.into_iter().next())
}

/// The names of the queues kept, at most [`MAX_QUEUES`].
pub async fn names(store: &dyn DocumentStore) -> Result<Vec<String>, StoreError> {
    let mut out = Vec::new();
    let mut after: Option<Vec<u8>> = None;
    while out.len() < MAX_QUEUES {
        let page = store.doc_scan(COLLECTION, b"", after.as_deref(), 1).await?;
        let Some((doc_id, _)) = page.into_iter().next() else { break };
        let Some(end) = doc_id.iter().position(|&b| b == 0) else { break };
        let name = String::from_utf8_lossy(&doc_id[..end]).into_owned();
        // Past every id of this queue: `name ‖ 0 ‖ FF×8`.
        let mut skip = doc_id[..=end].to_vec();
        skip.extend_from_slice(&[0xFF; 8]);
        after = Some(skip);
        out.push(name);
    }
    Ok(out)
}

/// Drop the entries dated before `cutoff_ms` at the head of every queue
/// (`txnlog_num_days_to_keep`), read from `docs` and removed as replicated
/// writes through `log`; the count removed.
pub async fn prune(docs: &dyn DocumentStore, log: &dyn TxnLogStore, cutoff_ms: u64) -> Result<u64, StoreError> {
    let mut removed = 0u64;
    for queue in names(docs).await? {
        loop {
            let page = read(docs, &queue, 0, PAGE).await?;
            let old: Vec<DocWrite> = page
                .iter()
                .take_while(|e| e.date_ms < cutoff_ms)
                .map(|e| DocWrite::new(COLLECTION, id(&queue, e.id), None))
                .collect();
            let whole_page = old.len() == page.len() && !page.is_empty();
            if old.is_empty() {
                break;
            }
            removed += old.len() as u64;
            log.apply_replicated_with_docs(Vec::new(), Vec::new(), old).await?;
            if !whole_page {
                break;
            }
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use handled_proto::replication::TxnAction as Wire;

    fn rec(id: u64, date: u64) -> TxnRecord {
        TxnRecord { txn_id: id, handle: b"TEST/x".to_vec(), action: Wire::UPDATE, date_ms: date, values: None }
    }

    #[tokio::test]
    async fn queues_keep_read_list_and_prune() {
        let store = handled_store::MemoryStore::new();
        let mut docs = Vec::new();
        for (q, id, date) in [("0:2:TEST/SITES", 1, 10), ("0:2:TEST/SITES", 2, 20), ("0:3:TEST/SITES", 7, 5)] {
            docs.push(keep(q, &rec(id, date)).unwrap());
        }
        assert!(keep("0:2:TEST/SITES", &rec(0, 1)).is_none(), "id 0 is never kept");
        assert!(keep("bad\0name", &rec(1, 1)).is_none());
        store.apply_replicated_with_docs(Vec::new(), Vec::new(), docs).await.unwrap();
        assert_eq!(names(&store).await.unwrap(), ["0:2:TEST/SITES", "0:3:TEST/SITES"]);
        let q2 = read(&store, "0:2:TEST/SITES", 1, 10).await.unwrap();
        assert_eq!(q2.len(), 1);
        assert_eq!((q2[0].id, q2[0].date_ms, q2[0].handle.as_slice()), (2, 20, &b"TEST/x"[..]));
        assert_eq!(first(&store, "0:3:TEST/SITES").await.unwrap().unwrap().id, 7);
        assert!(first(&store, "0:9:TEST/SITES").await.unwrap().is_none());
        assert_eq!(prune(&store, &store, 15).await.unwrap(), 2, "id 1 of queue 2 and id 7 of queue 3");
        assert_eq!(first(&store, "0:2:TEST/SITES").await.unwrap().unwrap().id, 2);
        assert_eq!(names(&store).await.unwrap(), ["0:2:TEST/SITES"]);
    }
}
