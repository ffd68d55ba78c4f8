//! Property: every lookup the credential, storage-spec, logger and CSC code
//! makes for a pod gives the same answer on the whole snapshot and on
//! `restrict(pod)`, i.e. the key set leaves nothing out. Seeded, so a run is
//! reproducible; 1,000 generated clusters and pods.

use super::*;
use crate::cluster::credentials::{
    add_service_account_credentials, CredentialError, CredentialRequest, CredentialTarget,
};
use crate::cluster::objects::{IsvcLogger, Secret, ServiceAccount};
use crate::cluster::storage_container::select;
use crate::cluster::storage_spec::{add_storage_spec_credentials, StorageSpec};
use crate::cluster::InferenceService;
use crate::config::LoggerStorage;
use crate::storage_uri::parse_oci;
use proptest::prelude::*;
use proptest::test_runner::{Config as RunnerConfig, RngAlgorithm, TestRng, TestRunner};
use serde_json::json;
use std::collections::BTreeMap;

const NAMESPACES: [&str; 2] = ["default", "team"];
const ACCOUNTS: [&str; 3] = ["default", "sa", "logger-sa"];
const SECRETS: [&str; 6] = ["s3", "gcs", "hf", "az", "storage-config", "absent"];
const ANNOTATION: &str = "serving.kserve.io/storageSecretName";

fn secret(namespace: &str, name: &str) -> Secret {
    let s = Secret::new(namespace, name);
    match name {
        "s3" => s
            .with_data("AWS_SECRET_ACCESS_KEY", "k")
            .with_data("AWS_ACCESS_KEY_ID", "i"),
        "gcs" => s.with_data("gcloud-application-credentials.json", "{}"),
        "hf" => s.with_data("HF_TOKEN", "t"),
        "az" => s.with_data("AZ_CLIENT_ID", "c"),
        _ => s.with_data("default", r#"{"type":"s3","bucket":"b"}"#),
    }
}

#[derive(Debug, Clone)]
struct Case {
    accounts: Vec<(usize, usize, Vec<usize>, bool)>,
    secrets: Vec<(usize, usize)>,
    isvc_logger_sa: Option<Option<usize>>,
    pod_namespace: usize,
    pod_sa: Option<usize>,
    uri: Option<&'static str>,
    flags: [bool; 5],
    annotated: Option<usize>,
    config_annotation: bool,
    config_logger_storage: bool,
}

fn case() -> impl Strategy<Value = Case> {
    let account = (
        0..2usize,
        0..3usize,
        prop::collection::vec(0..6usize, 0..4),
        any::<bool>(),
    );
    let uris = prop::sample::select(vec!["gs://m", "s3://m", "pvc://c/p", "oci://r/m", "hf://x"]);
    (
        prop::collection::vec(account, 0..5),
        prop::collection::vec((0..2usize, 0..6usize), 0..8),
        prop::option::of(prop::option::of(0..3usize)),
        (
            0..2usize,
            prop::option::of(0..3usize),
            prop::option::of(uris),
        ),
        any::<[bool; 5]>(),
        prop::option::of(0..6usize),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(accounts, secrets, isvc, (ns, sa, uri), flags, annotated, ca, cl)| Case {
                accounts,
                secrets,
                isvc_logger_sa: isvc,
                pod_namespace: ns,
                pod_sa: sa,
                uri,
                flags,
                annotated,
                config_annotation: ca,
                config_logger_storage: cl,
            },
        )
}

fn build(case: &Case) -> (ClusterSnapshot, PodFacts, Config) {
    let mut all = ClusterSnapshot::default();
    for (ns, name, secrets, irsa) in &case.accounts {
        let annotations = irsa.then_some(("eks.amazonaws.com/role-arn", "arn"));
        all.insert_service_account(ServiceAccount::new(
            NAMESPACES[*ns],
            ACCOUNTS[*name],
            secrets.iter().map(|i| SECRETS[*i]),
            annotations,
        ));
    }
    for (ns, name) in &case.secrets {
        if SECRETS[*name] != "absent" {
            all.insert_secret(secret(NAMESPACES[*ns], SECRETS[*name]));
        }
    }
    let namespace = NAMESPACES[case.pod_namespace];
    if let Some(sa) = case.isvc_logger_sa {
        all.insert_inference_service(InferenceService {
            namespace: namespace.into(),
            name: "isvc".into(),
            predictor_logger: Some(Box::new(IsvcLogger {
                storage: sa.map(|i| {
                    Box::new(LoggerStorage {
                        service_account_name: ACCOUNTS[i].into(),
                        ..LoggerStorage::default()
                    })
                }),
                ..IsvcLogger::default()
            })),
        });
    }
    let csc = json!({"apiVersion": "serving.kserve.io/v1alpha1", "kind": "ClusterStorageContainer",
        "metadata": {"name": "default"},
        "spec": {"container": {"name": "storage-initializer"}, "supportedUriFormats": [{"prefix": "gs://"}]}});
    all.storage_containers = ClusterSnapshot::from_documents(vec![csc])
        .unwrap()
        .storage_containers;

    let mut annotations = BTreeMap::new();
    let [storage_spec, logger, agent, batcher, _] = case.flags;
    let mut set = |on: bool, key: &str, value: &str| {
        if on {
            annotations.insert(key.to_string(), value.to_string());
        }
    };
    set(
        case.uri.is_some(),
        SOURCE_URI_ANNOTATION,
        case.uri.unwrap_or_default(),
    );
    set(storage_spec, STORAGE_SPEC_ANNOTATION, "true");
    set(logger, LOGGER_ANNOTATION, "true");
    set(agent, AGENT_ANNOTATION, "true");
    set(batcher, BATCHER_ANNOTATION, "true");
    if let Some(i) = case.annotated {
        annotations.insert(ANNOTATION.to_string(), SECRETS[i].to_string());
    }
    let pod = PodFacts {
        namespace: namespace.into(),
        service_account_name: case
            .pod_sa
            .map(|i| ACCOUNTS[i].to_string())
            .unwrap_or_default(),
        annotations,
        labels: BTreeMap::from([(ISVC_LABEL.to_string(), "isvc".to_string())]),
    };
    let mut config = Config::default();
    if case.config_annotation {
        config.credentials.storage_secret_name_annotation = ANNOTATION.into();
    }
    if case.config_logger_storage {
        config.logger.storage = Some(LoggerStorage {
            service_account_name: "logger-sa".into(),
            ..LoggerStorage::default()
        });
    }
    (all, pod, config)
}

fn credentials(
    data: &ClusterSnapshot,
    pod: &PodFacts,
    config: &Config,
    sa: &str,
) -> Result<CredentialTarget, CredentialError> {
    let mut target = CredentialTarget::default();
    let request = CredentialRequest {
        namespace: &pod.namespace,
        service_account_name: sa,
        pod_annotations: &pod.annotations,
        release: Default::default(),
    };
    add_service_account_credentials(data, &config.credentials, &request, &mut target)?;
    Ok(target)
}

/// Every lookup the injectors make for this pod, on `data`.
fn lookups(data: &ClusterSnapshot, pod: &PodFacts, config: &Config) -> Vec<String> {
    let ann = |k: &str| pod.annotations.get(k).map(String::as_str);
    let mut out = Vec::new();
    if let Some(uri) = ann(SOURCE_URI_ANNOTATION) {
        out.push(format!(
            "{:?}",
            select(data, uri, None).map(|c| c.map(|c| c.name.clone()))
        ));
        // The storage-initializer's own skips (§2.3 steps 6-7, PVC).
        let oci_mode = config.storage_initializer.oci_mode();
        let downloads = ann(AGENT_ANNOTATION).is_none()
            && parse_pvc(uri).is_none()
            && parse_oci(uri).is_none_or(|o| oci_effective_mode(&o, oci_mode).is_empty());
        if downloads && ann(STORAGE_SPEC_ANNOTATION) == Some("true") {
            let spec = StorageSpec::from_annotations(&pod.annotations)
                .unwrap()
                .unwrap();
            let (mut env, mut args) = (Vec::new(), vec![uri.to_string()]);
            let result = add_storage_spec_credentials(
                data,
                &config.credentials,
                &pod.namespace,
                &pod.annotations,
                &spec,
                &mut env,
                &mut args,
            );
            out.push(format!("{result:?} {env:?} {args:?}"));
        } else if downloads {
            out.push(format!(
                "{:?}",
                credentials(data, pod, config, &pod.service_account_name)
            ));
        }
    }
    let logger = ann(LOGGER_ANNOTATION).is_some();
    if logger || ann(AGENT_ANNOTATION).is_some() || ann(BATCHER_ANNOTATION).is_some() {
        out.push(format!(
            "{:?}",
            credentials(data, pod, config, &pod.service_account_name)
        ));
    }
    if logger {
        let isvc = data.inference_service(&pod.namespace, "isvc");
        let effective = effective_logger(&config.logger, isvc);
        out.push(format!("{effective:?}"));
        if let Some(sa) = logger_service_account(&effective) {
            out.push(format!("{:?}", credentials(data, pod, config, sa)));
        }
    }
    out
}

#[test]
fn restricted_snapshot_answers_every_lookup_like_the_whole() {
    let config = RunnerConfig {
        cases: 1_000,
        failure_persistence: None,
        rng_algorithm: RngAlgorithm::XorShift,
        ..RunnerConfig::default()
    };
    let rng = TestRng::from_seed(RngAlgorithm::XorShift, b"kserve-cluster-1");
    let mut runner = TestRunner::new_with_rng(config, rng);
    let result = runner.run(&case(), |case| {
        let (all, pod, config) = build(&case);
        let restricted = all.restrict(&pod, &config);
        let (a, b) = (
            lookups(&all, &pod, &config),
            lookups(&restricted, &pod, &config),
        );
        prop_assert_eq!(a, b);
        prop_assert!(restricted.len() <= all.len());
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}
