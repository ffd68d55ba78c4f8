use super::*;
use serde_json::json;

fn sa_doc() -> Value {
    json!({"apiVersion": "v1", "kind": "ServiceAccount",
           "metadata": {"name": "default", "namespace": "default",
                        "annotations": {"eks.amazonaws.com/role-arn": "arn"}},
           "secrets": [{"name": "s3-secret"}, {"name": "gcs"}]})
}

fn secret_doc() -> Value {
    // data values are base64, as in the API.
    json!({"apiVersion": "v1", "kind": "Secret",
           "metadata": {"name": "s3-secret", "namespace": "default"},
           "data": {"awsSecretAccessKey": "c2VjcmV0", "S3_ENDPOINT": "bWluaW86OTAwMA=="}})
}

#[test]
fn loads_every_kind_and_lists() {
    let list = json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "serving.kserve.io/v1alpha1", "kind": "ClusterStorageContainer",
         "metadata": {"name": "default"},
         "spec": {"container": {"name": "storage-initializer", "image": "i"},
                  "supportedUriFormats": [{"prefix": "gs://"}]}},
        {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
         "metadata": {"name": "sklearn", "namespace": "default"},
         "spec": {"predictor": {"logger": {"mode": "all", "storage": {"path": "/logs", "key": "k"},
                                           "batchSize": 3}}}},
    ]});
    let data =
        ClusterSnapshot::from_documents(vec![sa_doc(), secret_doc(), Value::Null, list]).unwrap();
    assert_eq!(data.len(), 4);
    let sa = data.service_account("default", "default").unwrap();
    assert_eq!(sa.secrets().collect::<Vec<_>>(), ["s3-secret", "gcs"]);
    assert_eq!(sa.annotation("eks.amazonaws.com/role-arn"), Some("arn"));
    let secret = data.secret("default", "s3-secret").unwrap();
    assert_eq!(secret.get("S3_ENDPOINT"), Some("minio:9000"));
    assert!(secret.has_key("awsSecretAccessKey"));
    assert!(
        !format!("{data:?}").contains("\"secret\""),
        "the access key is not held"
    );
    let csc = data.storage_container("default").unwrap();
    assert_eq!(
        (csc.workload_type(), csc.disabled),
        ("initContainer", false)
    );
    let isvc = data.inference_service("default", "sklearn").unwrap();
    let logger = isvc.predictor_logger.as_ref().unwrap();
    assert_eq!(logger.batch_size, Some(3));
    let storage = logger.storage.as_ref().unwrap();
    assert_eq!(
        (storage.path.as_str(), storage.key.as_str()),
        ("/logs", "k")
    );
    assert_eq!(storage.service_account_name, "");
}

#[test]
fn typed_lists_work_too() {
    let list = json!({"apiVersion": "v1", "kind": "SecretList", "items": [secret_doc()]});
    let data = ClusterSnapshot::from_documents(vec![list]).unwrap();
    assert!(data.secret("default", "s3-secret").is_some());
}

fn error(docs: Vec<Value>) -> String {
    ClusterSnapshot::from_documents(docs)
        .unwrap_err()
        .to_string()
}

#[test]
fn other_kinds_are_counted_and_passed_over() {
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}});
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "team"}});
    let list = json!({"apiVersion": "v1", "kind": "List", "items": [secret_doc(), pod.clone(), cm.clone()]});
    let loaded = ClusterSnapshot::load(vec![sa_doc(), list, cm, pod]).unwrap();
    assert!(loaded.data.secret("default", "s3-secret").is_some());
    assert_eq!(loaded.data.len(), 2);
    assert_eq!(
        loaded.ignored,
        [("ConfigMap".to_string(), 2), ("Pod".to_string(), 2)].into()
    );
    let lines: Vec<String> = loaded.ignored_lines().collect();
    assert_eq!(
        lines[0],
        "ignored 2 ConfigMap documents (only ServiceAccount, Secret, ClusterStorageContainer, InferenceService or a List of them are read)"
    );
}

#[test]
fn documents_without_a_kind_stay_errors() {
    assert!(error(vec![json!({"metadata": {}})]).starts_with("document 1: no kind"));
    assert!(error(vec![json!("text")]).starts_with("document 1: no kind"));
    let list =
        json!({"apiVersion": "v1", "kind": "List", "items": [secret_doc(), {"metadata": {}}]});
    assert!(error(vec![list]).starts_with("document 1, item 2: no kind"));
}

#[test]
fn a_wrong_type_inside_a_kind_we_read_stays_an_error() {
    let mut secret = secret_doc();
    secret["data"] = json!(["not", "a", "map"]);
    let message = error(vec![secret]);
    assert!(
        message.starts_with("document 1: invalid Secret \"s3-secret\""),
        "{message}"
    );
}

#[test]
fn malformed_objects_are_errors() {
    let mut wrong_version = secret_doc();
    wrong_version["apiVersion"] = json!("v2");
    assert_eq!(
        error(vec![wrong_version]),
        "document 1: Secret must have apiVersion \"v1\", found \"v2\""
    );
    let mut no_ns = sa_doc();
    no_ns["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("namespace");
    assert_eq!(
        error(vec![no_ns]),
        "document 1: ServiceAccount \"default\" has no metadata.namespace"
    );
    let mut no_name = sa_doc();
    no_name["metadata"]["name"] = json!("");
    assert_eq!(
        error(vec![no_name]),
        "document 1: ServiceAccount has no metadata.name"
    );
    assert_eq!(
        error(vec![secret_doc(), secret_doc()]),
        "document 2: Secret \"s3-secret\" appears more than once"
    );
    let mut bad_data = secret_doc();
    bad_data["data"] = json!({"k": 5});
    assert!(error(vec![bad_data]).starts_with("document 1: invalid Secret \"s3-secret\": "));
    let bad_quantity = json!({"apiVersion": "serving.kserve.io/v1alpha1", "kind": "ClusterStorageContainer",
        "metadata": {"name": "c"},
        "spec": {"container": {"resources": {"limits": {"memory": "lots"}}}, "supportedUriFormats": []}});
    assert!(error(vec![bad_quantity]).starts_with(
        "document 1: invalid ClusterStorageContainer \"c\": resources.limits.memory: "
    ));
    let no_spec = json!({"apiVersion": "serving.kserve.io/v1alpha1", "kind": "ClusterStorageContainer",
        "metadata": {"name": "c"}});
    assert!(error(vec![no_spec])
        .starts_with("document 1: invalid ClusterStorageContainer \"c\": spec: "));
    let list = json!({"apiVersion": "v1", "kind": "List"});
    assert_eq!(error(vec![list]), "document 1: List has no items array");
}

#[test]
fn csc_flags() {
    let doc = json!({"apiVersion": "serving.kserve.io/v1alpha1", "kind": "ClusterStorageContainer",
        "metadata": {"name": "c"}, "disabled": true,
        "spec": {"container": {"image": "i"}, "supportedUriFormats": [{"regex": "^x"}],
                 "workloadType": "localModelDownloadJob", "supportsMultiModelDownload": true}});
    let data = ClusterSnapshot::from_documents(vec![doc]).unwrap();
    let c = data.storage_container("c").unwrap();
    assert!(c.disabled && c.supports_multi_model_download);
    assert_eq!(c.workload_type(), "localModelDownloadJob");
    assert_eq!(c.container_name(), "");
}

#[test]
fn an_object_that_does_not_decode_keeps_serde_jsons_error_as_its_source() {
    let mut sa = sa_doc();
    sa["secrets"] = json!("not a list");
    let err = ClusterSnapshot::load(vec![sa]).unwrap_err();
    let mut chain = std::iter::successors(std::error::Error::source(&err), |e| e.source());
    assert!(
        chain.any(|e| e.to_string().starts_with("invalid type: string")),
        "{err}"
    );
}
