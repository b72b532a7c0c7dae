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

/// The embedded store with its key directory, checkpointing after every batch
/// so that reads go through the directory rather than the layers.
fn embedded_keydir() -> Fresh {
    let dir = tempfile::tempdir().unwrap();
    let opts = EmbeddedOptions {
        key_directory: true,
        checkpoint_interval: std::time::Duration::ZERO,
        warm_on_open: false,
        ..EmbeddedOptions::default()
    };
    let store = EmbeddedStore::open_dir(dir.path(), opts).unwrap();
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
            remote: false,
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
    ($backend:ident, $fresh:expr, $($name:ident),* $(,)?) => {
        pub mod $backend {
            use super::*;
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

/// The built-in backends have every seam; `RecordsOnly` records and admin only.
mod records {
    use super::*;
    handled_store::conformance_records!(suite!(memory, memory(),));
    handled_store::conformance_records!(suite!(embedded, embedded(),));
    handled_store::conformance_records!(suite!(embedded_keydir, embedded_keydir(),));
    handled_store::conformance_records!(suite!(records_only, records_only(),));
}

mod admin {
    use super::*;
    handled_store::conformance_admin!(suite!(memory, memory(),));
    handled_store::conformance_admin!(suite!(embedded, embedded(),));
    handled_store::conformance_admin!(suite!(embedded_keydir, embedded_keydir(),));
    handled_store::conformance_admin!(suite!(records_only, records_only(),));
}

mod documents {
    use super::*;
    handled_store::conformance_documents!(suite!(memory, memory(),));
    handled_store::conformance_documents!(suite!(embedded, embedded(),));
    handled_store::conformance_documents!(suite!(embedded_keydir, embedded_keydir(),));
}

mod txn_log {
    use super::*;
    handled_store::conformance_txn_log!(suite!(memory, memory(),));
    handled_store::conformance_txn_log!(suite!(embedded, embedded(),));
    handled_store::conformance_txn_log!(suite!(embedded_keydir, embedded_keydir(),));
}

mod change_dates {
    use super::*;
    handled_store::conformance_change_dates!(suite!(memory, memory(),));
    handled_store::conformance_change_dates!(suite!(embedded, embedded(),));
    handled_store::conformance_change_dates!(suite!(embedded_keydir, embedded_keydir(),));
}
