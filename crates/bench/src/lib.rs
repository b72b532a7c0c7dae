//! handled-bench
