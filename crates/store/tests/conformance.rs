//! The shared behaviour suite (`handled_store::conformance`), seam by seam,
//! against both built-in backends and against a backend with records only.

use std::sync::Arc;

use handled_store::{
    conformance, forward_store, Backup, Capabilities, DocumentStore, EmbeddedOptions, EmbeddedStore, MemoryStore,
    Store, StoreAdmin, StoreError, StoreStats, TxnLogStore,
};

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

/// A backend as one bound to a foreign schema would be: records only, no
/// documents, no transaction log, no backups. It keeps the seams' defaults,
/// which must refuse clearly.
struct RecordsOnly {
    records: MemoryStore,
}

forward_store!(RecordStore for RecordsOnly => records);
impl DocumentStore for RecordsOnly {}
impl TxnLogStore for RecordsOnly {}

#[async_trait::async_trait]
impl StoreAdmin for RecordsOnly {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            shared: false,
            durable: false,
            documents: false,
            txn_log: false,
            backup: Backup::Refused("records only: nothing to back up"),
            read_only: false,
        }
    }
    fn stats(&self) -> StoreStats {
        self.records.stats()
    }
    fn writable(&self) -> Result<(), StoreError> {
        self.records.writable()
    }
    async fn checkpoint(&self) -> Result<(), StoreError> {
        self.records.checkpoint().await
    }
    fn close(&self) {
        self.records.close()
    }
}

fn records_only() -> Fresh {
    (Arc::new(RecordsOnly { records: MemoryStore::new() }), None)
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

/// The built-in backends have every seam.
macro_rules! both {
    ($($name:ident),* $(,)?) => {
        suite!(memory, memory(), [$($name),*]);
        suite!(embedded, embedded(), [$($name),*]);
    };
}

/// The seams every backend has: the built-in ones and `RecordsOnly`.
macro_rules! all_three {
    ($($name:ident),* $(,)?) => {
        both!($($name),*);
        suite!(records_only, records_only(), [$($name),*]);
    };
}

mod records {
    use super::*;
    all_three!(
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
        homing,
        concurrent_distinct_keys,
        concurrent_same_key,
        same_key_racing_creates,
    );
}

mod admin {
    use super::*;
    all_three!(stats_count_writes, closed_store_refuses, capabilities_are_kept);
}

mod documents {
    use super::*;
    both!(
        doc_swap_basics,
        doc_index_maintenance,
        doc_lookup_prefix_order_paging,
        doc_scan_collection,
        doc_concurrent_cas,
        doc_closed_refuses,
        swap_with_docs_follows_the_handle,
        swap_with_docs_concurrent,
    );
}

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

fn names(list: &[(&'static str, impl Sized)]) -> Vec<&'static str> {
    list.iter().map(|(n, _)| *n).collect()
}

#[test]
fn every_suite_test_is_instantiated() {
    for (list, backends) in [
        (names(conformance::RECORDS), [records::memory::NAMES, records::embedded::NAMES, records::records_only::NAMES]),
        (names(conformance::ADMIN), [admin::memory::NAMES, admin::embedded::NAMES, admin::records_only::NAMES]),
    ] {
        for instantiated in backends {
            assert_eq!(instantiated, list.as_slice());
        }
    }
    for (list, backends) in [
        (names(conformance::DOCUMENTS), [documents::memory::NAMES, documents::embedded::NAMES]),
        (names(conformance::TXN_LOG), [txn_log::memory::NAMES, txn_log::embedded::NAMES]),
    ] {
        for instantiated in backends {
            assert_eq!(instantiated, list.as_slice());
        }
    }
}
