//! The webhook over real TLS sockets: every golden fixture through HTTP/1.1
//! and HTTP/2, the error statuses, the request timeout, config hot reload,
//! probes and metrics.

use crate::support::*;
use hyper::body::Bytes;
use hyper::StatusCode;
use kserve_injector_core::config::Config;
use serde_json::Value;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn golden_fixtures_through_http1_and_http2() -> TestResult {
    let cases = fixture_cases()?;
    ensure(!cases.is_empty(), || "no fixtures".into())?;
    let tmp = tempfile::tempdir()?;
    let (default_server, ca) = start_self_signed(tmp.path(), &["--shutdown-delay", "0s"]).await?;
    let mut failures = Vec::new();
    let mut checked = 0;
    for case in &cases {
        let mut flags = vec!["--shutdown-delay".to_string(), "0s".to_string()];
        for (flag, file) in [
            ("--config", "config.yaml"),
            ("--config-file", "settings.yaml"),
            ("--objects", "cluster.yaml"),
        ] {
            if case.join(file).is_file() {
                flags.extend([
                    flag.to_string(),
                    case.join(file).to_string_lossy().into_owned(),
                ]);
            }
        }
        flags.extend(case_flags(case));
        let own_server = if flags.len() > 2 {
            let dir = tempfile::tempdir()?;
            let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
            Some((start_self_signed(dir.path(), &flags).await?, dir))
        } else {
            None
        };
        let (server, ca) = match &own_server {
            Some(((server, ca), _)) => (server, ca),
            None => (&default_server, &ca),
        };
        let input = yaml(&case.join("input.yaml"))?;
        let want = golden(case)?;
        for http in Http::BOTH {
            let mut client = Client::open(server.local_addr(), ca, http).await?;
            for (path, api_version) in [
                // The API server appends its deadline as a query parameter.
                ("/mutate-pods?timeout=10s", "admission.k8s.io/v1"),
                ("/mutate", "admission.k8s.io/v1beta1"),
            ] {
                let uid = format!("uid-{checked}");
                let body = review_request(&input, api_version, &uid)?;
                let (status, answer) = client.post_json(path, body).await?;
                checked += 1;
                if status != StatusCode::OK {
                    failures.push(format!(
                        "{}: {http:?} {path}: HTTP {status}",
                        case.display()
                    ));
                    continue;
                }
                let got = apply_response(&input, &answer, api_version, &uid)?;
                if got != want {
                    failures.push(format!(
                        "{}: {http:?} {path}: got {got:?}, golden {want:?}",
                        case.display()
                    ));
                }
            }
        }
        if let Some(((server, _), _dir)) = own_server {
            stop(server).await?;
        }
    }
    stop(default_server).await?;
    ensure(failures.is_empty(), || failures.join("\n"))?;
    println!("{} fixtures, {checked} requests over TLS", cases.len());
    Ok(())
}

fn error_message(body: &Bytes) -> Result<String, Error> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| fail(format!("error body is not JSON ({e}): {body:?}")))?;
    value["error"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| fail(format!("no \"error\" in {value}")))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_precise_statuses_and_json_errors() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let (server, ca) = start_self_signed(tmp.path(), &["--shutdown-delay", "0s"]).await?;
    let addr = server.local_addr();
    let (mut pod, review) = sample_review()?;
    let too_big = vec![b' '; kserve_injector::limits::MAX_BODY_BYTES + 1];
    // Large but legal (an object near etcd's limit): reviewed off the async workers.
    pod["metadata"]["annotations"]["example.com/blob"] = Value::String("x".repeat(1024 * 1024));
    let large = review_request(&pod, "admission.k8s.io/v1", "large")?;
    for http in Http::BOTH {
        let mut client = Client::open(addr, &ca, http).await?;
        let cases: Vec<(&str, &str, Option<&str>, Body, StatusCode)> = vec![
            (
                "json with charset",
                "POST",
                Some("application/json; charset=utf-8"),
                full(review.clone()),
                StatusCode::OK,
            ),
            (
                "large but legal",
                "POST",
                Some("application/json"),
                full(large.clone()),
                StatusCode::OK,
            ),
            (
                "text/plain",
                "POST",
                Some("text/plain"),
                full(review.clone()),
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ),
            (
                "no content type",
                "POST",
                None,
                full(review.clone()),
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ),
            (
                "empty body",
                "POST",
                Some("application/json"),
                full(Bytes::new()),
                StatusCode::BAD_REQUEST,
            ),
            (
                "malformed JSON",
                "POST",
                Some("application/json"),
                full(&b"{\"apiVersion\":"[..]),
                StatusCode::BAD_REQUEST,
            ),
            (
                "not a review",
                "POST",
                Some("application/json"),
                full(&b"{\"kind\":\"Pod\",\"apiVersion\":\"v1\"}"[..]),
                StatusCode::BAD_REQUEST,
            ),
            (
                "unknown path",
                "POST",
                Some("application/json"),
                full(review.clone()),
                StatusCode::NOT_FOUND,
            ),
            (
                "wrong method",
                "GET",
                Some("application/json"),
                full(Bytes::new()),
                StatusCode::METHOD_NOT_ALLOWED,
            ),
        ];
        for (what, method, content_type, body, want) in cases {
            let path = if what == "unknown path" {
                "/validate"
            } else {
                "/mutate-pods"
            };
            let mut builder = hyper::Request::builder()
                .method(method)
                .uri(format!("https://localhost{path}"));
            if let Some(ct) = content_type {
                builder = builder.header("content-type", ct);
            }
            let (status, body) = client.call(builder.body(body)?).await?;
            ensure(status == want, || {
                format!("{http:?} {what}: {status}, want {want}: {body:?}")
            })?;
            if want != StatusCode::OK {
                error_message(&body).map_err(|e| fail(format!("{http:?} {what}: {e}")))?;
            }
        }
    }

    // HTTP/2, declared length: refused from the headers alone.
    let mut h2 = Client::open(addr, &ca, Http::H2).await?;
    let (status, body) = h2.post_json("/mutate-pods", too_big.clone()).await?;
    ensure(status == StatusCode::PAYLOAD_TOO_LARGE, || {
        format!("h2 declared: {status}")
    })?;
    ensure(error_message(&body)?.contains("larger than"), || {
        format!("{body:?}")
    })?;

    // HTTP/2, no declared length: cut off while reading.
    let (mut tx, channel) = http_body_util::Channel::<Bytes, std::convert::Infallible>::new(4);
    let streamed = tokio::spawn(async move {
        for chunk in too_big.chunks(256 * 1024) {
            if tx.send_data(Bytes::copy_from_slice(chunk)).await.is_err() {
                break;
            }
        }
    });
    let mut h2 = Client::open(addr, &ca, Http::H2).await?;
    let req = post(
        "/mutate-pods",
        Some("application/json"),
        http_body_util::BodyExt::boxed(channel),
    )?;
    let (status, _) = h2.call(req).await?;
    ensure(status == StatusCode::PAYLOAD_TOO_LARGE, || {
        format!("h2 streamed: {status}")
    })?;
    streamed.abort();

    // HTTP/1.1: the declared length alone earns the 413, before any body byte.
    let head = format!(
        "POST /mutate-pods HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        kserve_injector::limits::MAX_BODY_BYTES + 1
    );
    let answer = raw_exchange(addr, &ca, head.as_bytes(), PATIENCE).await?;
    ensure(answer.starts_with("HTTP/1.1 413"), || {
        format!("h1 declared: {answer}")
    })?;

    let admin = server.admin_addr();
    for (code, at_least) in [(200, 4.0), (400, 6.0), (404, 2.0), (413, 3.0), (415, 4.0)] {
        let path = if code == 404 { "other" } else { "/mutate-pods" };
        let series = format!("kserve_injector_requests_total{{path=\"{path}\",code=\"{code}\"}}");
        let value = metric_now(admin, &series).await?;
        ensure(value >= at_least, || {
            format!("{series} = {value}, want >= {at_least}")
        })?;
    }
    let series = "kserve_injector_requests_total{path=\"/mutate-pods\",code=\"405\"}";
    ensure(metric_now(admin, series).await? >= 2.0, || series.into())?;
    stop(server).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_request_gets_504_within_the_request_timeout() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let (server, ca) = start_self_signed(
        tmp.path(),
        &["--shutdown-delay", "0s", "--request-timeout", "500ms"],
    )
    .await?;
    let (_, review) = sample_review()?;
    for http in Http::BOTH {
        let (mut tx, channel) = http_body_util::Channel::<Bytes, std::convert::Infallible>::new(1);
        tx.send_data(Bytes::copy_from_slice(&review[..review.len() / 2]))
            .await?;
        let mut client = Client::open(server.local_addr(), &ca, http).await?;
        let req = post(
            "/mutate-pods",
            Some("application/json"),
            http_body_util::BodyExt::boxed(channel),
        )?;
        let started = std::time::Instant::now();
        let (status, body) = client.call(req).await?;
        ensure(status == StatusCode::GATEWAY_TIMEOUT, || {
            format!("{http:?}: {status} {body:?}")
        })?;
        ensure(started.elapsed() < Duration::from_secs(10), || {
            format!("took {:?}", started.elapsed())
        })?;
        error_message(&body)?;
        drop(tx);
    }
    let series = "kserve_injector_requests_total{path=\"/mutate-pods\",code=\"504\"}";
    ensure(
        metric_now(server.admin_addr(), series).await? >= 2.0,
        || series.into(),
    )?;
    stop(server).await
}

fn config_with_modelcar_uid(uid: &str) -> String {
    Config::default_manifest().replace("\"uidModelcar\": 1010", &format!("\"uidModelcar\": {uid}"))
}

fn modelcar_uid(outcome: &Outcome) -> Option<i64> {
    match outcome {
        Outcome::Pod(pod) => pod["spec"]["containers"]
            .as_array()?
            .iter()
            .find(|c| c["name"] == "modelcar")?["securityContext"]["runAsUser"]
            .as_i64(),
        Outcome::Denied(_) => None,
    }
}

async fn uid_now(client: &mut Client, pod: &Value, review: &[u8]) -> Option<i64> {
    let (status, body) = client
        .post_json("/mutate-pods", review.to_vec())
        .await
        .ok()?;
    if status != StatusCode::OK {
        return None;
    }
    modelcar_uid(&apply_response(pod, &body, "admission.k8s.io/v1", "sample-uid").ok()?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_changes_apply_to_the_next_request_and_bad_ones_are_ignored() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let config_file = tmp.path().join("inferenceservice-config.yaml");
    std::fs::write(&config_file, config_with_modelcar_uid("1010"))?;
    let config_flag = config_file.to_string_lossy().into_owned();
    let (server, ca) = start_self_signed(
        tmp.path(),
        &[
            "--shutdown-delay",
            "0s",
            "--config",
            &config_flag,
            "--config-poll-interval",
            "200ms",
        ],
    )
    .await?;
    let (pod, review) = sample_review()?;
    let mut client = Client::open(server.local_addr(), &ca, Http::H2).await?;
    let first = uid_now(&mut client, &pod, &review).await;
    ensure(first == Some(1010), || {
        format!("initial config not applied: {first:?}")
    })?;

    std::fs::write(&config_file, config_with_modelcar_uid("2020"))?;
    let deadline = std::time::Instant::now() + PATIENCE;
    while uid_now(&mut client, &pod, &review).await != Some(2020) {
        ensure(std::time::Instant::now() < deadline, || {
            "the changed config never applied".into()
        })?;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    std::fs::write(&config_file, "kind: ConfigMap\ndata:\n  agent: '{}'\n")?;
    let admin = server.admin_addr();
    eventually(PATIENCE, "the reload error to be counted", || async move {
        let errors = metric_now(admin, "kserve_injector_config_reload_errors_total")
            .await
            .ok()?;
        (errors >= 1.0).then_some(())
    })
    .await?;
    let kept = uid_now(&mut client, &pod, &review).await;
    ensure(kept == Some(2020), || {
        format!("the last good config was not kept: {kept:?}")
    })?;
    let reloads = metric_now(admin, "kserve_injector_config_reloads_total").await?;
    ensure(reloads == 1.0, || format!("config reloads = {reloads}"))?;
    stop(server).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_values_every_pod_would_carry_are_refused_and_the_last_good_config_kept(
) -> TestResult {
    let tmp = tempfile::tempdir()?;
    let config_file = tmp.path().join("inferenceservice-config.yaml");
    std::fs::write(&config_file, config_with_modelcar_uid("1010"))?;
    let config_flag = config_file.to_string_lossy().into_owned();
    let (server, ca) = start_self_signed(
        tmp.path(),
        &[
            "--shutdown-delay",
            "0s",
            "--config",
            &config_flag,
            "--config-poll-interval",
            "200ms",
        ],
    )
    .await?;
    let (pod, review) = sample_review()?;
    let mut client = Client::open(server.local_addr(), &ca, Http::H2).await?;
    let admin = server.admin_addr();
    // KServe loads each of these; the API server refuses every modelcar
    // pod made with the first three, and the last is 1 MB of quantity.
    let manifest = Config::default_manifest();
    let bad = [
        config_with_modelcar_uid("-1"),
        manifest.replace("\"memoryModelcar\": \"15Mi\"", "\"memoryModelcar\": \"-1\""),
        manifest.replace(
            "\"memoryModelcar\": \"15Mi\"",
            "\"memoryModelcar\": \"1e999999\"",
        ),
        manifest.replace(
            "\"cpuModelcar\": \"10m\"",
            &format!("\"cpuModelcar\": \"{}\"", "1".repeat(1 << 20)),
        ),
    ];
    for (i, text) in bad.into_iter().enumerate() {
        ensure(text != manifest, || format!("case {i} changed nothing"))?;
        // Whole at once: a poll that read half of it would count an error
        // of its own.
        let staged = tmp.path().join("staged.yaml");
        std::fs::write(&staged, text)?;
        std::fs::rename(&staged, &config_file)?;
        let want = (i + 1) as f64;
        eventually(PATIENCE, "the reload error to be counted", || async move {
            let errors = metric_now(admin, "kserve_injector_config_reload_errors_total")
                .await
                .ok()?;
            (errors >= want).then_some(())
        })
        .await?;
        let kept = uid_now(&mut client, &pod, &review).await;
        ensure(kept == Some(1010), || {
            format!("case {i}: the last good config was not kept: {kept:?}")
        })?;
    }
    let reloads = metric_now(admin, "kserve_injector_config_reloads_total").await?;
    ensure(reloads == 0.0, || format!("config reloads = {reloads}"))?;
    stop(server).await
}

/// A series and what its value must satisfy.
type Check = (&'static str, Box<dyn Fn(f64) -> bool>);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probes_and_metrics() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let (server, ca) = start_self_signed(tmp.path(), &["--shutdown-delay", "0s"]).await?;
    let admin = server.admin_addr();
    for path in ["/healthz", "/readyz"] {
        let (status, body) = admin_get(admin, path).await?;
        ensure(status == StatusCode::OK, || {
            format!("{path}: {status} {body}")
        })?;
    }
    let (status, _) = admin_get(admin, "/nope").await?;
    ensure(status == StatusCode::NOT_FOUND, || {
        format!("/nope: {status}")
    })?;

    let (_, review) = sample_review()?;
    let mut client = Client::open(server.local_addr(), &ca, Http::H2).await?;
    let (status, _) = client.post_json("/mutate-pods", review).await?;
    ensure(status == StatusCode::OK, || format!("review: {status}"))?;

    let (_, text) = admin_get(admin, "/metrics").await?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs() as f64;
    let checks: Vec<Check> = vec![
        (
            "kserve_injector_requests_total{path=\"/mutate-pods\",code=\"200\"}",
            Box::new(|v| v == 1.0),
        ),
        (
            "kserve_injector_request_duration_seconds_count{path=\"/mutate-pods\"}",
            Box::new(|v| v == 1.0),
        ),
        ("kserve_injector_requests_in_flight", Box::new(|v| v == 0.0)),
        (
            "kserve_injector_injections_total{injector=\"modelcar\",outcome=\"injected\"}",
            Box::new(|v| v == 1.0),
        ),
        ("kserve_injector_denials_total", Box::new(|v| v == 0.0)),
        (
            "kserve_injector_certificate_not_after_timestamp_seconds{cert=\"serving\"}",
            Box::new(move |v| v > now),
        ),
        (
            "kserve_injector_certificate_reload_errors_total{cert=\"serving\"}",
            Box::new(|v| v == 0.0),
        ),
        (
            "kserve_injector_certificate_pending_not_before_timestamp_seconds{cert=\"serving\"}",
            Box::new(|v| v == 0.0),
        ),
        (
            "kserve_injector_config_reload_errors_total",
            Box::new(|v| v == 0.0),
        ),
    ];
    for (series, ok) in checks {
        let value = metric(&text, series).ok_or_else(|| fail(format!("missing {series}")))?;
        ensure(ok(value), || format!("{series} = {value}"))?;
    }
    ensure(
        text.contains("kserve_injector_build_info{version=\""),
        || "no build info".into(),
    )?;
    ensure(!text.contains("namespace="), || {
        "namespace labels leak cardinality".into()
    })?;
    stop(server).await
}
