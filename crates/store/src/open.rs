//! The one place stores are opened: [`StoreConfig`] names a backend and its
//! settings, [`open_store`] opens it. A new backend is a variant and an arm
//! here (and its mapping from the server's configuration keys, in
//! `server/src/config.rs`).

use std::path::PathBuf;
use std::sync::Arc;

use crate::{EmbeddedOptions, EmbeddedStore, MemoryStore, Store, StoreError};

/// Which backend to open, with its settings.
#[derive(Debug, Clone)]
pub enum StoreConfig {
    /// [`MemoryStore`]: forgotten on exit.
    Memory,
    /// [`EmbeddedStore`]: one file, made if missing.
    Embedded { file: PathBuf, options: EmbeddedOptions },
    /// `CassandraStore`: a keyspace on a cluster, shared by several nodes.
    #[cfg(feature = "cassandra")]
    Cassandra(crate::CassandraOptions),
    /// `SqlStore`: Handle.Net's `nas`/`handles` tables on PostgreSQL.
    #[cfg(feature = "sql")]
    Sql(crate::SqlOptions),
}

/// Open (or connect to) the store `config` names.
pub async fn open_store(config: &StoreConfig) -> Result<Arc<dyn Store>, StoreError> {
    Ok(match config {
        StoreConfig::Memory => Arc::new(MemoryStore::new()),
        StoreConfig::Embedded { file, options } => Arc::new(EmbeddedStore::open(file, options.clone())?),
        #[cfg(feature = "cassandra")]
        StoreConfig::Cassandra(options) => Arc::new(crate::CassandraStore::connect(options).await?),
        #[cfg(feature = "sql")]
        StoreConfig::Sql(options) => Arc::new(crate::SqlStore::connect(options).await?),
    })
}
