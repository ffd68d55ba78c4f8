//! Vectors S10, S15, S16 and the storage-spec errors, at function level.

use super::*;
use crate::cluster::Secret;

fn annotations(items: &[(&str, &str)]) -> BTreeMap<String, String> {
    let mut a = BTreeMap::from([(STORAGE_SPEC_ANNOTATION.to_string(), "true".to_string())]);
    a.extend(items.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    a
}

/// `(name, value or "<secret>/<key>")` per variable.
fn summary(env: &[EnvVar]) -> Vec<(String, String)> {
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

fn run(
    cluster: &ClusterSnapshot,
    config: &CredentialConfig,
    ann: &BTreeMap<String, String>,
) -> Result<(Vec<EnvVar>, Vec<String>), StorageSpecError> {
    let spec = StorageSpec::from_annotations(ann)?.expect("storage-spec pod");
    let mut env = Vec::new();
    let mut args = vec![
        "<scheme-placeholder>://foo/bar".to_string(),
        "/mnt/models".to_string(),
    ];
    add_storage_spec_credentials(cluster, config, "default", ann, &spec, &mut env, &mut args)?;
    Ok((env, args))
}

fn storage_config(key: &str, value: &str) -> ClusterSnapshot {
    let mut data = ClusterSnapshot::default();
    data.insert_secret(Secret::new("default", "storage-config").with_data(key, value));
    data
}

const PARAM: &str = STORAGE_SPEC_PARAM_ANNOTATION;
const KEY: &str = STORAGE_SPEC_KEY_ANNOTATION;

#[test]
fn s10_no_secret_parameters_give_type_and_bucket() {
    let ann = annotations(&[(PARAM, r#"{"type": "s3", "bucket": "my-bucket"}"#)]);
    let (env, args) = run(
        &ClusterSnapshot::default(),
        &CredentialConfig::default(),
        &ann,
    )
    .unwrap();
    assert_eq!(args, ["s3://my-bucket/foo/bar", "/mnt/models"]);
    assert_eq!(
        summary(&env),
        pairs(&[(
            "STORAGE_OVERRIDE_CONFIG",
            r#"{"bucket":"my-bucket","type":"s3"}"#
        )])
    );
}

#[test]
fn s15_secret_entry_by_key() {
    let data = storage_config(
        "my-storage",
        r#"{"type":"s3","bucket":"my-bucket","region":"na"}"#,
    );
    let ann = annotations(&[
        (PARAM, r#"{"some-param": "some-val"}"#),
        (KEY, "my-storage"),
    ]);
    let (env, args) = run(&data, &CredentialConfig::default(), &ann).unwrap();
    assert_eq!(args[0], "s3://my-bucket/foo/bar");
    assert_eq!(
        summary(&env),
        pairs(&[
            ("STORAGE_CONFIG", "storage-config/my-storage"),
            ("STORAGE_OVERRIDE_CONFIG", r#"{"some-param":"some-val"}"#),
        ])
    );
}

#[test]
fn s16_default_key() {
    let data = storage_config("default", r#"{"type":"s3","bucket":"my-bucket"}"#);
    let ann = annotations(&[(PARAM, r#"{"some-param": "some-val"}"#)]);
    let (env, _) = run(&data, &CredentialConfig::default(), &ann).unwrap();
    assert_eq!(
        summary(&env)[0],
        ("STORAGE_CONFIG".into(), "storage-config/default".into())
    );
}

#[test]
fn type_parameter_selects_default_type_key_without_parsing() {
    // The entry is not even JSON: with a type parameter KServe never parses it.
    let data = storage_config("default_hdfs", "not json");
    let ann = annotations(&[(PARAM, r#"{"type": "hdfs"}"#)]);
    let (env, args) = run(&data, &CredentialConfig::default(), &ann).unwrap();
    assert_eq!(args[0], "hdfs://foo/bar");
    assert_eq!(summary(&env)[0].1, "storage-config/default_hdfs");
}

#[test]
fn entry_ca_bundle_and_annotated_secret() {
    let mut data = ClusterSnapshot::default();
    data.insert_secret(Secret::new("default", "mine").with_data(
        "default",
        r#"{"type":"s3","bucket":"b","cabundle_configmap":"my-ca"}"#,
    ));
    let config = CredentialConfig {
        storage_secret_name_annotation: "serving.kserve.io/storageSecretName".into(),
        ..CredentialConfig::default()
    };
    let ann = annotations(&[("serving.kserve.io/storageSecretName", "mine")]);
    let (env, args) = run(&data, &config, &ann).unwrap();
    assert_eq!(args[0], "s3://b/foo/bar");
    assert_eq!(
        summary(&env),
        pairs(&[
            ("AWS_CA_BUNDLE_CONFIGMAP", "my-ca"),
            ("STORAGE_CONFIG", "mine/default")
        ])
    );
}

#[test]
fn kserve_messages() {
    let none = ClusterSnapshot::default();
    let cfg = CredentialConfig::default();
    let err = |data: &ClusterSnapshot, items: &[(&str, &str)]| {
        run(data, &cfg, &annotations(items))
            .unwrap_err()
            .to_string()
    };
    assert_eq!(err(&none, &[]), "unable to determine storage type");
    assert_eq!(
        err(&none, &[(KEY, "k")]),
        "can't read storage secret storage-config: secrets \"storage-config\" not found"
    );
    let data = storage_config("default", r#"{"type":"gcs"}"#);
    assert_eq!(
        err(&data, &[(KEY, "other")]),
        "specified storage key other not found in storage secret storage-config"
    );
    assert_eq!(
        err(&data, &[]),
        "storage type must be one of [s3, hdfs, webhdfs]. storage type [gcs] is not supported"
    );
    let data = storage_config("default", r#"{"type":"s3"}"#);
    assert_eq!(
        err(&data, &[]),
        "format [s3] requires a bucket but one wasn't found in storage data or parameters"
    );
    let data = storage_config("default", "[1]");
    assert!(err(&data, &[])
        .starts_with("invalid json encountered in key default of storage secret storage-config: "));
    assert!(err(&none, &[(PARAM, "{")]).starts_with(&format!("invalid {PARAM} annotation: ")));
}

#[test]
fn not_a_storage_spec_pod() {
    assert_eq!(StorageSpec::from_annotations(&BTreeMap::new()), Ok(None));
    let null = annotations(&[(PARAM, "null")]);
    assert_eq!(
        StorageSpec::from_annotations(&null)
            .unwrap()
            .unwrap()
            .params
            .len(),
        0
    );
}

#[test]
fn every_uri_argument_is_resolved_and_errors_change_nothing() {
    let mut args = vec![
        "<scheme-placeholder>://a".to_string(),
        "/mnt/models/a".to_string(),
        "<scheme-placeholder>://b".to_string(),
        "/mnt/models/b".to_string(),
    ];
    resolve_placeholders(&mut args, "webhdfs", None).unwrap();
    assert_eq!(args[0], "webhdfs://a");
    assert_eq!(args[2], "webhdfs://b");
    let mut args = vec!["<scheme-placeholder>://a".to_string()];
    assert!(resolve_placeholders(&mut args, "s3", Some("")).is_err());
    assert_eq!(args[0], "<scheme-placeholder>://a");
}
