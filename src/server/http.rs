//! Request handling for both listeners. The webhook side never panics the
//! process and always answers: a malformed request gets a 4xx with a JSON
//! `{"error": ...}` body, a bug gets a 500, a stalled request a 504.

use super::config_reload::EnvStore;
use super::metrics::{InjectionLabels, Metrics, PathLabels, RequestLabels};
use crate::admission::{self, Reviewed};
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::body::{Body, Bytes, Incoming};
use hyper::header::{HeaderValue, ALLOW, CONTENT_LENGTH, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tracing::{debug, error, info, info_span, warn};

/// controller-runtime's limit: etcd stores objects up to 1.5 MiB, JSON can
/// roughly double that, and an UPDATE carries object and oldObject.
pub const MAX_BODY_BYTES: usize = 7 * 1024 * 1024;

pub(crate) type HttpResponse = Response<Full<Bytes>>;

const JSON: HeaderValue = HeaderValue::from_static("application/json");

/// Everything a webhook request needs, shared by all connections.
pub(crate) struct App {
    pub env: Arc<EnvStore>,
    pub metrics: Arc<Metrics>,
    pub request_timeout: Duration,
}

fn json_error(status: StatusCode, message: &str) -> HttpResponse {
    let body = serde_json::json!({ "error": message }).to_string();
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(CONTENT_TYPE, JSON);
    response
}

/// Decrements the in-flight gauge however the request ends, including when
/// the client resets the stream and the future is dropped.
struct InFlight<'a>(&'a Metrics);

impl<'a> InFlight<'a> {
    fn enter(metrics: &'a Metrics) -> Self {
        metrics.in_flight.inc();
        Self(metrics)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.dec();
    }
}

/// Turns a panic while polling the inner future into `Err`, so one bad
/// request costs a 500 rather than its connection (HTTP/1) or stream.
pub(crate) struct CatchPanic<F>(Pin<Box<F>>);

impl<F: Future> CatchPanic<F> {
    pub(crate) fn new(inner: F) -> Self {
        Self(Box::pin(inner))
    }
}

impl<F: Future> Future for CatchPanic<F> {
    type Output = Result<F::Output, String>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let inner = self.0.as_mut();
        match std::panic::catch_unwind(AssertUnwindSafe(move || inner.poll(cx))) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(out)) => Poll::Ready(Ok(out)),
            Err(payload) => Poll::Ready(Err(panic_message(payload.as_ref()))),
        }
    }
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panic with a non-string payload".to_string())
}

impl App {
    /// The webhook listener's entry point: routing plus the per-request
    /// metrics, whatever the route did.
    pub(crate) async fn handle(self: Arc<Self>, req: Request<Incoming>) -> HttpResponse {
        let start = Instant::now();
        let path = Metrics::path_label(req.uri().path());
        let _in_flight = InFlight::enter(&self.metrics);
        let response = match CatchPanic::new(self.route(req)).await {
            Ok(response) => response,
            Err(message) => {
                self.metrics.panics.inc();
                error!(path, panic = %message, "request handler panicked");
                json_error(StatusCode::INTERNAL_SERVER_ERROR, "internal error")
            }
        };
        let code = response.status().as_u16();
        self.metrics
            .requests
            .get_or_create(&RequestLabels { path, code })
            .inc();
        self.metrics
            .duration
            .get_or_create(&PathLabels { path })
            .observe(start.elapsed().as_secs_f64());
        response
    }

    async fn route(&self, req: Request<Incoming>) -> HttpResponse {
        match req.uri().path() {
            "/mutate-pods" | "/mutate" => {}
            other => {
                debug!(path = other, "no such path");
                return json_error(
                    StatusCode::NOT_FOUND,
                    "not found: the webhook path is /mutate-pods",
                );
            }
        }
        if req.method() != Method::POST {
            let mut response = json_error(
                StatusCode::METHOD_NOT_ALLOWED,
                "method not allowed: admission requests are POSTed",
            );
            response
                .headers_mut()
                .insert(ALLOW, HeaderValue::from_static("POST"));
            return response;
        }
        match tokio::time::timeout(self.request_timeout, self.admit(req)).await {
            Ok(response) => response,
            Err(_) => {
                warn!(
                    timeout_ms = self.request_timeout.as_millis() as u64,
                    "admission request timed out"
                );
                json_error(
                    StatusCode::GATEWAY_TIMEOUT,
                    "the request was not received and answered within the request timeout",
                )
            }
        }
    }

    async fn admit(&self, req: Request<Incoming>) -> HttpResponse {
        let start = Instant::now();
        if let Some(refusal) = check_headers(&req) {
            return refusal;
        }
        let body = match read_body(req.into_body()).await {
            Ok(body) => body,
            Err(refusal) => return refusal,
        };
        let reviewed = match run_review(body.clone(), self.env.load()).await {
            Ok(Ok(reviewed)) => reviewed,
            Ok(Err(e)) => {
                warn!(error = %e, "malformed admission request");
                return json_error(StatusCode::BAD_REQUEST, &e.to_string());
            }
            Err(panic) => {
                self.metrics.panics.inc();
                error!(%panic, "admission review panicked");
                return json_error(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "internal error while reviewing the request",
                );
            }
        };
        // Created once the fields are known: recording them one by one later
        // would make the JSON formatter rewrite the span's fields each time.
        let span = info_span!(
            "admission",
            request_uid = reviewed.uid.as_str(),
            namespace = reviewed.namespace.as_str(),
            object_name = reviewed.name.as_str(),
            operation = reviewed.operation.as_str(),
            kind = reviewed.kind.as_str(),
            dry_run = reviewed.dry_run,
        );
        span.in_scope(|| {
            debug!(request = %String::from_utf8_lossy(&body), "admission request body");
            self.answer(reviewed, start)
        })
    }

    fn answer(&self, reviewed: Reviewed, start: Instant) -> HttpResponse {
        for &(injector, outcome) in &reviewed.outcomes {
            self.metrics
                .injections
                .get_or_create(&InjectionLabels {
                    injector,
                    outcome: outcome.as_str(),
                })
                .inc();
        }
        let duration_ms = start.elapsed().as_secs_f64() * 1000.0;
        match &reviewed.denial {
            None => info!(
                allowed = reviewed.allowed,
                patch_ops = reviewed.patch_ops,
                duration_ms,
                "admission reviewed"
            ),
            Some(reason) => {
                self.metrics.denials.inc();
                info!(
                    allowed = reviewed.allowed,
                    patch_ops = reviewed.patch_ops,
                    duration_ms,
                    reason = %reason,
                    "admission denied"
                );
            }
        }
        let mut response = Response::new(Full::new(Bytes::from(reviewed.body)));
        response.headers_mut().insert(CONTENT_TYPE, JSON);
        response
    }
}

/// Bodies up to this size are reviewed on the async worker: that takes tens
/// of microseconds, less than a hand-off to the blocking pool. Larger ones
/// (rare, up to 7 MiB) go to the blocking pool so they cannot stall the
/// other connections sharing the worker.
const INLINE_REVIEW_BYTES: usize = 256 * 1024;

/// Runs the pure review, turning a panic inside it into `Err(message)`.
async fn run_review(
    body: Bytes,
    env: Arc<crate::Env>,
) -> Result<Result<Reviewed, admission::ReviewError>, String> {
    if body.len() <= INLINE_REVIEW_BYTES {
        return std::panic::catch_unwind(AssertUnwindSafe(|| admission::review(&body, &env)))
            .map_err(|payload| panic_message(payload.as_ref()));
    }
    match tokio::task::spawn_blocking(move || admission::review(&body, &env)).await {
        Ok(result) => Ok(result),
        Err(e) if e.is_panic() => Err(panic_message(e.into_panic().as_ref())),
        Err(e) => Err(e.to_string()),
    }
}

/// Refuses before reading the body what no body could fix.
fn check_headers(req: &Request<Incoming>) -> Option<HttpResponse> {
    let content_type = req
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let media_type = content_type.split(';').next().unwrap_or("").trim();
    if !media_type.eq_ignore_ascii_case("application/json") {
        warn!(content_type, "unsupported content type");
        return Some(json_error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            &format!("content type {content_type:?} is not supported: send application/json"),
        ));
    }
    let declared = req
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
        .or_else(|| req.body().size_hint().exact());
    if declared.is_some_and(|len| len > MAX_BODY_BYTES as u64) {
        return Some(too_large());
    }
    None
}

fn too_large() -> HttpResponse {
    warn!(limit = MAX_BODY_BYTES, "request body too large");
    json_error(
        StatusCode::PAYLOAD_TOO_LARGE,
        &format!("request body is larger than {MAX_BODY_BYTES} bytes"),
    )
}

async fn read_body(body: Incoming) -> Result<Bytes, HttpResponse> {
    match Limited::new(body, MAX_BODY_BYTES).collect().await {
        Ok(collected) => {
            let bytes = collected.to_bytes();
            if bytes.is_empty() {
                warn!("empty request body");
                return Err(json_error(
                    StatusCode::BAD_REQUEST,
                    "request body is empty: expected an AdmissionReview",
                ));
            }
            Ok(bytes)
        }
        Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => Err(too_large()),
        Err(e) => {
            debug!(error = %e, "cannot read request body");
            Err(json_error(
                StatusCode::BAD_REQUEST,
                &format!("cannot read request body: {e}"),
            ))
        }
    }
}

/// Readiness: not ready until the certificate is loaded and both listeners
/// are bound, and not ready again from the first shutdown signal on.
#[derive(Debug, Default)]
pub(crate) struct Readiness(AtomicU8);

const STARTING: u8 = 0;
const READY: u8 = 1;
const DRAINING: u8 = 2;

impl Readiness {
    pub(crate) fn set_ready(&self) {
        let _ = self
            .0
            .compare_exchange(STARTING, READY, Ordering::SeqCst, Ordering::SeqCst);
    }

    pub(crate) fn set_draining(&self) {
        self.0.store(DRAINING, Ordering::SeqCst);
    }

    fn state(&self) -> u8 {
        self.0.load(Ordering::SeqCst)
    }
}

/// The plain-HTTP admin listener: probes and metrics only.
pub(crate) struct Admin {
    pub metrics: Arc<Metrics>,
    pub readiness: Arc<Readiness>,
}

fn text(status: StatusCode, body: &'static str) -> HttpResponse {
    let mut response = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
    *response.status_mut() = status;
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

impl Admin {
    pub(crate) fn handle(&self, req: &Request<Incoming>) -> HttpResponse {
        let path = req.uri().path();
        if !matches!(path, "/healthz" | "/readyz" | "/metrics") {
            return text(StatusCode::NOT_FOUND, "not found\n");
        }
        if req.method() != Method::GET && req.method() != Method::HEAD {
            let mut response = text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n");
            response
                .headers_mut()
                .insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
            return response;
        }
        match path {
            "/healthz" => text(StatusCode::OK, "ok\n"),
            "/readyz" => match self.readiness.state() {
                READY => text(StatusCode::OK, "ok\n"),
                DRAINING => text(StatusCode::SERVICE_UNAVAILABLE, "shutting down\n"),
                _ => text(StatusCode::SERVICE_UNAVAILABLE, "starting\n"),
            },
            _ => match self.metrics.encode() {
                Ok(body) => {
                    let mut response = Response::new(Full::new(Bytes::from(body)));
                    response.headers_mut().insert(
                        CONTENT_TYPE,
                        HeaderValue::from_static(
                            "application/openmetrics-text; version=1.0.0; charset=utf-8",
                        ),
                    );
                    response
                }
                Err(_) => text(StatusCode::INTERNAL_SERVER_ERROR, "cannot encode metrics\n"),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_panicking_future_becomes_an_error_not_a_dead_task() {
        let caught = CatchPanic::new(async {
            tokio::task::yield_now().await;
            if std::hint::black_box(true) {
                panic!("boom");
            }
            1
        })
        .await;
        assert_eq!(caught, Err("boom".to_string()));
        assert_eq!(CatchPanic::new(async { 7 }).await, Ok(7));
    }
}
