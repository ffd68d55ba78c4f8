//! Both routers, and [`RouterInputs`], the plain inputs they are built
//! from (no socket, no TLS), so they can be called in-process. The webhook
//! side never panics the process and always answers: malformed requests get
//! a 4xx, overload a 503 with Retry-After, a bug a 500, a stalled request a
//! 504, every error as `{"error": ...}`. The parts, each in its own file:
//! the service and its limits (`service.rs`, `limits.rs`), reading the body
//! (`body.rs`), one review (`review.rs`), what is observed of it
//! (`observe.rs`, `summary.rs`), one webhook router's state (`app.rs`),
//! the error answers (`api_error.rs`) and the admin router
//! (`admin.rs`).

use super::limits::Limits;
use super::metrics::Metrics;
use crate::lookups::SnapshotSource;
use crate::server::settings::LimitSettings;
use arc_swap::ArcSwap;
use axum::Router;
use kserve_injector_core::admission::Mode;
use kserve_injector_core::Inputs;
use std::sync::atomic::AtomicI64;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Everything the two routers need, without sockets or TLS: the one value
/// a router is built from (the webhook router keeps it whole beside what
/// it holds of its own). `Server::start` fills it from its settings, config
/// and certificate; an embedder or a test can fill it by hand and call the
/// routers with `tower::ServiceExt::oneshot`.
#[derive(Clone)]
pub struct RouterInputs {
    /// The config and environment every review reads; swapped whole on a
    /// config reload.
    pub env: Arc<ArcSwap<Inputs>>,
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
    /// `env` with cluster lookups off, fresh metrics, not draining, a
    /// certificate that never expires, and `limits` sized as without a
    /// memory limit (`Server::start` sizes them to the container's).
    pub fn new(env: Inputs, limits: &LimitSettings) -> Self {
        Self {
            env: Arc::new(ArcSwap::from_pointee(env)),
            objects: Arc::new(SnapshotSource::Off),
            metrics: Arc::new(Metrics::new()),
            limits: super::sizing::size(None, None, limits, 0),
            draining: CancellationToken::new(),
            cert_not_after: Arc::new(AtomicI64::new(i64::MAX)),
            mode: Mode::Mutate,
        }
    }

    /// The webhook router (`POST /mutate-pods`, `POST /mutate`) with its
    /// error handling and limits. Each call gets its own concurrency limit
    /// and byte budget.
    pub fn webhook_router(&self) -> Router {
        Router::new().fallback_service(super::service::webhook(self))
    }

    /// The admin router: `/healthz`, `/readyz`, `/metrics`.
    pub fn admin_router(&self) -> Router {
        super::admin::admin(
            self.draining.clone(),
            self.cert_not_after.clone(),
            self.objects.clone(),
            self.metrics.clone(),
        )
    }
}
