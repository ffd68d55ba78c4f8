//! The webhook service: one hand-ordered service rather than tower or
//! tower-http layers around an axum router. It does the same checks in the
//! same order (metrics, panic catching, load shedding above the concurrency
//! limit, the body limit, the request timeout, then the path and method),
//! but the layer stack cost about twenty allocations per request (a boxed
//! future and a cloned boxed service per layer, the request's extension
//! map, the header map cloned for the handler) and a second boxing of each
//! body; see docs/performance.md.

use super::answer::AnswerBody;
use super::api_error::{too_large, Answer, ApiError};
use super::app::{App, RouterInputs};
use super::body::{drained, Arrival, BoxError};
use super::metrics::Metrics;
use super::review::mutate;
use super::share::Share;
use crate::limits::MAX_BODY_BYTES;
use axum::body::Bytes;
use axum::http::header::{ALLOW, CONNECTION, CONTENT_LENGTH};
use axum::http::{HeaderValue, Method, Request, StatusCode, Version};
use futures::FutureExt;
use http_body_util::Limited;
use hyper::body::Body as HttpBody;
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

/// The webhook's routes and their limits, in the order they apply: metrics
/// and the request counter, panic catching, load shedding above the
/// concurrency limit, the body limit, the request timeout, the path and
/// method. Cloned per connection (an `Arc`); called per request without
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
/// after the answer, and the client must know not to send another request
/// on it.
const UNREAD: [StatusCode; 4] = [
    StatusCode::REQUEST_TIMEOUT,
    StatusCode::PAYLOAD_TOO_LARGE,
    StatusCode::SERVICE_UNAVAILABLE,
    StatusCode::GATEWAY_TIMEOUT,
];

/// A request's answer being worked out. Boxed: the review's future is
/// kilobytes, and unboxed it would be moved whole each time hyper spawns a
/// stream's task.
pub(crate) type Answering = Pin<Box<dyn Future<Output = Answer> + Send>>;

impl WebhookService {
    /// Answers one request that came over the connection whose share is
    /// `share` (`None`: called without a connection); never fails.
    pub(crate) fn answer<B>(&self, req: Request<B>, share: Option<Arc<Share>>) -> Answering
    where
        B: HttpBody<Data = Bytes> + Send + Unpin + 'static,
        B::Error: Into<BoxError>,
    {
        let webhook = self.0.clone();
        Box::pin(async move {
            let start = Instant::now();
            let path = Metrics::path_index(req.uri().path());
            let version = req.version();
            let head = req.method() == Method::HEAD;
            let metrics = &webhook.router_inputs.metrics;
            let in_flight = InFlight::enter(&metrics.in_flight);
            let arrival = Arrival { share, start };
            let limited = webhook.limited(req, &arrival);
            let answered = AssertUnwindSafe(limited).catch_unwind().await;
            drop(in_flight);
            let response = answered.unwrap_or_else(|panic| webhook.panicked(panic));
            finish(metrics, path, version, head, start, response)
        })
    }
}

impl WebhookService {
    /// Refuses a request unread (503) because its connection's client has
    /// not read the answers it was already sent (`--max-connection-buffered-bytes`).
    pub(crate) fn refuse_unread<B>(&self, req: Request<B>) -> Answering {
        let webhook = self.0.clone();
        let (start, path) = (Instant::now(), Metrics::path_index(req.uri().path()));
        let (version, head) = (req.version(), req.method() == Method::HEAD);
        Box::pin(async move {
            let metrics = &webhook.router_inputs.metrics;
            metrics.answers_shed.inc();
            let message = "too many answer bytes wait for this connection's client to read them; read them, or retry on another connection";
            let response = ApiError::new(StatusCode::SERVICE_UNAVAILABLE, message).answer();
            finish(metrics, path, version, head, start, response)
        })
    }
}

/// What every answer gets last: `Connection: close` when its request's
/// body may be unread, no body for HEAD, and its count and duration.
fn finish(
    metrics: &Metrics,
    path: usize,
    version: Version,
    head: bool,
    start: Instant,
    mut response: Answer,
) -> Answer {
    let status = response.status();
    if version < Version::HTTP_2 && UNREAD.contains(&status) {
        let close = HeaderValue::from_static("close");
        response.headers_mut().insert(CONNECTION, close);
    }
    if head {
        // The status and headers alone: over HTTP/2 a body would be DATA
        // frames on a HEAD stream, which clients reject.
        *response.body_mut() = AnswerBody::new(Bytes::new());
    }
    metrics.record_request(path, status.as_u16(), start.elapsed().as_secs_f64());
    response
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
    fn panicked(&self, panic: Box<dyn std::any::Any + Send>) -> Answer {
        self.router_inputs.metrics.panics.inc();
        let message = super::logging::panic_message(panic.as_ref());
        error!(panic = %crate::log_text::bounded(message), "request handler panicked");
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal error").answer()
    }

    /// Sheds, limits the body, bounds the time, routes.
    async fn limited<B>(self: &Arc<Self>, req: Request<B>, arrival: &Arrival) -> Answer
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
        match tokio::time::timeout(
            self.router_inputs.limits.request_timeout,
            route(self, req, arrival),
        )
        .await
        {
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
        self.answer(req, None).map(Ok)
    }
}

async fn route<B>(app: &Arc<App>, req: Request<B>, arrival: &Arrival) -> Answer
where
    B: HttpBody<Data = Bytes> + Unpin + Send + 'static,
    B::Error: Into<BoxError>,
{
    let (parts, body) = req.into_parts();
    let path = parts.uri.path();
    if path != "/mutate-pods" && path != "/mutate" {
        let message = "not found: the webhook path is /mutate-pods";
        let headers = drained(
            parts.version,
            body,
            arrival,
            &app.router_inputs.limits.body_pace,
        )
        .await;
        return ApiError::new(StatusCode::NOT_FOUND, message).answer_with(headers);
    }
    if parts.method != Method::POST {
        let message = "method not allowed: admission requests are POSTed";
        let mut headers = drained(
            parts.version,
            body,
            arrival,
            &app.router_inputs.limits.body_pace,
        )
        .await;
        headers.insert(ALLOW, HeaderValue::from_static("POST"));
        return ApiError::new(StatusCode::METHOD_NOT_ALLOWED, message).answer_with(headers);
    }
    mutate(app, parts.version, &parts.headers, body, arrival).await
}

#[cfg(test)]
mod tests;
