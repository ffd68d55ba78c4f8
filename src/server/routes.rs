//! Both routers, and [`RouterInputs`], the plain inputs they are built
//! from (no socket, no TLS), so they can be called in-process. The webhook
//! side never panics the process and always answers: malformed requests get
//! a 4xx, overload a 503 with Retry-After, a bug a 500, a stalled request a
//! 504, every error as `{"error": ...}`. The parts, each in its own file:
//! the service and its limits (`service.rs`, `limits.rs`), reading the body
//! (`body.rs`), one review (`review.rs`), what is observed of it
//! (`observe.rs`), the error answers (`api_error.rs`) and the admin router
//! (`admin.rs`).

use super::metrics::Metrics;
use super::observe::Summary;
use crate::lookups::SnapshotSource;
use arc_swap::ArcSwap;
use axum::Router;
use kserve_injector_core::admission::Mode;
use kserve_injector_core::Inputs;
use std::sync::atomic::AtomicI64;
use std::sync::Arc;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

pub use super::limits::Limits;

/// What the two routers are built from, without sockets or TLS.
/// `Server::start` fills it from its flags, config and certificate; an
/// embedder or a test can fill it by hand and call the routers with
/// `tower::ServiceExt::oneshot`.
#[derive(Clone)]
pub struct RouterInputs {
    /// The config and environment every review reads; swapped whole on a
    /// config reload.
    pub env: Arc<ArcSwap<Inputs>>,
    /// Where reviews get the cluster objects a pod needs.
    pub objects: Arc<SnapshotSource>,
    /// Recorded into by the webhook router, exposed by the admin router.
    pub metrics: Arc<Metrics>,
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
    /// `env` with cluster lookups off, fresh metrics, not draining, and a
    /// certificate that never expires.
    pub fn new(env: Inputs, limits: Limits) -> Self {
        Self {
            env: Arc::new(ArcSwap::from_pointee(env)),
            objects: Arc::new(SnapshotSource::Off),
            metrics: Arc::new(Metrics::new()),
            limits,
            draining: CancellationToken::new(),
            cert_not_after: Arc::new(AtomicI64::new(i64::MAX)),
            mode: Mode::Mutate,
        }
    }

    /// The webhook router (`POST /mutate-pods`, `POST /mutate`) with its
    /// error handling and limits. Each call gets its own concurrency limit
    /// and byte budget.
    pub fn webhook_router(&self) -> Router {
        Router::new().fallback_service(super::service::webhook(App::new(self), &self.limits))
    }

    /// The admin router: `/healthz`, `/readyz`, `/metrics`.
    pub fn admin_router(&self) -> Router {
        super::admin::admin(self)
    }
}

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
    pub(crate) fn new(inputs: &RouterInputs) -> Arc<Self> {
        Arc::new(Self {
            env: inputs.env.clone(),
            objects: inputs.objects.clone(),
            metrics: inputs.metrics.clone(),
            budget: Arc::new(Semaphore::new(inputs.limits.max_buffered_bytes)),
            large_reviews: Arc::new(Semaphore::new(inputs.limits.large_reviews)),
            max_patch: inputs.limits.max_buffered_bytes.saturating_sub(ENVELOPE),
            summary: Summary::default(),
            mode: inputs.mode,
        })
    }
}
