//! handled-store
