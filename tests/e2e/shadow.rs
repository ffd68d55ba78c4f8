//! `serve --shadow` beside another pod mutator, end to end: the binary is
//! registered twice, as the API server calls webhook configurations in name
//! order. First `inferenceservice.serving.kserve.io` (KServe's name) in
//! normal mode stands in for the mutator already installed; then
//! `kserve-injector-shadow` in shadow mode with warnings sees its result.
//! With the same config the shadow agrees on every pod; with the first
//! one's config changed (modelcar turned off) it reports the modelcar it
//! would add, in its metric, its log and a warning kubectl would print.

use crate::harness::*;
use crate::ports;
use crate::webhook::{create, pod, Injector, OBJECTS, URI};
use base64::Engine;
use k8s_openapi::api::core::v1::Pod;
use kserve_injector_core::{INJECTOR_NAMES, MUTATOR};
use kube::api::{Api, ListParams};
use std::path::Path;
use std::time::Duration;

fn registration(name: &str, port: u16, ca: &[u8]) -> String {
    let ca = base64::engine::general_purpose::STANDARD.encode(ca);
    format!(
        r#"apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {{name: {name}}}
webhooks:
- name: {name}.pods.e2e.example.com
  clientConfig: {{url: "https://127.0.0.1:{port}/mutate-pods", caBundle: "{ca}"}}
  rules: [{{apiGroups: [""], apiVersions: ["v1"], operations: ["CREATE"], resources: ["pods"]}}]
  objectSelector: {{matchExpressions: [{{key: serving.kserve.io/inferenceservice, operator: Exists}}]}}
  admissionReviewVersions: ["v1"]
  sideEffects: None
  failurePolicy: Fail
  reinvocationPolicy: IfNeeded
  timeoutSeconds: 10
"#
    )
}

/// Over every name a change can be reported under.
async fn differences(shadow: &Injector) -> f64 {
    let mut total = 0.0;
    for injector in std::iter::once(MUTATOR).chain(INJECTOR_NAMES) {
        let series = format!("kserve_injector_shadow_differences_total{{injector=\"{injector}\"}}");
        total += shadow.metric(&series).await;
    }
    total
}

fn write_config(path: &Path, modelcar: bool) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kserve-injector"))
        .arg("default-config")
        .output()
        .expect("default-config runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("\"enableModelcar\": true"), "{text}");
    let text = text.replace(
        "\"enableModelcar\": true",
        &format!("\"enableModelcar\": {modelcar}"),
    );
    std::fs::write(path, text).expect("config written");
}

/// Creates `pod` through a raw request, so the response's `Warning`
/// headers (the webhooks' AdmissionReview warnings) can be read.
async fn create_with_warnings(admin: &kube::Client, pod: &Pod) -> Vec<String> {
    let mut body = serde_json::to_value(pod).expect("a pod as JSON");
    body["apiVersion"] = "v1".into();
    body["kind"] = "Pod".into();
    let request = axum::http::Request::post(format!("/api/v1/namespaces/{NS}/pods"))
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&body).expect("JSON").into())
        .expect("a request");
    let response = admin.send(request).await.expect("the API server answers");
    assert!(
        response.status().is_success(),
        "create: {}",
        response.status()
    );
    (response.headers().get_all("warning").iter())
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shadow_mode_after_another_mutator_agrees_then_reports_what_it_would_add() {
    let server = ApiServer::new("/tmp/kapi-21-shadow");
    if !present(&server) {
        return;
    }
    let admin = client(&server.start_clean()).await;
    apply_cluster(&admin, OBJECTS).await;
    let configs = server.work_dir.join("configs");
    std::fs::create_dir_all(&configs).expect("config dir");
    let (first_config, shadow_config) = (configs.join("first.yaml"), configs.join("shadow.yaml"));
    write_config(&first_config, true);
    write_config(&shadow_config, true);
    let path = |p: &Path| p.display().to_string();
    let (first_port, shadow_port) = (ports::port(), ports::port());
    let first_args = [
        "--config",
        &path(&first_config),
        "--config-poll-interval",
        "1s",
    ];
    let mut first = Injector::spawn(&server, first_port, ports::port(), &first_args);
    let shadow_args = [
        "--config",
        &path(&shadow_config),
        "--shadow",
        "--shadow-warnings",
    ];
    let mut shadow = Injector::spawn(&server, shadow_port, ports::port(), &shadow_args);
    first.ready().await;
    shadow.ready().await;
    let ca = std::fs::read(server.work_dir.join("pki/ca.crt")).expect("the harness CA");
    apply(
        &admin,
        &registration("inferenceservice.serving.kserve.io", first_port, &ca),
    )
    .await;
    apply(
        &admin,
        &registration("kserve-injector-shadow", shadow_port, &ca),
    )
    .await;
    let pods: Api<Pod> = Api::namespaced(admin.clone(), NS);
    let patience = Duration::from_secs(30);

    // The same config: every e2e pod is injected by the first webhook, and
    // the shadow would change nothing on any of them.
    let oci = [(URI, "oci://registry.example.com/models/sklearn:1")];
    let logger = [("internal.serving.kserve.io/logger", "true")];
    let cases = [
        pod("s3", "sa-s3", "isvc", &[(URI, "s3://bucket/model")]),
        pod("gcs", "sa-gcs", "isvc", &[(URI, "gs://bucket/model")]),
        pod("csc", "default", "isvc", &[(URI, "custom://model")]),
        pod("logger", "default", "isvc-logger", &logger),
        pod("oci", "default", "isvc", &oci),
        pod("plain", "default", "isvc", &[]),
    ];
    for case in &cases {
        let stored = create(&pods, case, patience).await.expect("admitted");
        let name = stored.metadata.name.unwrap_or_default();
        assert_eq!(
            differences(&shadow).await,
            0.0,
            "shadow differs on {name}:\n{}",
            shadow.log_text()
        );
    }
    let warnings = create_with_warnings(&admin, &pod("oci-2", "default", "isvc", &oci)).await;
    assert!(warnings.is_empty(), "{warnings:?}");
    assert!(!shadow.log_text().contains("would change the pod"));

    // The first webhook's config changes (modelcar off): the shadow now sees
    // pods without the modelcar it would add.
    write_config(&first_config, false);
    let reloads = "kserve_injector_config_reloads_total";
    eventually(
        "the first webhook reloads its config",
        Duration::from_secs(30),
        || async { (first.metric(reloads).await >= 1.0).then_some(()) },
    )
    .await;
    let warnings = create_with_warnings(&admin, &pod("oci-3", "default", "isvc", &oci)).await;
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("kserve-injector (shadow mode) would make"),
        "{warnings:?}"
    );
    assert!(warnings[0].contains("(modelcar)"), "{warnings:?}");
    let modelcar = "kserve_injector_shadow_differences_total{injector=\"modelcar\"}";
    assert_eq!(shadow.metric(modelcar).await, 1.0);
    let log = shadow.log_text();
    let line = log.lines().find(|l| l.contains("would change the pod"));
    let line = line.unwrap_or_else(|| panic!("no shadow log line in:\n{log}"));
    assert!(
        line.contains("oci-3") && line.contains("injectors=\"modelcar\""),
        "{line}"
    );
    eprintln!("e2e shadow log line: {line}");
    // Shadow mode never changed a pod: oci-3 is stored as the first left it.
    let stored = pods.get("oci-3").await.expect("oci-3 stored");
    let containers = stored.spec.expect("spec").containers;
    assert!(
        containers.iter().all(|c| c.name != "modelcar"),
        "{containers:?}"
    );
    let listed = pods
        .list(&ListParams::default())
        .await
        .expect("pods listed");
    assert_eq!(listed.items.len(), cases.len() + 2);
}
