//! Vectors S13, S14, S18, S20, S22 (the env half; the CA-bundle volume is
//! decided from this env by the storage initializer), plus the lookup rules
//! of §2.3 "Otherwise (service account)".

use super::*;
use crate::cluster::objects::ServiceAccount;
use crate::config::S3Config;
use std::collections::BTreeMap;

fn s3_config() -> CredentialConfig {
    CredentialConfig {
        s3: S3Config {
            access_key_id_name: "awsAccessKeyID".into(),
            secret_access_key_name: "awsSecretAccessKey".into(),
            ..S3Config::default()
        },
        ..CredentialConfig::default()
    }
}

fn sa(name: &str, secrets: &[&str]) -> ServiceAccount {
    irsa_sa(name, secrets, &[])
}

fn irsa_sa(name: &str, secrets: &[&str], annotations: &[(&str, &str)]) -> ServiceAccount {
    ServiceAccount::new("default", name, secrets, annotations.iter().copied())
}

fn s3_secret(name: &str) -> Secret {
    Secret::new("default", name)
        .with_data("awsAccessKeyID", "id")
        .with_data("awsSecretAccessKey", "key")
}

fn run(
    cluster: &ClusterSnapshot,
    config: &CredentialConfig,
    sa_name: &str,
    annotations: &BTreeMap<String, String>,
) -> Result<CredentialTarget, CredentialError> {
    let mut target = CredentialTarget::default();
    let request = CredentialRequest {
        namespace: "default",
        service_account_name: sa_name,
        pod_annotations: annotations,
        release: Default::default(),
    };
    add_service_account_credentials(cluster, config, &request, &mut target)?;
    Ok(target)
}

/// `(name, value or "<secret>/<key>")` per variable.
fn env_summary(env: &[EnvVar]) -> Vec<(String, String)> {
    env.iter()
        .map(|e| {
            let v = match &e.value_from {
                Some(src) => {
                    let r = src.secret_key_ref.as_ref().unwrap();
                    format!("{}/{}", r.name, r.key)
                }
                None => e.value.clone().unwrap_or_default(),
            };
            (e.name.clone(), v)
        })
        .collect()
}

fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
    items
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

#[test]
fn s13_s3_secret_of_the_default_service_account() {
    let mut cluster = ClusterSnapshot::default();
    cluster.insert_service_account(sa("default", &["s3-secret"]));
    cluster.insert_secret(
        s3_secret("s3-secret").with_annotation("serving.kserve.io/s3-endpoint", "s3.aws.com"),
    );
    let t = run(&cluster, &s3_config(), "", &BTreeMap::new()).unwrap();
    assert_eq!(
        env_summary(&t.env),
        pairs(&[
            ("AWS_ACCESS_KEY_ID", "s3-secret/awsAccessKeyID"),
            ("AWS_SECRET_ACCESS_KEY", "s3-secret/awsSecretAccessKey"),
            ("S3_ENDPOINT", "s3.aws.com"),
            ("AWS_ENDPOINT_URL", "https://s3.aws.com"),
        ])
    );
    assert!(t.volumes.is_empty() && t.volume_mounts.is_empty());
}

#[test]
fn s14_gcs_secret() {
    let mut cluster = ClusterSnapshot::default();
    cluster.insert_service_account(sa("default", &["user-gcp-sa"]));
    cluster.insert_secret(
        Secret::new("default", "user-gcp-sa")
            .with_data("gcloud-application-credentials.json", "{}"),
    );
    let t = run(
        &cluster,
        &CredentialConfig::default(),
        "default",
        &BTreeMap::new(),
    )
    .unwrap();
    assert_eq!(
        env_summary(&t.env),
        pairs(&[(
            "GOOGLE_APPLICATION_CREDENTIALS",
            "/var/secrets/gcloud-application-credentials.json"
        )])
    );
    assert_eq!(t.volumes.len(), 1);
    assert_eq!(t.volumes[0].name, "user-gcp-sa");
    assert_eq!(t.volume_mounts[0].mount_path, "/var/secrets/");
}

#[test]
fn s18_access_keys_only_give_no_ca_env() {
    let mut cluster = ClusterSnapshot::default();
    cluster.insert_service_account(sa("default", &["s3-secret"]));
    cluster.insert_secret(s3_secret("s3-secret"));
    let t = run(&cluster, &s3_config(), "", &BTreeMap::new()).unwrap();
    assert_eq!(
        env_summary(&t.env),
        pairs(&[
            ("AWS_ACCESS_KEY_ID", "s3-secret/awsAccessKeyID"),
            ("AWS_SECRET_ACCESS_KEY", "s3-secret/awsSecretAccessKey"),
        ])
    );
}

#[test]
fn s20_s22_ca_settings_reach_the_env() {
    let mut cluster = ClusterSnapshot::default();
    cluster.insert_service_account(sa("default", &["s3-secret"]));
    cluster.insert_secret(
        s3_secret("s3-secret")
            .with_annotation(
                "serving.kserve.io/s3-cabundle-configmap",
                "cabundle-annotation",
            )
            .with_annotation(
                "serving.kserve.io/s3-cabundle",
                "/annotation/path/to/annotation-ca.crt",
            ),
    );
    let t = run(&cluster, &s3_config(), "", &BTreeMap::new()).unwrap();
    let summary = env_summary(&t.env);
    assert_eq!(
        summary[2..],
        pairs(&[
            ("AWS_CA_BUNDLE", "/annotation/path/to/annotation-ca.crt"),
            ("AWS_CA_BUNDLE_CONFIGMAP", "cabundle-annotation"),
        ])
    );
}

#[test]
fn missing_service_account_is_silently_skipped() {
    let mut cluster = ClusterSnapshot::default();
    cluster.insert_secret(s3_secret("s3-secret"));
    let annotations = BTreeMap::from([(
        "serving.kserve.io/storageSecretName".to_string(),
        "s3-secret".to_string(),
    )]);
    let config = CredentialConfig {
        storage_secret_name_annotation: "serving.kserve.io/storageSecretName".into(),
        ..s3_config()
    };
    assert_eq!(
        run(&cluster, &config, "sa", &annotations).unwrap(),
        CredentialTarget::default()
    );
}

#[test]
fn missing_secret_denies_with_kserve_message_and_changes_nothing() {
    let mut cluster = ClusterSnapshot::default();
    cluster.insert_service_account(sa("sa", &["s3-secret", "gone"]));
    cluster.insert_secret(s3_secret("s3-secret"));
    let mut target = CredentialTarget::default();
    let annotations = BTreeMap::new();
    let request = CredentialRequest {
        namespace: "default",
        service_account_name: "sa",
        pod_annotations: &annotations,
        release: Default::default(),
    };
    let err =
        add_service_account_credentials(&cluster, &s3_config(), &request, &mut target).unwrap_err();
    assert_eq!(err.to_string(), "secrets \"gone\" not found");
    assert_eq!(target, CredentialTarget::default());
}

#[test]
fn storage_secret_annotation_replaces_the_service_account_secrets() {
    let mut cluster = ClusterSnapshot::default();
    cluster.insert_service_account(sa("default", &["s3-secret"]));
    cluster.insert_secret(s3_secret("s3-secret"));
    cluster.insert_secret(Secret::new("default", "hf").with_data("HF_TOKEN", "t"));
    let key = "serving.kserve.io/storageSecretName";
    let annotations = BTreeMap::from([(key.to_string(), "hf".to_string())]);
    let config = CredentialConfig {
        storage_secret_name_annotation: key.into(),
        ..s3_config()
    };
    let t = run(&cluster, &config, "", &annotations).unwrap();
    assert_eq!(env_summary(&t.env), pairs(&[("HF_TOKEN", "hf/HF_TOKEN")]));
    // Without the config key the annotation means nothing.
    let t = run(&cluster, &s3_config(), "", &annotations).unwrap();
    assert_eq!(t.env.len(), 2);
    // A named Secret that does not exist denies the pod.
    let gone = BTreeMap::from([(key.to_string(), "gone".to_string())]);
    assert_eq!(
        run(&cluster, &config, "", &gone).unwrap_err(),
        CredentialError::SecretNotFound("gone".into())
    );
}

#[test]
fn irsa_settings_are_overridden_by_an_s3_secret() {
    let account = irsa_sa(
        "irsa",
        &["s3-secret"],
        &[
            (IRSA_ANNOTATION, "arn:aws:iam::1:role/r"),
            ("serving.kserve.io/s3-region", "us-east-1"),
            ("serving.kserve.io/s3-endpoint", "irsa.example"),
        ],
    );
    let mut cluster = ClusterSnapshot::default();
    cluster.insert_service_account(account);
    cluster.insert_secret(
        s3_secret("s3-secret").with_annotation("serving.kserve.io/s3-region", "eu-west-1"),
    );
    let t = run(&cluster, &s3_config(), "irsa", &BTreeMap::new()).unwrap();
    assert_eq!(
        env_summary(&t.env),
        pairs(&[
            ("S3_ENDPOINT", "irsa.example"),
            ("AWS_ENDPOINT_URL", "https://irsa.example"),
            ("AWS_DEFAULT_REGION", "eu-west-1"),
            ("AWS_ACCESS_KEY_ID", "s3-secret/awsAccessKeyID"),
            ("AWS_SECRET_ACCESS_KEY", "s3-secret/awsSecretAccessKey"),
        ])
    );
}

#[test]
fn irsa_without_secrets_gives_config_settings() {
    let account = irsa_sa("irsa", &[], &[(IRSA_ANNOTATION, "arn")]);
    let mut cluster = ClusterSnapshot::default();
    cluster.insert_service_account(account);
    let mut config = s3_config();
    config.s3.region = "us-west-2".into();
    let t = run(&cluster, &config, "irsa", &BTreeMap::new()).unwrap();
    assert_eq!(
        env_summary(&t.env),
        pairs(&[("AWS_DEFAULT_REGION", "us-west-2")])
    );
}

#[test]
fn second_s3_secret_merges_values_like_kserve() {
    let mut cluster = ClusterSnapshot::default();
    cluster.insert_service_account(sa("default", &["a", "b"]));
    cluster.insert_secret(s3_secret("a"));
    cluster.insert_secret(s3_secret("b").with_annotation("serving.kserve.io/s3-region", "r"));
    let t = run(&cluster, &s3_config(), "", &BTreeMap::new()).unwrap();
    // MergeEnvs replaces only `value`, so the first Secret's references stay.
    assert_eq!(
        env_summary(&t.env),
        pairs(&[
            ("AWS_ACCESS_KEY_ID", "a/awsAccessKeyID"),
            ("AWS_SECRET_ACCESS_KEY", "a/awsSecretAccessKey"),
            ("AWS_DEFAULT_REGION", "r"),
        ])
    );
}

#[test]
fn zero_config_uses_kserve_default_key_names() {
    let mut cluster = ClusterSnapshot::default();
    cluster.insert_service_account(sa("default", &["s3-secret"]));
    cluster.insert_secret(s3_secret("s3-secret"));
    let t = run(&cluster, &CredentialConfig::default(), "", &BTreeMap::new()).unwrap();
    assert_eq!(env_summary(&t.env)[0].1, "s3-secret/awsAccessKeyID");
    // The shipped ConfigMap names the AWS_* keys instead: no S3 match then.
    let shipped = crate::config::Config::default().credentials;
    assert_eq!(shipped.s3.secret_access_key_name, "AWS_SECRET_ACCESS_KEY");
    let t = run(&cluster, &shipped, "", &BTreeMap::new()).unwrap();
    assert!(t.env.is_empty());
}

#[test]
fn repeated_lookup_adds_each_volume_and_mount_once() {
    let mut cluster = ClusterSnapshot::default();
    cluster.insert_service_account(sa("default", &["gcs", "gcs2"]));
    cluster.insert_service_account(sa("logger-sa", &["gcs"]));
    for name in ["gcs", "gcs2"] {
        cluster.insert_secret(
            Secret::new("default", name).with_data("gcloud-application-credentials.json", "{}"),
        );
    }
    let annotations = BTreeMap::new();
    let mut target = CredentialTarget::default();
    for sa_name in ["default", "logger-sa"] {
        let request = CredentialRequest {
            namespace: "default",
            service_account_name: sa_name,
            pod_annotations: &annotations,
            release: Default::default(),
        };
        add_service_account_credentials(
            &cluster,
            &CredentialConfig::default(),
            &request,
            &mut target,
        )
        .unwrap();
    }
    assert_eq!(target.volumes.len(), 1);
    assert_eq!(
        target.volumes[0]
            .secret
            .as_ref()
            .unwrap()
            .secret_name
            .as_deref(),
        Some("gcs")
    );
    assert_eq!(target.volume_mounts.len(), 1);
    // Env is appended per Secret, as KServe does.
    assert_eq!(target.env.len(), 3);
}

#[test]
fn existing_env_is_kept_in_front() {
    let mut cluster = ClusterSnapshot::default();
    cluster.insert_service_account(sa("default", &["hf"]));
    cluster.insert_secret(Secret::new("default", "hf").with_data("HF_TOKEN", "t"));
    let annotations = BTreeMap::new();
    let mut target = CredentialTarget {
        env: vec![crate::cluster::s3::literal("SERVING_READINESS_PROBE", "{}")],
        ..CredentialTarget::default()
    };
    let request = CredentialRequest {
        namespace: "default",
        service_account_name: "",
        pod_annotations: &annotations,
        release: Default::default(),
    };
    add_service_account_credentials(
        &cluster,
        &CredentialConfig::default(),
        &request,
        &mut target,
    )
    .unwrap();
    let names: Vec<_> = target.env.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["SERVING_READINESS_PROBE", "HF_TOKEN"]);
}
