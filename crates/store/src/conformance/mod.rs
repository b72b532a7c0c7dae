//! The behaviour suite every backend must pass, one list per seam.
//!
//! Each function takes a fresh, empty store and panics on a violation. A
//! backend's test file instantiates every function of the lists for the seams
//! it implements ([`RECORDS`] and [`ADMIN`] always; [`DOCUMENTS`] and
//! [`TXN_LOG`] when its [`crate::Capabilities`] say it has them — [`ADMIN`]'s
//! `capabilities_are_kept` checks the refusals otherwise); see
//! `tests/conformance.rs`, which also runs a backend with neither. A test file
//! makes one `#[test]` per name with `conformance_records!(its_macro!())` and
//! the like, so a backend can't silently miss a test. The functions spawn
//! tokio tasks: run them on a multi-threaded runtime.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::Store;

mod admin;
mod dates;
pub(crate) mod derived;
mod docs;
mod fixtures;
mod records;
mod txnlog;

pub use admin::*;
pub use dates::*;
pub use derived::{
    derived_documents_follow_pulled_changes, derived_documents_follow_the_handle,
    derived_documents_of_a_losing_change_are_dropped, indexed_by_url, URL_INDEX,
};
pub use docs::*;
pub use fixtures::{rich_record, url_record};
pub use records::*;
pub use txnlog::*;

/// Runs `task(store, t)` for each `t` in `0..tasks` at once, each on a tokio
/// task of its own: what each returned, in the order of `t`. A panic in one
/// fails the test.
pub(crate) async fn on_tasks<T, Fut>(
    s: &Arc<dyn Store>,
    tasks: u32,
    task: impl Fn(Arc<dyn Store>, u32) -> Fut,
) -> Vec<T>
where
    Fut: Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    let joins: Vec<_> = (0..tasks).map(|t| tokio::spawn(task(s.clone(), t))).collect();
    let mut out = Vec::with_capacity(joins.len());
    for j in joins {
        out.push(j.await.unwrap());
    }
    out
}

type Test = fn(Arc<dyn Store>) -> Pin<Box<dyn Future<Output = ()> + Send>>;

macro_rules! suite {
    ($(#[$doc:meta])* $list:ident: $($name:ident),* $(,)?) => {
        $(#[$doc])*
        pub const $list: &[(&str, Test)] = &[$((stringify!($name), |s| Box::pin($name(s)))),*];
    };
}

// Each seam's list is written once, in a macro that hands the names to another
// macro (`callback!(args… name, name, …)`): the lists below and every
// backend's test file instantiate from it, so none can miss a test.

/// The names of [`RECORDS`], handed to `$callback!($($args)* names…)`.
#[macro_export]
macro_rules! conformance_records {
    ($callback:ident!($($args:tt)*)) => {
        $callback! {
            $($args)*
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
        }
    };
}

conformance_records!(suite!(
    /// [`crate::RecordStore`]: handles, metadata, homing.
    RECORDS:
));

/// The names of [`ADMIN`], handed to `$callback!($($args)* names…)`.
#[macro_export]
macro_rules! conformance_admin {
    ($callback:ident!($($args:tt)*)) => {
        $callback! {
            $($args)*
            stats_count_writes,
            closed_store_refuses,
            capabilities_are_kept,
        }
    };
}

conformance_admin!(suite!(
    /// [`crate::StoreAdmin`]: counters, shutdown, what the capabilities promise.
    ADMIN:
));

/// The names of [`DOCUMENTS`], handed to `$callback!($($args)* names…)`.
#[macro_export]
macro_rules! conformance_documents {
    ($callback:ident!($($args:tt)*)) => {
        $callback! {
            $($args)*
            doc_swap_basics,
            doc_index_maintenance,
            doc_lookup_prefix_order_paging,
            doc_scan_collection,
            doc_concurrent_cas,
            doc_closed_refuses,
            swap_with_docs_follows_the_handle,
            swap_with_docs_concurrent,
            derived_documents_follow_the_handle,
            derived_documents_follow_pulled_changes,
        }
    };
}

conformance_documents!(suite!(
    /// [`crate::DocumentStore`], and documents riding along with handle writes.
    DOCUMENTS:
));

/// The names of [`TXN_LOG`], handed to `$callback!($($args)* names…)`.
#[macro_export]
macro_rules! conformance_txn_log {
    ($callback:ident!($($args:tt)*)) => {
        $callback! {
            $($args)*
            txn_log_local_writes,
            txn_log_no_ops_and_conflicts_log_nothing,
            txn_log_put_many,
            txn_log_large_import_reads_from_anywhere,
            txn_log_read_paging,
            txn_log_prune_raises_floor,
            txn_log_reset,
            txn_log_apply_replicated,
            txn_log_apply_replicated_all_or_nothing,
            txn_log_subscribe_wakes_on_commit,
            txn_log_concurrent_ids_gap_free,
            txn_log_checkpoint,
        }
    };
}

conformance_txn_log!(suite!(
    /// [`crate::TxnLogStore`], and the logging every write does.
    TXN_LOG:
));

/// The names of [`CHANGE_DATES`], handed to `$callback!($($args)* names…)`.
#[macro_export]
macro_rules! conformance_change_dates {
    ($callback:ident!($($args:tt)*)) => {
        $callback! {
            $($args)*
            dates_pulled_changes_settle_by_date_and_priority,
            dates_local_writes_move_forward,
            derived_documents_of_a_losing_change_are_dropped,
        }
    };
}

conformance_change_dates!(suite!(
    /// Multi-primary conflict dates (`crate::change_dates`): the backends that
    /// can be multi-primary members (embedded, memory).
    CHANGE_DATES:
));
