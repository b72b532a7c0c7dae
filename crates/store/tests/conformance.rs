//! The shared behaviour suite (`handled_store::conformance`) against both backends.

use std::sync::Arc;

use handled_store::{conformance, EmbeddedOptions, EmbeddedStore, MemoryStore, Store};

/// A fresh store and whatever must live as long as it (a temporary directory).
type Fresh = (Arc<dyn Store>, Option<tempfile::TempDir>);

fn memory() -> Fresh {
    (Arc::new(MemoryStore::new()), None)
}

fn embedded() -> Fresh {
    let dir = tempfile::tempdir().unwrap();
    let store = EmbeddedStore::open_dir(dir.path(), EmbeddedOptions::default()).unwrap();
    (Arc::new(store), Some(dir))
}

macro_rules! suite {
    ($backend:ident, $fresh:expr, [$($name:ident),* $(,)?]) => {
        pub mod $backend {
            use super::*;
            pub const NAMES: &[&str] = &[$(stringify!($name)),*];
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $name() {
                    let (store, _dir) = $fresh;
                    conformance::$name(store).await;
                }
            )*
        }
    };
}

macro_rules! both {
    ($($name:ident),* $(,)?) => {
        suite!(memory, memory(), [$($name),*]);
        suite!(embedded, embedded(), [$($name),*]);
    };
}

both!(
    get_absent,
    create_absent,
    swap_present,
    swap_any,
    delete,
    values_round_trip,
    invalid_record_rejected,
    scan_keys_order_prefix_limit,
    scan_keys_paging,
    put_many,
    meta_ops,
    concurrent_distinct_keys,
    concurrent_same_key,
    same_key_racing_creates,
    stats_count_writes,
    closed_store_refuses,
    doc_swap_basics,
    doc_index_maintenance,
    doc_lookup_prefix_order_paging,
    doc_scan_collection,
    doc_concurrent_cas,
    doc_closed_refuses,
    swap_with_docs_follows_the_handle,
    swap_with_docs_concurrent,
);

mod txn_log {
    use super::*;
    both!(
        txn_log_local_writes,
        txn_log_no_ops_and_conflicts_log_nothing,
        txn_log_put_many,
        txn_log_read_paging,
        txn_log_prune_raises_floor,
        txn_log_reset,
        txn_log_apply_replicated,
        txn_log_apply_replicated_all_or_nothing,
        txn_log_subscribe_wakes_on_commit,
        txn_log_concurrent_ids_gap_free,
        txn_log_checkpoint,
    );
}

#[test]
fn every_suite_test_is_instantiated() {
    let all: Vec<&str> = conformance::ALL.iter().map(|(n, _)| *n).collect();
    assert_eq!(memory::NAMES, all.as_slice());
    assert_eq!(embedded::NAMES, all.as_slice());
    let all: Vec<&str> = conformance::TXN_LOG_ALL.iter().map(|(n, _)| *n).collect();
    assert_eq!(txn_log::memory::NAMES, all.as_slice());
    assert_eq!(txn_log::embedded::NAMES, all.as_slice());
}
