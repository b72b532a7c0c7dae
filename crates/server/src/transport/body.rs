//! Reading HTTP request bodies on every HTTP port (native tunnel, JSON API,
//! domain registry): a time limit, a size limit, and a byte budget shared by all
//! bodies being received at once. A peer that sends part of a body and stalls
//! holds what it sent until the time limit; the budget caps the sum over all
//! such peers (F2: each stalled tunnel POST could pin ~256 KB, and the JSON API
//! reads up to 4 MB), and a body that does not fit is refused at once with 503.

use bytes::Bytes;
use http_body_util::{BodyExt, Limited};
use hyper::body::{Body as _, Incoming};
use hyper::StatusCode;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;

/// Budget granularity: one permit per KiB.
const UNIT: usize = 1024;

/// The byte budget of bodies in flight; shared by every HTTP port.
pub struct BodyBudget {
    kib: Arc<Semaphore>,
    total_kib: usize,
}

impl BodyBudget {
    pub fn new(bytes: usize) -> Arc<BodyBudget> {
        let total_kib = bytes.div_ceil(UNIT).max(1);
        Arc::new(BodyBudget { kib: Arc::new(Semaphore::new(total_kib)), total_kib })
    }
}

#[derive(Debug)]
pub enum BodyError {
    /// The budget is spent by other bodies being received.
    Busy,
    /// Longer than allowed, or the connection failed.
    Unreadable(String),
    TimedOut,
}

impl BodyError {
    pub fn status(&self) -> StatusCode {
        match self {
            BodyError::Busy => StatusCode::SERVICE_UNAVAILABLE,
            BodyError::Unreadable(_) => StatusCode::BAD_REQUEST,
            BodyError::TimedOut => StatusCode::REQUEST_TIMEOUT,
        }
    }

    pub fn message(&self) -> String {
        match self {
            BodyError::Busy => "Server too busy (too many request bodies being received)".into(),
            BodyError::Unreadable(e) => format!("Cannot read request body: {e}"),
            BodyError::TimedOut => "Request body not received in time".into(),
        }
    }
}

/// How one HTTP port reads bodies.
#[derive(Clone)]
pub struct BodyReader {
    pub timeout: Duration,
    budget: Arc<BodyBudget>,
}

impl BodyReader {
    pub fn new(timeout: Duration, budget: Arc<BodyBudget>) -> BodyReader {
        BodyReader { timeout, budget }
    }

    /// The whole body, at most `max` bytes, within the timeout; the bytes it may
    /// grow to (its Content-Length, else `max`) are reserved from the budget
    /// while it arrives.
    pub async fn read(&self, body: Incoming, max: usize) -> Result<Bytes, BodyError> {
        let announced = body.size_hint().exact().map_or(max, |n| (n as usize).min(max));
        let kib = announced.div_ceil(UNIT).clamp(1, self.budget.total_kib) as u32;
        let _reserved = self.budget.kib.clone().try_acquire_many_owned(kib).map_err(|_| BodyError::Busy)?;
        match tokio::time::timeout(self.timeout, Limited::new(body, max).collect()).await {
            Ok(Ok(b)) => Ok(b.to_bytes()),
            Ok(Err(e)) => Err(BodyError::Unreadable(e.to_string())),
            Err(_) => Err(BodyError::TimedOut),
        }
    }
}
