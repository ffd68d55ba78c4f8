use super::secret::REDACTED;
use super::storage_container::Matcher;
use super::*;
use crate::cluster::ObjectRef;
use k8s_openapi::api::core::v1 as api;
use k8s_openapi::api::core::v1::Container;
use k8s_openapi::ByteString;
use std::collections::BTreeMap;

#[test]
fn secret_keeps_key_names_and_only_listed_values() {
    let api_secret = api::Secret {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some("s3-secret".into()),
            annotations: Some(BTreeMap::from([(
                "serving.kserve.io/s3-endpoint".into(),
                "s3.aws.com".into(),
            )])),
            ..Default::default()
        },
        data: Some(BTreeMap::from([
            (
                "awsSecretAccessKey".into(),
                ByteString(b"very-secret".to_vec()),
            ),
            ("S3_ENDPOINT".into(), ByteString(b"minio:9000".to_vec())),
        ])),
        string_data: Some(BTreeMap::from([("HF_TOKEN".into(), "hf_abc".into())])),
        ..Default::default()
    };
    let s = Secret::from_api(&api_secret, "default");
    assert_eq!(s.object_ref(), ObjectRef::new("default", "s3-secret"));
    let keys: Vec<&str> = s.keys().collect();
    assert_eq!(keys, ["HF_TOKEN", "S3_ENDPOINT", "awsSecretAccessKey"]);
    assert_eq!(s.get("S3_ENDPOINT"), Some("minio:9000"));
    assert_eq!(s.get("awsSecretAccessKey"), Some(NOT_A_STORAGE_SPEC));
    assert_eq!(s.get("HF_TOKEN"), Some(NOT_A_STORAGE_SPEC));
    let held = format!("{s:?}");
    let plain = Secret::from_data("default", "s3-secret", [("S3_ENDPOINT", "minio:9000")]);
    assert_eq!(plain.get("S3_ENDPOINT"), s.get("S3_ENDPOINT"));
    assert!(
        !held.contains("very-secret") && !held.contains("hf_abc"),
        "{held}"
    );
    assert_eq!(
        s.annotation("serving.kserve.io/s3-endpoint"),
        Some("s3.aws.com")
    );
}

#[test]
fn storage_spec_entries_keep_only_what_kserve_reads() {
    let s = Secret::new("default", "storage-config")
        .with_data(
            "my-storage",
            r#"{"type":"s3","bucket":"b","region":"na","secret_access_key":"x","cabundle_configmap":"cm"}"#,
        )
        .with_data("typeless", r#"{"region":"na"}"#)
        .with_data("numbers", r#"{"type":"s3","port":9000}"#)
        .with_data("null", "null");
    assert_eq!(
        s.get("my-storage").unwrap(),
        r#"{"bucket":"b","cabundle_configmap":"cm","type":"s3"}"#
    );
    assert_eq!(s.get("typeless").unwrap(), "{}");
    // Go's map[string]string rejects a number member; so does the marker.
    assert_eq!(s.get("numbers").unwrap(), NOT_A_STORAGE_SPEC);
    assert!(serde_json::from_str::<serde_json::Value>(NOT_A_STORAGE_SPEC).is_err());
    assert_eq!(s.get("null").unwrap(), "null");
    assert!(s.get("absent").is_none());
}

#[test]
fn https_and_s3_settings_are_verbatim() {
    let s = Secret::new("ns", "n")
        .with_data("https-host", "github.com")
        .with_data("headers", "{\n\"Authorization\": \"token x\"\n}")
        .with_data("AWS_CA_BUNDLE", "/path/ca.crt");
    assert_eq!(s.get("https-host").unwrap(), "github.com");
    assert!(s.get("headers").unwrap().starts_with("{\n"));
    assert_eq!(s.get("AWS_CA_BUNDLE").unwrap(), "/path/ca.crt");
    // Kept values (a header may carry a token) never reach `Debug`.
    let printed = format!("{s:?}");
    assert!(!printed.contains("token x") && !printed.contains("github.com"));
    assert!(printed.contains(REDACTED) && printed.contains("https-host"));
}

#[test]
fn uri_format_prefers_prefix_and_keeps_regex_errors() {
    assert_eq!(
        UriFormat::new(Some("s3://"), Some("x")),
        UriFormat::Prefix("s3://".into())
    );
    assert_eq!(UriFormat::new(Some(""), None), UriFormat::Empty);
    match UriFormat::new(None, Some("(")) {
        UriFormat::Regex(r) => match r.compiled {
            Err(e) => assert!(!e.to_string().is_empty()),
            Ok(m) => panic!("{m:?}"),
        },
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_service_account_keeps_its_secrets_in_order_and_the_annotations_read() {
    let sa = ServiceAccount::new(
        "ns",
        "sa",
        ["b", "a", "b"],
        [
            ("serving.kserve.io/s3-region", "eu"),
            ("note", "dropped"),
            (IRSA_ANNOTATION, "arn:1"),
            ("serving.kserve.io/s3-other", "dropped"),
            (IRSA_ANNOTATION, "arn:2"),
        ],
    );
    assert_eq!((sa.namespace(), sa.name()), ("ns", "sa"));
    assert_eq!(sa.secrets().collect::<Vec<_>>(), ["b", "a", "b"]);
    assert_eq!(
        sa.annotations().collect::<Vec<_>>(),
        [
            (IRSA_ANNOTATION, "arn:2"),
            ("serving.kserve.io/s3-region", "eu")
        ]
    );
    assert_eq!(sa.annotation("serving.kserve.io/s3-region"), Some("eu"));
    assert_eq!(sa.annotation("serving.kserve.io/s3-endpoint"), None);
    assert_eq!(sa.annotation("note"), None);
    let empty = ServiceAccount::new("ns", "", None::<&str>, None::<(&str, &str)>);
    assert_eq!((empty.name(), empty.secrets().len()), ("", 0));
    assert_eq!(empty.annotations().count(), 0);
}

#[test]
fn every_read_annotation_is_kept_with_its_value() {
    let pairs: Vec<(&str, String)> = (READ_ANNOTATIONS.iter().enumerate())
        .map(|(i, k)| (*k, format!("v{i}")))
        .collect();
    for skip in 0..READ_ANNOTATIONS.len() {
        let some = pairs
            .iter()
            .enumerate()
            .filter(|(i, _)| i % (skip + 1) == 0);
        let some: Vec<(&str, &str)> = some.map(|(_, (k, v))| (*k, v.as_str())).collect();
        let secret = Secret::reduced("ns", "s", some.iter().copied(), [("k", "v")]);
        for (k, v) in &pairs {
            let expected = some.iter().find(|(key, _)| key == k).map(|(_, v)| *v);
            assert_eq!(secret.annotation(k), expected, "{k} {v}");
        }
        assert_eq!(secret.annotations().collect::<Vec<_>>(), some);
        assert_eq!(secret.keys().collect::<Vec<_>>(), ["k"]);
    }
}

#[test]
fn a_secret_finds_each_key_and_keeps_a_value_only_where_read() {
    let secret = Secret::from_data(
        "ns",
        "s",
        [
            ("S3_ENDPOINT", "minio:9000"),
            ("a", "x"),
            ("storage", r#"{"type":"s3","secret_access_key":"k"}"#),
            ("z", "y"),
            ("a", "{}"),
        ],
    );
    assert_eq!(
        secret.keys().collect::<Vec<_>>(),
        ["S3_ENDPOINT", "a", "storage", "z"]
    );
    assert_eq!(secret.get("S3_ENDPOINT"), Some("minio:9000"));
    // The later of a key given twice wins.
    assert_eq!(secret.get("a"), Some("{}"));
    assert_eq!(secret.get("storage"), Some(r#"{"type":"s3"}"#));
    assert_eq!(secret.get("z"), Some(NOT_A_STORAGE_SPEC));
    assert_eq!(secret.get("b"), None);
    assert!(secret.has_key("z") && !secret.has_key("") && !secret.has_key("zz"));
    // Only the values read are held: the kept key's and the two storage
    // specs' projections.
    assert_eq!(secret.values.len(), 3);
    let again = secret.clone().with_data("b", "1");
    assert_eq!(again.keys().count(), 5);
    assert_eq!(again.get("a"), Some("{}"));
    assert_eq!(again.get("b"), Some(NOT_A_STORAGE_SPEC));
}

#[test]
fn a_storage_container_gives_its_container_back() {
    let container: Container = serde_json::from_value(serde_json::json!({
        "name": "init", "image": "i:1", "args": ["a"],
        "env": [{"name": "E", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}],
        "resources": {"limits": {"memory": "2Gi"}},
        "ports": [{"containerPort": 80, "protocol": "TCP"}],
        "readinessProbe": {"httpGet": {"port": "http"}},
    }))
    .unwrap();
    let csc =
        ClusterStorageContainer::new("c", &container, Box::new([]), "x", false, true).unwrap();
    assert_eq!(csc.container().unwrap(), container);
    assert_eq!((csc.name(), csc.container_name()), ("c", "init"));
    assert_eq!(csc.workload_type(), "x");
}

/// The Pike VM kept for a regex format answers as `regex::Regex` does.
#[test]
fn a_regex_format_matches_as_regex_does() {
    let patterns = [
        "^s3://team-1-[a-z]+/",
        "https://(.+?).blob.core.windows.net/(.+)",
        "(?i)^HF://",
        r"\bmodels\b",
        r"^gs://[\w-]+/\p{L}+$",
        "^$",
        "a|",
        r"\.onnx$",
        "(?m)^x",
    ];
    let uris = [
        "",
        "s3://team-1-abc/m",
        "s3://team-1-/m",
        "https://acct.blob.core.windows.net/c/m",
        "hf://org/model",
        "HF://org/model",
        "pvc://models/x",
        "gs://b-1/modèle",
        "gs://b-1/m1",
        "oci://r/m.onnx",
        "y\nx",
    ];
    for pattern in patterns {
        let UriFormat::Regex(format) = UriFormat::new(None, Some(pattern)) else {
            panic!("{pattern}")
        };
        let matcher = format.compiled.as_ref().unwrap();
        assert!(matches!(matcher, Matcher::Vm(_)), "{pattern}");
        let regex = regex::Regex::new(pattern).unwrap();
        for uri in uris {
            assert_eq!(
                matcher.is_match(uri),
                regex.is_match(uri),
                "{pattern} {uri:?}"
            );
        }
    }
}
