//! Secret-key (HS_SECKEY) challenge answers (§5.3): computing them (clients)
//! and checking them (servers), every algorithm the v9 client and older ones use.

use super::ct_eq;
use crate::session::SecretKeyAnswer;
use hmac::{Hmac, Mac};
use md5::Md5;
use sha1::Sha1;
use sha2::{Digest, Sha256};

/// What the Java client sends for PBKDF2 answers.
pub const JAVA_PBKDF2_ITERATIONS: i32 = 10_000;
pub const JAVA_PBKDF2_KEY_BITS: i32 = 160;
/// Bounds on answer parameters a verifier accepts: PBKDF2 cost is chosen by the
/// client, so an unbounded iteration count would let one answer burn a core.
pub const MAX_PBKDF2_ITERATIONS: i32 = 200_000;
pub const MAX_PBKDF2_KEY_BITS: i32 = 1024;

/// Which answer to build.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnswerAlg {
    Pbkdf2HmacSha1 { iterations: i32, key_bits: i32 },
    HmacSha256,
    HmacSha1,
    Sha256,
    Sha1,
    Md5,
    LegacyMd5,
}

/// The MAC input of §5.3: `nonce ‖ request digest`.
fn mac_input(nonce: &[u8], digest: &[u8]) -> Vec<u8> {
    [nonce, digest].concat()
}

/// The PBKDF2 password the Java client really uses: each secret byte widened to
/// a char 0–255, then UTF-8-encoded by the JDK (bytes ≥ 0x80 become two bytes).
pub fn pbkdf2_password(secret: &[u8]) -> Vec<u8> {
    let text: String = secret.iter().map(|&b| char::from(b)).collect();
    text.into_bytes()
}

/// PBKDF2-HMAC-SHA1 of the secret as the Java client computes it.
pub fn pbkdf2_key(secret: &[u8], salt: &[u8], iterations: u32, key_len: usize) -> Vec<u8> {
    let mut key = vec![0u8; key_len];
    pbkdf2::pbkdf2_hmac::<Sha1>(&pbkdf2_password(secret), salt, iterations, &mut key);
    key
}

fn hmac_sha1(key: &[u8], data: &[u8]) -> Vec<u8> {
    let mut m = <Hmac<Sha1> as Mac>::new_from_slice(key).expect("HMAC takes any key length");
    m.update(data);
    m.finalize().into_bytes().to_vec()
}

fn hmac_sha256(key: &[u8], data: &[u8]) -> Vec<u8> {
    let mut m = <Hmac<Sha256> as Mac>::new_from_slice(key).expect("HMAC takes any key length");
    m.update(data);
    m.finalize().into_bytes().to_vec()
}

/// `H(K ‖ m ‖ K)`, the pre-HMAC answers.
fn sandwich<D: Digest>(secret: &[u8], m: &[u8]) -> Vec<u8> {
    let mut d = D::new();
    d.update(secret);
    d.update(m);
    d.update(secret);
    d.finalize().to_vec()
}

/// Build an answer. `salt` is used by PBKDF2 only (the Java client uses 16 random bytes).
pub fn answer(alg: AnswerAlg, secret: &[u8], nonce: &[u8], digest: &[u8], salt: &[u8]) -> SecretKeyAnswer {
    let m = mac_input(nonce, digest);
    match alg {
        AnswerAlg::Pbkdf2HmacSha1 { iterations, key_bits } => {
            let key = pbkdf2_key(secret, salt, iterations.max(1) as u32, (key_bits.max(8) / 8) as usize);
            SecretKeyAnswer::Pbkdf2HmacSha1 { salt: salt.to_vec(), iterations, key_bits, mac: hmac_sha1(&key, &m) }
        }
        AnswerAlg::HmacSha256 => SecretKeyAnswer::HmacSha256(hmac_sha256(secret, &m)),
        AnswerAlg::HmacSha1 => SecretKeyAnswer::HmacSha1(hmac_sha1(secret, &m)),
        AnswerAlg::Sha256 => SecretKeyAnswer::Sha256(sandwich::<Sha256>(secret, &m)),
        AnswerAlg::Sha1 => SecretKeyAnswer::Sha1(sandwich::<Sha1>(secret, &m)),
        AnswerAlg::Md5 => SecretKeyAnswer::Md5(sandwich::<Md5>(secret, &m)),
        AnswerAlg::LegacyMd5 => SecretKeyAnswer::LegacyMd5(sandwich::<Md5>(secret, &m)),
    }
}

/// Why an answer could not be checked at all (as opposed to being wrong).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AnswerError {
    #[error("PBKDF2 parameters out of range (iterations {iterations}, key bits {key_bits})")]
    Pbkdf2Parameters { iterations: i32, key_bits: i32 },
}

/// Does `answer` prove knowledge of `secret` for this challenge? Recomputes the
/// answer with the parameters it names and compares in constant time.
pub fn verify(answer: &SecretKeyAnswer, secret: &[u8], nonce: &[u8], digest: &[u8]) -> Result<bool, AnswerError> {
    let alg = match answer {
        SecretKeyAnswer::Pbkdf2HmacSha1 { salt, iterations, key_bits, mac } => {
            let (iterations, key_bits) = (*iterations, *key_bits);
            if !(1..=MAX_PBKDF2_ITERATIONS).contains(&iterations)
                || !(8..=MAX_PBKDF2_KEY_BITS).contains(&key_bits)
                || key_bits % 8 != 0
            {
                return Err(AnswerError::Pbkdf2Parameters { iterations, key_bits });
            }
            let expected = answer_pbkdf2(secret, nonce, digest, salt, iterations, key_bits);
            return Ok(ct_eq(&expected, mac));
        }
        SecretKeyAnswer::HmacSha256(_) => AnswerAlg::HmacSha256,
        SecretKeyAnswer::HmacSha1(_) => AnswerAlg::HmacSha1,
        SecretKeyAnswer::Sha256(_) => AnswerAlg::Sha256,
        SecretKeyAnswer::Sha1(_) => AnswerAlg::Sha1,
        SecretKeyAnswer::Md5(_) => AnswerAlg::Md5,
        SecretKeyAnswer::LegacyMd5(_) => AnswerAlg::LegacyMd5,
    };
    let expected = self::answer(alg, secret, nonce, digest, &[]);
    Ok(ct_eq(expected.mac(), answer.mac()))
}

fn answer_pbkdf2(secret: &[u8], nonce: &[u8], digest: &[u8], salt: &[u8], iterations: i32, key_bits: i32) -> Vec<u8> {
    let key = pbkdf2_key(secret, salt, iterations as u32, (key_bits / 8) as usize);
    hmac_sha1(&key, &mac_input(nonce, digest))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_every_algorithm() {
        let (nonce, digest) = ([7u8; 16], [9u8; 32]);
        for alg in [
            AnswerAlg::Pbkdf2HmacSha1 { iterations: 100, key_bits: 160 },
            AnswerAlg::HmacSha256,
            AnswerAlg::HmacSha1,
            AnswerAlg::Sha256,
            AnswerAlg::Sha1,
            AnswerAlg::Md5,
            AnswerAlg::LegacyMd5,
        ] {
            let a = answer(alg, b"secret", &nonce, &digest, &[1; 16]);
            let decoded = SecretKeyAnswer::decode(&a.to_vec()).unwrap();
            assert_eq!(verify(&decoded, b"secret", &nonce, &digest), Ok(true), "{alg:?}");
            assert_eq!(verify(&decoded, b"secreT", &nonce, &digest), Ok(false), "{alg:?}");
            assert_eq!(verify(&decoded, b"secret", &[8; 16], &digest), Ok(false), "{alg:?}");
        }
    }

    #[test]
    fn rejects_absurd_pbkdf2_parameters() {
        let a = SecretKeyAnswer::Pbkdf2HmacSha1 { salt: vec![], iterations: i32::MAX, key_bits: 160, mac: vec![] };
        assert!(verify(&a, b"k", b"n", b"d").is_err());
        let a = SecretKeyAnswer::Pbkdf2HmacSha1 { salt: vec![], iterations: 10, key_bits: 7, mac: vec![] };
        assert!(verify(&a, b"k", b"n", b"d").is_err());
    }

    #[test]
    fn latin1_widening() {
        assert_eq!(pbkdf2_password(b"abc"), b"abc");
        assert_eq!(pbkdf2_password(&[0x70, 0xc3, 0xa4]), vec![0x70, 0xc3, 0x83, 0xc2, 0xa4]);
    }
}
