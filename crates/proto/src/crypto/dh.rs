//! Diffie–Hellman for session setup (§5.7, mode 4).
//!
//! Modular exponentiation runs on crypto-bigint's Montgomery arithmetic, which
//! is constant-time in the exponent (our secret), unlike a general bignum
//! `modpow`. Moduli of up to 4096 bits are accepted, at least 1024.

use crypto_bigint::modular::runtime_mod::{DynResidue, DynResidueParams};
use crypto_bigint::{Uint, U1024, U2048, U256, U4096};
use std::cmp::Ordering;

/// RFC 2409 second Oakley group (1024-bit MODP, g = 2): what Java clients on
/// JDK 17 send, and what our client uses.
pub const RFC2409_GROUP2_P: &str = "ffffffffffffffffc90fdaa22168c234c4c6628b80dc1cd129024e088a67cc74020bbea63b139b22514a08798e3404ddef9519b3cd3a431b302b0a6df25f14374fe1356d6d51c245e485b576625e7ec6f44c42e9a637ed6b0bff5cb6f406b7edee386bfb5a899fa5ae9f24117c4b1fe649286651ece65381ffffffffffffffff";
pub const MIN_MODULUS_BITS: usize = 1024;
pub const MAX_MODULUS_BITS: usize = 4096;
/// Private exponents are 256 random bits (128-bit security against the
/// exponent, more than the groups offer).
pub const SECRET_LEN: usize = 32;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DhError {
    #[error("DH modulus must be odd and {MIN_MODULUS_BITS}–{MAX_MODULUS_BITS} bits, got {0} bits")]
    Modulus(usize),
    #[error("DH generator out of range")]
    Generator,
    #[error("peer's DH public value out of range")]
    PublicValue,
}

/// The group 2 modulus as bytes.
pub fn rfc2409_group2_p() -> Vec<u8> {
    (0..RFC2409_GROUP2_P.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&RFC2409_GROUP2_P[i..i + 2], 16).expect("constant is hex"))
        .collect()
}

fn strip(b: &[u8]) -> &[u8] {
    let z = b.iter().take_while(|&&x| x == 0).count();
    &b[z..]
}

/// Compare unsigned big-endian integers of any padding.
fn cmp_be(a: &[u8], b: &[u8]) -> Ordering {
    let (a, b) = (strip(a), strip(b));
    a.len().cmp(&b.len()).then_with(|| a.cmp(b))
}

fn bit_len(b: &[u8]) -> usize {
    let b = strip(b);
    b.first().map_or(0, |&top| (b.len() - 1) * 8 + (8 - top.leading_zeros() as usize))
}

/// Is `x` in (1, p − 1)? (Rejects the small-subgroup values 0, 1 and p − 1.)
fn in_open_range(x: &[u8], p: &[u8]) -> bool {
    let mut p_minus_1 = strip(p).to_vec();
    if let Some(last) = p_minus_1.last_mut() {
        *last -= 1; // p is odd, so no borrow
    }
    cmp_be(x, &[1]) == Ordering::Greater && cmp_be(x, &p_minus_1) == Ordering::Less
}

fn check_modulus(p: &[u8]) -> Result<(), DhError> {
    let bits = bit_len(p);
    let odd = p.last().is_some_and(|b| b & 1 == 1);
    if !odd || !(MIN_MODULUS_BITS..=MAX_MODULUS_BITS).contains(&bits) {
        return Err(DhError::Modulus(bits));
    }
    Ok(())
}

fn to_uint<const L: usize>(b: &[u8]) -> Uint<L> {
    let b = strip(b);
    let mut padded = vec![0u8; L * 8];
    padded[L * 8 - b.len()..].copy_from_slice(b);
    Uint::from_be_slice(&padded)
}

fn pow_fixed<const L: usize>(base: &[u8], secret: &[u8; SECRET_LEN], p: &[u8]) -> Vec<u8> {
    let params = DynResidueParams::new(&to_uint::<L>(p));
    let exponent = U256::from_be_slice(secret);
    let r = DynResidue::new(&to_uint::<L>(base), params).pow(&exponent).retrieve();
    let mut out = Vec::with_capacity(L * 8);
    for w in r.as_words().iter().rev() {
        out.extend_from_slice(&w.to_be_bytes());
    }
    // Fixed width: the length of p, as Java's generateSecret() pads.
    let p_len = strip(p).len();
    out.split_off(out.len() - p_len)
}

/// `base^secret mod p`, big-endian, padded to the byte length of p. `p` must
/// have passed [`check_modulus`] and `base` be below p.
fn modpow(base: &[u8], secret: &[u8; SECRET_LEN], p: &[u8]) -> Vec<u8> {
    match bit_len(p) {
        0..=1024 => pow_fixed::<{ U1024::LIMBS }>(base, secret, p),
        1025..=2048 => pow_fixed::<{ U2048::LIMBS }>(base, secret, p),
        _ => pow_fixed::<{ U4096::LIMBS }>(base, secret, p),
    }
}

/// Our public value `g^secret mod p` for the group (p, g).
pub fn public_value(p: &[u8], g: &[u8], secret: &[u8; SECRET_LEN]) -> Result<Vec<u8>, DhError> {
    check_modulus(p)?;
    if !in_open_range(g, p) {
        return Err(DhError::Generator);
    }
    Ok(modpow(g, secret, p))
}

/// The shared secret `peer^secret mod p`, padded to the length of p.
pub fn shared_secret(p: &[u8], peer: &[u8], secret: &[u8; SECRET_LEN]) -> Result<Vec<u8>, DhError> {
    check_modulus(p)?;
    if !in_open_range(peer, p) {
        return Err(DhError::PublicValue);
    }
    Ok(modpow(peer, secret, p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agreement_and_checks() {
        let p = rfc2409_group2_p();
        assert_eq!(bit_len(&p), 1024);
        let (a, b) = ([3u8; 32], [200u8; 32]);
        let ya = public_value(&p, &[2], &a).unwrap();
        let yb = public_value(&p, &[2], &b).unwrap();
        assert_eq!(ya.len(), 128);
        assert_eq!(shared_secret(&p, &yb, &a).unwrap(), shared_secret(&p, &ya, &b).unwrap());
        assert_eq!(shared_secret(&p, &[1], &a), Err(DhError::PublicValue));
        let mut pm1 = p.clone();
        *pm1.last_mut().unwrap() -= 1;
        assert_eq!(shared_secret(&p, &pm1, &a), Err(DhError::PublicValue));
        assert!(matches!(public_value(&p[..64], &[2], &a), Err(DhError::Modulus(512))));
        let mut even = p.clone();
        *even.last_mut().unwrap() = 0xfe;
        assert!(public_value(&even, &[2], &a).is_err());
        assert_eq!(public_value(&p, &[1], &a), Err(DhError::Generator));
    }

    #[test]
    fn small_known_value() {
        // 2^x for x = 1 is 2 in any group.
        let p = rfc2409_group2_p();
        let mut one = [0u8; 32];
        one[31] = 1;
        let y = public_value(&p, &[0, 2], &one).unwrap();
        assert_eq!(strip(&y), &[2]);
    }
}
