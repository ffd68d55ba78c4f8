//! [`App`]: what the webhook routes share, built once per router from the
//! router's inputs.

use super::limits::Limits;
use super::metrics::Metrics;
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
    pub env: Arc<ArcSwap<Inputs>>,
    pub objects: Arc<SnapshotSource>,
    pub metrics: Arc<Metrics>,
    /// One permit per byte held in memory: of request bodies until they are
    /// reviewed, of answers until hyper has taken them.
    pub budget: Arc<Semaphore>,
    /// One permit per review of a body too large to review inline.
    pub large_reviews: Arc<Semaphore>,
    /// The largest patch an answer may carry, base64-encoded: an answer
    /// must fit in the byte budget whole.
    pub max_patch: usize,
    pub summary: Summary,
    pub mode: Mode,
}

impl App {
    pub(crate) fn new(
        env: Arc<ArcSwap<Inputs>>,
        objects: Arc<SnapshotSource>,
        metrics: Arc<Metrics>,
        limits: &Limits,
        mode: Mode,
    ) -> Arc<Self> {
        Arc::new(Self {
            env,
            objects,
            metrics,
            budget: Arc::new(Semaphore::new(limits.max_buffered_bytes)),
            large_reviews: Arc::new(Semaphore::new(limits.large_reviews)),
            max_patch: limits.max_buffered_bytes.saturating_sub(ENVELOPE),
            summary: Summary::default(),
            mode,
        })
    }
}
