//! Public keys as JWK (§2.8), as Java's `PublicKeyTypeHierarchyAdapter`.

use base64::Engine as _;
use serde_json::{json, Value};

use super::{as_object, as_text, decode_base64_lenient, err, require, JResult};
use crate::data::pubkey::{java_bigint, unsigned, PublicKey};

/// The JWK form of a public key: `{"kty":"RSA","n","e"}`,
/// `{"kty":"DSA","y","p","q","g"}` (Java's order), base64url without padding,
/// leading zeros stripped. Java has no JWK for DH keys; we write
/// `{"kty":"DH","y","p","g"}` (non-standard) so callers always get something,
/// but value and site JSON fall back to base64 for DH keys, as Java does.
pub fn public_key_to_jwk(key: &PublicKey) -> Value {
    match java_jwk(key) {
        Some(v) => v,
        None => match key {
            PublicKey::Dh { y, p, g } => json!({ "kty": "DH", "y": b64url(y), "p": b64url(p), "g": b64url(g) }),
            _ => Value::Null, // unreachable: java_jwk covers RSA and DSA
        },
    }
}

pub(super) fn java_jwk(key: &PublicKey) -> Option<Value> {
    match key {
        PublicKey::Rsa { exponent, modulus } => {
            Some(json!({ "kty": "RSA", "n": b64url(modulus), "e": b64url(exponent) }))
        }
        PublicKey::Dsa { q, p, g, y } => {
            Some(json!({ "kty": "DSA", "y": b64url(y), "p": b64url(p), "q": b64url(q), "g": b64url(g) }))
        }
        PublicKey::Dh { .. } => None,
    }
}

fn b64url(twos_complement: &[u8]) -> String {
    let mag = unsigned(twos_complement);
    let mag: &[u8] = if mag.is_empty() { &[0] } else { mag };
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(mag)
}

/// A public key from its JWK form (`kty` RSA or DSA, any case; DH as written
/// by [`public_key_to_jwk`]). Parameters may be base64url or base64, padded or
/// not; they are stored as Java's `BigInteger.toByteArray()` would write them.
pub fn public_key_from_jwk(j: &Value) -> JResult<PublicKey> {
    let o = as_object(j, "JWK")?;
    let kty = as_text(require(o, "kty", "JWK")?, "JWK kty")?;
    let param = |name: &str| -> JResult<Vec<u8>> {
        let text = as_text(require(o, name, "JWK")?, "JWK parameter")?;
        Ok(java_bigint(&decode_base64_lenient(&text)))
    };
    match kty.to_ascii_uppercase().as_str() {
        "RSA" => Ok(PublicKey::Rsa { exponent: param("e")?, modulus: param("n")? }),
        "DSA" => Ok(PublicKey::Dsa { q: param("q")?, p: param("p")?, g: param("g")?, y: param("y")? }),
        "DH" => Ok(PublicKey::Dh { y: param("y")?, p: param("p")?, g: param("g")? }),
        _ => err(format!("unsupported key type {kty:?}")),
    }
}
