//! `serve --shadow` through the router: allowed without a patch, the
//! difference counted per injector and, with `--shadow-warnings`, returned
//! as an AdmissionReview warning.

use crate::support::{ensure, fail, metric, review_request, sample_review, Error, TestResult};
use axum::body::Body;
use axum::http::header::CONTENT_TYPE;
use axum::http::{Method, Request, StatusCode};
use axum::Router;
use http_body_util::BodyExt;
use kserve_injector::cli::ServeArgs;
use kserve_injector::server::{Limits, RouterInputs};
use kserve_injector::{mutate, Inputs};
use serde_json::Value;
use tower::ServiceExt;

/// Router inputs as `serve` builds them from `flags`.
fn shadow_inputs(flags: &[&str]) -> Result<RouterInputs, Error> {
    let args = ServeArgs::try_parse_from(flags.iter().copied())?;
    let mut inputs = RouterInputs::new(Inputs::default(), Limits::from(&args.limits));
    inputs.mode = args.shadow.mode();
    Ok(inputs)
}

async fn post(router: &Router, body: Vec<u8>) -> Result<Value, Error> {
    let request = Request::builder()
        .method(Method::POST)
        .uri("/mutate-pods")
        .header(CONTENT_TYPE, "application/json")
        .body(Body::from(body))?;
    let response = router.clone().oneshot(request).await?;
    ensure(response.status() == StatusCode::OK, || {
        format!("status {}", response.status())
    })?;
    let bytes = response.into_body().collect().await?.to_bytes();
    Ok(serde_json::from_slice(&bytes)?)
}

async fn differences(inputs: &RouterInputs, injector: &str) -> Result<f64, Error> {
    let text = inputs.metrics.encode().map_err(|e| fail(e.to_string()))?;
    let series = format!("kserve_injector_shadow_differences_total{{injector=\"{injector}\"}}");
    metric(&text, &series).ok_or_else(|| fail(format!("no {series} in\n{text}")))
}

#[tokio::test]
async fn shadow_mode_allows_without_a_patch_and_counts_the_difference_per_injector() -> TestResult {
    let inputs = shadow_inputs(&["--shadow"])?;
    let router = inputs.webhook_router();
    let (_, body) = sample_review()?;
    let review = post(&router, body).await?;
    let response = &review["response"];
    ensure(response["allowed"] == true, || review.to_string())?;
    ensure(response.get("patch").is_none(), || review.to_string())?;
    ensure(response.get("warnings").is_none(), || review.to_string())?;
    ensure(differences(&inputs, "modelcar").await? == 1.0, || {
        "modelcar counted once".to_string()
    })?;
    ensure(differences(&inputs, "agent").await? == 0.0, || {
        "agent not counted".to_string()
    })
}

#[tokio::test]
async fn shadow_warnings_reach_the_response_and_an_agreeing_pod_counts_nothing() -> TestResult {
    let inputs = shadow_inputs(&["--shadow", "--shadow-warnings"])?;
    let router = inputs.webhook_router();
    let (pod, body) = sample_review()?;
    let review = post(&router, body).await?;
    let warning = review["response"]["warnings"][0]
        .as_str()
        .unwrap_or_default();
    ensure(
        warning.contains(" by mutator, metrics-aggregator, modelcar:"),
        || review.to_string(),
    )?;
    // The pod as the other mutator left it: the same as ours, nothing to report.
    let agreed = mutate(&pod, "default", &Inputs::default())?.pod;
    let body = review_request(&agreed, "admission.k8s.io/v1", "agreed")?;
    let review = post(&router, body).await?;
    ensure(review["response"].get("warnings").is_none(), || {
        review.to_string()
    })?;
    ensure(differences(&inputs, "modelcar").await? == 1.0, || {
        "only the first pod counted".to_string()
    })
}

#[test]
fn shadow_warnings_need_shadow() {
    assert!(ServeArgs::try_parse_from(["--shadow-warnings"]).is_err());
    let plain = ServeArgs::try_parse_from(Vec::<&str>::new()).map(|a| a.shadow.mode());
    assert_eq!(plain.ok(), Some(kserve_injector::admission::Mode::Mutate));
}
