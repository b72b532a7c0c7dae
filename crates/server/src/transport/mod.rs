//! Listeners: each turns its framing into calls of [`crate::native::handle_unit`].

pub mod http;
pub mod tcp;
pub mod udp;
