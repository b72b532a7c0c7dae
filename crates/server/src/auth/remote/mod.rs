//! Identities held on other servers (§5.2), checked as Handle.Net does: a
//! secret-key answer goes to the server responsible for the identity handle
//! as VERIFY_CHALLENGE; public keys and admin groups (HS_VLIST) are fetched
//! from it by certified resolution and used here. That server is found
//! through the root sites of `root_info` (`handled_client::sites`, the one
//! site finder); every reply must be signed by the key its site record publishes.
//!
//! Codes as the original's: the responsible server saying "not valid" (or
//! answering with an error) fails authentication (403); not reaching it, or a
//! reply that does not verify, is an authentication error (406).
//!
//! One asking costs the server at most a few outgoing requests: all of one
//! check runs within `remote_auth_timeout_ms`, at most `remote_auth_concurrent`
//! checks run at once (beyond that, after a short wait, too busy; shared out
//! by [`fairness`]), site lookups are cached, and service handles are followed
//! to a fixed depth.
//!
//! The client is told only that the check failed: whoever controls a prefix's
//! HS_SITE chooses the address asked, so the connect error or the bytes that
//! came back would make this server a port scanner for them. Details go to
//! the log (target `auth`).

pub mod fairness;

use super::work::AuthError;
use fairness::{Fairness, NoTurn};
use handled_client::sites::{LookupError, SiteOptions, Sites, UpstreamGuards, UpstreamPolicy};
use handled_proto::data::site::SiteInfo;
use handled_proto::header::ResponseCode;
use handled_proto::request::RequestBody;
use handled_proto::response::ResponseBody;
use handled_proto::session::VerifyChallengeRequest;
use handled_proto::value::HandleValue;
use std::time::Duration;
use tokio::time::Instant;

/// Longest wait for a turn at remote checking before "too busy".
const TURN_WAIT: Duration = Duration::from_millis(200);
/// Keys (or groups) of one remote identity that are used: each key is a
/// signature check here, and a remote handle may hold thousands of values.
const MAX_REMOTE_VALUES: usize = 16;

/// What the client is told when the identity's server could not be asked.
const NOT_CHECKED: &str = "identity could not be verified remotely: its server could not be reached or \
     did not answer verifiably (details in this server's log)";

impl From<LookupError> for AuthError {
    fn from(e: LookupError) -> Self {
        match e {
            // A code, not the other side's text.
            LookupError::Refused { code, .. } => {
                AuthError::failed(format!("identity not verified remotely: {}", code.name()))
            }
            _ => AuthError::error(NOT_CHECKED),
        }
    }
}

/// The server's means of checking identities held elsewhere.
pub struct RemoteAuth {
    sites: Sites,
    timeout: Duration,
    fairness: Fairness,
}

impl RemoteAuth {
    /// With the root sites read from `root_info`, `timeout` per check,
    /// `concurrent` checks at once, and `upstream`: where walks may send and
    /// how many attempts one check may make (the `[resolver]` table's keys).
    pub fn new(root: Vec<SiteInfo>, timeout: Duration, concurrent: usize, upstream: (UpstreamPolicy, u32)) -> Self {
        let (policy, attempts) = upstream;
        let options = SiteOptions { attempts, ..SiteOptions::default() };
        RemoteAuth {
            sites: Sites::with_options(root, crate::auth::signature::verify, options).with_policy(policy),
            timeout,
            fairness: Fairness::new(concurrent),
        }
    }

    /// Site lookups remembered (count, bytes).
    pub fn cached_sites(&self) -> (usize, usize) {
        self.sites.cached()
    }

    /// Upstream attempts not made so far (address policy, budget, remembered failures).
    pub fn guards(&self) -> UpstreamGuards {
        self.sites.guards()
    }

    /// Run one check of `index:handle` under a turn and the time limit.
    async fn bounded<T>(
        &self,
        handle: &[u8],
        index: i32,
        check: impl std::future::Future<Output = Result<T, LookupError>>,
    ) -> Result<T, AuthError> {
        let what = format!("{index}:{}", String::from_utf8_lossy(handle));
        let _turn = match self.fairness.turn(handle, index, TURN_WAIT).await {
            Ok(turn) => turn,
            Err(NoTurn::Busy) => {
                return Err(AuthError {
                    code: ResponseCode::SERVER_TOO_BUSY,
                    message: "Server too busy: too many remote identity checks at once".into(),
                })
            }
            Err(NoTurn::Failing) => {
                tracing::info!(target: "auth", "remote authentication of {what}: not asked, its server failed recently");
                return Err(AuthError::error(NOT_CHECKED));
            }
        };
        let result = match tokio::time::timeout(self.timeout, check).await {
            Ok(r) => r,
            Err(_) => Err(LookupError::Unreachable(format!("no answer within {:?}", self.timeout))),
        };
        result.map_err(|e| {
            tracing::info!(target: "auth", "remote authentication of {what}: {e}");
            if !matches!(e, LookupError::Refused { .. }) {
                self.fairness.failed(handle);
            }
            AuthError::from(e)
        })
    }

    /// `index:handle` proved itself with what its server holds (a signature
    /// by a fetched key): it keeps a share of the turns.
    pub fn verified(&self, handle: &[u8], index: i32) {
        self.fairness.verified(handle, index);
    }

    /// Ask the server responsible for `handle` whether `answer` proves
    /// `index:handle` for this nonce and request digest (VERIFY_CHALLENGE).
    pub async fn verify_secret_key(
        &self,
        handle: &[u8],
        index: i32,
        nonce: &[u8],
        digest: &[u8],
        answer: &[u8],
    ) -> Result<bool, AuthError> {
        let body = RequestBody::VerifyChallenge(VerifyChallengeRequest {
            handle: handle.to_vec(),
            index,
            nonce: nonce.to_vec(),
            request_digest: digest.to_vec(),
            digest_alg: None,
            answer: answer.to_vec(),
        });
        let valid = self
            .bounded(handle, index, async {
                let walk = self.sites.walk(Instant::now() + self.timeout);
                let sites = self.sites.for_handle(handle, &walk).await?;
                let reply = self.sites.first_answer(&sites, handle, &body, &walk).await?;
                match (reply.code(), &reply.body) {
                    (ResponseCode::SUCCESS, ResponseBody::VerifyResult { valid }) => Ok(*valid),
                    (ResponseCode::SUCCESS, other) => {
                        Err(LookupError::Uncertified(format!("unexpected reply to VERIFY_CHALLENGE: {other:?}")))
                    }
                    (code, _) => Err(LookupError::Refused { code, message: reply.message().unwrap_or_default() }),
                }
            })
            .await?;
        if valid {
            self.fairness.verified(handle, index);
        }
        Ok(valid)
    }

    /// The identity handle's values of `value_type` usable as `index` (all of
    /// them for index 0), resolved at its responsible server, as Handle.Net
    /// asks: by index when one is given, by type for index 0.
    pub async fn values(&self, handle: &[u8], index: i32, value_type: &[u8]) -> Result<Vec<HandleValue>, AuthError> {
        let values = self
            .bounded(handle, index, async {
                let walk = self.sites.walk(Instant::now() + self.timeout);
                let sites = self.sites.for_handle(handle, &walk).await?;
                let (indexes, value_types): (&[i32], &[&[u8]]) =
                    if index > 0 { (&[index], &[]) } else { (&[], &[value_type]) };
                self.sites.resolve_filtered(&sites, handle, indexes, value_types, &walk).await
            })
            .await?;
        let mut values: Vec<HandleValue> =
            values.into_iter().filter(|v| v.is_type(value_type) && (index <= 0 || v.index == index)).collect();
        values.sort_by_key(|v| v.index);
        values.truncate(MAX_REMOTE_VALUES);
        Ok(values)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use handled_client::sites::testing::site;
    use handled_proto::codec::Codec;
    use handled_proto::data::site::SiteInfo;
    use std::sync::Arc;

    /// A server that accepts and never answers: each check ends at the time
    /// limit with an authentication error (406), and checks beyond the
    /// concurrency bound are refused as too busy instead of piling up.
    #[tokio::test]
    async fn checks_are_time_limited_and_bounded_in_number() {
        let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = silent.local_addr().unwrap().port();
        let holder = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((s, _)) = silent.accept().await {
                held.push(s);
            }
        });
        let key = handled_proto::data::pubkey::PublicKey::Rsa { exponent: vec![1, 0, 1], modulus: vec![0xc5; 256] };
        let remote =
            Arc::new(RemoteAuth::new(vec![site(port, key.to_bytes())], Duration::from_millis(600), 1, upstream()));
        let first = {
            let remote = remote.clone();
            tokio::spawn(async move { remote.verify_secret_key(b"0.NA/X", 300, &[1; 16], &[2; 32], &[0x13]).await })
        };
        tokio::time::sleep(Duration::from_millis(100)).await;
        let busy = remote.values(b"0.NA/X", 300, b"HS_PUBKEY").await.unwrap_err();
        assert_eq!(busy.code, ResponseCode::SERVER_TOO_BUSY);
        let timed_out = first.await.unwrap().unwrap_err();
        assert_eq!(timed_out.code, ResponseCode::AUTHEN_ERROR, "{}", timed_out.message);
        let unsigned_site: SiteInfo = site(1, vec![]);
        let nowhere = RemoteAuth::new(vec![unsigned_site], Duration::from_millis(600), 1, upstream());
        let e = nowhere.values(b"0.NA/X", 0, b"HS_PUBKEY").await.unwrap_err();
        assert_eq!(e.code, ResponseCode::AUTHEN_ERROR, "{}", e.message);
        holder.abort();
    }

    fn upstream() -> (UpstreamPolicy, u32) {
        (UpstreamPolicy::default(), handled_client::sites::DEFAULT_ATTEMPTS)
    }
}
