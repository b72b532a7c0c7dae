//! Certified responses (§1.5): a response sent with CT carries an HS_SIGNED
//! credential over envelope, header and body, made with the key the server
//! publishes in its site record.

use crate::Response;
use handled_proto::codec::Codec;
use handled_proto::credential::{alg_names, signed_input};
use handled_proto::data::pubkey::{unsigned, PublicKey};
use handled_proto::data::site::SiteInfo;
use handled_proto::response::ResponseBody;

/// The first server's public key in a GET_SITE_INFO response, if it has one.
pub fn site_key(site: &Response) -> Option<PublicKey> {
    match &site.body {
        ResponseBody::SiteInfo(bytes) => SiteInfo::from_bytes(bytes)
            .ok()
            .and_then(|s| s.servers.first().and_then(|srv| PublicKey::decode_data(&srv.public_key).ok())),
        _ => None,
    }
}

/// Check `response`'s signature with `key`; Ok names the algorithm that verified.
pub fn verify_signature(response: &Response, key: &PublicKey) -> Result<String, String> {
    let cred = response.credential.as_ref().filter(|c| c.is_signature()).ok_or("the response is not signed")?;
    let PublicKey::Rsa { exponent, modulus } = key else {
        return Err("the site's key is not an RSA key (only RSA signatures are checked)".into());
    };
    let algorithm: &'static aws_lc_rs::rsa::RsaParameters = match cred.algorithm.as_slice() {
        alg_names::SHA_256 => &aws_lc_rs::signature::RSA_PKCS1_2048_8192_SHA256,
        alg_names::SHA1 => &aws_lc_rs::signature::RSA_PKCS1_2048_8192_SHA1_FOR_LEGACY_USE_ONLY,
        other => return Err(format!("unsupported signature algorithm {:?}", String::from_utf8_lossy(other))),
    };
    let input = signed_input(&response.envelope, &response.header_and_body, cred.session_counter);
    let key = aws_lc_rs::rsa::PublicKeyComponents { n: unsigned(modulus), e: unsigned(exponent) };
    key.verify(algorithm, &input, &cred.signature)
        .map(|_| format!("{}withRSA", String::from_utf8_lossy(&cred.algorithm)))
        .map_err(|_| "the signature does not verify with the site's key".into())
}
