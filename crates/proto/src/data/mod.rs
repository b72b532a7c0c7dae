//! Structured value data (§2).
