//! [`App`]: what the webhook routes share, built once per router from the
//! router's inputs.

use super::limits::{Limits, Pace};
use super::metrics::Metrics;
use super::share::Budget;
use super::summary::Summary;
use crate::lookups::SnapshotSource;
use arc_swap::ArcSwap;
use kserve_injector_core::admission::Mode;
use kserve_injector_core::Inputs;
use std::sync::Arc;
use tokio::sync::Semaphore;

/// Room an answer's envelope (uid, status, warnings) may take besides its
/// patch.
const ENVELOPE: usize = 16 * 1024;

/// What the webhook routes share.
pub(crate) struct App {
    pub inputs: Arc<ArcSwap<Inputs>>,
    pub objects: Arc<SnapshotSource>,
    pub metrics: Arc<Metrics>,
    /// The bytes held in memory beyond each connection's own: of request
    /// bodies until they are reviewed, of answers until hyper has taken them.
    pub budget: Budget,
    /// How fast a request body must arrive.
    pub pace: Pace,
    /// One permit per review of a body too large to review inline.
    pub large_reviews: Arc<Semaphore>,
    /// The largest patch an answer may carry, base64-encoded: an answer
    /// must fit in a connection's part of the byte budget whole.
    pub max_patch: usize,
    pub summary: Summary,
    pub mode: Mode,
}

impl App {
    pub(crate) fn new(
        inputs: Arc<ArcSwap<Inputs>>,
        objects: Arc<SnapshotSource>,
        metrics: Arc<Metrics>,
        limits: &Limits,
        mode: Mode,
    ) -> Arc<Self> {
        let budget = Budget::new(limits.max_buffered_bytes);
        Arc::new(Self {
            inputs,
            objects,
            metrics,
            max_patch: budget.per_connection().saturating_sub(ENVELOPE),
            budget,
            pace: limits.body_pace,
            large_reviews: Arc::new(Semaphore::new(limits.large_reviews)),
            summary: Summary::default(),
            mode,
        })
    }
}
