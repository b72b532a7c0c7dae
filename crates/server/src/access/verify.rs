//! Checking proofs of identity against admin handles stored on this server
//! (§5.2): secret-key answers, public-key answers, and plain secrets (for the
//! REST API's Basic authentication).
//!
//! Anyone may ask for a proof to be checked (VERIFY_CHALLENGE needs no prior
//! challenge, even over UDP), and a PBKDF2 answer names its own cost. So the
//! server computes PBKDF2 only up to [`AuthWork::max_pbkdf2_cost`], and all
//! CPU-heavy checking (PBKDF2, signatures) runs under its own small budget of
//! threads, apart from admission: a flood of proofs is refused as too busy
//! and cannot starve resolution.

use crate::auth::remote::RemoteAuth;
pub use crate::auth::work::{AuthError, AuthWork};
use crate::auth::{signature, Identity};
use crate::client_cert::ClientCertificate;
use crate::directory::Directory;
use handled_proto::crypto::{ct_eq, seckey};
use handled_proto::data::pubkey::PublicKey;
use handled_proto::session::{PublicKeyAnswer, SecretKeyAnswer};
use handled_proto::value::{types, HandleValue};

fn show(handle: &[u8]) -> String {
    String::from_utf8_lossy(handle).into_owned()
}

/// The identity handle's values of `value_type` that an identity `index` may
/// use: the one at `index`, or all of them (lowest index first) for index 0.
/// A handle held elsewhere is resolved at its server when `root_info` is set.
async fn key_values(
    state: &Directory,
    handle: &[u8],
    index: i32,
    value_type: &[u8],
) -> Result<Vec<HandleValue>, AuthError> {
    let mut values = match held(state, handle).await {
        Held::Here => local_values(state, handle, index, value_type).await?,
        Held::Elsewhere(remote) => remote.values(handle, index, value_type).await?,
        Held::Unknown => {
            return Err(AuthError::failed(format!("identity handle {} is not served by this server", show(handle))))
        }
    };
    values.sort_by_key(|v| v.index);
    if values.is_empty() {
        let kind = String::from_utf8_lossy(value_type);
        return Err(AuthError::failed(format!("no {kind} at {index}:{}", show(handle))));
    }
    Ok(values)
}

/// Where an identity handle lives, as far as this server can tell.
enum Held {
    Here,
    /// On another server, reachable through `root_info`.
    Elsewhere(std::sync::Arc<RemoteAuth>),
    Unknown,
}

async fn held(state: &Directory, handle: &[u8]) -> Held {
    if state.is_homed(handle).await {
        return Held::Here;
    }
    match state.remote_auth() {
        Some(remote) => Held::Elsewhere(remote),
        None => Held::Unknown,
    }
}

async fn local_values(
    state: &Directory,
    handle: &[u8],
    index: i32,
    value_type: &[u8],
) -> Result<Vec<HandleValue>, AuthError> {
    let record = match state.record(&state.storage_key(handle)).await {
        Ok(Some(r)) => r,
        Ok(None) => return Err(AuthError::failed(format!("identity handle {} not found", show(handle)))),
        Err(e) => return Err(AuthError::store(&e)),
    };
    Ok(record.values.into_iter().filter(|v| v.is_type(value_type) && (index == 0 || v.index == index)).collect())
}

/// Verify an HS_SECKEY challenge answer (§5.3) over `nonce ‖ digest`.
pub async fn secret_key_answer(
    state: &Directory,
    handle: &[u8],
    index: i32,
    answer: &[u8],
    nonce: &[u8],
    digest: &[u8],
) -> Result<Identity, AuthError> {
    let raw = answer;
    let answer =
        SecretKeyAnswer::decode(raw).map_err(|e| AuthError::failed(format!("malformed secret key answer: {e}")))?;
    state.auth_work.check(&answer)?;
    if let Held::Elsewhere(remote) = held(state, handle).await {
        // The secret never leaves its server: that server checks the answer.
        return match remote.verify_secret_key(handle, index, nonce, digest, raw).await? {
            true => Ok(Identity::new(handle, index)),
            false => Err(AuthError::failed(format!("wrong secret key answer for {index}:{}", show(handle)))),
        };
    }
    let secrets: Vec<Vec<u8>> =
        key_values(state, handle, index, types::HS_SECKEY).await?.into_iter().map(|v| v.data).collect();
    let (nonce, digest) = (nonce.to_vec(), digest.to_vec());
    // PBKDF2 costs milliseconds: keep it off the I/O threads, within the budget.
    let verdict = state
        .auth_work
        .run(move || -> Result<bool, seckey::AnswerError> {
            for s in &secrets {
                if seckey::verify(&answer, s, &nonce, &digest)? {
                    return Ok(true);
                }
            }
            Ok(false)
        })
        .await?;
    match verdict {
        Ok(true) => Ok(Identity::new(handle, index)),
        Ok(false) => Err(AuthError::failed(format!("wrong secret key answer for {index}:{}", show(handle)))),
        Err(e) => Err(AuthError::failed(e.to_string())),
    }
}

/// Verify an HS_PUBKEY answer (§5.4): a signature over `signed` (`nonce ‖
/// digest`). Index 0 tries every HS_PUBKEY and records the one that verified.
pub async fn public_key_answer(
    state: &Directory,
    handle: &[u8],
    index: i32,
    answer: &[u8],
    signed: &[u8],
) -> Result<Identity, AuthError> {
    let answer =
        PublicKeyAnswer::decode(answer).map_err(|e| AuthError::failed(format!("malformed public key answer: {e}")))?;
    signature_by(state, handle, index, &answer.hash_name, &answer.signature, signed).await
}

/// Verify a signature over `signed` by an HS_PUBKEY of the identity, the hash
/// named by `hash_name` (also used by the REST API's Handle authorization).
pub async fn signature_by(
    state: &Directory,
    handle: &[u8],
    index: i32,
    hash_name: &[u8],
    sig: &[u8],
    signed: &[u8],
) -> Result<Identity, AuthError> {
    let Some(alg) = handled_proto::digest::DigestAlg::from_name(hash_name) else {
        return Err(AuthError::failed(format!("unknown signature hash {:?}", String::from_utf8_lossy(hash_name))));
    };
    let keys = key_values(state, handle, index, types::HS_PUBKEY).await?;
    let (sig, signed) = (sig.to_vec(), signed.to_vec());
    let matched = state
        .auth_work
        .run(move || {
            keys.iter().find_map(|v| {
                let key = PublicKey::decode_data(&v.data).ok()?;
                signature::verify(&key, alg, &signed, &sig).then_some(v.index)
            })
        })
        .await?;
    match matched {
        Some(k) => {
            if let Held::Elsewhere(remote) = held(state, handle).await {
                remote.verified(handle, index);
            }
            Ok(Identity { handle: handle.to_vec(), index, key_index: (index == 0).then_some(k) })
        }
        None => {
            Err(AuthError::failed(format!("signature does not verify with the public key at {index}:{}", show(handle))))
        }
    }
}

/// The identity a TLS client certificate claims (§14.6.2), when its key is an
/// HS_PUBKEY at that index (any of them for index 0). The handshake proved the
/// client holds the private key.
pub async fn certificate_key(
    state: &Directory,
    handle: &[u8],
    index: i32,
    certificate: &ClientCertificate,
) -> Result<Identity, AuthError> {
    let keys = key_values(state, handle, index, types::HS_PUBKEY).await?;
    let matched = keys.iter().find(|v| PublicKey::decode_data(&v.data).is_ok_and(|k| certificate.matches(&k)));
    match matched {
        Some(v) => Ok(Identity { handle: handle.to_vec(), index, key_index: (index == 0).then_some(v.index) }),
        None => Err(AuthError::failed(format!(
            "the client certificate's key is not the public key at {index}:{}",
            show(handle)
        ))),
    }
}

/// Check a plain secret against the identity's HS_SECKEY values, as the REST
/// API's Basic authentication does.
pub async fn secret(state: &Directory, handle: &[u8], index: i32, secret: &[u8]) -> Result<Identity, AuthError> {
    if let Held::Elsewhere(remote) = held(state, handle).await {
        // Make a challenge of our own and have the identity's server check the answer.
        let (nonce, digest): ([u8; 16], [u8; 32]) = (rand::random(), rand::random());
        let mut answer = Vec::new();
        seckey::answer(seckey::AnswerAlg::HmacSha256, secret, &nonce, &digest, &[]).encode(&mut answer);
        return match remote.verify_secret_key(handle, index, &nonce, &digest, &answer).await? {
            true => Ok(Identity::new(handle, index)),
            false => Err(AuthError::failed(format!("wrong secret key for {index}:{}", show(handle)))),
        };
    }
    let values = key_values(state, handle, index, types::HS_SECKEY).await?;
    if values.iter().any(|v| ct_eq(&v.data, secret)) {
        Ok(Identity::new(handle, index))
    } else {
        Err(AuthError::failed(format!("wrong secret key for {index}:{}", show(handle))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use handled_proto::header::ResponseCode;
    use std::sync::Arc;

    fn pbkdf2(iterations: i32, key_bits: i32) -> SecretKeyAnswer {
        SecretKeyAnswer::Pbkdf2HmacSha1 { salt: vec![0; 16], iterations, key_bits, mac: vec![0; 20] }
    }

    /// F6: a client could make the server run 200,000 iterations × 1,024 bits
    /// (~0.2 s of CPU) per answer; now only what real clients ask for.
    #[test]
    fn pbkdf2_work_is_capped_at_what_real_clients_ask() {
        let work = AuthWork::new(1, 10_000);
        assert!(work.check(&pbkdf2(10_000, 160)).is_ok(), "the Java client's answers");
        assert!(work.check(&pbkdf2(5_000, 320)).is_ok());
        for (iterations, bits) in [(200_000, 1024), (10_001, 160), (10_000, 168), (i32::MAX, 160)] {
            let e = work.check(&pbkdf2(iterations, bits)).unwrap_err();
            assert_eq!(e.code, ResponseCode::AUTHENTICATION_FAILED, "{iterations} × {bits}");
        }
        assert!(work.check(&SecretKeyAnswer::HmacSha256(vec![0; 32])).is_ok());
    }

    /// F6: heavy checks run a few at a time, and beyond that are refused as
    /// too busy instead of piling up.
    #[tokio::test]
    async fn heavy_checks_have_their_own_budget() {
        let work = Arc::new(AuthWork::new(1, 10_000));
        let (started, release) = (Arc::new(std::sync::Barrier::new(2)), Arc::new(std::sync::Barrier::new(2)));
        let busy = {
            let (work, started, release) = (work.clone(), started.clone(), release.clone());
            tokio::spawn(async move {
                work.run(move || {
                    started.wait();
                    release.wait();
                })
                .await
            })
        };
        tokio::task::spawn_blocking({
            let started = started.clone();
            move || started.wait()
        })
        .await
        .unwrap();
        let refused = work.run(|| ()).await.unwrap_err();
        assert_eq!(refused.code, ResponseCode::SERVER_TOO_BUSY);
        tokio::task::spawn_blocking(move || release.wait()).await.unwrap();
        busy.await.unwrap().unwrap();
        assert!(work.run(|| ()).await.is_ok(), "the turn is free again");
    }
}
