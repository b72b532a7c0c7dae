//! The budget of CPU-heavy proof checking (PBKDF2, signatures), apart from
//! request admission, so a flood of expensive answers cannot starve resolution;
//! and the error an authentication ends with.

use handled_proto::header::ResponseCode;
use handled_proto::session::SecretKeyAnswer;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;

/// Longest wait for a turn at CPU-heavy checking before "too busy".
const AUTH_WORK_WAIT: Duration = Duration::from_millis(200);
/// PBKDF2-HMAC-SHA1 yields 160 bits per block; each block costs all iterations.
const PBKDF2_BLOCK_BITS: i64 = 160;

/// The budget of CPU-heavy proof checking.
pub struct AuthWork {
    turns: Arc<Semaphore>,
    /// Most PBKDF2 work one answer may ask for: iterations × 160-bit blocks.
    pub max_pbkdf2_cost: i64,
}

impl AuthWork {
    /// `workers` checks at once (at least one).
    pub fn new(workers: usize, max_pbkdf2_cost: u32) -> Self {
        AuthWork { turns: Arc::new(Semaphore::new(workers.max(1))), max_pbkdf2_cost: i64::from(max_pbkdf2_cost) }
    }

    /// Run `work` on a blocking thread once a turn is free; too busy when none
    /// frees up within [`AUTH_WORK_WAIT`].
    pub async fn run<T: Send + 'static>(&self, work: impl FnOnce() -> T + Send + 'static) -> Result<T, AuthError> {
        let turn = match tokio::time::timeout(AUTH_WORK_WAIT, self.turns.clone().acquire_owned()).await {
            Ok(Ok(turn)) => turn,
            _ => {
                return Err(AuthError {
                    code: ResponseCode::SERVER_TOO_BUSY,
                    message: "Server too busy: too many authentication checks at once".into(),
                })
            }
        };
        tokio::task::spawn_blocking(move || {
            let result = work();
            drop(turn);
            result
        })
        .await
        .map_err(|e| AuthError::error(format!("verification task failed: {e}")))
    }

    /// Refuse a PBKDF2 answer that asks for more work than real clients do.
    pub fn check(&self, answer: &SecretKeyAnswer) -> Result<(), AuthError> {
        let SecretKeyAnswer::Pbkdf2HmacSha1 { iterations, key_bits, .. } = answer else { return Ok(()) };
        let blocks = (i64::from(*key_bits) + PBKDF2_BLOCK_BITS - 1) / PBKDF2_BLOCK_BITS;
        if i64::from(*iterations) * blocks.max(1) > self.max_pbkdf2_cost {
            return Err(AuthError::failed(format!(
                "PBKDF2 answer with {iterations} iterations of {key_bits} bits: this server computes at most {} \
                 iterations of 160 bits",
                self.max_pbkdf2_cost
            )));
        }
        Ok(())
    }
}

/// A failed authentication: 403 when the proof is wrong or names nothing
/// usable, 406 for other errors (§5.6); or no check at all (3 too busy, 7
/// the store out of reach), which says nothing of the credentials.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthError {
    pub code: ResponseCode,
    pub message: String,
}

impl AuthError {
    pub fn failed(message: impl Into<String>) -> Self {
        AuthError { code: ResponseCode::AUTHENTICATION_FAILED, message: message.into() }
    }

    pub fn error(message: impl Into<String>) -> Self {
        AuthError { code: ResponseCode::AUTHEN_ERROR, message: message.into() }
    }

    /// The identity's keys could not be read: answered as the store's failure
    /// (7 while it is out of reach), not as a failed authentication, so that
    /// clients do not take it for wrong credentials (and rotate or lock keys).
    pub fn store(e: &handled_store::StoreError) -> Self {
        let (code, message) = crate::store_answer::store_answer(e);
        AuthError { code, message }
    }

    /// Whether the credentials were judged (wrong, unusable, or failing their
    /// check: the 4xx codes of §5.6), not left unchecked (too busy, storage
    /// unavailable): only those are answered HTTP 401 and logged as failures.
    pub fn judged_credentials(&self) -> bool {
        (400..500).contains(&self.code.0)
    }
}
