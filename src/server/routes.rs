//! Both routers, built from a [`RouterInputs`] (no socket, no TLS), so
//! they can be called in-process. The webhook side never panics the
//! process and always answers: malformed requests get a 4xx, overload a
//! 503 with Retry-After, a bug a 500, a stalled request a 504, every error
//! as `{"error": ...}`. The parts, each in its own file: the service and
//! its limits (`service.rs`, `limits.rs`), reading the body (`body.rs`),
//! one review (`review.rs`), what is observed of it (`observe.rs`,
//! `summary.rs`), the routers' inputs and one webhook router's state
//! (`app.rs`), the error answers (`api_error.rs`) and the admin router
//! (`admin.rs`).

use super::app::RouterInputs;
use axum::Router;

impl RouterInputs {
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
