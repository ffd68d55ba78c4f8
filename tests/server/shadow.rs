//! `serve --shadow` through the router: allowed without a patch, the
//! difference counted per injector and, with `--shadow-warnings`, returned
//! as an AdmissionReview warning.

use crate::support::{ensure, fail, metric, review_request, sample_review, Error, TestResult};
use axum::body::Body;
use axum::http::header::CONTENT_TYPE;
use axum::http::{Method, Request, StatusCode};
use axum::Router;
use http_body_util::BodyExt;
use kserve_injector::server::args::ServeArgs;
use kserve_injector::server::RouterInputs;
use kserve_injector_core::{mutate, Inputs};
use serde_json::Value;
use tower::ServiceExt;

/// Router inputs as `serve` builds them from `flags`.
fn shadow_inputs(flags: &[&str]) -> Result<RouterInputs, Error> {
    let args = ServeArgs::try_parse_from(flags.iter().copied())?;
    let mut inputs = RouterInputs::new(Inputs::default(), &args.limits);
    inputs.mode = args.shadow.mode();
    Ok(inputs)
}

async fn send(router: &Router, body: Vec<u8>) -> Result<axum::response::Response, Error> {
    let request = Request::builder()
        .method(Method::POST)
        .uri("/mutate-pods")
        .header(CONTENT_TYPE, "application/json")
        .body(Body::from(body))?;
    Ok(router.clone().oneshot(request).await?)
}

async fn post(router: &Router, body: Vec<u8>) -> Result<Value, Error> {
    let response = send(router, body).await?;
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
    assert_eq!(
        plain.ok(),
        Some(kserve_injector_core::admission::Mode::Mutate)
    );
}

/// The sample review with `from` replaced by `to` once in its JSON text:
/// the way to write what `serde_json::Value` cannot hold (a duplicate key,
/// a lone surrogate, a number past f64).
fn spliced(from: &str, to: &str) -> Result<Vec<u8>, Error> {
    let (_, body) = sample_review()?;
    let text = String::from_utf8(body)?;
    ensure(text.matches(from).count() == 1, || {
        format!("{from} not once in {text}")
    })?;
    Ok(text.replacen(from, to, 1).into_bytes())
}

/// The sample pod with `edit` applied, as a review.
fn edited(edit: impl FnOnce(&mut Value)) -> Result<Vec<u8>, Error> {
    let (mut pod, _) = sample_review()?;
    edit(&mut pod);
    review_request(&pod, "admission.k8s.io/v1", "sample-uid")
}

/// A request body named for the test output, and a piece of the reason it
/// is denied for.
type Case = (&'static str, Vec<u8>, &'static str);

/// Each kind of denial a red-team run found answered with `allowed: false`
/// under `--shadow`, and a CREATE without its pod.
fn denied_cases() -> Result<Vec<Case>, Error> {
    let many = |n: usize| -> Vec<Value> {
        (0..n)
            .map(|i| serde_json::json!({"name": format!("E{i}"), "value": "v"}))
            .collect()
    };
    let annotations: serde_json::Map<String, Value> = (0..5000)
        .map(|i| (format!("a{i}"), Value::from("v")))
        .collect();
    Ok(vec![
        (
            "no kserve-container",
            edited(|pod| pod["spec"]["containers"][0]["name"] = "other".into())?,
            "cannot find container: kserve-container",
        ),
        (
            "too many env entries",
            edited(|pod| pod["spec"]["containers"][0]["env"] = many(5000).into())?,
            "more than 4096 entries",
        ),
        (
            "too many annotations",
            edited(|pod| {
                let mut all = annotations;
                all.insert(
                    "internal.serving.kserve.io/storage-initializer-sourceuri".into(),
                    "oci://myrepo/mymodelimage".into(),
                );
                pod["metadata"]["annotations"] = all.into();
            })?,
            "more than 4096 entries",
        ),
        (
            "containerPort 1e999999",
            spliced(
                "\"name\":\"kserve-container\"",
                "\"name\":\"kserve-container\",\"ports\":[{\"containerPort\":1e999999}]",
            )?,
            "containerPort",
        ),
        (
            "a lone surrogate",
            spliced(
                "\"name\":\"kserve-container\"",
                "\"name\":\"kserve-container\",\"env\":[{\"name\":\"A\",\"value\":\"\\ud800\"}]",
            )?,
            "hex escape",
        ),
        (
            "a duplicate containers key",
            spliced("\"containers\":[", "\"containers\":[],\"containers\":[")?,
            "duplicate field `containers`",
        ),
        (
            "a CREATE without the pod",
            spliced("\"object\":{", "\"object\":null,\"unused\":{")?,
            "must carry the pod",
        ),
    ])
}

#[tokio::test]
async fn each_denial_is_allowed_in_shadow_mode_counted_as_deny_and_warned() -> TestResult {
    let mutating = shadow_inputs(&[])?.webhook_router();
    let inputs = shadow_inputs(&["--shadow", "--shadow-warnings"])?;
    let router = inputs.webhook_router();
    let cases = denied_cases()?;
    for (i, (what, body, reason)) in cases.iter().enumerate() {
        // The case is real: without --shadow the pod is denied.
        let denied = post(&mutating, body.clone()).await?;
        ensure(denied["response"]["allowed"] == false, || {
            format!("{what}: not denied without --shadow: {denied}")
        })?;
        let review = post(&router, body.clone()).await?;
        let response = &review["response"];
        ensure(response["allowed"] == true, || format!("{what}: {review}"))?;
        ensure(response["uid"] == "sample-uid", || {
            format!("{what}: {review}")
        })?;
        ensure(response.get("patch").is_none(), || {
            format!("{what}: {review}")
        })?;
        ensure(response["status"].get("message").is_none(), || {
            format!("{what}: {review}")
        })?;
        let warning = response["warnings"][0].as_str().unwrap_or_default();
        ensure(
            warning.starts_with("kserve-injector (shadow mode) would deny the pod")
                && warning.contains(reason),
            || format!("{what}: warning {warning:?} lacks {reason:?}"),
        )?;
        let counted = differences(&inputs, "deny").await?;
        ensure(counted == (i + 1) as f64, || {
            format!("{what}: deny counted {counted} times after {} cases", i + 1)
        })?;
    }
    ensure(differences(&inputs, "modelcar").await? == 0.0, || {
        "a denied pod counts no injector".to_string()
    })
}

#[tokio::test]
async fn without_warnings_a_shadow_denial_is_counted_and_not_warned() -> TestResult {
    let inputs = shadow_inputs(&["--shadow"])?;
    let router = inputs.webhook_router();
    for (what, body, _) in denied_cases()? {
        let review = post(&router, body).await?;
        ensure(review["response"]["allowed"] == true, || {
            format!("{what}: {review}")
        })?;
        ensure(review["response"].get("warnings").is_none(), || {
            format!("{what}: {review}")
        })?;
    }
    let cases = denied_cases()?.len() as f64;
    ensure(differences(&inputs, "deny").await? == cases, || {
        "every case counted".to_string()
    })
}

#[tokio::test]
async fn a_body_that_is_not_an_admission_review_keeps_its_400_in_shadow_mode() -> TestResult {
    let router = shadow_inputs(&["--shadow"])?.webhook_router();
    let (_, body) = sample_review()?;
    let other_kind = String::from_utf8(body)?.replacen("\"AdmissionReview\"", "\"Pod\"", 1);
    for body in [b"not json".to_vec(), other_kind.into_bytes()] {
        let response = send(&router, body).await?;
        ensure(response.status() == StatusCode::BAD_REQUEST, || {
            format!("status {}", response.status())
        })?;
    }
    Ok(())
}
