//! The symmetric cryptography of §5 that clients and servers share: secret-key
//! challenge answers, session key agreement (DH), HS_MAC and the session cipher.
//!
//! Pure computation on byte slices: callers bring their own randomness (salts,
//! IVs, DH exponents), which keeps this crate free of I/O and entropy sources.
//! Public-key signatures live with the callers (aws-lc-rs for RSA, `dsa` for DSA).

pub mod dh;
pub mod keyfile;
pub mod seckey;
pub mod session;

use subtle::ConstantTimeEq;

/// Equal bytes, compared in time independent of where they differ.
pub fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && bool::from(a.ct_eq(b))
}
