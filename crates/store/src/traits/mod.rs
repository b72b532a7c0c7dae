//! The store seams: what callers use of a store, one trait per concern, and
//! [`Store`], all of them together (what `Arc<dyn Store>` holders use).
//!
//! A backend implements [`RecordStore`] and [`StoreAdmin`] in full; a backend
//! without documents or a transaction log writes empty `impl DocumentStore` /
//! `impl TxnLogStore` blocks, whose defaults refuse with
//! [`crate::StoreError::Unsupported`], and says so in its [`Capabilities`].
//! What the server hangs on writes (its value index, its record cache) are
//! document contributors and commit observers ([`crate::observe`]), not
//! wrappers. A wrapper (a test's) writes every method of a seam it changes
//! (one left out would fall back to a refusing default, not to the inner
//! store) and passes the other seams through whole with
//! [`crate::forward_store!`].

mod admin;
mod documents;
mod forward;
mod records;
mod txn_log;

pub use admin::{Backup, Capabilities, StoreAdmin, Warming};
pub use documents::{no_documents, DocumentStore};
pub use records::{RecordStore, MAX_SEARCHED_LEN};
pub use txn_log::{never_moves, no_multi_primary, no_txn_log, TxnLogStore};

/// A whole store: every seam. Implemented for whatever implements them all.
pub trait Store: RecordStore + DocumentStore + TxnLogStore + StoreAdmin {}

impl<T: RecordStore + DocumentStore + TxnLogStore + StoreAdmin> Store for T {}
