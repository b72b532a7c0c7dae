//! Public-key signatures of challenge answers (§5.4): RSA through aws-lc-rs,
//! DSA through RustCrypto `dsa`. The hash comes from the answer's name field.

use aws_lc_rs::rsa::PublicKeyComponents;
use aws_lc_rs::signature as aws;
use dsa::signature::DigestVerifier;
use handled_proto::data::pubkey::{unsigned, PublicKey};
use handled_proto::digest::DigestAlg;
use sha1::Sha1;
use sha2::{Digest, Sha256};

/// Does `signature` sign `data` under `key` with hash `alg`? MD5 and DH keys never verify.
pub fn verify(key: &PublicKey, alg: DigestAlg, data: &[u8], signature: &[u8]) -> bool {
    match key {
        PublicKey::Rsa { exponent, modulus } => {
            // 1024-bit admin keys are still common in Handle deployments.
            let params = match alg {
                DigestAlg::Sha256 => &aws::RSA_PKCS1_1024_8192_SHA256_FOR_LEGACY_USE_ONLY,
                DigestAlg::Sha1 => &aws::RSA_PKCS1_1024_8192_SHA1_FOR_LEGACY_USE_ONLY,
                DigestAlg::Md5 => return false,
            };
            let key = PublicKeyComponents { n: unsigned(modulus), e: unsigned(exponent) };
            key.verify(params, data, signature).is_ok()
        }
        PublicKey::Dsa { q, p, g, y } => verify_dsa(q, p, g, y, alg, data, signature),
        PublicKey::Dh { .. } => false,
    }
}

fn verify_dsa(q: &[u8], p: &[u8], g: &[u8], y: &[u8], alg: DigestAlg, data: &[u8], signature: &[u8]) -> bool {
    let big = |b: &[u8]| dsa::BigUint::from_bytes_be(b);
    let Ok(components) = dsa::Components::from_components(big(p), big(q), big(g)) else { return false };
    let Ok(key) = dsa::VerifyingKey::from_components(components, big(y)) else { return false };
    let Ok(sig) = dsa::Signature::try_from(signature) else { return false };
    let zero = dsa::BigUint::default();
    if *sig.r() == zero || *sig.s() == zero {
        return false;
    }
    match alg {
        DigestAlg::Sha1 => key.verify_digest(Sha1::new_with_prefix(data), &sig).is_ok(),
        DigestAlg::Sha256 => key.verify_digest(Sha256::new_with_prefix(data), &sig).is_ok(),
        DigestAlg::Md5 => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unhex(s: &str) -> Vec<u8> {
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    /// A 1024-bit DSA key and signatures over "nonce+digest" made by the JDK
    /// (`SHA1withDSA`, `SHA256withDSA`): what Java clients send.
    #[test]
    fn dsa_signatures_from_java() {
        let fixture = include_str!("testdata/dsa_java_1024.txt");
        let field =
            |name: &str| unhex(fixture.lines().find_map(|l| l.strip_prefix(&format!("{name}="))).unwrap().trim());
        let key = PublicKey::Dsa { q: field("q"), p: field("p"), g: field("g"), y: field("y") };
        let (sha1, sha256) = (field("sha1sig"), field("sha256sig"));
        assert!(verify(&key, DigestAlg::Sha1, b"nonce+digest", &sha1));
        assert!(verify(&key, DigestAlg::Sha256, b"nonce+digest", &sha256));
        assert!(!verify(&key, DigestAlg::Sha1, b"nonce+digesT", &sha1));
        assert!(!verify(&key, DigestAlg::Sha256, b"nonce+digest", &sha1));
        assert!(!verify(&key, DigestAlg::Sha1, b"nonce+digest", &sha1[..sha1.len() - 1]));
    }

    #[test]
    fn rsa_vector_answer() {
        let v = crate::auth::test_vector("challenge_pubkey.json");
        let keys = crate::auth::test_vector("keys.json");
        let unhex = |s: &serde_json::Value| -> Vec<u8> {
            let s = s.as_str().unwrap();
            (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
        };
        let pubkey_hex = keys["admin"]["hs_pubkey_encoding_hex"].clone();
        let key = handled_proto::codec::Codec::from_bytes(&unhex(&pubkey_hex)).unwrap();
        let data = unhex(&v["signed_data_hex(nonce||digest)"]);
        let sig = unhex(&v["signature_hex"]);
        assert!(verify(&key, DigestAlg::Sha256, &data, &sig));
        assert!(!verify(&key, DigestAlg::Sha1, &data, &sig));
        let mut bad = data.clone();
        bad[0] ^= 1;
        assert!(!verify(&key, DigestAlg::Sha256, &bad, &sig));
    }
}
