//! What Handle.Net's schema has no place for: documents (the domain registry,
//! the reverse-lookup index, shared site keys) and the transaction log
//! (replication source). Each is declined with an error that says so, rather
//! than kept in tables an operator did not ask for.

use crate::StoreError;

pub(crate) fn no_documents() -> StoreError {
    StoreError::Backend(
        "sql: Handle.Net's schema keeps no documents (domain registry, /hrls reverse lookup, shared site key): \
         not available with store = \"sql\""
            .into(),
    )
}

pub(crate) fn no_txn_log() -> StoreError {
    StoreError::Backend(
        "sql: Handle.Net's schema keeps no transaction log: this server cannot be a replication source or mirror \
         with store = \"sql\" (replicate the database with its own tools)"
            .into(),
    )
}
