//! The webhook service, read top to bottom in the order a request meets
//! it. One hand-ordered service rather than tower or tower-http layers
//! around an axum router: the layer stack cost about twenty allocations per
//! request (a boxed future and a cloned boxed service per layer, the
//! request's extension map, the header map cloned for the handler) and a
//! second boxing of each body; see docs/performance.md.
//!
//! The stages, each answering with an [`ApiError`] when it refuses:
//!
//! 1. [`WebhookService::reply`]: the request is counted in flight and
//!    timed, and a panic anywhere below is caught (500).
//! 2. [`App::limited`]: shed above the concurrency limit (503), a declared
//!    length over the body limit refused from the head alone (413), and
//!    everything below bounded by the request timeout (504).
//! 3. [`route`]: the path (404) and the method (405).
//! 4. [`review_request`]: the content type (415).
//! 5. [`reviewed`]: the body read at its pace under the byte budget
//!    (`body.rs`: 408, 413, 503), then reviewed inline or, when large, on
//!    the blocking pool one at a time; a body that is no AdmissionReview
//!    is 400.
//! 6. [`review`]: the core's `prepare`, the `--namespaces` policy, the
//!    cluster lookups (a namespace over its share is shed: 503) and the
//!    core's answer or denial.
//! 7. back in [`reviewed`]: what is observed of the review (`observation.rs`).
//! 8. back in [`review_request`]: the reply's bytes charged to the byte
//!    budget until hyper has taken them (503 when they do not fit).
//! 9. [`finish`]: `Connection: close` where the body may be unread, no body
//!    for HEAD, the request's count and duration.

use super::app::{App, RouterInputs};
use super::body::{drained, read_body, Arrival, BoxError};
use super::errors::{json_body, too_large, ApiError, Reply};
use super::reply::ReplyBody;
use super::share::{Budget, Full, Share};
use crate::limits::MAX_BODY_BYTES;
use crate::lookups::{LookupError, OutsideNamespaces, Shed, SnapshotSource};
use crate::server::metrics::Metrics;
use axum::body::Bytes;
use axum::http::header::{ALLOW, CONNECTION, CONTENT_LENGTH, CONTENT_TYPE};
use axum::http::{HeaderMap, HeaderValue, Method, Request, StatusCode, Version};
use futures::FutureExt;
use http_body_util::Limited;
use hyper::body::Body as HttpBody;
use kserve_injector_core::admission::{self, Mode, Reviewed};
use kserve_injector_core::Inputs;
use std::convert::Infallible;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;
use tracing::error;

/// The webhook service: `POST /mutate-pods` and `POST /mutate`, with a
/// concurrency limit and byte budget of its own.
pub(crate) fn webhook(inputs: &RouterInputs) -> WebhookService {
    WebhookService(App::new(inputs))
}

/// The webhook's routes and their limits, in the order of the module
/// comment. Cloned per connection (an `Arc`); called per request without
/// boxing the body or cloning any service.
#[derive(Clone)]
pub(crate) struct WebhookService(Arc<App>);

impl WebhookService {
    /// What its routes share (its summary is logged by the server).
    pub(crate) fn app(&self) -> &Arc<App> {
        &self.0
    }
}

/// Statuses answered before the body is read (too large, shed) or while it
/// is (behind its pace, timeout): hyper then closes an HTTP/1 connection
/// after the reply, and the client must know not to send another request
/// on it.
const UNREAD: [StatusCode; 4] = [
    StatusCode::REQUEST_TIMEOUT,
    StatusCode::PAYLOAD_TOO_LARGE,
    StatusCode::SERVICE_UNAVAILABLE,
    StatusCode::GATEWAY_TIMEOUT,
];

/// Bodies up to this size are reviewed on the async worker: that takes tens
/// of microseconds, less than a hand-off to the blocking pool. Larger ones
/// go to the blocking pool so they do not stall the connections sharing the
/// worker (the admin port has its own thread either way).
const INLINE_REVIEW_BYTES: usize = 64 * 1024;

/// A request's reply being worked out. Boxed: the review's future is
/// kilobytes, and unboxed it would be moved whole each time hyper spawns a
/// stream's task.
pub(crate) type Replying = Pin<Box<dyn Future<Output = Reply> + Send>>;

impl WebhookService {
    /// Stage 1: replies to one request that came over the connection whose
    /// share is `share` (`None`: called without a connection); never fails.
    pub(crate) fn reply<B>(&self, req: Request<B>, share: Option<Arc<Share>>) -> Replying
    where
        B: HttpBody<Data = Bytes> + Send + Unpin + 'static,
        B::Error: Into<BoxError>,
    {
        let app = self.0.clone();
        Box::pin(async move {
            let start = Instant::now();
            let path = Metrics::path_index(req.uri().path());
            let version = req.version();
            let head = req.method() == Method::HEAD;
            let in_flight = InFlight::enter(&app.metrics().in_flight);
            let arrival = Arrival { share, start };
            let limited = app.limited(req, &arrival);
            let replied = AssertUnwindSafe(limited).catch_unwind().await;
            drop(in_flight);
            let reply = replied.unwrap_or_else(|panic| app.panicked(panic));
            finish(app.metrics(), path, version, head, start, reply)
        })
    }

    /// Instead of stage 1: refuses a request unread (503) because its
    /// connection's client has not read the replies it was already sent
    /// (`--max-connection-buffered-bytes`).
    pub(crate) fn refuse_unread<B>(&self, req: Request<B>) -> Replying {
        let app = self.0.clone();
        let (start, path) = (Instant::now(), Metrics::path_index(req.uri().path()));
        let (version, head) = (req.version(), req.method() == Method::HEAD);
        Box::pin(async move {
            app.metrics().answers_shed.inc();
            let message = "too many answer bytes wait for this connection's client to read them; read them, or retry on another connection";
            let reply = ApiError::new(StatusCode::SERVICE_UNAVAILABLE, message).reply();
            finish(app.metrics(), path, version, head, start, reply)
        })
    }
}

/// Counts a request in `requests_in_flight` until dropped, also when the
/// client resets the stream and the request's future is dropped unfinished.
struct InFlight<'a>(&'a prometheus_client::metrics::gauge::Gauge);

impl<'a> InFlight<'a> {
    fn enter(gauge: &'a prometheus_client::metrics::gauge::Gauge) -> Self {
        gauge.inc();
        Self(gauge)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.dec();
    }
}

impl App {
    fn panicked(&self, panic: Box<dyn std::any::Any + Send>) -> Reply {
        self.metrics().panics.inc();
        let message = crate::server::logging::panic_message(panic.as_ref());
        error!(panic = %crate::log_text::bounded(message), "request handler panicked");
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal error").reply()
    }

    /// Stage 2: sheds, limits the body, bounds the time, routes.
    async fn limited<B>(self: &Arc<Self>, req: Request<B>, arrival: &Arrival) -> Reply
    where
        B: HttpBody<Data = Bytes> + Send + Unpin + 'static,
        B::Error: Into<BoxError>,
    {
        let Some(_permit) = self.permit() else {
            let message = "too many requests in flight; retry";
            return ApiError::new(StatusCode::SERVICE_UNAVAILABLE, message).reply();
        };
        // A declared length over the limit is refused from the head alone;
        // a body longer than it declared, or undeclared and too long, when
        // reading reaches the limit.
        let declared = req.headers().get(CONTENT_LENGTH);
        let declared = declared.and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
        if declared.is_some_and(|n| n > MAX_BODY_BYTES as u64) {
            return too_large().reply();
        }
        let limit = declared.map_or(MAX_BODY_BYTES, |n| n as usize);
        let req = req.map(|body| Limited::new(body, limit));
        match tokio::time::timeout(self.limits().request_timeout, route(self, req, arrival)).await {
            Ok(reply) => reply,
            Err(_) => {
                let message =
                    "the request was not received and answered within the request timeout";
                ApiError::new(StatusCode::GATEWAY_TIMEOUT, message).reply()
            }
        }
    }
}

/// Stage 3: the path and the method. A request refused here has its body
/// drained (or its connection closed) so the next request on it is read
/// from where it starts.
async fn route<B>(app: &Arc<App>, req: Request<B>, arrival: &Arrival) -> Reply
where
    B: HttpBody<Data = Bytes> + Unpin + Send + 'static,
    B::Error: Into<BoxError>,
{
    let (parts, body) = req.into_parts();
    let path = parts.uri.path();
    if path != "/mutate-pods" && path != "/mutate" {
        let message = "not found: the webhook path is /mutate-pods";
        let headers = drained(parts.version, body, arrival, app.body_pace()).await;
        return ApiError::new(StatusCode::NOT_FOUND, message).reply_with(headers);
    }
    if parts.method != Method::POST {
        let message = "method not allowed: admission requests are POSTed";
        let mut headers = drained(parts.version, body, arrival, app.body_pace()).await;
        headers.insert(ALLOW, HeaderValue::from_static("POST"));
        return ApiError::new(StatusCode::METHOD_NOT_ALLOWED, message).reply_with(headers);
    }
    review_request(app, parts.version, &parts.headers, body, arrival).await
}

/// Stage 4, and 8 once the review is done: the content type, then the
/// reply's bytes, held until hyper has taken them.
pub(crate) async fn review_request<B>(
    app: &Arc<App>,
    version: Version,
    headers: &HeaderMap,
    body: B,
    arrival: &Arrival,
) -> Reply
where
    B: HttpBody<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    let content_type = headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok());
    let content_type = content_type.unwrap_or_default();
    let media_type = content_type.split(';').next().unwrap_or_default();
    if !media_type.trim().eq_ignore_ascii_case("application/json") {
        let message =
            format!("content type {content_type:?} is not supported: send application/json");
        let refused = ApiError::new(StatusCode::UNSUPPORTED_MEDIA_TYPE, message);
        return refused.reply_with(drained(version, body, arrival, app.body_pace()).await);
    }
    let reviewed = match reviewed(app, body, arrival).await {
        Ok(reviewed) => reviewed,
        Err(e) => return e.reply(),
    };
    // The request's bytes are given back by now; the reply's are taken
    // until hyper has taken the reply.
    let len = reviewed.body.len();
    let mut held = Budget::hold(arrival.share.as_ref());
    if let Err(full) = app.budget().take(&mut held, len) {
        app.metrics().answers_shed.inc();
        let whose = match full {
            Full::Server => "the bytes the server may hold (--max-buffered-bytes)",
            Full::Connection => "this connection's part of the bytes the server may hold",
        };
        let message = format!("the answer ({len} bytes) does not fit in {whose}; retry");
        return ApiError::new(StatusCode::SERVICE_UNAVAILABLE, message).reply();
    }
    let body = ReplyBody::new(Bytes::from(reviewed.body)).holding(held);
    json_body(StatusCode::OK, body)
}

/// Stage 5, and 7 once the review is done: the body read, reviewed inline
/// or on the blocking pool, observed.
async fn reviewed<B>(app: &Arc<App>, body: B, arrival: &Arrival) -> Result<Reviewed, ApiError>
where
    B: HttpBody<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    let (body, _held) = read_body(app.budget(), arrival, app.body_pace(), body).await?;
    let inputs = app.inputs();
    let (mode, max_patch) = (app.mode(), app.max_patch());
    let reviewed = if body.len() <= INLINE_REVIEW_BYTES {
        review(&body, &inputs, app.objects(), mode, max_patch).await
    } else {
        // Their working memory is the largest a review has: one at a time
        // under a memory limit (docs/operations.md, "Memory").
        let Some(_turn) = app.large_review_turn().await else {
            let message = "the server is shutting down";
            return Err(ApiError::new(StatusCode::SERVICE_UNAVAILABLE, message));
        };
        let (objects, runtime) = (app.objects().clone(), tokio::runtime::Handle::current());
        let review = move || runtime.block_on(review(&body, &inputs, &objects, mode, max_patch));
        match tokio::task::spawn_blocking(review).await {
            Ok(reviewed) => reviewed,
            // Re-raised here so the one panic catcher (stage 1) replies.
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(e) => {
                return Err(ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    e.to_string(),
                ))
            }
        }
    };
    let reviewed = reviewed.map_err(|e| {
        app.malformed(&e);
        ApiError::new(StatusCode::BAD_REQUEST, e.to_string())
    })?;
    // The namespace's share of the lookups is taken: the API server retries.
    let reviewed = reviewed
        .map_err(|shed| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, shed.to_string()))?;
    app.observe(&reviewed);
    Ok(reviewed)
}

/// Stage 6: decodes the request, reads the cluster objects its pod needs,
/// answers through the core. A lookup that cannot be answered denies the
/// pod (KServe fails it too); one whose namespace has its share of lookups
/// in flight is shed.
async fn review(
    body: &[u8],
    inputs: &Inputs,
    objects: &SnapshotSource,
    mode: Mode,
    max_patch: usize,
) -> Result<Result<Reviewed, Shed>, admission::ReviewError> {
    // In shadow mode every answer below is an allowance, a denial included.
    let prepared = admission::prepare(body, mode)?.answer_at_most(max_patch);
    // With lookups off the pod's facts are not even gathered.
    let facts = (!objects.is_off()).then(|| prepared.lookup_facts(&inputs.config));
    let Some(facts) = facts.flatten() else {
        return prepared.answer(inputs).map(Ok);
    };
    match objects.outside(&facts.namespace) {
        Some((OutsideNamespaces::Deny, served)) => {
            let message = format!(
                "kserve-injector serves the namespaces {served} only (--namespaces): it may not read the ServiceAccounts and Secrets of namespace {:?}, so this pod cannot be injected here; add the namespace to --namespaces (and its Role), or exclude it from the webhook",
                facts.namespace
            );
            return prepared.refuse(403, &message).map(Ok);
        }
        Some((OutsideNamespaces::Allow, _)) => return prepared.untouched().map(Ok),
        None => {}
    }
    match objects.snapshot(&facts, &inputs.config).await {
        Ok(cluster) => prepared.answer(&inputs.with_cluster(cluster)).map(Ok),
        Err(LookupError::Shed(shed)) => Ok(Err(shed)),
        Err(e) => prepared.deny(&e.to_string()).map(Ok),
    }
}

/// Stage 9, what every reply gets last: `Connection: close` when its
/// request's body may be unread, no body for HEAD, and its count and
/// duration.
fn finish(
    metrics: &Metrics,
    path: usize,
    version: Version,
    head: bool,
    start: Instant,
    mut reply: Reply,
) -> Reply {
    let status = reply.status();
    if version < Version::HTTP_2 && UNREAD.contains(&status) {
        let close = HeaderValue::from_static("close");
        reply.headers_mut().insert(CONNECTION, close);
    }
    if head {
        // The status and headers alone: over HTTP/2 a body would be DATA
        // frames on a HEAD stream, which clients reject.
        *reply.body_mut() = ReplyBody::new(Bytes::new());
    }
    metrics.record_request(path, status.as_u16(), start.elapsed().as_secs_f64());
    reply
}

/// For embedders and tests, through `Router::fallback_service`.
impl<B> tower::Service<Request<B>> for WebhookService
where
    B: HttpBody<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<BoxError>,
{
    type Response = Reply;
    type Error = Infallible;
    type Future = futures::future::Map<Replying, fn(Reply) -> Result<Reply, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        self.reply(req, None).map(Ok)
    }
}

#[cfg(test)]
mod tests;
