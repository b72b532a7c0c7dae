//! Handle.Net private key files (`privkey.bin`, `admpriv.bin`, `replpriv.bin`,
//! as `hdl-keygen`, `hdl-keyutil` and `hdl-setup-server` write them), read into
//! key components and written out as PKCS#8 DER.
//!
//! Layout, established black-box against Handle.Net 9.0.0's tools (see
//! `crates/cli/tests/fixtures/handle-net-server/README.md`):
//!
//! * `u32 scheme`: 1 = not encrypted, 4 = passphrase-encrypted (the only form
//!   v9's tools write); then
//! * scheme 1: the key body; scheme 4: `bytes salt ‖ u32 iterations ‖
//!   u32 key bits ‖ bytes iv ‖ bytes ciphertext`, the ciphertext being the key
//!   body under AES-CBC with PKCS#5 padding, keyed by PBKDF2-HMAC-SHA1 of the
//!   passphrase (widened byte by byte, like secret keys: [`pbkdf2_key`]);
//! * the key body: `bytes type` (`RSA_PRIVCRT_KEY`: n, e, d, p, q, dp, dq, qi;
//!   `DSA_PRIV_KEY`: x, p, q, g), each parameter a length-prefixed Java big integer.

use super::seckey::pbkdf2_key;
use crate::codec::Reader;
use aes::cipher::{block_padding::Pkcs7, BlockDecryptMut, KeyIvInit};

pub const SCHEME_NONE: u32 = 1;
pub const SCHEME_PBKDF2_AES_CBC: u32 = 4;
/// A file asking for more PBKDF2 work than this is refused (v9 writes 10 000).
pub const MAX_ITERATIONS: u32 = 1_000_000;
/// Keys (moduli) larger than this many bytes are refused: 16384-bit RSA.
const MAX_PARAMETER_BYTES: usize = 2049;

/// A private key from a Handle.Net key file; parameters are unsigned big-endian.
#[derive(Clone, PartialEq, Eq)]
pub enum PrivateKey {
    Rsa { n: Vec<u8>, e: Vec<u8>, d: Vec<u8>, p: Vec<u8>, q: Vec<u8>, dp: Vec<u8>, dq: Vec<u8>, qi: Vec<u8> },
    Dsa { x: Vec<u8>, p: Vec<u8>, q: Vec<u8>, g: Vec<u8> },
}

impl std::fmt::Debug for PrivateKey {
    // Never print private parameters.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.algorithm())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyFileError {
    #[error("the key is encrypted with a passphrase; give the passphrase")]
    NeedsPassphrase,
    #[error("wrong passphrase (or a damaged key file): the key does not decrypt")]
    WrongPassphrase,
    #[error("unsupported Handle.Net key encryption scheme {0} (Handle.Net 9 writes 1 = none and 4 = PBKDF2/AES; re-save older keys with hdl-keyutil, option 1)")]
    UnsupportedScheme(u32),
    #[error("unsupported encryption parameters: {0}")]
    BadParameters(String),
    #[error("not a Handle.Net private key file: {0}")]
    Malformed(String),
    #[error("Handle.Net key type {0} is not supported (RSA_PRIVCRT_KEY and DSA_PRIV_KEY are)")]
    UnsupportedKeyType(String),
}

impl From<crate::DecodeError> for KeyFileError {
    fn from(e: crate::DecodeError) -> Self {
        KeyFileError::Malformed(e.to_string())
    }
}

/// Whether the file is passphrase-encrypted (decides whether to ask for one).
pub fn is_encrypted(file: &[u8]) -> Result<bool, KeyFileError> {
    match Reader::new(file).u32("key encryption scheme")? {
        SCHEME_NONE => Ok(false),
        SCHEME_PBKDF2_AES_CBC => Ok(true),
        other => Err(KeyFileError::UnsupportedScheme(other)),
    }
}

/// Read a key file, decrypting it with `passphrase` when it is encrypted
/// (the passphrase is ignored for an unencrypted file).
pub fn decode_private_key(file: &[u8], passphrase: Option<&[u8]>) -> Result<PrivateKey, KeyFileError> {
    let mut r = Reader::new(file);
    match r.u32("key encryption scheme")? {
        SCHEME_NONE => decode_body(r.rest()),
        SCHEME_PBKDF2_AES_CBC => {
            let passphrase = passphrase.ok_or(KeyFileError::NeedsPassphrase)?;
            let body = decrypt(&mut r, passphrase)?;
            // Padding that happens to check out under a wrong key leaves garbage.
            decode_body(&body).map_err(|_| KeyFileError::WrongPassphrase)
        }
        other => Err(KeyFileError::UnsupportedScheme(other)),
    }
}

fn decrypt(r: &mut Reader<'_>, passphrase: &[u8]) -> Result<Vec<u8>, KeyFileError> {
    let salt = r.bytes("salt")?;
    let iterations = r.u32("iterations")?;
    let key_bits = r.u32("key bits")?;
    let iv = r.bytes("iv")?;
    let ciphertext = r.bytes("ciphertext")?;
    if iterations == 0 || iterations > MAX_ITERATIONS {
        return Err(KeyFileError::BadParameters(format!("{iterations} PBKDF2 iterations (at most {MAX_ITERATIONS})")));
    }
    if iv.len() != 16 {
        return Err(KeyFileError::BadParameters(format!("a {}-byte IV (AES needs 16)", iv.len())));
    }
    let key = pbkdf2_key(passphrase, salt, iterations, key_bits as usize / 8);
    let bad_key = || KeyFileError::BadParameters(format!("a {key_bits}-bit AES key"));
    let result = match key_bits {
        128 => cbc::Decryptor::<aes::Aes128>::new_from_slices(&key, iv)
            .map_err(|_| bad_key())?
            .decrypt_padded_vec_mut::<Pkcs7>(ciphertext),
        192 => cbc::Decryptor::<aes::Aes192>::new_from_slices(&key, iv)
            .map_err(|_| bad_key())?
            .decrypt_padded_vec_mut::<Pkcs7>(ciphertext),
        256 => cbc::Decryptor::<aes::Aes256>::new_from_slices(&key, iv)
            .map_err(|_| bad_key())?
            .decrypt_padded_vec_mut::<Pkcs7>(ciphertext),
        _ => return Err(bad_key()),
    };
    result.map_err(|_| KeyFileError::WrongPassphrase)
}

fn decode_body(body: &[u8]) -> Result<PrivateKey, KeyFileError> {
    let mut r = Reader::new(body);
    let kind = r.bytes("key type")?;
    let mut next = |what: &'static str| -> Result<Vec<u8>, KeyFileError> {
        let b = r.bytes(what)?;
        if b.len() > MAX_PARAMETER_BYTES {
            return Err(KeyFileError::Malformed(format!("{what} of {} bytes is too large", b.len())));
        }
        Ok(unsigned(b).to_vec())
    };
    match kind {
        b"RSA_PRIVCRT_KEY" => Ok(PrivateKey::Rsa {
            n: next("n")?,
            e: next("e")?,
            d: next("d")?,
            p: next("p")?,
            q: next("q")?,
            dp: next("dp")?,
            dq: next("dq")?,
            qi: next("qi")?,
        }),
        b"DSA_PRIV_KEY" => Ok(PrivateKey::Dsa { x: next("x")?, p: next("p")?, q: next("q")?, g: next("g")? }),
        other => Err(KeyFileError::UnsupportedKeyType(String::from_utf8_lossy(other).chars().take(40).collect())),
    }
}

/// Java's two's-complement big integers carry a leading zero byte when the top bit is set.
fn unsigned(b: &[u8]) -> &[u8] {
    let zeros = b.iter().take_while(|&&x| x == 0).count();
    &b[zeros.min(b.len().saturating_sub(1))..]
}

const OID_RSA_ENCRYPTION: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01];
const OID_DSA: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x38, 0x04, 0x01];

impl PrivateKey {
    pub fn algorithm(&self) -> &'static str {
        match self {
            PrivateKey::Rsa { .. } => "RSA",
            PrivateKey::Dsa { .. } => "DSA",
        }
    }

    /// The key as a PKCS#8 `PrivateKeyInfo` (DER), what `openssl`, aws-lc and
    /// `handled`'s key files use.
    pub fn to_pkcs8_der(&self) -> Vec<u8> {
        let (algorithm, private) = match self {
            PrivateKey::Rsa { n, e, d, p, q, dp, dq, qi } => {
                let ints = [&[0u8][..], n, e, d, p, q, dp, dq, qi].map(der_integer).concat();
                (der(0x30, &[der(0x06, OID_RSA_ENCRYPTION), vec![0x05, 0x00]].concat()), der(0x30, &ints))
            }
            PrivateKey::Dsa { x, p, q, g } => {
                let params = der(0x30, &[der_integer(p), der_integer(q), der_integer(g)].concat());
                (der(0x30, &[der(0x06, OID_DSA), params].concat()), der_integer(x))
            }
        };
        der(0x30, &[der_integer(&[0]), algorithm, der(0x04, &private)].concat())
    }
}

fn der(tag: u8, content: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    let len = content.len();
    if len < 0x80 {
        out.push(len as u8);
    } else {
        let bytes: Vec<u8> = len.to_be_bytes().into_iter().skip_while(|&b| b == 0).collect();
        out.push(0x80 | bytes.len() as u8);
        out.extend_from_slice(&bytes);
    }
    out.extend_from_slice(content);
    out
}

/// A non-negative INTEGER from unsigned big-endian bytes.
fn der_integer(unsigned_be: &[u8]) -> Vec<u8> {
    let zeros = unsigned_be.iter().take_while(|&&b| b == 0).count();
    let trimmed = &unsigned_be[zeros..];
    let mut content = Vec::with_capacity(trimmed.len() + 1);
    if trimmed.first().is_none_or(|&b| b & 0x80 != 0) {
        content.push(0); // zero, or a sign byte so the value stays positive
    }
    content.extend_from_slice(trimmed);
    der(0x02, &content)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Made with Handle.Net 9.0.0's hdl-keygen (see tests/fixtures/handle-net-keys/README.md).
    const PLAIN: &[u8] = include_bytes!("../../tests/fixtures/handle-net-keys/rsa_plain.bin");
    const ENCRYPTED: &[u8] = include_bytes!("../../tests/fixtures/handle-net-keys/rsa_enc_correct_horse.bin");
    const ENCRYPTED_UMLAUT: &[u8] = include_bytes!("../../tests/fixtures/handle-net-keys/rsa_enc_paessphrase.bin");
    const DSA: &[u8] = include_bytes!("../../tests/fixtures/handle-net-keys/dsa_privkey.bin");

    #[test]
    fn reads_unencrypted_rsa_and_dsa() {
        assert!(!is_encrypted(PLAIN).unwrap());
        let PrivateKey::Rsa { n, e, .. } = decode_private_key(PLAIN, None).unwrap() else { panic!("not RSA") };
        assert_eq!(n.len(), 256);
        assert_eq!(e, vec![1, 0, 1]);
        let PrivateKey::Dsa { x, q, .. } = decode_private_key(DSA, None).unwrap() else { panic!("not DSA") };
        assert_eq!((x.len(), q.len()), (20, 20));
    }

    #[test]
    fn private_parameters_match_the_public_key_file() {
        let public = include_bytes!("../../tests/fixtures/handle-net-keys/rsa_enc_correct_horse_pub.bin");
        let crate::data::PublicKey::Rsa { exponent, modulus } = crate::data::PublicKey::decode_data(public).unwrap()
        else {
            panic!("not RSA")
        };
        let PrivateKey::Rsa { n, e, .. } = decode_private_key(ENCRYPTED, Some(b"correct horse")).unwrap() else {
            panic!("not RSA")
        };
        assert_eq!((unsigned(&modulus), unsigned(&exponent)), (&n[..], &e[..]));
    }

    #[test]
    fn decrypts_with_the_right_passphrase_only() {
        assert!(is_encrypted(ENCRYPTED).unwrap());
        assert_eq!(decode_private_key(ENCRYPTED, None), Err(KeyFileError::NeedsPassphrase));
        assert_eq!(decode_private_key(ENCRYPTED, Some(b"wrong horse")), Err(KeyFileError::WrongPassphrase));
        assert_eq!(decode_private_key(ENCRYPTED, Some(b"correct horse")).unwrap().algorithm(), "RSA");
        // Non-ASCII passphrases: typed as UTF-8, widened byte by byte as the Java tools do.
        assert!(decode_private_key(ENCRYPTED_UMLAUT, Some("Pässphrase 1".as_bytes())).is_ok());
    }

    #[test]
    fn damaged_files_are_errors_not_panics() {
        for cut in 0..ENCRYPTED.len() {
            assert!(decode_private_key(&ENCRYPTED[..cut], Some(b"correct horse")).is_err(), "cut at {cut}");
        }
        for cut in 0..PLAIN.len() {
            let _ = decode_private_key(&PLAIN[..cut], None);
        }
        assert_eq!(decode_private_key(&[0, 0, 0, 2, 0], None), Err(KeyFileError::UnsupportedScheme(2)));
        let mut greedy = ENCRYPTED.to_vec();
        greedy[24..28].copy_from_slice(&u32::MAX.to_be_bytes()); // iterations
        assert!(matches!(decode_private_key(&greedy, Some(b"x")), Err(KeyFileError::BadParameters(_))));
    }

    #[test]
    fn der_integers_are_minimal_and_positive() {
        assert_eq!(der_integer(&[]), vec![2, 1, 0]);
        assert_eq!(der_integer(&[0, 0, 5]), vec![2, 1, 5]);
        assert_eq!(der_integer(&[0x80]), vec![2, 2, 0, 0x80]);
        assert_eq!(der(0x04, &[7; 200])[..3], [0x04, 0x81, 200]);
    }
}
