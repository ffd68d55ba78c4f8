//! Both routers, and [`RouterInputs`], the plain inputs they are built
//! from (no socket, no TLS), so they can be called in-process. The webhook side never panics the process and always
//! answers: malformed requests get a 4xx, overload a 503 with Retry-After, a
//! bug a 500, a stalled request a 504, every error as `{"error": ...}`
//! through [`ApiError`]. The limits are tower/tower-http layers; this file
//! holds only the admission handler and the byte budget, which no layer
//! provides (a limit on the bytes buffered across all requests).

use super::metrics::{unix_now, Metrics};
use crate::limits::MAX_BODY_BYTES;
use crate::lookups::{OutsideNamespaces, SnapshotSource};
use crate::server::settings::LimitSettings;
use arc_swap::ArcSwap;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::header::{CONNECTION, CONTENT_TYPE, RETRY_AFTER};
use axum::http::{HeaderMap, HeaderValue, StatusCode, Version};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use http_body_util::{BodyExt, LengthLimitError};
use hyper::body::Body as _;
use kserve_injector_core::admission::{self, Mode, Reviewed};
use kserve_injector_core::Inputs;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tower::limit::GlobalConcurrencyLimitLayer;
use tower::ServiceBuilder;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::timeout::TimeoutLayer;
use tracing::{debug, error, info};

/// Bodies up to this size are reviewed on the async worker: that takes tens
/// of microseconds, less than a hand-off to the blocking pool. Larger ones
/// go to the blocking pool so they do not stall the connections sharing the
/// worker (the admin port has its own thread either way).
const INLINE_REVIEW_BYTES: usize = 64 * 1024;

const JSON: HeaderValue = HeaderValue::from_static("application/json");

/// Every error the webhook answers with: a status and the `error` text.
#[derive(Debug)]
pub(crate) struct ApiError(StatusCode, String);

impl ApiError {
    fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self(status, message.into())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({ "error": self.1 }).to_string();
        let mut response = (self.0, [(CONTENT_TYPE, JSON)], body).into_response();
        if self.0 == StatusCode::SERVICE_UNAVAILABLE {
            let retry = HeaderValue::from_static("1");
            response.headers_mut().insert(RETRY_AFTER, retry);
        }
        response
    }
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
        webhook(App::new(self), &self.limits)
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

/// The webhook router with its middleware, outermost first: metrics and
/// JSON errors, panic catching, load shedding above the concurrency limit,
/// the body limit, the request timeout.
pub(crate) fn webhook(app: Arc<App>, limits: &Limits) -> Router {
    let metrics = app.metrics.clone();
    let panics = move |panic: Box<dyn std::any::Any + Send>| {
        metrics.panics.inc();
        let message = super::logging::panic_message(panic.as_ref());
        error!(panic = message, "request handler panicked");
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal error").into_response()
    };
    let layers = ServiceBuilder::new()
        .layer(middleware::from_fn_with_state(app.clone(), finish))
        .layer(CatchPanicLayer::custom(panics))
        .layer(axum::error_handling::HandleErrorLayer::new(overloaded))
        .load_shed()
        // Global: `Router::layer` builds the stack once per route, and a
        // plain concurrency limit would then be a separate one per path.
        .layer(GlobalConcurrencyLimitLayer::new(
            limits.max_concurrent_requests,
        ))
        .layer(RequestBodyLimitLayer::new(MAX_BODY_BYTES))
        .layer(TimeoutLayer::with_status_code(
            StatusCode::GATEWAY_TIMEOUT,
            limits.request_timeout,
        ));
    Router::new()
        .route("/mutate-pods", post(mutate))
        .route("/mutate", post(mutate))
        .fallback(|version: Version, body: Body| async move {
            (StatusCode::NOT_FOUND, drained(version, body).await)
        })
        .method_not_allowed_fallback(|version: Version, body: Body| async move {
            (StatusCode::METHOD_NOT_ALLOWED, drained(version, body).await)
        })
        .layer(layers)
        .with_state(app)
}

/// Reads and drops the body of a request answered without it, so that its
/// HTTP/1.1 connection can carry the next request: hyper closes a
/// connection whose request body was left unread unless the rest is
/// already buffered (`poll_drain_or_close_read`), and a client reusing it
/// then meets EOF. Bounded by the body limit and the request timeout. When
/// the body cannot be read to its end, the answer says `Connection: close`
/// (HTTP/1; HTTP/2 resets just the stream).
async fn drained(version: Version, mut body: Body) -> HeaderMap {
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

async fn overloaded(_: tower::BoxError) -> ApiError {
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "too many requests in flight; retry",
    )
}

/// Counts the request, and turns the bodiless errors the layers and the
/// router produce (404, 405 with Allow, 413, 504) into [`ApiError`] JSON.
async fn finish(State(app): State<Arc<App>>, req: Request, next: Next) -> Response {
    let start = Instant::now();
    let path = Metrics::path_index(req.uri().path());
    let version = req.version();
    app.metrics.in_flight.inc();
    let mut response = next.run(req).await;
    app.metrics.in_flight.dec();
    let status = response.status();
    if status.as_u16() >= 400 && response.headers().get(CONTENT_TYPE) != Some(&JSON) {
        let too_large = too_large();
        let message = match status {
            StatusCode::NOT_FOUND => "not found: the webhook path is /mutate-pods",
            StatusCode::METHOD_NOT_ALLOWED => "method not allowed: admission requests are POSTed",
            StatusCode::PAYLOAD_TOO_LARGE => &too_large.1,
            StatusCode::GATEWAY_TIMEOUT => {
                "the request was not received and answered within the request timeout"
            }
            other => other.canonical_reason().unwrap_or("error"),
        };
        let (parts, _) = response.into_parts();
        let mut json = ApiError::new(status, message).into_response();
        for (name, value) in &parts.headers {
            if name != CONTENT_TYPE && name != axum::http::header::CONTENT_LENGTH {
                json.headers_mut().insert(name, value.clone());
            }
        }
        response = json;
    }
    // These are answered before the body is read (too large, shed) or while
    // it is (timeout): hyper then closes an HTTP/1 connection after the
    // answer, and the client must know not to send another request on it.
    let unread = [
        StatusCode::PAYLOAD_TOO_LARGE,
        StatusCode::SERVICE_UNAVAILABLE,
        StatusCode::GATEWAY_TIMEOUT,
    ];
    if version < Version::HTTP_2 && unread.contains(&status) {
        let close = HeaderValue::from_static("close");
        response.headers_mut().insert(CONNECTION, close);
    }
    let seconds = start.elapsed().as_secs_f64();
    app.metrics.record_request(path, status.as_u16(), seconds);
    response
}

fn too_large() -> ApiError {
    let message = format!("request body is larger than {MAX_BODY_BYTES} bytes");
    ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, message)
}

async fn mutate(
    State(app): State<Arc<App>>,
    version: Version,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let content_type = headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok());
    let content_type = content_type.unwrap_or_default();
    let media_type = content_type.split(';').next().unwrap_or_default();
    if !media_type.trim().eq_ignore_ascii_case("application/json") {
        let message =
            format!("content type {content_type:?} is not supported: send application/json");
        let refused = ApiError::new(StatusCode::UNSUPPORTED_MEDIA_TYPE, message);
        return Ok((drained(version, body).await, refused).into_response());
    }
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
            // Re-raised here so the one panic catcher (CatchPanicLayer) answers.
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
    Ok(([(CONTENT_TYPE, JSON)], reviewed.body).into_response())
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
/// since waiting while holding part of the budget could deadlock.
async fn read_body(
    budget: &Arc<Semaphore>,
    mut body: Body,
) -> Result<(Bytes, OwnedSemaphorePermit), ApiError> {
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
    let mut buffer = Vec::with_capacity(declared.unwrap_or(0) as usize);
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| match e.into_inner() {
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
        buffer.extend_from_slice(&data);
    }
    if buffer.is_empty() {
        let message = "request body is empty: expected an AdmissionReview";
        return Err(ApiError::new(StatusCode::BAD_REQUEST, message));
    }
    Ok((Bytes::from(buffer), held))
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
