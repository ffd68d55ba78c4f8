//! [`RouterInputs`], the one value both routers are built from, and
//! [`App`], one webhook router's state: those inputs (held whole, never
//! copied field by field) and what each router holds of its own (its
//! concurrency limit, byte budget, turns for large reviews and summary).

use super::share::Budget;
use super::summary::Summary;
use crate::lookups::SnapshotSource;
use crate::server::args::LimitFlags;
use crate::server::limits::{Limits, Pace};
use crate::server::metrics::Metrics;
use arc_swap::ArcSwap;
use kserve_injector_core::admission::Mode;
use kserve_injector_core::Inputs;
use std::sync::atomic::AtomicI64;
use std::sync::Arc;
use tokio::sync::{Semaphore, SemaphorePermit};
use tokio_util::sync::CancellationToken;

/// Everything the two routers need, without sockets or TLS: the one value
/// a router is built from (the webhook router keeps it whole beside what
/// it holds of its own). `Server::start` fills it from its settings, config
/// and certificate; an embedder or a test can fill it by hand and call the
/// routers with `tower::ServiceExt::oneshot`.
#[derive(Clone)]
pub struct RouterInputs {
    /// The inputs every review reads (the config, the modelcar mode, the
    /// security profile, the model volume); swapped whole on a config reload.
    pub inputs: Arc<ArcSwap<Inputs>>,
    /// Where reviews get the cluster objects a pod needs.
    pub objects: Arc<SnapshotSource>,
    /// Recorded into by the webhook router, exposed by the admin router.
    pub metrics: Arc<Metrics>,
    /// The bounds, as the settings and the memory limit made them.
    pub limits: Limits,
    /// Cancelled at the first shutdown signal; `/readyz` answers 503 from then on.
    pub draining: CancellationToken,
    /// The serving certificate's notAfter, Unix seconds; `/readyz` answers
    /// 503 once it is past.
    pub cert_not_after: Arc<AtomicI64>,
    /// Mutate, or shadow another mutator (`serve --shadow`).
    pub mode: Mode,
}

impl RouterInputs {
    /// `inputs` with cluster lookups off, fresh metrics, not draining, a
    /// certificate that never expires, and `limits` sized as without a
    /// memory limit (`Server::start` sizes them to the container's).
    pub fn new(inputs: Inputs, limits: &LimitFlags) -> Self {
        Self {
            inputs: Arc::new(ArcSwap::from_pointee(inputs)),
            objects: Arc::new(SnapshotSource::Off),
            metrics: Arc::new(Metrics::new()),
            limits: crate::server::sizing::size(None, None, limits, 0),
            draining: CancellationToken::new(),
            cert_not_after: Arc::new(AtomicI64::new(i64::MAX)),
            mode: Mode::Mutate,
        }
    }
}

/// Room an answer's envelope (uid, status, warnings) may take besides its
/// patch.
const ENVELOPE: usize = 16 * 1024;

/// What the webhook routes share, read through its methods.
pub(crate) struct App {
    /// The config, the cluster objects, the metrics, the limits and the mode.
    router_inputs: RouterInputs,
    /// One per request being answered; none left and the request is shed
    /// (`--max-concurrent-requests`).
    permits: Semaphore,
    /// The bytes held in memory beyond each connection's own: of request
    /// bodies until they are reviewed, of replies until hyper has taken them.
    budget: Budget,
    /// One permit per review of a body too large to review inline.
    large_reviews: Semaphore,
    /// The largest patch an answer may carry, base64-encoded: an answer
    /// must fit in a connection's part of the byte budget whole.
    max_patch: usize,
    summary: Summary,
}

impl App {
    pub(crate) fn new(inputs: &RouterInputs) -> Arc<Self> {
        let limits = &inputs.limits;
        let budget = Budget::new(limits.max_buffered_bytes);
        Arc::new(Self {
            permits: Semaphore::new(limits.max_concurrent_requests),
            max_patch: budget.per_connection().saturating_sub(ENVELOPE),
            budget,
            large_reviews: Semaphore::new(limits.large_reviews),
            summary: Summary::default(),
            router_inputs: inputs.clone(),
        })
    }

    pub(crate) fn metrics(&self) -> &Metrics {
        &self.router_inputs.metrics
    }

    pub(crate) fn limits(&self) -> &Limits {
        &self.router_inputs.limits
    }

    /// The pace a request body must keep.
    pub(crate) fn body_pace(&self) -> &Pace {
        &self.router_inputs.limits.body_pace
    }

    /// The inputs in force now (a config reload swaps them whole).
    pub(crate) fn inputs(&self) -> Arc<Inputs> {
        self.router_inputs.inputs.load_full()
    }

    pub(crate) fn objects(&self) -> &Arc<SnapshotSource> {
        &self.router_inputs.objects
    }

    pub(crate) fn mode(&self) -> Mode {
        self.router_inputs.mode
    }

    pub(crate) fn budget(&self) -> &Budget {
        &self.budget
    }

    pub(crate) fn max_patch(&self) -> usize {
        self.max_patch
    }

    pub(crate) fn summary(&self) -> &Summary {
        &self.summary
    }

    /// A place among the requests in flight, or `None` when they are all taken.
    pub(crate) fn permit(&self) -> Option<SemaphorePermit<'_>> {
        self.permits.try_acquire().ok()
    }

    /// The turn of a review too large to review inline (`None`: closed).
    pub(crate) async fn large_review_turn(&self) -> Option<SemaphorePermit<'_>> {
        self.large_reviews.acquire().await.ok()
    }
}
