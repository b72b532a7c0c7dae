//! What an authenticated caller may do and how its proof is checked, on the
//! server's state: [`verify`] checks proofs of an [`crate::auth::Identity`]
//! (locally, or at the server holding it), [`authorize`] answers what that
//! identity may do with a handle. The tables they use (pending challenges, the
//! proof workers, remote sites) are in [`crate::auth`], below the state that holds them.

pub mod authorize;
pub mod verify;
