//! [`crate::forward_store!`]: a wrapper's pass-through of one whole seam.

/// Implement one seam for a wrapper type by passing every call to a field
/// holding the inner store (an `Arc<dyn Store>` or any type implementing the
/// seam): `forward_store!(DocumentStore for MyWrapper => inner);`. Seams:
/// `RecordStore`, `DocumentStore`, `TxnLogStore`, `StoreAdmin`. With
/// `=> inner, writes hooked`, the writes (`swap_with_docs`,
/// `put_many_with_docs`, `meta_put`, `home`, `doc_swap`,
/// `apply_replicated_with_docs`), `hooks` and `beneath_hooks` go to `hooked` instead, a field
/// with methods of those names and signatures ([`crate::Observed`]). A
/// wrapper that changes other methods implements that seam by hand, all of it.
#[macro_export]
macro_rules! forward_store {
    (RecordStore for $ty:ty => $field:ident) => {
        $crate::forward_store!(RecordStore for $ty => $field, writes $field);
    };
    (RecordStore for $ty:ty => $field:ident, writes $writes:ident) => {
        #[$crate::__async_trait]
        impl $crate::RecordStore for $ty {
            async fn get(&self, key: &[u8]) -> Result<Option<$crate::HandleRecord>, $crate::StoreError> {
                #[allow(unused_imports)]
                use $crate::RecordStore as _;
                self.$field.get(key).await
            }
            async fn swap_with_docs(
                &self,
                key: &[u8],
                expect: $crate::Expect,
                new: Option<$crate::HandleRecord>,
                docs: Vec<$crate::DocWrite>,
            ) -> Result<$crate::SwapOutcome, $crate::StoreError> {
                #[allow(unused_imports)]
                use $crate::RecordStore as _;
                self.$writes.swap_with_docs(key, expect, new, docs).await
            }
            async fn scan_keys(
                &self,
                prefix: &[u8],
                start_after: Option<&[u8]>,
                limit: usize,
            ) -> Result<Vec<Vec<u8>>, $crate::StoreError> {
                #[allow(unused_imports)]
                use $crate::RecordStore as _;
                self.$field.scan_keys(prefix, start_after, limit).await
            }
            async fn find_by_value(
                &self,
                value_type: &[u8],
                data: $crate::IndexMatch<'_>,
                start_after: Option<&$crate::IndexHit>,
                limit: usize,
            ) -> Result<Vec<$crate::IndexHit>, $crate::StoreError> {
                #[allow(unused_imports)]
                use $crate::RecordStore as _;
                self.$field.find_by_value(value_type, data, start_after, limit).await
            }
            async fn put_many_with_docs(
                &self,
                records: Vec<(Vec<u8>, $crate::HandleRecord)>,
                docs: Vec<$crate::DocWrite>,
            ) -> Result<(), $crate::StoreError> {
                #[allow(unused_imports)]
                use $crate::RecordStore as _;
                self.$writes.put_many_with_docs(records, docs).await
            }
            async fn meta_get(&self, key: &str) -> Result<Option<Vec<u8>>, $crate::StoreError> {
                #[allow(unused_imports)]
                use $crate::RecordStore as _;
                self.$field.meta_get(key).await
            }
            async fn meta_put(&self, key: &str, value: Option<Vec<u8>>) -> Result<(), $crate::StoreError> {
                #[allow(unused_imports)]
                use $crate::RecordStore as _;
                self.$writes.meta_put(key, value).await
            }
            async fn meta_scan(&self, prefix: &str) -> Result<Vec<(String, Vec<u8>)>, $crate::StoreError> {
                #[allow(unused_imports)]
                use $crate::RecordStore as _;
                self.$field.meta_scan(prefix).await
            }
            async fn count(&self) -> Result<u64, $crate::StoreError> {
                #[allow(unused_imports)]
                use $crate::RecordStore as _;
                self.$field.count().await
            }
            async fn home(&self, prefix_handle: &[u8], homed: bool) -> Result<(), $crate::StoreError> {
                #[allow(unused_imports)]
                use $crate::RecordStore as _;
                self.$writes.home(prefix_handle, homed).await
            }
            async fn homed_prefixes(&self) -> Result<Vec<Vec<u8>>, $crate::StoreError> {
                #[allow(unused_imports)]
                use $crate::RecordStore as _;
                self.$field.homed_prefixes().await
            }
        }
    };
    (DocumentStore for $ty:ty => $field:ident) => {
        $crate::forward_store!(DocumentStore for $ty => $field, writes $field);
    };
    (DocumentStore for $ty:ty => $field:ident, writes $writes:ident) => {
        #[$crate::__async_trait]
        impl $crate::DocumentStore for $ty {
            async fn doc_get(
                &self,
                collection: &str,
                id: &[u8],
            ) -> Result<Option<$crate::Document>, $crate::StoreError> {
                #[allow(unused_imports)]
                use $crate::DocumentStore as _;
                self.$field.doc_get(collection, id).await
            }
            async fn doc_swap(
                &self,
                collection: &str,
                id: &[u8],
                expect: $crate::DocExpect,
                new: Option<$crate::Document>,
            ) -> Result<$crate::DocOutcome, $crate::StoreError> {
                #[allow(unused_imports)]
                use $crate::DocumentStore as _;
                self.$writes.doc_swap(collection, id, expect, new).await
            }
            async fn doc_lookup(
                &self,
                collection: &str,
                index: &str,
                key: $crate::IndexMatch<'_>,
                start_after: Option<&$crate::IndexHit>,
                limit: usize,
            ) -> Result<Vec<$crate::IndexHit>, $crate::StoreError> {
                #[allow(unused_imports)]
                use $crate::DocumentStore as _;
                self.$field.doc_lookup(collection, index, key, start_after, limit).await
            }
            async fn doc_scan(
                &self,
                collection: &str,
                prefix: &[u8],
                start_after: Option<&[u8]>,
                limit: usize,
            ) -> Result<Vec<(Vec<u8>, $crate::Document)>, $crate::StoreError> {
                #[allow(unused_imports)]
                use $crate::DocumentStore as _;
                self.$field.doc_scan(collection, prefix, start_after, limit).await
            }
        }
    };
    (TxnLogStore for $ty:ty => $field:ident) => {
        $crate::forward_store!(TxnLogStore for $ty => $field, writes $field);
    };
    (TxnLogStore for $ty:ty => $field:ident, writes $writes:ident) => {
        #[$crate::__async_trait]
        impl $crate::TxnLogStore for $ty {
            async fn txn_log_read(
                &self,
                after: u64,
                limit: usize,
            ) -> Result<Vec<$crate::TxnEntry>, $crate::StoreError> {
                #[allow(unused_imports)]
                use $crate::TxnLogStore as _;
                self.$field.txn_log_read(after, limit).await
            }
            async fn txn_log_bounds(&self) -> Result<$crate::TxnLogBounds, $crate::StoreError> {
                #[allow(unused_imports)]
                use $crate::TxnLogStore as _;
                self.$field.txn_log_bounds().await
            }
            async fn txn_log_prune(&self, before_ms: u64) -> Result<u64, $crate::StoreError> {
                #[allow(unused_imports)]
                use $crate::TxnLogStore as _;
                self.$field.txn_log_prune(before_ms).await
            }
            fn txn_log_subscribe(&self) -> $crate::__watch::Receiver<u64> {
                #[allow(unused_imports)]
                use $crate::TxnLogStore as _;
                self.$field.txn_log_subscribe()
            }
            async fn apply_replicated_with_docs(
                &self,
                changes: Vec<$crate::ReplicatedChange>,
                progress: Vec<(String, Option<Vec<u8>>)>,
                docs: Vec<$crate::DocWrite>,
            ) -> Result<(), $crate::StoreError> {
                #[allow(unused_imports)]
                use $crate::TxnLogStore as _;
                self.$writes.apply_replicated_with_docs(changes, progress, docs).await
            }
            async fn txn_log_reset(&self, id: u64) -> Result<(), $crate::StoreError> {
                #[allow(unused_imports)]
                use $crate::TxnLogStore as _;
                self.$field.txn_log_reset(id).await
            }
        }
    };
    (StoreAdmin for $ty:ty => $field:ident) => {
        $crate::forward_store!(StoreAdmin for $ty => $field, writes $field);
    };
    (StoreAdmin for $ty:ty => $field:ident, writes $writes:ident) => {
        #[$crate::__async_trait]
        impl $crate::StoreAdmin for $ty {
            fn capabilities(&self) -> $crate::Capabilities {
                #[allow(unused_imports)]
                use $crate::StoreAdmin as _;
                self.$field.capabilities()
            }
            fn stats(&self) -> $crate::StoreStats {
                #[allow(unused_imports)]
                use $crate::StoreAdmin as _;
                self.$field.stats()
            }
            fn writable(&self) -> Result<(), $crate::StoreError> {
                #[allow(unused_imports)]
                use $crate::StoreAdmin as _;
                self.$field.writable()
            }
            fn warming(&self) -> Option<$crate::Warming> {
                #[allow(unused_imports)]
                use $crate::StoreAdmin as _;
                self.$field.warming()
            }
            async fn checkpoint(&self) -> Result<(), $crate::StoreError> {
                #[allow(unused_imports)]
                use $crate::StoreAdmin as _;
                self.$field.checkpoint().await
            }
            fn close(&self) {
                #[allow(unused_imports)]
                use $crate::StoreAdmin as _;
                self.$field.close()
            }
            fn export(&self) -> Result<Box<dyn $crate::backup::StoreExport>, $crate::StoreError> {
                #[allow(unused_imports)]
                use $crate::StoreAdmin as _;
                self.$field.export()
            }
            fn hooks(&self) -> Option<&$crate::Hooks> {
                #[allow(unused_imports)]
                use $crate::StoreAdmin as _;
                self.$writes.hooks()
            }
            fn beneath_hooks(&self) -> Option<std::sync::Arc<dyn $crate::Store>> {
                #[allow(unused_imports)]
                use $crate::StoreAdmin as _;
                self.$writes.beneath_hooks()
            }
        }
    };
}
