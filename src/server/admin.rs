//! The plain-HTTP admin router: `/healthz`, `/readyz`, `/metrics`, and
//! the bounded listener that serves it (`listener.rs`).

pub(crate) mod listener;

use super::metrics::unix_now;
use super::metrics::Metrics;
use super::webhook::RouterInputs;
use crate::lookups::SnapshotSource;
use axum::http::header::CONTENT_TYPE;
use axum::http::{HeaderValue, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// The plain-HTTP admin router: probes and metrics only. It is served only
/// once the certificate is loaded and both listeners are bound; `/readyz`
/// then fails from the first shutdown signal on (`draining`), while the
/// served certificate is expired, and until the watch caches have listed.
impl RouterInputs {
    /// The admin router: `/healthz`, `/readyz`, `/metrics`.
    pub fn admin_router(&self) -> Router {
        admin(
            self.draining.clone(),
            self.cert_not_after.clone(),
            self.objects.clone(),
            self.metrics.clone(),
        )
    }
}

fn admin(
    draining: CancellationToken,
    cert_not_after: Arc<AtomicI64>,
    objects: Arc<SnapshotSource>,
    metrics: Arc<Metrics>,
) -> Router {
    let readyz = move || async move {
        let unavailable = |text| (StatusCode::SERVICE_UNAVAILABLE, text);
        if draining.is_cancelled() {
            unavailable("shutting down\n")
        } else if unix_now() > cert_not_after.load(Ordering::Relaxed) {
            unavailable("the serving certificate has expired\n")
        } else if !objects.ready() {
            unavailable("waiting for the cluster watch caches to list\n")
        } else {
            (StatusCode::OK, "ok\n")
        }
    };
    let scrape = move || async move {
        match metrics.encode() {
            Ok(text) => {
                let kind = "application/openmetrics-text; version=1.0.0; charset=utf-8";
                ([(CONTENT_TYPE, HeaderValue::from_static(kind))], text).into_response()
            }
            Err(_) => {
                (StatusCode::INTERNAL_SERVER_ERROR, "cannot encode metrics\n").into_response()
            }
        }
    };
    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(scrape))
        .fallback(|| async { (StatusCode::NOT_FOUND, "not found\n") })
}
