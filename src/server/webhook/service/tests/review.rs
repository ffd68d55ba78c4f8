//! The review behind the HTTP layer, called directly: lookups off, a fixed
//! snapshot, the `--namespaces` policy, shadow mode and the answer bound.

use super::*;
use crate::lookups::{LookupMetrics, LookupOptions, Lookups};
use kserve_injector_core::cluster::ClusterSnapshot;
use serde_json::{json, Value};

fn body(namespace: &str, annotations: Value) -> Vec<u8> {
    let pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": "sklearn-predictor-",
            "namespace": namespace,
            "labels": {"serving.kserve.io/inferenceservice": "sklearn"},
            "annotations": annotations,
        },
        "spec": {
            "serviceAccountName": "sa",
            "containers": [{"name": "kserve-container", "image": "kserve/sklearnserver:latest"}],
        },
    });
    let review = json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u-1",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": namespace,
            "operation": "CREATE",
            "userInfo": {"username": "system:serviceaccount:kube-system:replicaset-controller"},
            "object": pod,
        },
    });
    serde_json::to_vec(&review).unwrap()
}

fn s3(namespace: &str) -> Vec<u8> {
    let uri = "internal.serving.kserve.io/storage-initializer-sourceuri";
    body(namespace, json!({ uri: "s3://bucket/model" }))
}

/// The ServiceAccount `sa` of namespace `models` and its S3 Secret, read
/// as `--objects` reads them.
fn cluster() -> ClusterSnapshot {
    let objects = "\
apiVersion: v1
kind: ServiceAccount
metadata: {name: sa, namespace: models}
secrets: [{name: creds}]
---
apiVersion: v1
kind: Secret
metadata:
  name: creds
  namespace: models
  annotations: {serving.kserve.io/s3-endpoint: s3.example.com}
stringData: {awsAccessKeyID: AKIAEXAMPLE, awsSecretAccessKey: not-a-real-key}
";
    let loaded = crate::lookups::load_objects(&mut objects.as_bytes()).unwrap();
    loaded.data
}

/// A config whose S3 credential keys are `awsAccessKeyID` and
/// `awsSecretAccessKey` (KServe's shipped keys differ).
fn s3_keys() -> Inputs {
    let manifest =
        include_str!("../../../../../fixtures/s13-credential-s3-service-account/config.yaml");
    let config = kserve_injector_core::config::Config::from_manifest(manifest).unwrap();
    Inputs::new(config)
}

fn patch(reviewed: &Reviewed) -> String {
    let answer: Value = serde_json::from_slice(&reviewed.body).unwrap();
    let patch = answer["response"]["patch"].as_str().unwrap_or_default();
    use base64::Engine;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(patch)
        .unwrap();
    String::from_utf8(bytes).unwrap()
}

fn status(reviewed: &Reviewed) -> (bool, u64, String) {
    let answer: Value = serde_json::from_slice(&reviewed.body).unwrap();
    let status = &answer["response"]["status"];
    (
        answer["response"]["allowed"] == true,
        status["code"].as_u64().unwrap_or_default(),
        status["message"].as_str().unwrap_or_default().to_string(),
    )
}

/// Lookups whose caches hold `cluster()` and whose client never answers,
/// serving the namespace `models` only.
fn served_models_only(outside: OutsideNamespaces) -> (SnapshotSource, std::net::TcpListener) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let client = kube::Client::try_from(kube::Config::new(url.parse().unwrap())).unwrap();
    let options = LookupOptions {
        namespaces: ["models".to_string()].into(),
        outside,
        ..LookupOptions::watch_all()
    };
    let lookups = Lookups::preloaded(client, LookupMetrics::unregistered(), &options, cluster());
    (SnapshotSource::Live(Box::new(lookups)), listener)
}

#[tokio::test]
async fn with_lookups_off_the_pod_is_patched_without_credentials() {
    let reviewed = review(
        &s3("models"),
        &Inputs::default(),
        &SnapshotSource::Off,
        Mode::Mutate,
        usize::MAX,
    )
    .await
    .unwrap()
    .unwrap();
    assert!(reviewed.allowed);
    let patch = patch(&reviewed);
    assert!(patch.contains("storage-initializer"), "{patch}");
    assert!(!patch.contains("AWS_ACCESS_KEY_ID"), "{patch}");
}

#[tokio::test]
async fn the_snapshot_supplies_the_service_accounts_credentials() {
    let objects = SnapshotSource::Static(cluster());
    let reviewed = review(
        &s3("models"),
        &s3_keys(),
        &objects,
        Mode::Mutate,
        usize::MAX,
    )
    .await
    .unwrap()
    .unwrap();
    assert!(reviewed.allowed);
    let text = patch(&reviewed);
    assert!(text.contains("AWS_ACCESS_KEY_ID"), "{text}");
}

#[tokio::test]
async fn a_namespace_outside_namespaces_is_denied_or_left_untouched() {
    let (objects, _listener) = served_models_only(OutsideNamespaces::Deny);
    let reviewed = review(
        &s3("other"),
        &Inputs::default(),
        &objects,
        Mode::Mutate,
        usize::MAX,
    )
    .await
    .unwrap()
    .unwrap();
    let (allowed, code, message) = status(&reviewed);
    assert!(!allowed);
    assert_eq!(code, 403);
    assert!(
        message.starts_with("kserve-injector serves the namespaces models only"),
        "{message}"
    );

    // Inside, the cached objects answer: no request reaches the silent client.
    let inside = review(
        &s3("models"),
        &s3_keys(),
        &objects,
        Mode::Mutate,
        usize::MAX,
    )
    .await
    .unwrap()
    .unwrap();
    assert!(patch(&inside).contains("AWS_ACCESS_KEY_ID"));

    let (objects, _listener) = served_models_only(OutsideNamespaces::Allow);
    let reviewed = review(
        &s3("other"),
        &Inputs::default(),
        &objects,
        Mode::Mutate,
        usize::MAX,
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(status(&reviewed), (true, 200, String::new()));
    assert_eq!(reviewed.patch_ops, 0);
}

#[tokio::test]
async fn shadow_mode_allows_what_it_would_deny_and_reports_it() {
    let (objects, _listener) = served_models_only(OutsideNamespaces::Deny);
    let shadow = Mode::Shadow { warnings: false };
    let reviewed = review(
        &s3("other"),
        &Inputs::default(),
        &objects,
        shadow,
        usize::MAX,
    )
    .await
    .unwrap()
    .unwrap();
    assert!(reviewed.allowed);
    let withheld = reviewed.withheld_denial.as_deref().unwrap_or_default();
    assert!(
        withheld.starts_with("kserve-injector serves the namespaces"),
        "{withheld}"
    );

    let reviewed = review(
        &s3("models"),
        &Inputs::default(),
        &objects,
        shadow,
        usize::MAX,
    )
    .await
    .unwrap()
    .unwrap();
    assert!(reviewed.allowed);
    assert_eq!(reviewed.patch_ops, 0);
    assert!(!reviewed.withheld.is_empty());
}

#[tokio::test]
async fn a_patch_over_the_answer_bound_is_denied_413() {
    let objects = SnapshotSource::Off;
    let reviewed = review(
        &s3("models"),
        &Inputs::default(),
        &objects,
        Mode::Mutate,
        64,
    )
    .await
    .unwrap()
    .unwrap();
    let (allowed, code, message) = status(&reviewed);
    assert!(!allowed);
    assert_eq!(code, 413);
    assert!(
        message.contains("more than the 64 this webhook may hold"),
        "{message}"
    );
}

#[tokio::test]
async fn a_body_that_is_not_a_review_is_an_error_not_an_answer() {
    let objects = SnapshotSource::Off;
    let error = review(
        b"{\"kind\":\"Pod\"}",
        &Inputs::default(),
        &objects,
        Mode::Mutate,
        usize::MAX,
    )
    .await
    .unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with("request body is not an AdmissionReview"),
        "{error}"
    );
}
