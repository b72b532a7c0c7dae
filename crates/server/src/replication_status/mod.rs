//! What replication keeps in the server's state between requests: a mirror's
//! progress and mode ([`mirror`]) and the slots and TLS of the streams served to
//! mirrors ([`slots`]). Here, below the state that holds them, so that
//! [`crate::replication`] can use the state.

pub mod mirror;
pub mod slots;
