//! handled-client
