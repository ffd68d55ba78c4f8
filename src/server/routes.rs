//! Both routers, and [`RouterInputs`], the plain inputs they are built
//! from (no socket, no TLS), so they can be called in-process. The webhook side never panics the process and always
//! answers: malformed requests get a 4xx, overload a 503 with Retry-After, a
//! bug a 500, a stalled request a 504, every error as `{"error": ...}`
//! through [`ApiError`].
//!
//! The webhook is one hand-ordered service ([`WebhookService`]) rather than
//! tower/tower-http layers around an axum router: it does the same checks
//! in the same order (metrics, panic catching, load shedding above the
//! concurrency limit, the body limit, the request timeout, then the path and
//! method), but the layer stack cost about twenty allocations per request
//! (a boxed future and a cloned boxed service per layer, the request's
//! extension map, the header map cloned for the handler) and a second
//! boxing of each body; see docs/performance.md. The byte budget (a limit on
//! the bytes buffered across all requests) is no layer's either.

use super::metrics::{unix_now, Metrics};
use crate::limits::MAX_BODY_BYTES;
use crate::lookups::{OutsideNamespaces, SnapshotSource};
use crate::server::settings::LimitSettings;
use arc_swap::ArcSwap;
use axum::body::Bytes;
use axum::http::header::{ALLOW, CONNECTION, CONTENT_LENGTH, CONTENT_TYPE, RETRY_AFTER};
use axum::http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode, Version};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use futures::FutureExt;
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::body::Body as HttpBody;
use kserve_injector_core::admission::{self, Mode, Reviewed};
use kserve_injector_core::Inputs;
use std::convert::Infallible;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, info};

/// Bodies up to this size are reviewed on the async worker: that takes tens
/// of microseconds, less than a hand-off to the blocking pool. Larger ones
/// go to the blocking pool so they do not stall the connections sharing the
/// worker (the admin port has its own thread either way).
const INLINE_REVIEW_BYTES: usize = 64 * 1024;

const JSON: HeaderValue = HeaderValue::from_static("application/json");

/// What the webhook answers: a whole body, which hyper sends as it is.
pub(crate) type Answer = Response<Full<Bytes>>;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Every error the webhook answers with: a status and the `error` text.
#[derive(Debug)]
pub(crate) struct ApiError(StatusCode, String);

impl ApiError {
    fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self(status, message.into())
    }

    fn answer(self) -> Answer {
        let body = serde_json::json!({ "error": self.1 }).to_string();
        let mut response = json_answer(self.0, body);
        if self.0 == StatusCode::SERVICE_UNAVAILABLE {
            let retry = HeaderValue::from_static("1");
            response.headers_mut().insert(RETRY_AFTER, retry);
        }
        response
    }

    /// The answer, with `headers` added (`Connection: close`, `Allow`).
    fn answer_with(self, headers: HeaderMap) -> Answer {
        let mut response = self.answer();
        response.headers_mut().extend(headers);
        response
    }
}

fn json_answer(status: StatusCode, body: impl Into<Bytes>) -> Answer {
    let mut response = Response::new(Full::new(body.into()));
    *response.status_mut() = status;
    response.headers_mut().insert(CONTENT_TYPE, JSON);
    response
}

/// The request limits the webhook router enforces itself (the connection
/// limits live in the listener). The body size limit is [`MAX_BODY_BYTES`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Requests served at once; above it they are shed with 503
    /// (`--max-concurrent-requests`).
    pub max_concurrent_requests: usize,
    /// Request body bytes buffered across all requests; above it requests
    /// are shed with 503 (`--max-buffered-bytes`).
    pub max_buffered_bytes: usize,
    /// From the request head to the response; past it, 504
    /// (`--request-timeout`).
    pub request_timeout: Duration,
}

impl From<&LimitSettings> for Limits {
    fn from(args: &LimitSettings) -> Self {
        Self {
            max_concurrent_requests: args.max_concurrent_requests,
            max_buffered_bytes: args.max_buffered_bytes,
            request_timeout: args.request_timeout,
        }
    }
}

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
    /// and body byte budget.
    pub fn webhook_router(&self) -> Router {
        Router::new().fallback_service(webhook(App::new(self), &self.limits))
    }

    /// The admin router: `/healthz`, `/readyz`, `/metrics`.
    pub fn admin_router(&self) -> Router {
        admin(self)
    }
}

/// What the webhook routes share.
pub(crate) struct App {
    pub env: Arc<ArcSwap<Inputs>>,
    pub objects: Arc<SnapshotSource>,
    pub metrics: Arc<Metrics>,
    /// One permit per request body byte held in memory.
    pub body_budget: Arc<Semaphore>,
    pub summary: Summary,
    pub mode: Mode,
}

impl App {
    pub(crate) fn new(inputs: &RouterInputs) -> Arc<Self> {
        Arc::new(Self {
            env: inputs.env.clone(),
            objects: inputs.objects.clone(),
            metrics: inputs.metrics.clone(),
            body_budget: Arc::new(Semaphore::new(inputs.limits.max_buffered_bytes)),
            summary: Summary::default(),
            mode: inputs.mode,
        })
    }
}

/// The webhook service: `POST /mutate-pods` and `POST /mutate`.
pub(crate) fn webhook(app: Arc<App>, limits: &Limits) -> WebhookService {
    WebhookService(Arc::new(Routes {
        app,
        permits: Semaphore::new(limits.max_concurrent_requests),
        timeout: limits.request_timeout,
    }))
}

/// The webhook's routes and their limits, in the order they apply: metrics
/// and the request counter, panic catching, load shedding above the
/// concurrency limit, the body limit, the request timeout, the path and
/// method. Cloned per connection (an `Arc`); called per request without
/// boxing the body or cloning any service.
#[derive(Clone)]
pub(crate) struct WebhookService(Arc<Routes>);

struct Routes {
    app: Arc<App>,
    /// One per request being answered; none left and the request is shed.
    permits: Semaphore,
    timeout: Duration,
}

/// Statuses answered before the body is read (too large, shed) or while it
/// is (timeout): hyper then closes an HTTP/1 connection after the answer,
/// and the client must know not to send another request on it.
const UNREAD: [StatusCode; 3] = [
    StatusCode::PAYLOAD_TOO_LARGE,
    StatusCode::SERVICE_UNAVAILABLE,
    StatusCode::GATEWAY_TIMEOUT,
];

/// A request's answer being worked out. Boxed: the review's future is
/// kilobytes, and unboxed it would be moved whole each time hyper spawns a
/// stream's task.
pub(crate) type Answering = Pin<Box<dyn Future<Output = Answer> + Send>>;

impl WebhookService {
    /// Answers one request; never fails.
    pub(crate) fn answer<B>(&self, req: Request<B>) -> Answering
    where
        B: HttpBody<Data = Bytes> + Send + Unpin + 'static,
        B::Error: Into<BoxError>,
    {
        let webhook = self.0.clone();
        Box::pin(async move {
            let start = Instant::now();
            let path = Metrics::path_index(req.uri().path());
            let version = req.version();
            let metrics = &webhook.app.metrics;
            let in_flight = InFlight::enter(&metrics.in_flight);
            let answered = AssertUnwindSafe(webhook.limited(req)).catch_unwind().await;
            drop(in_flight);
            let mut response = answered.unwrap_or_else(|panic| webhook.panicked(panic));
            let status = response.status();
            if version < Version::HTTP_2 && UNREAD.contains(&status) {
                let close = HeaderValue::from_static("close");
                response.headers_mut().insert(CONNECTION, close);
            }
            let seconds = start.elapsed().as_secs_f64();
            metrics.record_request(path, status.as_u16(), seconds);
            response
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

impl Routes {
    fn panicked(&self, panic: Box<dyn std::any::Any + Send>) -> Answer {
        self.app.metrics.panics.inc();
        let message = super::logging::panic_message(panic.as_ref());
        error!(panic = message, "request handler panicked");
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal error").answer()
    }

    /// Sheds, limits the body, bounds the time, routes.
    async fn limited<B>(&self, req: Request<B>) -> Answer
    where
        B: HttpBody<Data = Bytes> + Send + Unpin + 'static,
        B::Error: Into<BoxError>,
    {
        let Ok(_permit) = self.permits.try_acquire() else {
            let message = "too many requests in flight; retry";
            return ApiError::new(StatusCode::SERVICE_UNAVAILABLE, message).answer();
        };
        // A declared length over the limit is refused from the head alone;
        // a body longer than it declared, or undeclared and too long, when
        // reading reaches the limit.
        let declared = req.headers().get(CONTENT_LENGTH);
        let declared = declared.and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
        if declared.is_some_and(|n| n > MAX_BODY_BYTES as u64) {
            return too_large().answer();
        }
        let limit = declared.map_or(MAX_BODY_BYTES, |n| n as usize);
        let req = req.map(|body| Limited::new(body, limit));
        match tokio::time::timeout(self.timeout, route(&self.app, req)).await {
            Ok(answer) => answer,
            Err(_) => {
                let message =
                    "the request was not received and answered within the request timeout";
                ApiError::new(StatusCode::GATEWAY_TIMEOUT, message).answer()
            }
        }
    }
}

/// For embedders and tests, through `Router::fallback_service`.
impl<B> tower::Service<Request<B>> for WebhookService
where
    B: HttpBody<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<BoxError>,
{
    type Response = Answer;
    type Error = Infallible;
    type Future = futures::future::Map<Answering, fn(Answer) -> Result<Answer, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        self.answer(req).map(Ok)
    }
}

async fn route<B>(app: &Arc<App>, req: Request<B>) -> Answer
where
    B: HttpBody<Data = Bytes> + Unpin + Send + 'static,
    B::Error: Into<BoxError>,
{
    let (parts, body) = req.into_parts();
    let path = parts.uri.path();
    if path != "/mutate-pods" && path != "/mutate" {
        let message = "not found: the webhook path is /mutate-pods";
        let headers = drained(parts.version, body).await;
        return ApiError::new(StatusCode::NOT_FOUND, message).answer_with(headers);
    }
    if parts.method != Method::POST {
        let message = "method not allowed: admission requests are POSTed";
        let mut headers = drained(parts.version, body).await;
        headers.insert(ALLOW, HeaderValue::from_static("POST"));
        return ApiError::new(StatusCode::METHOD_NOT_ALLOWED, message).answer_with(headers);
    }
    mutate(app, parts.version, &parts.headers, body).await
}

/// Reads and drops the body of a request answered without it, so that its
/// HTTP/1.1 connection can carry the next request: hyper closes a
/// connection whose request body was left unread unless the rest is
/// already buffered (`poll_drain_or_close_read`), and a client reusing it
/// then meets EOF. Bounded by the body limit and the request timeout. When
/// the body cannot be read to its end, the answer says `Connection: close`
/// (HTTP/1; HTTP/2 resets just the stream).
async fn drained<B: HttpBody + Unpin>(version: Version, mut body: B) -> HeaderMap {
    let mut headers = HeaderMap::new();
    while let Some(frame) = body.frame().await {
        if frame.is_err() {
            if version < Version::HTTP_2 {
                headers.insert(CONNECTION, HeaderValue::from_static("close"));
            }
            break;
        }
    }
    headers
}

fn too_large() -> ApiError {
    let message = format!("request body is larger than {MAX_BODY_BYTES} bytes");
    ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, message)
}

async fn mutate<B>(app: &Arc<App>, version: Version, headers: &HeaderMap, body: B) -> Answer
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
        return refused.answer_with(drained(version, body).await);
    }
    match reviewed(app, body).await {
        Ok(reviewed) => json_answer(StatusCode::OK, reviewed.body),
        Err(e) => e.answer(),
    }
}

async fn reviewed<B>(app: &Arc<App>, body: B) -> Result<Reviewed, ApiError>
where
    B: HttpBody<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    let (body, _held) = read_body(&app.body_budget, body).await?;
    let env = app.env.load_full();
    let mode = app.mode;
    let reviewed = if body.len() <= INLINE_REVIEW_BYTES {
        review(&body, &env, &app.objects, mode).await
    } else {
        let (objects, runtime) = (app.objects.clone(), tokio::runtime::Handle::current());
        let review = move || runtime.block_on(review(&body, &env, &objects, mode));
        match tokio::task::spawn_blocking(review).await {
            Ok(reviewed) => reviewed,
            // Re-raised here so the one panic catcher (WebhookService) answers.
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
        app.summary.malformed.fetch_add(1, Ordering::Relaxed);
        debug!(error = %e, "malformed admission request");
        ApiError::new(StatusCode::BAD_REQUEST, e.to_string())
    })?;
    app.observe(&reviewed);
    Ok(reviewed)
}

/// Decodes the request, reads the cluster objects its pod needs, answers.
/// A lookup that cannot be answered denies the pod (KServe fails it too).
async fn review(
    body: &[u8],
    env: &Inputs,
    objects: &SnapshotSource,
    mode: Mode,
) -> Result<Reviewed, admission::ReviewError> {
    // In shadow mode every answer below is an allowance, a denial included.
    let prepared = admission::prepare_in(body, mode)?;
    // With lookups off the pod's facts are not even gathered.
    let facts = (!objects.is_off()).then(|| prepared.lookup_facts(&env.config));
    let Some(facts) = facts.flatten() else {
        return prepared.answer(env);
    };
    match objects.outside(&facts.namespace) {
        Some((OutsideNamespaces::Deny, served)) => {
            let message = format!(
                "kserve-injector serves the namespaces {served} only (--namespaces): it may not read the ServiceAccounts and Secrets of namespace {:?}, so this pod cannot be injected here; add the namespace to --namespaces (and its Role), or exclude it from the webhook",
                facts.namespace
            );
            return prepared.refuse(403, &message);
        }
        Some((OutsideNamespaces::Allow, _)) => return prepared.untouched(),
        None => {}
    }
    match objects.snapshot(&facts, &env.config).await {
        Ok(cluster) => prepared.answer(&env.with_cluster(cluster)),
        Err(e) => prepared.deny(&e.to_string()),
    }
}

/// Collects the body, holding one budget permit per byte until the review
/// is answered; over the budget the request is shed (503) rather than queued,
/// since waiting while holding part of the budget could deadlock. A body
/// that arrives in one frame is kept as it came, not copied.
async fn read_body<B>(
    budget: &Arc<Semaphore>,
    mut body: B,
) -> Result<(Bytes, OwnedSemaphorePermit), ApiError>
where
    B: HttpBody<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    let reserve = |n: u32| {
        let message = "too many request bytes buffered by the server; retry";
        let shed = |_| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, message);
        budget.clone().try_acquire_many_owned(n).map_err(shed)
    };
    // A declared length is reserved whole before anything is read, so a
    // request that cannot fit is refused without buffering any of it.
    let declared = body.size_hint().exact().map(u32::try_from);
    let declared = declared.transpose().map_err(|_| too_large())?;
    let mut held = reserve(declared.unwrap_or(0))?;
    let mut first: Option<Bytes> = None;
    let mut buffer = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| match e.into() {
            inner if inner.is::<LengthLimitError>() => too_large(),
            inner => {
                let message = format!("cannot read request body: {inner}");
                ApiError::new(StatusCode::BAD_REQUEST, message)
            }
        })?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        if declared.is_none() {
            let len = u32::try_from(data.len()).map_err(|_| too_large())?;
            held.merge(reserve(len)?);
        }
        match first.take() {
            None if buffer.is_empty() => first = Some(data),
            earlier => {
                if let Some(earlier) = earlier {
                    let capacity = declared.map_or(0, |n| n as usize).max(2 * earlier.len());
                    buffer.reserve(capacity);
                    buffer.extend_from_slice(&earlier);
                }
                buffer.extend_from_slice(&data);
            }
        }
    }
    let body = first.unwrap_or_else(|| Bytes::from(buffer));
    if body.is_empty() {
        let message = "request body is empty: expected an AdmissionReview";
        return Err(ApiError::new(StatusCode::BAD_REQUEST, message));
    }
    Ok((body, held))
}

impl App {
    /// Metrics, the summary, and the per-request line at debug level.
    fn observe(&self, r: &Reviewed) {
        for (injector, outcome) in &r.outcomes {
            self.metrics.record_injection(injector, outcome.as_str());
        }
        let s = &self.summary;
        s.reviewed.fetch_add(1, Ordering::Relaxed);
        if r.patch_ops > 0 {
            s.patched.fetch_add(1, Ordering::Relaxed);
        }
        if let Some(reason) = &r.denial {
            self.metrics.denials.inc();
            s.denied.fetch_add(1, Ordering::Relaxed);
            let last = format!("{}/{} ({}): {reason}", r.namespace, r.name, r.uid);
            *s.last_denial.lock().unwrap_or_else(PoisonError::into_inner) = Some(last);
        }
        if !r.withheld.is_empty() {
            self.shadow_difference(r);
        }
        if let Some(reason) = &r.withheld_denial {
            self.shadow_denial(r, reason);
        }
        for lack in &r.unsupported {
            debug!(
                request_uid = r.uid.as_str(),
                namespace = r.namespace.as_str(),
                object_name = r.name.as_str(),
                kserve_version = %lack.release,
                "{lack}"
            );
        }
        debug!(
            request_uid = r.uid.as_str(),
            namespace = r.namespace.as_str(),
            object_name = r.name.as_str(),
            operation = r.operation.as_str(),
            kind = r.kind.as_str(),
            dry_run = r.dry_run,
            allowed = r.allowed,
            patch_ops = r.patch_ops,
            reason = r.denial.as_deref(),
            modelcar_shape = r.modelcar_shape.map(tracing::field::display),
            "admission reviewed"
        );
    }
}

impl App {
    /// Shadow mode found a pod this webhook would change: one line with the
    /// operations' paths and injectors (never their values, which may hold
    /// a Secret's), and the counter once per injector involved.
    fn shadow_difference(&self, r: &Reviewed) {
        let mut injectors: Vec<&'static str> = r.withheld.iter().map(|w| w.injector).collect();
        injectors.sort_unstable();
        injectors.dedup();
        for injector in &injectors {
            self.metrics.record_shadow_difference(injector);
        }
        let changes: Vec<String> = (r.withheld.iter())
            .map(|w| format!("{} {} ({})", w.op, w.path, w.injector))
            .collect();
        info!(
            request_uid = r.uid.as_str(),
            namespace = r.namespace.as_str(),
            pod = r.name.as_str(),
            generate_name = r.generate_name.as_deref(),
            injectors = injectors.join(",").as_str(),
            changes = changes.join("; ").as_str(),
            "shadow mode: this webhook would change the pod"
        );
    }
}

impl App {
    /// Shadow mode allowed a pod this webhook would have denied: one line
    /// with the reason, counted as `injector="deny"`.
    fn shadow_denial(&self, r: &Reviewed, reason: &str) {
        self.metrics
            .record_shadow_difference(super::metrics::SHADOW_DENY);
        info!(
            request_uid = r.uid.as_str(),
            namespace = r.namespace.as_str(),
            pod = r.name.as_str(),
            generate_name = r.generate_name.as_deref(),
            reason,
            "shadow mode: this webhook would deny the pod"
        );
    }
}

/// The info-level admission log: one aggregated line per interval instead
/// of a formatted JSON line and a write per request. On two cores a line
/// per request cost more CPU than the review itself, and a non-blocking
/// writer only moves that cost to another thread on the same cores. The
/// per-request line is at debug (`--log kserve_injector=debug`).
#[derive(Debug, Default)]
pub(crate) struct Summary {
    reviewed: AtomicU64,
    patched: AtomicU64,
    denied: AtomicU64,
    malformed: AtomicU64,
    last_denial: Mutex<Option<String>>,
}

impl Summary {
    pub(crate) async fn log_every(&self, interval: Duration, stop: CancellationToken) {
        let mut tick = tokio::time::interval(interval);
        tick.tick().await;
        loop {
            tokio::select! {
                _ = stop.cancelled() => { self.log(interval); return; }
                _ = tick.tick() => self.log(interval),
            }
        }
    }

    fn log(&self, interval: Duration) {
        let reviewed = self.reviewed.swap(0, Ordering::Relaxed);
        let malformed = self.malformed.swap(0, Ordering::Relaxed);
        if reviewed + malformed == 0 {
            return;
        }
        let last_denial = self
            .last_denial
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        info!(
            interval_s = interval.as_secs_f64(),
            reviewed,
            patched = self.patched.swap(0, Ordering::Relaxed),
            denied = self.denied.swap(0, Ordering::Relaxed),
            malformed,
            last_denial,
            "admission summary"
        );
    }
}

/// The plain-HTTP admin router: probes and metrics only. It is served only
/// once the certificate is loaded and both listeners are bound; `/readyz`
/// then fails from the first shutdown signal on (`draining`), while the
/// served certificate is expired, and until the watch caches have listed.
fn admin(inputs: &RouterInputs) -> Router {
    let (draining, cert_not_after) = (inputs.draining.clone(), inputs.cert_not_after.clone());
    let (objects, metrics) = (inputs.objects.clone(), inputs.metrics.clone());
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

#[cfg(test)]
mod tests;
