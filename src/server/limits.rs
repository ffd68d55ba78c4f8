//! The bounds the server enforces, as they came to: each flag given, else
//! sized to the memory limit by `server::sizing::size`, the one place the
//! values a flag leaves out are derived.

use std::time::{Duration, Instant};

/// The server's bounds. The listener enforces the connection cap; the
/// webhook router the rest. The body size limit is
/// `crate::limits::MAX_BODY_BYTES`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Open webhook connections (`--max-connections`).
    pub max_connections: usize,
    /// Requests served at once; above it they are shed with 503
    /// (`--max-concurrent-requests`; left out, every connection's streams).
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
    /// How fast a request body must arrive; behind it, 408.
    pub body_pace: Pace,
}

/// How fast a request body must arrive (`--body-timeout`, `--min-body-rate`):
/// all of it within `timeout` of its request's head plus the time its bytes
/// take at `min_rate`, so that at every moment a body still arriving has
/// kept up that rate since `timeout` passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pace {
    /// What any body may take besides its bytes' time.
    pub timeout: Duration,
    /// Bytes a second a body must keep up, at the least.
    pub min_rate: u64,
}

impl Pace {
    /// By when a body whose request's head came at `start` must have
    /// delivered more than `received` bytes (or ended).
    pub(crate) fn deadline(&self, start: Instant, received: usize) -> Instant {
        let micros = received as u128 * 1_000_000 / u128::from(self.min_rate.max(1));
        start + self.timeout + Duration::from_micros(u64::try_from(micros).unwrap_or(u64::MAX))
    }
}

/// Admin connections open at once: kubelet opens one per probe and closes
/// it, Prometheus keeps one or two. Fixed, not sized: the memory plan
/// (`sizing.rs`) counts them at their worst.
pub(crate) const ADMIN_CONNECTIONS: usize = 32;
