//! Vectors S26–S28 (selection) and the #3900 guard.

use super::*;
use serde_json::{json, Value};

fn csc(name: &str, spec: Value, disabled: Option<bool>) -> Value {
    let mut doc = json!({
        "apiVersion": "serving.kserve.io/v1alpha1",
        "kind": "ClusterStorageContainer",
        "metadata": {"name": name},
        "spec": spec,
    });
    if let Some(d) = disabled {
        doc["disabled"] = json!(d);
    }
    doc
}

fn container(name: &str) -> Value {
    json!({"name": name, "image": format!("kserve/{name}:latest")})
}

/// S25/S26/S27's two CSCs.
fn custom_and_s3_azure() -> ClusterSnapshot {
    ClusterSnapshot::from_documents(vec![
        csc(
            "custom",
            json!({"container": {"name": "name", "image": "img", "resources": {"limits": {"memory": "200Mi"}}},
                   "supportedUriFormats": [{"prefix": "custom://"}]}),
            None,
        ),
        csc(
            "s3-azure",
            json!({"container": {"name": "name", "image": "img", "resources": {"limits": {"memory": "500Mi"}},
                                 "env": [{"name": "name", "value": "value"}]},
                   "supportedUriFormats": [{"prefix": "s3://"},
                                           {"regex": "https://(.+?).blob.core.windows.net/(.+)"}]}),
            None,
        ),
    ])
    .unwrap()
}

/// S28's five CSCs.
fn s28() -> ClusterSnapshot {
    let hf = || json!([{"prefix": "hf://"}]);
    ClusterSnapshot::from_documents(vec![
        csc(
            "default",
            json!({"container": container("storage-initializer"),
                   "supportedUriFormats": [{"prefix": "gs://"}, {"prefix": "s3://"}, {"prefix": "hf://"}]}),
            None,
        ),
        csc(
            "hf-custom",
            json!({"container": {"name": "storage-initializer", "image": "kserve/hf-custom:latest",
                                 "resources": {"requests": {"memory": "2Gi"}}},
                   "supportedUriFormats": hf()}),
            None,
        ),
        csc("disabled-csc", json!({"container": container("x"), "supportedUriFormats": hf()}), Some(true)),
        csc("s3-only", json!({"container": container("x"), "supportedUriFormats": [{"prefix": "s3://"}]}), None),
        csc(
            "download-job",
            json!({"container": container("x"), "supportedUriFormats": hf(), "workloadType": "localModelDownloadJob"}),
            None,
        ),
    ])
    .unwrap()
}

fn selected(data: &ClusterSnapshot, uri: &str, explicit: Option<&str>) -> Option<String> {
    select(data, uri, explicit)
        .unwrap()
        .map(|c| c.name().to_string())
}

#[test]
fn s27_match_by_prefix_and_regex() {
    let data = custom_and_s3_azure();
    assert_eq!(
        selected(&data, "s3://foo", None).as_deref(),
        Some("s3-azure")
    );
    assert_eq!(
        selected(&data, "custom://foo", None).as_deref(),
        Some("custom")
    );
    assert_eq!(selected(&data, "abc://", None), None);
    assert_eq!(
        selected(&data, "https://acct.blob.core.windows.net/c/m", None).as_deref(),
        Some("s3-azure")
    );
}

#[test]
fn s26_no_match_for_plain_https() {
    assert_eq!(selected(&custom_and_s3_azure(), "https://foo", None), None);
}

#[test]
fn regex_is_unanchored_like_go() {
    let data = ClusterSnapshot::from_documents(vec![csc(
        "r",
        json!({"container": container("x"), "supportedUriFormats": [{"regex": "models/"}]}),
        None,
    )])
    .unwrap();
    assert_eq!(
        selected(&data, "gs://bucket/models/a", None).as_deref(),
        Some("r")
    );
}

#[test]
fn s28_implicit_selection_skips_disabled_and_other_workloads() {
    let data = s28();
    assert_eq!(
        selected(&data, "hf://my-model", None).as_deref(),
        Some("default")
    );
    // Without `default`, alphabetical order reaches the disabled and the
    // download-job CSCs first and skips them.
    let mut data = data;
    data.storage_containers.remove("default");
    assert_eq!(
        selected(&data, "hf://my-model", None).as_deref(),
        Some("hf-custom")
    );
}

#[test]
fn s28_explicit_selection_and_its_errors() {
    let data = s28();
    let chosen = select(&data, "hf://my-model", Some("hf-custom"))
        .unwrap()
        .unwrap();
    let container = chosen.container().unwrap();
    assert_eq!(container.image.as_deref(), Some("kserve/hf-custom:latest"));
    let requests = container
        .resources
        .as_ref()
        .unwrap()
        .requests
        .as_ref()
        .unwrap();
    assert_eq!(requests["memory"].0, "2Gi");
    let err = |name: &str| {
        select(&data, "hf://my-model", Some(name))
            .unwrap_err()
            .to_string()
    };
    assert_eq!(
        err("does-not-exist"),
        "ClusterStorageContainer \"does-not-exist\" not found"
    );
    assert_eq!(
        err("disabled-csc"),
        "ClusterStorageContainer \"disabled-csc\" is disabled"
    );
    assert_eq!(
        err("s3-only"),
        "ClusterStorageContainer \"s3-only\" does not support storageUri \"hf://my-model\""
    );
    assert_eq!(
        err("download-job"),
        "ClusterStorageContainer \"download-job\" has workloadType \"localModelDownloadJob\"; explicit selection requires \"initContainer\""
    );
}

#[test]
fn invalid_regex_is_an_error_when_reached() {
    let data = ClusterSnapshot::from_documents(vec![
        csc(
            "a",
            json!({"container": container("x"), "supportedUriFormats": [{"prefix": "s3://"}]}),
            None,
        ),
        csc(
            "b",
            json!({"container": container("x"), "supportedUriFormats": [{"regex": "("}]}),
            None,
        ),
    ])
    .unwrap();
    // `a` matches first, so `b` is never checked.
    assert_eq!(selected(&data, "s3://x", None).as_deref(), Some("a"));
    let err = select(&data, "gs://x", None).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("error checking storage container b: "),
        "{err}"
    );
}

fn init(name: &str, mounts: &[(&str, &str)]) -> Value {
    let mounts: Vec<_> = (mounts.iter())
        .map(|(n, p)| json!({"name": n, "mountPath": p}))
        .collect();
    json!({"name": name, "volumeMounts": mounts})
}

/// The guard on init containers given as JSON, read as the injectors read them.
fn injected(init_containers: &[Value], csc_container_name: Option<&str>) -> bool {
    let views: Vec<_> = (init_containers.iter())
        .map(crate::view::container_from_value)
        .collect();
    storage_initializer_injected(&views, csc_container_name)
}

#[test]
fn guard_recognises_renamed_init_container_by_name_and_model_mount() {
    let model = [("kserve-provision-location", "/mnt/models")];
    assert!(injected(&[init("storage-initializer", &[])], None));
    assert!(injected(&[init("my-init", &model)], Some("my-init")));
    // The user's own container of that name, without our mount: not ours.
    assert!(!injected(&[init("my-init", &[])], Some("my-init")));
    // Our mount on a container the selected CSC does not name: not ours.
    assert!(!injected(&[init("other", &model)], Some("my-init")));
    assert!(!injected(&[init("my-init", &model)], None));
    assert!(!injected(&[init("", &model)], Some("")));
    assert!(!injected(&[], Some("my-init")));
}
