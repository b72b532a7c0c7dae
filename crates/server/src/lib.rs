//! handled-server
