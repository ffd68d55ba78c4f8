//! One admission review behind the HTTP layer: the content type, the body
//! read under the budget, the review (inline or on the blocking pool), the
//! `--namespaces` policy, the cluster lookups, and what is observed of it.

use super::answer::AnswerBody;
use super::api_error::{json_body, Answer, ApiError};
use super::app::App;
use super::body::{drained, read_body, Arrival, BoxError};
use super::share::{Budget, Full};
use crate::lookups::{LookupError, OutsideNamespaces, Shed, SnapshotSource};
use axum::body::Bytes;
use axum::http::header::CONTENT_TYPE;
use axum::http::{HeaderMap, StatusCode, Version};
use hyper::body::Body as HttpBody;
use kserve_injector_core::admission::{self, Mode, Reviewed};
use kserve_injector_core::Inputs;
use std::sync::Arc;

/// Bodies up to this size are reviewed on the async worker: that takes tens
/// of microseconds, less than a hand-off to the blocking pool. Larger ones
/// go to the blocking pool so they do not stall the connections sharing the
/// worker (the admin port has its own thread either way).
const INLINE_REVIEW_BYTES: usize = 64 * 1024;

pub(crate) async fn mutate<B>(
    app: &Arc<App>,
    version: Version,
    headers: &HeaderMap,
    body: B,
    arrival: &Arrival,
) -> Answer
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
        return refused.answer_with(
            drained(version, body, arrival, &app.router_inputs.limits.body_pace).await,
        );
    }
    let reviewed = match reviewed(app, body, arrival).await {
        Ok(reviewed) => reviewed,
        Err(e) => return e.answer(),
    };
    // The request's bytes are given back by now; the answer's are taken
    // until hyper has taken the answer.
    let len = reviewed.body.len();
    let mut held = Budget::hold(arrival.share.as_ref());
    if let Err(full) = app.budget.take(&mut held, len) {
        app.router_inputs.metrics.answers_shed.inc();
        let whose = match full {
            Full::Server => "the bytes the server may hold (--max-buffered-bytes)",
            Full::Connection => "this connection's part of the bytes the server may hold",
        };
        let message = format!("the answer ({len} bytes) does not fit in {whose}; retry");
        return ApiError::new(StatusCode::SERVICE_UNAVAILABLE, message).answer();
    }
    let body = AnswerBody::new(Bytes::from(reviewed.body)).holding(held);
    json_body(StatusCode::OK, body)
}

async fn reviewed<B>(app: &Arc<App>, body: B, arrival: &Arrival) -> Result<Reviewed, ApiError>
where
    B: HttpBody<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    let (body, _held) = read_body(
        &app.budget,
        arrival,
        &app.router_inputs.limits.body_pace,
        body,
    )
    .await?;
    let inputs = app.router_inputs.inputs.load_full();
    let mode = app.router_inputs.mode;
    let reviewed = if body.len() <= INLINE_REVIEW_BYTES {
        review(
            &body,
            &inputs,
            &app.router_inputs.objects,
            mode,
            app.max_patch,
        )
        .await
    } else {
        // Their working memory is the largest a review has: one at a time
        // under a memory limit (docs/operations.md, "Memory").
        let Ok(_turn) = app.large_reviews.acquire().await else {
            let message = "the server is shutting down";
            return Err(ApiError::new(StatusCode::SERVICE_UNAVAILABLE, message));
        };
        let (objects, runtime) = (
            app.router_inputs.objects.clone(),
            tokio::runtime::Handle::current(),
        );
        let max_patch = app.max_patch;
        let review = move || runtime.block_on(review(&body, &inputs, &objects, mode, max_patch));
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
        app.malformed(&e);
        ApiError::new(StatusCode::BAD_REQUEST, e.to_string())
    })?;
    // The namespace's share of the lookups is taken: the API server retries.
    let reviewed = reviewed
        .map_err(|shed| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, shed.to_string()))?;
    app.observe(&reviewed);
    Ok(reviewed)
}

/// Decodes the request, reads the cluster objects its pod needs, answers.
/// A lookup that cannot be answered denies the pod (KServe fails it too);
/// one whose namespace has its share of lookups in flight is shed.
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

#[cfg(test)]
mod tests;
