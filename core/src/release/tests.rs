use super::*;
use crate::cluster::storage_container::STORAGE_CONTAINER_NAME_ANNOTATION;
use crate::config::{image_mismatches, Config};
use crate::constants::*;
use crate::mutation::unsupported;
use std::collections::BTreeMap;

#[test]
fn every_spelling_of_a_release_parses() {
    for text in ["v0.17", "v0.17.0", "0.17"] {
        assert_eq!(text.parse::<Release>(), Ok(Release::V0_17), "{text}");
    }
    assert_eq!("head".parse::<Release>(), Ok(Release::Head));
    assert_eq!("HEAD".parse::<Release>(), Ok(Release::Head));
    assert_eq!("v0.20".parse::<Release>(), Ok(Release::V0_20));
    assert_eq!(Release::default(), Release::Head);
}

#[test]
fn other_spellings_are_refused_with_the_supported_list() {
    for text in [
        "",
        "v0.14",
        "v1.17",
        "0.17.x",
        "v0.17.",
        "17",
        "latest",
        "v0.17.0.1",
        // Near misses: only the documented spellings name a release.
        " v0.17",
        "v0.17 ",
        "V0.17",
        "v0.17.1",
        "v0.17.3",
        "0.17.00",
        "0.17.0",
        "v0.017",
        "Head",
        "v0.17.00",
    ] {
        let err = text.parse::<Release>().unwrap_err();
        assert_eq!(err, ReleaseError::Unknown(text.to_string()));
        assert!(
            err.to_string()
                .contains("v0.15, v0.16, v0.17, v0.18, v0.19, v0.20, head"),
            "{err}"
        );
    }
}

#[test]
fn every_release_is_supported() {
    for (text, release) in [("v0.15", Release::V0_15), ("v0.15.0", Release::V0_15)] {
        assert_eq!(text.parse::<Release>(), Ok(release));
    }
    assert_eq!(Release::SUPPORTED, ALL.as_slice());
    // Newest last, as the error's list reads.
    assert!(ALL.windows(2).all(|w| w[0] < w[1]));
}

#[test]
fn image_tags_name_a_release() {
    let of = |image| Release::of_image(image).map(|t| t.to_string());
    assert_eq!(of("kserve/agent:v0.17.0").as_deref(), Some("v0.17"));
    assert_eq!(
        of("registry:5000/kserve/agent:v0.19.1").as_deref(),
        Some("v0.19")
    );
    assert_eq!(
        of("kserve/storage-initializer:v0.20.0-rc1").as_deref(),
        Some("v0.20")
    );
    assert_eq!(of("kserve/agent:latest"), None);
    assert_eq!(of("registry:5000/kserve/agent"), None);
    assert_eq!(of("kserve/agent@sha256:abcd"), None);
    let tag = |image| Release::of_image(image).expect("a release tag");
    assert!(Release::V0_17.matches_image(tag("kserve/agent:v0.17.2")));
    assert!(!Release::V0_17.matches_image(tag("kserve/agent:v0.18.0")));
    // KServe v0.15.0's release manifests pin both images to v0.15.0.
    assert!(Release::V0_15.matches_image(tag("kserve/storage-initializer:v0.15.0")));
    assert!(!Release::V0_15.matches_image(tag("kserve/agent:v0.16.0")));
    assert!(!Release::Head.matches_image(tag("kserve/agent:v0.15.2")));
    // KServe's chart at HEAD still renders v0.20.0.
    assert!(Release::Head.matches_image(tag("kserve/agent:v0.20.0")));
    assert!(Release::Head.matches_image(tag("kserve/agent:v0.21.0")));
    assert!(!Release::Head.matches_image(tag("kserve/agent:v0.17.0")));
}

#[test]
fn image_mismatches_name_the_key_and_the_release() {
    let mut config = Config::default();
    config.agent.image = "kserve/agent:v0.17.0".into();
    config.storage_initializer.image = "kserve/storage-initializer:latest".into();
    assert!(image_mismatches(&config, Release::V0_17).is_empty());
    let found = image_mismatches(&config, Release::Head);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].key, "agent");
    assert_eq!(found[0].names.to_string(), "v0.17");
    config.storage_initializer.image = "kserve/storage-initializer:v0.19.0".into();
    assert_eq!(image_mismatches(&config, Release::V0_18).len(), 2);
}

/// ConfigMap data with these `storageInitializer` keys besides the
/// required quantities.
fn data(storage_initializer: &str) -> BTreeMap<String, String> {
    let quantities =
        r#""memoryRequest": "100Mi", "memoryLimit": "1Gi", "cpuRequest": "100m", "cpuLimit": "1""#;
    let keys = storage_initializer
        .trim()
        .trim_start_matches('{')
        .trim_end_matches('}');
    let section = if keys.trim().is_empty() {
        format!("{{{quantities}}}")
    } else {
        format!("{{{quantities}, {keys}}}")
    };
    let mut data = BTreeMap::from([("storageInitializer".to_string(), section)]);
    for key in ["logger", "batcher", "agent"] {
        data.insert(key.to_string(), format!("{{{quantities}}}"));
    }
    data
}

#[test]
fn oci_mode_keys_are_read_and_validated_from_v0_20() {
    let invalid = data(r#"{"enableModelcar": true, "ociModelMode": "sidecar"}"#);
    for release in [Release::Head, Release::V0_20] {
        let err = Config::from_data_with(&invalid, &Default::default(), release).unwrap_err();
        assert!(err.to_string().contains("ociModelMode"), "{err}");
    }
    for release in [Release::V0_19, Release::V0_18, Release::V0_17] {
        let config =
            Config::from_data_with(&invalid, &Default::default(), release).expect("key unknown");
        assert_eq!(config.storage_initializer.oci_mode(), "modelcar");
        assert_eq!(config.release, release);
    }
    let support_only = data(r#"{"enableOciModelSupport": true, "ociModelMode": "native"}"#);
    let v0_19 = Config::from_data_with(&support_only, &Default::default(), Release::V0_19).unwrap();
    assert_eq!(v0_19.storage_initializer.oci_mode(), "");
    let v0_20 = Config::from_data_with(&support_only, &Default::default(), Release::V0_20).unwrap();
    assert_eq!(v0_20.storage_initializer.oci_mode(), "native");
}

#[test]
fn insecure_registry_is_read_at_head_only() {
    let d = data(r#"{"ociModelMode": "fetch", "ociInsecureRegistry": true}"#);
    let at = |r| Config::from_data_with(&d, &Default::default(), r).unwrap();
    assert!(at(Release::Head).storage_initializer.oci_insecure_registry);
    assert!(!at(Release::V0_20).storage_initializer.oci_insecure_registry);
}

#[test]
fn the_configmap_holds_only_kserve_keys_and_the_release_is_given() {
    // The release comes from --kserve-version or our settings file; a
    // `kserveVersion` key in KServe's ConfigMap is ignored, as KServe does.
    let mut d = data("{}");
    d.insert("kserveVersion".into(), "v0.15".into());
    assert_eq!(Config::from_data(&d).unwrap().release, Release::Head);
    let given = Config::from_data_with(&d, &Default::default(), Release::V0_19).unwrap();
    assert_eq!(given.release, Release::V0_19);
}

#[test]
fn logger_marshaller_keys_arrive_in_v0_17() {
    let mut config = Config::default();
    config.logger.marshaller_url = "http://m".into();
    config.logger.batch_size = 5;
    config.logger.batch_interval = "1s".into();
    let kept = config.clone().for_release(Release::V0_17);
    assert_eq!(kept.logger, config.logger);
    let gone = config.for_release(Release::V0_16);
    assert_eq!(
        (gone.logger.marshaller_url.as_str(), gone.logger.batch_size),
        ("", 0)
    );
}

#[test]
fn unsupported_requests_are_named_per_release() {
    use crate::pod::WorkingSet;
    let pod = |annotations: serde_json::Value| {
        serde_json::json!({
            "metadata": {"name": "p", "labels": {"serving.kserve.io/inferenceservice": "i"},
                         "annotations": annotations},
            "spec": {"containers": [{"name": "kserve-container"}]}
        })
        .to_string()
    };
    let lacks = |text: &str, release| {
        let view = crate::view::pod_from_str(text).expect("a pod");
        let doc = WorkingSet::in_namespace(view, "default");
        unsupported(&doc, release)
    };
    let native = pod(serde_json::json!({SOURCE_URI_ANNOTATION: "oci+native://r/m"}));
    assert!(lacks(&native, Release::V0_20).is_empty());
    let got = lacks(&native, Release::V0_19);
    assert_eq!(got.len(), 1);
    assert!(got[0]
        .to_string()
        .starts_with("KServe v0.19 has no URI scheme oci+native://"));
    let fetch = pod(serde_json::json!({SOURCE_URI_ANNOTATION: "oci+fetch://r/m"}));
    assert!(lacks(&fetch, Release::Head).is_empty());
    assert!(lacks(&fetch, Release::V0_20)[0]
        .instead
        .contains("modelcar"));
    let both = pod(serde_json::json!({
        CONFIDENTIAL_ENABLED_ANNOTATION: "true",
        STORAGE_CONTAINER_NAME_ANNOTATION: "csc",
    }));
    assert_eq!(lacks(&both, Release::V0_19).len(), 2);
    assert!(lacks(&both, Release::V0_20).is_empty());
    assert!(lacks(&both, Release::Head).is_empty());
    let metadata = pod(serde_json::json!({
        LOGGER_ANNOTATION: "true",
        LOGGER_METADATA_ANNOTATIONS_ANNOTATION: "team",
    }));
    assert!(lacks(&metadata, Release::V0_16).is_empty());
    let got = lacks(&metadata, Release::V0_15);
    assert_eq!(got.len(), 1);
    assert!(
        got[0].instead.contains("--metadata-annotations"),
        "{}",
        got[0]
    );
}

#[test]
fn direct_pvc_volume_mount_is_read_under_v0_15_only() {
    let absent = data("{}");
    let at = |d: &BTreeMap<String, String>, r| Config::from_data_with(d, &Default::default(), r);
    assert!(
        at(&absent, Release::V0_15)
            .unwrap()
            .storage_initializer
            .pvc_copy_mode
    );
    let direct = data(r#"{"enableDirectPvcVolumeMount": true}"#);
    assert!(
        !at(&direct, Release::V0_15)
            .unwrap()
            .storage_initializer
            .pvc_copy_mode
    );
    // Unknown to every later release: never read, so never refused.
    let odd = data(r#"{"enableDirectPvcVolumeMount": "yes"}"#);
    for release in [Release::V0_17, Release::Head] {
        assert!(
            !at(&absent, release)
                .unwrap()
                .storage_initializer
                .pvc_copy_mode
        );
        assert!(at(&odd, release).is_ok());
    }
    assert!(at(&odd, Release::V0_15).is_err());
    // KServe's shipped ConfigMap of v0.15.0 says true.
    let shipped = Config::default().for_release(Release::V0_15);
    assert!(!shipped.storage_initializer.pvc_copy_mode);
}

#[test]
fn logger_storage_arrives_in_v0_16() {
    let mut config = Config::default();
    config.logger.storage = Some(crate::config::LoggerStorage {
        path: "/logs".into(),
        ..Default::default()
    });
    assert!(config
        .clone()
        .for_release(Release::V0_16)
        .logger
        .storage
        .is_some());
    assert!(config.for_release(Release::V0_15).logger.storage.is_none());
}

#[test]
fn v0_15_storage_initializer_resource_error_text() {
    let bad = data(r#"{"memoryRequest": "lots"}"#);
    let err = Config::from_data_with(&bad, &Default::default(), Release::V0_15).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("Failed to parse resource configuration for \"storageInitializer\": \""),
        "{err}"
    );
    let err = Config::from_data_with(&bad, &Default::default(), Release::V0_16).unwrap_err();
    assert!(
        err.to_string().starts_with(
            "failed to parse resource configuration for \"storageInitializer\".\"memoryRequest\""
        ),
        "{err}"
    );
}

#[test]
fn modelcar_quantities_are_required_under_v0_16_only() {
    let absent = data("{}");
    for release in [Release::V0_15, Release::V0_17, Release::Head] {
        assert!(Config::from_data_with(&absent, &Default::default(), release).is_ok());
    }
    assert!(Config::from_data_with(&absent, &Default::default(), Release::V0_16).is_err());
}

#[test]
fn several_bad_quantities_always_name_the_same_key() {
    // KServe v0.16 to HEAD check them in Go's map order, so the key named
    // varies from run to run; ours is the first in a fixed order.
    let all_bad = data(
        r#"{"memoryRequest": "x", "memoryLimit": "x", "cpuRequest": "x", "cpuLimit": "x",
            "cpuModelcar": "x", "memoryModelcar": "x"}"#,
    );
    let modelcar_bad = data(r#"{"cpuModelcar": "x", "memoryModelcar": "x"}"#);
    for release in [Release::V0_16, Release::V0_20, Release::Head] {
        let named = |d: &BTreeMap<String, String>| {
            let err = Config::from_data_with(d, &Default::default(), release).unwrap_err();
            err.to_string()
        };
        assert!(named(&all_bad).contains(r#""storageInitializer"."memoryRequest""#));
        assert!(named(&modelcar_bad).contains(r#""storageInitializer"."cpuModelcar""#));
    }
}
