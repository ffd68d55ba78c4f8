//! [`App`]: one webhook router's state, built from the [`RouterInputs`]
//! it serves: the inputs themselves (read, never copied field by field)
//! and what each router holds of its own (its concurrency limit, byte
//! budget, turns for large reviews and summary).

use super::routes::RouterInputs;
use super::share::Budget;
use super::summary::Summary;
use std::sync::Arc;
use tokio::sync::Semaphore;

/// Room an answer's envelope (uid, status, warnings) may take besides its
/// patch.
const ENVELOPE: usize = 16 * 1024;

/// What the webhook routes share.
pub(crate) struct App {
    /// The config, the cluster objects, the metrics, the limits and the mode.
    pub inputs: RouterInputs,
    /// One per request being answered; none left and the request is shed
    /// (`--max-concurrent-requests`).
    pub permits: Semaphore,
    /// The bytes held in memory beyond each connection's own: of request
    /// bodies until they are reviewed, of answers until hyper has taken them.
    pub budget: Budget,
    /// One permit per review of a body too large to review inline.
    pub large_reviews: Arc<Semaphore>,
    /// The largest patch an answer may carry, base64-encoded: an answer
    /// must fit in a connection's part of the byte budget whole.
    pub max_patch: usize,
    pub summary: Summary,
}

impl App {
    pub(crate) fn new(inputs: &RouterInputs) -> Arc<Self> {
        let limits = &inputs.limits;
        let budget = Budget::new(limits.max_buffered_bytes);
        Arc::new(Self {
            permits: Semaphore::new(limits.max_concurrent_requests),
            max_patch: budget.per_connection().saturating_sub(ENVELOPE),
            budget,
            large_reviews: Arc::new(Semaphore::new(limits.large_reviews)),
            summary: Summary::default(),
            inputs: inputs.clone(),
        })
    }
}
