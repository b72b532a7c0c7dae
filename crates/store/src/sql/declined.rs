//! What Handle.Net's schema has no place for: documents (the domain registry,
//! shared sessions and site keys), declined with an error that
//! says so rather than kept in tables an operator did not ask for. (The
//! transaction log is kept in tables of ours when asked for: txn_log.rs.)

use crate::StoreError;

pub(crate) fn no_documents() -> StoreError {
    StoreError::Unsupported(
        "sql: Handle.Net's schema keeps no documents (domain registry, shared sessions and site key): \
         not available with store = \"sql\""
            .into(),
    )
}
