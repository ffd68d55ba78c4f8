use super::*;
use crate::cluster::objects::IsvcLogger;
use crate::cluster::{InferenceService, Secret, ServiceAccount};
use crate::config::LoggerStorage;
use std::collections::BTreeMap;

fn pod(annotations: &[(&str, &str)]) -> PodFacts {
    PodFacts {
        namespace: "default".into(),
        service_account_name: String::new(),
        annotations: annotations
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        labels: BTreeMap::from([(ISVC_LABEL.to_string(), "sklearn".to_string())]),
    }
}

fn sa_key(name: &str) -> ObjectKey {
    ObjectKey::ServiceAccount(ObjectRef::new("default", name))
}

fn secret_key(name: &str) -> ObjectKey {
    ObjectKey::Secret(ObjectRef::new("default", name))
}

fn account(name: &str, secrets: &[&str]) -> ServiceAccount {
    ServiceAccount::new("default", name, secrets, None::<(&str, &str)>)
}

fn keys(pod: &PodFacts, config: &Config, known: &ClusterSnapshot) -> Vec<ObjectKey> {
    needed_keys(pod, config, known).into_iter().collect()
}

const URI: &str = SOURCE_URI_ANNOTATION;

#[test]
fn no_label_needs_nothing() {
    let mut p = pod(&[(URI, "gs://m"), (LOGGER_ANNOTATION, "true")]);
    p.labels.clear();
    assert!(needed_keys(&p, &Config::default(), &ClusterSnapshot::default()).is_empty());
}

#[test]
fn storage_uri_needs_cscs_service_account_then_its_secrets() {
    let config = Config::default();
    let p = pod(&[(URI, "s3://bucket/model")]);
    assert_eq!(
        keys(&p, &config, &ClusterSnapshot::default()),
        [sa_key("default"), ObjectKey::ClusterStorageContainers]
    );
    let mut known = ClusterSnapshot::default();
    known.insert_service_account(account("default", &["a", "b"]));
    assert_eq!(
        keys(&p, &config, &known),
        [
            sa_key("default"),
            secret_key("a"),
            secret_key("b"),
            ObjectKey::ClusterStorageContainers
        ]
    );
}

#[test]
fn storage_secret_annotation_replaces_listed_secrets() {
    let mut config = Config::default();
    config.credentials.storage_secret_name_annotation =
        "serving.kserve.io/storageSecretName".into();
    let p = pod(&[
        (URI, "s3://m"),
        ("serving.kserve.io/storageSecretName", "mine"),
    ]);
    let mut known = ClusterSnapshot::default();
    known.insert_service_account(account("default", &["a"]));
    assert_eq!(
        keys(&p, &config, &known),
        [
            sa_key("default"),
            secret_key("mine"),
            ObjectKey::ClusterStorageContainers
        ]
    );
}

#[test]
fn no_credentials_where_no_init_container_downloads() {
    let config = Config::default();
    let known = ClusterSnapshot::default();
    for annotations in [
        vec![(URI, "pvc://claim/path")],
        vec![(URI, "oci://registry/model")], // the shipped config enables modelcar
    ] {
        assert_eq!(
            keys(&pod(&annotations), &config, &known),
            [ObjectKey::ClusterStorageContainers]
        );
    }
    let mut local = pod(&[(URI, "s3://m")]);
    local.labels.insert(LOCAL_MODEL_LABEL.into(), "m".into());
    assert_eq!(
        keys(&local, &config, &known),
        [ObjectKey::ClusterStorageContainers]
    );
    // OCI with OCI support off downloads through the storage-initializer.
    let mut no_oci = Config::default();
    no_oci.storage_initializer.enable_modelcar = false;
    no_oci.storage_initializer.enable_oci_model_support = false;
    no_oci.storage_initializer.oci_model_mode.clear();
    assert_eq!(
        keys(&pod(&[(URI, "oci://registry/model")]), &no_oci, &known),
        [sa_key("default"), ObjectKey::ClusterStorageContainers]
    );
}

#[test]
fn storage_spec_needs_only_its_secret() {
    let mut config = Config::default();
    let p = pod(&[
        (URI, "<scheme-placeholder>://foo"),
        (STORAGE_SPEC_ANNOTATION, "true"),
    ]);
    let known = ClusterSnapshot::default();
    assert_eq!(
        keys(&p, &config, &known),
        [
            secret_key("storage-config"),
            ObjectKey::ClusterStorageContainers
        ]
    );
    config.credentials.storage_spec_secret_name = "custom".into();
    assert_eq!(keys(&p, &config, &known)[0], secret_key("custom"));
    config.credentials.storage_secret_name_annotation = "ann".into();
    let mut p = p;
    p.annotations.insert("ann".into(), "from-pod".into());
    assert_eq!(keys(&p, &config, &known)[0], secret_key("from-pod"));
}

#[test]
fn agent_needs_pod_service_account_and_logger_storage_account() {
    let mut config = Config::default();
    let mut p = pod(&[(AGENT_ANNOTATION, "true"), (URI, "gs://m")]);
    p.service_account_name = "sa".into();
    // The puller skips the storage-initializer but still needs the agent's credentials.
    assert_eq!(
        keys(&p, &config, &ClusterSnapshot::default()),
        [sa_key("sa"), ObjectKey::ClusterStorageContainers]
    );
    let logger = pod(&[(LOGGER_ANNOTATION, "true")]);
    let isvc = ObjectKey::InferenceService(ObjectRef::new("default", "sklearn"));
    assert_eq!(
        keys(&logger, &config, &ClusterSnapshot::default()),
        [sa_key("default"), isvc.clone()]
    );
    config.logger.storage = Some(LoggerStorage {
        service_account_name: "logger-sa".into(),
        ..LoggerStorage::default()
    });
    assert_eq!(
        keys(&logger, &config, &ClusterSnapshot::default()),
        [sa_key("default"), sa_key("logger-sa"), isvc.clone()]
    );
    // The InferenceService's logger without storage turns it off.
    let mut known = ClusterSnapshot::default();
    known.insert_inference_service(InferenceService {
        namespace: "default".into(),
        name: "sklearn".into(),
        predictor_logger: Some(Box::default()),
    });
    assert_eq!(keys(&logger, &config, &known), [sa_key("default"), isvc]);
}

#[test]
fn restrict_follows_the_chain_to_a_fixed_point() {
    let mut all = ClusterSnapshot::default();
    all.insert_service_account(account("default", &["hf"]));
    all.insert_service_account(account("my-logger", &["s3"]));
    all.insert_service_account(account("unrelated", &["x"]));
    for name in ["hf", "s3", "x", "storage-config"] {
        all.insert_secret(Secret::new("default", name).with_data("k", "v"));
    }
    all.insert_inference_service(InferenceService {
        namespace: "default".into(),
        name: "sklearn".into(),
        predictor_logger: Some(Box::new(IsvcLogger {
            storage: Some(Box::new(LoggerStorage {
                service_account_name: "my-logger".into(),
                ..LoggerStorage::default()
            })),
            ..IsvcLogger::default()
        })),
    });
    let p = pod(&[(LOGGER_ANNOTATION, "true")]);
    let got = all.restrict(&p, &Config::default());
    let accounts: Vec<_> = got
        .service_accounts
        .keys()
        .map(|r| r.name.as_str())
        .collect();
    assert_eq!(accounts, ["default", "my-logger"]);
    let secrets: Vec<_> = got.secrets.keys().map(|r| r.name.as_str()).collect();
    assert_eq!(secrets, ["hf", "s3"]);
    assert_eq!(got.inference_services.len(), 1);
    assert!(got.storage_containers.is_empty());
    // Another namespace sees nothing.
    let mut elsewhere = p.clone();
    elsewhere.namespace = "other".into();
    assert!(all.restrict(&elsewhere, &Config::default()).is_empty());
}

#[test]
fn pod_facts_keep_only_what_the_rules_read() {
    let mut config = Config::default();
    config.credentials.storage_secret_name_annotation = "team/storage-secret".into();
    let raw = serde_json::json!({
        "metadata": {
            "labels": {ISVC_LABEL: "sklearn", "n": 1, "app": "x"},
            "annotations": {URI: "gs://m", "team/storage-secret": "s",
                            "kubectl.kubernetes.io/last-applied-configuration": "{...}"}},
        "spec": {"serviceAccountName": "sa", "containers": []},
    });
    let facts = PodFacts::from_pod_value(&raw, "team", &config);
    assert_eq!(facts.namespace, "team");
    assert_eq!(facts.service_account_name, "sa");
    assert_eq!(facts.labels.keys().collect::<Vec<_>>(), [ISVC_LABEL]);
    let kept: Vec<&str> = facts.annotations.keys().map(String::as_str).collect();
    assert_eq!(kept, [URI, "team/storage-secret"]);
    let empty = PodFacts::from_pod_value(&serde_json::json!({}), "ns", &config);
    assert_eq!(
        empty,
        PodFacts {
            namespace: "ns".into(),
            ..PodFacts::default()
        }
    );
}

mod properties;

#[test]
fn an_oci_mode_uri_is_a_download_before_v0_20() {
    let p = pod(&[(URI, "oci+native://registry/model:v1")]);
    let head = Config::default();
    assert_eq!(
        keys(&p, &head, &ClusterSnapshot::default()),
        [ObjectKey::ClusterStorageContainers]
    );
    let v0_19 = Config::default().for_release(crate::release::Release::V0_19_0);
    assert_eq!(
        keys(&p, &v0_19, &ClusterSnapshot::default()),
        [sa_key("default"), ObjectKey::ClusterStorageContainers]
    );
}
