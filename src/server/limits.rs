//! The request limits the webhook service enforces, as plain values.

use crate::server::settings::LimitSettings;
use std::time::Duration;

/// The request limits the webhook router enforces itself (the connection
/// limits live in the listener). The body size limit is `crate::limits::MAX_BODY_BYTES`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Requests served at once; above it they are shed with 503
    /// (`--max-concurrent-requests`).
    pub max_concurrent_requests: usize,
    /// Request body bytes buffered across all requests; above it requests
    /// are shed with 503 (`--max-buffered-bytes`).
    pub max_buffered_bytes: usize,
    /// From the request head to the response; past it, 504
    /// (`--request-timeout`).
    pub request_timeout: Duration,
}

impl From<&LimitSettings> for Limits {
    fn from(args: &LimitSettings) -> Self {
        Self {
            max_concurrent_requests: args.max_concurrent_requests,
            max_buffered_bytes: args.max_buffered_bytes,
            request_timeout: args.request_timeout,
        }
    }
}
