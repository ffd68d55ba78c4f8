//! The request limits the webhook service enforces, as plain values.

use super::sizing::{self, Sized};
use crate::server::settings::LimitSettings;
use std::time::Duration;

/// The request limits the webhook router enforces itself (the connection
/// limits live in the listener). The body size limit is `crate::limits::MAX_BODY_BYTES`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Requests served at once; above it they are shed with 503
    /// (`--max-concurrent-requests`).
    pub max_concurrent_requests: usize,
    /// Request bodies and answers held across all requests, in bytes;
    /// above it requests are shed with 503 (`--max-buffered-bytes`).
    pub max_buffered_bytes: usize,
    /// Reviews of bodies too large to review inline that run at once; the
    /// others wait their turn within the request timeout.
    pub large_reviews: usize,
    /// From the request head to the response; past it, 504
    /// (`--request-timeout`).
    pub request_timeout: Duration,
}

impl Limits {
    /// The flags, with what they leave out sized as `sized` says.
    pub(crate) fn sized(args: &LimitSettings, sized: &Sized) -> Self {
        Self {
            max_concurrent_requests: args.max_concurrent_requests,
            max_buffered_bytes: sized.max_buffered_bytes,
            large_reviews: sized.large_reviews,
            request_timeout: args.request_timeout,
        }
    }
}

/// The flags, with what they leave out sized as for no memory limit.
impl From<&LimitSettings> for Limits {
    fn from(args: &LimitSettings) -> Self {
        let sized = sizing::size(
            None,
            None,
            args.max_connections,
            args.max_buffered_bytes,
            args.max_concurrent_requests,
            0,
        );
        Self::sized(args, &sized)
    }
}
