//! The webhook and admin routers in-process, through
//! `tower::ServiceExt::oneshot`: no socket, no TLS, no listener. The
//! statuses and messages are those the socket tests assert
//! (`http.rs`, `bad_requests_get_precise_statuses_and_json_errors`);
//! what only a connection shows (HTTP/2, TLS, deadlines, the drain) stays
//! there.

use crate::support::{
    apply_response, case_flags, ensure, fail, fixture_cases, golden, metric, repo_path,
    review_request, sample_review, yaml, Error, Outcome, TestResult,
};
use axum::body::{Body, Bytes};
use axum::http::header::{ALLOW, CONTENT_LENGTH, CONTENT_TYPE, RETRY_AFTER};
use axum::http::{HeaderMap, Method, Request, StatusCode};
use axum::Router;
use http_body_util::BodyExt;
use kserve_injector::limits::MAX_BODY_BYTES;
use kserve_injector::lookups::SnapshotSource;
use kserve_injector::server::args::ServeArgs;
use kserve_injector::server::RouterInputs;
use kserve_injector_core::{config::Config, Inputs};
use serde_json::Value;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tower::ServiceExt;

/// An answer: status, headers, the whole body.
struct Answer {
    status: StatusCode,
    headers: HeaderMap,
    body: Bytes,
}

impl Answer {
    /// The `error` text of a JSON error body, which every webhook error has.
    fn error(&self) -> Result<String, Error> {
        ensure(
            self.headers.get(CONTENT_TYPE).map(|v| v.as_bytes()) == Some(b"application/json"),
            || format!("error content type: {:?}", self.headers.get(CONTENT_TYPE)),
        )?;
        let value: Value = serde_json::from_slice(&self.body)
            .map_err(|e| fail(format!("error body is not JSON ({e}): {:?}", self.body)))?;
        value["error"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| fail(format!("no \"error\" in {value}")))
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// `serve`'s defaults: the limits, and the config and namespace it starts with.
fn inputs() -> Result<RouterInputs, Error> {
    inputs_with(Config::default())
}

fn inputs_with(config: Config) -> Result<RouterInputs, Error> {
    inputs_with_flags(config, Vec::new())
}

/// As `serve` with `flags` starts.
fn inputs_with_flags(config: Config, flags: Vec<String>) -> Result<RouterInputs, Error> {
    let args = ServeArgs::try_parse_from(flags)?;
    let mut env = Inputs::new(config);
    env.controller_namespace = args.inference_config.resolved_controller_namespace();
    env.modelcar_mode = args.inference_config.inputs.modelcar_mode;
    env.security_profile = args.inference_config.inputs.security_profile;
    Ok(RouterInputs::new(env, &args.limits))
}

fn request(
    method: Method,
    path: &str,
    content_type: Option<&str>,
    body: impl Into<Body>,
) -> Result<Request<Body>, Error> {
    let mut builder = Request::builder().method(method).uri(path);
    if let Some(ct) = content_type {
        builder = builder.header(CONTENT_TYPE, ct);
    }
    Ok(builder.body(body.into())?)
}

async fn call(router: &Router, req: Request<Body>) -> Result<Answer, Error> {
    let response = router.clone().oneshot(req).await?;
    let (parts, body) = response.into_parts();
    let body = tokio::time::timeout(Duration::from_secs(20), body.collect())
        .await??
        .to_bytes();
    Ok(Answer {
        status: parts.status,
        headers: parts.headers,
        body,
    })
}

async fn post_json(router: &Router, path: &str, body: Vec<u8>) -> Result<Answer, Error> {
    call(
        router,
        request(Method::POST, path, Some("application/json"), body)?,
    )
    .await
}

async fn get(router: &Router, path: &str) -> Result<Answer, Error> {
    call(router, request(Method::GET, path, None, Body::empty())?).await
}

#[tokio::test]
async fn a_golden_review_gets_a_json_patch_on_both_paths() -> TestResult {
    let router = inputs()?.webhook_router();
    let pod = yaml(&repo_path("fixtures/m3-modelcar-oci/input.yaml"))?;
    let want = golden(&repo_path("fixtures/m3-modelcar-oci"))?;
    for (path, api_version) in [
        // The API server appends its deadline as a query parameter.
        ("/mutate-pods?timeout=10s", "admission.k8s.io/v1"),
        ("/mutate", "admission.k8s.io/v1beta1"),
    ] {
        let body = review_request(&pod, api_version, "uid-golden")?;
        let answer = post_json(&router, path, body).await?;
        ensure(answer.status == StatusCode::OK, || {
            format!("{path}: {} {}", answer.status, answer.text())
        })?;
        ensure(
            answer.headers.get(CONTENT_TYPE).map(|v| v.as_bytes()) == Some(b"application/json"),
            || format!("{path}: content type {:?}", answer.headers),
        )?;
        let review: Value = serde_json::from_slice(&answer.body)?;
        ensure(review["kind"] == "AdmissionReview", || review.to_string())?;
        ensure(review["response"]["allowed"] == true, || review.to_string())?;
        ensure(review["response"]["patchType"] == "JSONPatch", || {
            format!("{path}: no JSONPatch in {review}")
        })?;
        let got = apply_response(&pod, &answer.body, api_version, "uid-golden")?;
        ensure(got == want, || {
            format!("{path}: got {got:?}, golden {want:?}")
        })?;
    }
    Ok(())
}

/// The socket test's golden loop, in-process: every fixture a webhook can
/// be sent, with its own config and cluster objects when it has them.
#[tokio::test]
async fn every_golden_fixture_through_the_router() -> TestResult {
    let cases = fixture_cases()?;
    ensure(!cases.is_empty(), || "no fixtures".into())?;
    let mut failures = Vec::new();
    for case in &cases {
        let router = fixture_inputs(case)?.webhook_router();
        let input = yaml(&case.join("input.yaml"))?;
        let want = golden(case)?;
        for (path, api_version) in [
            ("/mutate-pods", "admission.k8s.io/v1"),
            ("/mutate", "admission.k8s.io/v1beta1"),
        ] {
            let body = review_request(&input, api_version, "uid-fixture")?;
            let answer = post_json(&router, path, body).await?;
            if answer.status != StatusCode::OK {
                failures.push(format!(
                    "{}: {path}: HTTP {}",
                    case.display(),
                    answer.status
                ));
                continue;
            }
            let got = apply_response(&input, &answer.body, api_version, "uid-fixture")?;
            if got != want {
                failures.push(format!(
                    "{}: {path}: got {got:?}, golden {want:?}",
                    case.display()
                ));
            }
        }
    }
    ensure(failures.is_empty(), || failures.join("\n"))
}

/// A case's `config.yaml`, `settings.yaml`, `cluster.yaml` and `args`, as
/// `serve --config --config-file --objects` with those flags would load them.
fn fixture_inputs(case: &Path) -> Result<RouterInputs, Error> {
    let optional = |name: &str| Some(case.join(name)).filter(|p| p.is_file());
    let settings = kserve_injector::files::load_settings(optional("settings.yaml").as_deref())?;
    let config =
        kserve_injector::files::load_config(optional("config.yaml").as_deref(), &settings, None)?;
    let mut inputs = inputs_with_flags(config, case_flags(case))?;
    if let Some(volume) = settings.model_volume {
        let mut env = (*inputs.inputs.load_full()).clone();
        env.model_volume = Some(volume);
        inputs.inputs.store(Arc::new(env));
    }
    let objects = case.join("cluster.yaml");
    if objects.is_file() {
        let file = std::fs::File::open(&objects)?;
        let loaded = kserve_injector::lookups::load_objects(&mut std::io::BufReader::new(file))?;
        inputs.objects = Arc::new(SnapshotSource::Static(loaded.data));
    }
    Ok(inputs)
}

#[tokio::test]
async fn a_pod_an_injector_refuses_is_denied_with_code_500() -> TestResult {
    let case = repo_path("fixtures/s11-missing-user-container");
    let inputs = fixture_inputs(&case)?;
    let router = inputs.webhook_router();
    let pod = yaml(&case.join("input.yaml"))?;
    let body = review_request(&pod, "admission.k8s.io/v1", "uid-refused")?;
    let answer = post_json(&router, "/mutate-pods", body).await?;
    // An answered review, not an HTTP error: the API server shows the message.
    ensure(answer.status == StatusCode::OK, || {
        format!("{} {}", answer.status, answer.text())
    })?;
    let review: Value = serde_json::from_slice(&answer.body)?;
    let response = &review["response"];
    ensure(response["uid"] == "uid-refused", || review.to_string())?;
    ensure(response["allowed"] == false, || review.to_string())?;
    ensure(response["status"]["code"] == 500, || review.to_string())?;
    ensure(response.get("patch").is_none(), || review.to_string())?;
    let want = golden(&case)?;
    let got = Outcome::Denied(response["status"]["message"].as_str().unwrap_or("").into());
    ensure(got == want, || format!("got {got:?}, golden {want:?}"))?;
    let metrics = inputs.metrics.encode()?;
    let denials = metric(&metrics, "kserve_injector_denials_total");
    ensure(denials == Some(1.0), || format!("denials = {denials:?}"))
}

/// What, method, path, content type, body, status, start of the error.
type BadRequest = (
    &'static str,
    Method,
    &'static str,
    Option<&'static str>,
    Vec<u8>,
    StatusCode,
    &'static str,
);

#[tokio::test]
async fn bad_requests_get_the_socket_tests_statuses_and_json_errors() -> TestResult {
    let inputs = inputs()?;
    let router = inputs.webhook_router();
    let (mut pod, review) = sample_review()?;
    // Large but legal (an object near etcd's limit): reviewed off the async workers.
    pod["metadata"]["annotations"]["example.com/blob"] = Value::String("x".repeat(1024 * 1024));
    let large = review_request(&pod, "admission.k8s.io/v1", "large")?;
    let json = Some("application/json");
    let cases: Vec<BadRequest> = vec![
        (
            "json with charset",
            Method::POST,
            "/mutate-pods",
            Some("application/json; charset=utf-8"),
            review.clone(),
            StatusCode::OK,
            "",
        ),
        (
            "large but legal",
            Method::POST,
            "/mutate-pods",
            json,
            large,
            StatusCode::OK,
            "",
        ),
        (
            "text/plain",
            Method::POST,
            "/mutate-pods",
            Some("text/plain"),
            review.clone(),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "content type \"text/plain\" is not supported: send application/json",
        ),
        (
            "no content type",
            Method::POST,
            "/mutate-pods",
            None,
            review.clone(),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "content type \"\" is not supported",
        ),
        (
            "empty body",
            Method::POST,
            "/mutate-pods",
            json,
            Vec::new(),
            StatusCode::BAD_REQUEST,
            "request body is empty: expected an AdmissionReview",
        ),
        (
            "malformed JSON",
            Method::POST,
            "/mutate-pods",
            json,
            b"{\"apiVersion\":".to_vec(),
            StatusCode::BAD_REQUEST,
            "request body is not valid JSON",
        ),
        (
            "not a review",
            Method::POST,
            "/mutate-pods",
            json,
            b"{\"kind\":\"Pod\",\"apiVersion\":\"v1\"}".to_vec(),
            StatusCode::BAD_REQUEST,
            "request body is not an AdmissionReview",
        ),
        (
            "unknown path",
            Method::POST,
            "/validate",
            json,
            review.clone(),
            StatusCode::NOT_FOUND,
            "not found: the webhook path is /mutate-pods",
        ),
        (
            "wrong method",
            Method::GET,
            "/mutate-pods",
            json,
            Vec::new(),
            StatusCode::METHOD_NOT_ALLOWED,
            "method not allowed: admission requests are POSTed",
        ),
    ];
    for (what, method, path, content_type, body, want, prefix) in cases {
        let answer = call(&router, request(method, path, content_type, body)?).await?;
        ensure(answer.status == want, || {
            format!("{what}: {}, want {want}: {}", answer.status, answer.text())
        })?;
        if want == StatusCode::OK {
            continue;
        }
        let message = answer.error().map_err(|e| fail(format!("{what}: {e}")))?;
        ensure(message.starts_with(prefix), || {
            format!("{what}: {message:?} does not start with {prefix:?}")
        })?;
        if want == StatusCode::METHOD_NOT_ALLOWED {
            // The Allow header survives the rewrite into a JSON error.
            let allow = answer.headers.get(ALLOW).map(|v| v.to_str().unwrap_or(""));
            ensure(allow.is_some_and(|a| a.contains("POST")), || {
                format!("{what}: Allow {allow:?}")
            })?;
        }
    }
    let text = inputs.metrics.encode()?;
    for (path, code, want) in [
        ("/mutate-pods", 200, 2.0),
        ("/mutate-pods", 400, 3.0),
        ("other", 404, 1.0),
        ("/mutate-pods", 405, 1.0),
        ("/mutate-pods", 415, 2.0),
    ] {
        let series = format!("kserve_injector_requests_total{{path=\"{path}\",code=\"{code}\"}}");
        let value = metric(&text, &series);
        ensure(value == Some(want), || {
            format!("{series} = {value:?}, want {want}")
        })?;
    }
    Ok(())
}

#[tokio::test]
async fn a_body_over_the_limit_gets_413_declared_or_not() -> TestResult {
    let router = inputs()?.webhook_router();
    let too_big = vec![b' '; MAX_BODY_BYTES + 1];
    let want = format!("request body is larger than {MAX_BODY_BYTES} bytes");
    // Declared: refused from the head alone.
    let mut declared = request(
        Method::POST,
        "/mutate-pods",
        Some("application/json"),
        too_big.clone(),
    )?;
    declared
        .headers_mut()
        .insert(CONTENT_LENGTH, too_big.len().into());
    // Undeclared: cut off while reading.
    let chunks: Vec<Result<Bytes, std::io::Error>> = too_big
        .chunks(256 * 1024)
        .map(|c| Ok(Bytes::copy_from_slice(c)))
        .collect();
    let streamed = request(
        Method::POST,
        "/mutate-pods",
        Some("application/json"),
        Body::from_stream(futures::stream::iter(chunks)),
    )?;
    for (what, req) in [("declared", declared), ("streamed", streamed)] {
        let answer = call(&router, req).await?;
        ensure(answer.status == StatusCode::PAYLOAD_TOO_LARGE, || {
            format!("{what}: {} {}", answer.status, answer.text())
        })?;
        let message = answer.error()?;
        ensure(message == want, || format!("{what}: {message:?}"))?;
    }
    Ok(())
}

/// A body that sends half a review, then nothing, until dropped.
fn stalled_body(review: &[u8]) -> (tokio::sync::mpsc::Sender<()>, Body) {
    let (hold, mut held) = tokio::sync::mpsc::channel::<()>(1);
    let half = Bytes::copy_from_slice(&review[..review.len() / 2]);
    let stream = async_stream_of(half, async move {
        held.recv().await;
    });
    (hold, Body::from_stream(stream))
}

/// One chunk, then pending until `end` completes, then the end of the body.
fn async_stream_of(
    first: Bytes,
    end: impl std::future::Future<Output = ()> + Send + 'static,
) -> impl futures::Stream<Item = Result<Bytes, std::io::Error>> + Send + 'static {
    use futures::StreamExt;
    let rest = futures::stream::once(end).filter_map(|()| async { None });
    futures::stream::once(async move { Ok(first) }).chain(rest)
}

#[tokio::test]
async fn a_stalled_request_gets_504_within_the_request_timeout() -> TestResult {
    let mut inputs = inputs()?;
    inputs.limits.request_timeout = Duration::from_millis(200);
    let router = inputs.webhook_router();
    let (_, review) = sample_review()?;
    let (_hold, body) = stalled_body(&review);
    let started = Instant::now();
    let req = request(Method::POST, "/mutate-pods", Some("application/json"), body)?;
    let answer = call(&router, req).await?;
    ensure(answer.status == StatusCode::GATEWAY_TIMEOUT, || {
        format!("{} {}", answer.status, answer.text())
    })?;
    ensure(started.elapsed() < Duration::from_secs(10), || {
        format!("took {:?}", started.elapsed())
    })?;
    let message = answer.error()?;
    ensure(message.contains("request timeout"), || message.clone())
}

#[tokio::test]
async fn requests_over_the_concurrency_limit_or_byte_budget_are_shed_with_503() -> TestResult {
    let (_, review) = sample_review()?;

    let mut inputs = inputs()?;
    inputs.limits.max_concurrent_requests = 1;
    let router = inputs.webhook_router();
    let (hold, body) = stalled_body(&review);
    let req = request(Method::POST, "/mutate-pods", Some("application/json"), body)?;
    let stalled = router.clone();
    let in_flight = tokio::spawn(async move { call(&stalled, req).await });
    // Until the stalled request holds the one slot.
    let deadline = Instant::now() + Duration::from_secs(20);
    let shed = loop {
        let answer = post_json(&router, "/mutate-pods", review.clone()).await?;
        if answer.status != StatusCode::OK || Instant::now() > deadline {
            break answer;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    ensure(shed.status == StatusCode::SERVICE_UNAVAILABLE, || {
        format!("{} {}", shed.status, shed.text())
    })?;
    ensure(
        shed.headers.get(RETRY_AFTER).map(|v| v.as_bytes()) == Some(b"1"),
        || format!("Retry-After: {:?}", shed.headers),
    )?;
    ensure(
        shed.error()?.contains("too many requests in flight"),
        || shed.text(),
    )?;
    // One limit for the server, not one per path.
    let other_path = post_json(&router, "/mutate", review.clone()).await?;
    ensure(other_path.status == StatusCode::SERVICE_UNAVAILABLE, || {
        format!(
            "/mutate while /mutate-pods holds the slot: {}",
            other_path.status
        )
    })?;
    drop(hold);
    // The stalled body ends short: not valid JSON.
    let finished = tokio::time::timeout(Duration::from_secs(20), in_flight).await???;
    ensure(finished.status == StatusCode::BAD_REQUEST, || {
        format!("{} {}", finished.status, finished.text())
    })?;
    let again = post_json(&router, "/mutate-pods", review.clone()).await?;
    ensure(again.status == StatusCode::OK, || {
        format!("after the slot freed: {}", again.status)
    })?;

    let mut inputs = self::inputs()?;
    inputs.limits.max_buffered_bytes = review.len() - 1;
    let answer = post_json(&inputs.webhook_router(), "/mutate-pods", review).await?;
    ensure(answer.status == StatusCode::SERVICE_UNAVAILABLE, || {
        format!("byte budget: {} {}", answer.status, answer.text())
    })?;
    ensure(answer.error()?.contains("request bytes buffered"), || {
        answer.text()
    })
}

#[tokio::test]
async fn config_swaps_apply_to_the_next_request() -> TestResult {
    let inputs = inputs()?;
    let router = inputs.webhook_router();
    let (pod, review) = sample_review()?;
    let uid = |answer: &Answer| -> Result<Option<i64>, Error> {
        let outcome = apply_response(&pod, &answer.body, "admission.k8s.io/v1", "sample-uid")?;
        Ok(match outcome {
            Outcome::Pod(pod) => pod["spec"]["containers"]
                .as_array()
                .and_then(|cs| cs.iter().find(|c| c["name"] == "modelcar"))
                .and_then(|c| c["securityContext"]["runAsUser"].as_i64()),
            Outcome::Denied(_) => None,
        })
    };
    let first = post_json(&router, "/mutate-pods", review.clone()).await?;
    ensure(uid(&first)? == Some(1010), || first.text())?;
    let manifest =
        Config::default_manifest().replace("\"uidModelcar\": 1010", "\"uidModelcar\": 2020");
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("inferenceservice-config.yaml");
    std::fs::write(&file, manifest)?;
    let mut env = Inputs::new(kserve_injector::files::load(&file)?);
    env.controller_namespace = inputs.inputs.load().controller_namespace.clone();
    inputs.inputs.store(Arc::new(env));
    let second = post_json(&router, "/mutate-pods", review).await?;
    ensure(uid(&second)? == Some(2020), || second.text())
}

#[tokio::test]
async fn admin_router_probes_and_metrics() -> TestResult {
    let inputs = inputs()?;
    let admin = inputs.admin_router();
    for path in ["/healthz", "/readyz"] {
        let answer = get(&admin, path).await?;
        ensure(
            answer.status == StatusCode::OK && answer.text() == "ok\n",
            || format!("{path}: {} {:?}", answer.status, answer.text()),
        )?;
    }
    let answer = get(&admin, "/nope").await?;
    ensure(answer.status == StatusCode::NOT_FOUND, || {
        format!("/nope: {}", answer.status)
    })?;

    // A review on the webhook router shows in the admin router's metrics.
    let (_, review) = sample_review()?;
    let reviewed = post_json(&inputs.webhook_router(), "/mutate-pods", review).await?;
    ensure(reviewed.status == StatusCode::OK, || reviewed.text())?;
    let scrape = get(&admin, "/metrics").await?;
    ensure(scrape.status == StatusCode::OK, || scrape.text())?;
    let kind = scrape.headers.get(CONTENT_TYPE).map(|v| v.as_bytes());
    ensure(
        kind.is_some_and(|k| k.starts_with(b"application/openmetrics-text")),
        || format!("/metrics content type {kind:?}"),
    )?;
    let text = scrape.text();
    for (series, want) in [
        (
            "kserve_injector_requests_total{path=\"/mutate-pods\",code=\"200\"}",
            1.0,
        ),
        (
            "kserve_injector_request_duration_seconds_count{path=\"/mutate-pods\"}",
            1.0,
        ),
        ("kserve_injector_requests_in_flight", 0.0),
        (
            "kserve_injector_injections_total{injector=\"modelcar\",outcome=\"injected\"}",
            1.0,
        ),
        ("kserve_injector_denials_total", 0.0),
    ] {
        let value = metric(&text, series);
        ensure(value == Some(want), || format!("{series} = {value:?}"))?;
    }
    ensure(
        text.contains("kserve_injector_build_info{version=\""),
        || "no build info".into(),
    )?;

    // Not ready past the certificate's expiry, nor once draining.
    inputs.cert_not_after.store(0, Ordering::Relaxed);
    let expired = get(&admin, "/readyz").await?;
    ensure(
        expired.status == StatusCode::SERVICE_UNAVAILABLE && expired.text().contains("expired"),
        || format!("expired: {} {:?}", expired.status, expired.text()),
    )?;
    inputs.cert_not_after.store(i64::MAX, Ordering::Relaxed);
    inputs.draining.cancel();
    let draining = get(&admin, "/readyz").await?;
    ensure(
        draining.status == StatusCode::SERVICE_UNAVAILABLE && draining.text() == "shutting down\n",
        || format!("draining: {} {:?}", draining.status, draining.text()),
    )?;
    let healthz = get(&admin, "/healthz").await?;
    ensure(healthz.status == StatusCode::OK, || {
        "/healthz stays 200 while draining".into()
    })
}
