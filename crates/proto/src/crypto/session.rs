//! Session cryptography (§5.7, §1.5, §1.6): the session key from a DH secret,
//! HS_MAC credentials and the AES-128-CBC message cipher.

use super::ct_eq;
use crate::credential::{alg_names, signed_input, Credential, HS_MAC};
use crate::envelope::{Envelope, Version};
use aes::cipher::{block_padding::Pkcs7, BlockDecryptMut, BlockEncryptMut, KeyIvInit};
use hmac::{Hmac, Mac};
use sha1::Sha1;
use sha2::Sha256;

/// Session keys are 32 bytes: all of it keys the MAC, the first 16 bytes AES.
pub const SESSION_KEY_LEN: usize = 32;
pub const AES_KEY_LEN: usize = 16;
pub const IV_LEN: usize = 16;

type Aes128CbcEnc = cbc::Encryptor<aes::Aes128>;
type Aes128CbcDec = cbc::Decryptor<aes::Aes128>;

/// Java's `stripLeadingZerosAndTruncate(secret, 32)`: drop leading zero bytes
/// while more than 32 bytes remain, then keep the first 32. `shared_secret`
/// is the DH secret big-endian, padded to the length of p as Java's
/// `KeyAgreement.generateSecret()` returns it (padding is stripped either way).
pub fn session_key_from_dh(shared_secret: &[u8]) -> Option<[u8; SESSION_KEY_LEN]> {
    let mut i = 0;
    while i + SESSION_KEY_LEN < shared_secret.len() && shared_secret[i] == 0 {
        i += 1;
    }
    shared_secret.get(i..i + SESSION_KEY_LEN)?.try_into().ok()
}

fn hmac<M: Mac + hmac::digest::KeyInit>(key: &[u8], data: &[u8]) -> Vec<u8> {
    let mut m = <M as hmac::digest::KeyInit>::new_from_slice(key).expect("HMAC takes any key length");
    m.update(data);
    m.finalize().into_bytes().to_vec()
}

/// The HS_MAC credential for a message at ≥ 2.7: HMAC-SHA256 over the signed
/// input of §1.5, the counter in the signer-index slot. None below 2.7 (the
/// 2.5/2.6 layouts were broken; a v9 peer never negotiates them for sessions).
pub fn mac_credential(key: &[u8], envelope: &Envelope, header_and_body: &[u8], counter: i32) -> Option<Credential> {
    if envelope.version < Version::V2_7 {
        return None;
    }
    let mac = hmac::<Hmac<Sha256>>(key, &signed_input(envelope, header_and_body, counter));
    Some(Credential::new(HS_MAC, alg_names::HMAC_SHA256, mac, counter))
}

/// Check an HS_MAC credential on a message whose envelope (as received) is
/// `envelope`. HMAC-SHA256 and HMAC-SHA1 are accepted, at ≥ 2.7 only.
pub fn verify_mac(key: &[u8], envelope: &Envelope, header_and_body: &[u8], credential: &Credential) -> bool {
    if !credential.is_mac() || envelope.version < Version::V2_7 {
        return false;
    }
    let input = signed_input(envelope, header_and_body, credential.session_counter);
    let name: Vec<u8> =
        credential.algorithm.iter().filter(|b| b.is_ascii_alphanumeric()).map(u8::to_ascii_uppercase).collect();
    let expected = match name.as_slice() {
        b"HMACSHA256" => hmac::<Hmac<Sha256>>(key, &input),
        b"HMACSHA1" => hmac::<Hmac<Sha1>>(key, &input),
        _ => return false,
    };
    ct_eq(&expected, &credential.signature)
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CipherError {
    #[error("session key must be at least 16 bytes")]
    Key,
    #[error("encrypted message shorter than its IV or not a whole number of blocks")]
    Length,
    #[error("bad padding (wrong key or damaged message)")]
    Padding,
}

/// Encrypt a message part (header+body+credential) for the wire: `IV ‖ AES-128-CBC-PKCS5(plaintext)`.
pub fn encrypt(session_key: &[u8], iv: &[u8; IV_LEN], plaintext: &[u8]) -> Result<Vec<u8>, CipherError> {
    let key = session_key.get(..AES_KEY_LEN).ok_or(CipherError::Key)?;
    let cipher = Aes128CbcEnc::new_from_slices(key, iv).map_err(|_| CipherError::Key)?;
    let ct = cipher.encrypt_padded_vec_mut::<Pkcs7>(plaintext);
    let mut out = Vec::with_capacity(IV_LEN + ct.len());
    out.extend_from_slice(iv);
    out.extend_from_slice(&ct);
    Ok(out)
}

/// Decrypt `IV ‖ ciphertext` as produced by [`encrypt`] or the Java client.
pub fn decrypt(session_key: &[u8], data: &[u8]) -> Result<Vec<u8>, CipherError> {
    let key = session_key.get(..AES_KEY_LEN).ok_or(CipherError::Key)?;
    if data.len() < IV_LEN + 16 || !(data.len() - IV_LEN).is_multiple_of(16) {
        return Err(CipherError::Length);
    }
    let (iv, ct) = data.split_at(IV_LEN);
    let cipher = Aes128CbcDec::new_from_slices(key, iv).map_err(|_| CipherError::Key)?;
    cipher.decrypt_padded_vec_mut::<Pkcs7>(ct).map_err(|_| CipherError::Padding)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_derivation_strips_only_leading_zeros_beyond_32() {
        let mut s = vec![0u8; 3];
        s.extend(1..=40u8);
        assert_eq!(session_key_from_dh(&s).unwrap()[0], 1);
        let short: Vec<u8> = std::iter::once(0).chain(1..=31u8).collect();
        assert_eq!(session_key_from_dh(&short).unwrap()[0], 0, "a 32-byte secret keeps its leading zero");
        assert!(session_key_from_dh(&[1; 31]).is_none());
    }

    #[test]
    fn cipher_round_trip_and_tamper() {
        let key = [5u8; 32];
        let ct = encrypt(&key, &[1; 16], b"hello world, a message").unwrap();
        assert_eq!(decrypt(&key, &ct).unwrap(), b"hello world, a message");
        assert!(decrypt(&[6u8; 32], &ct).is_err() || decrypt(&[6u8; 32], &ct).unwrap() != b"hello world, a message");
        assert_eq!(decrypt(&key, &ct[..20]), Err(CipherError::Length));
    }

    #[test]
    fn mac_round_trip() {
        let mut e = Envelope::new(Version::V2_10, Version::V2_10, 9);
        e.session_id = 4;
        let c = mac_credential(&[3; 32], &e, b"header+body", 7).unwrap();
        assert!(verify_mac(&[3; 32], &e, b"header+body", &c));
        assert!(!verify_mac(&[3; 32], &e, b"header+bodY", &c));
        let mut other = c.clone();
        other.session_counter = 8;
        assert!(!verify_mac(&[3; 32], &e, b"header+body", &other));
        e.version = Version::V2_6;
        assert!(mac_credential(&[3; 32], &e, b"x", 1).is_none());
    }
}
