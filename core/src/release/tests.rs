use super::*;
use crate::cluster::storage_container::STORAGE_CONTAINER_NAME_ANNOTATION;
use crate::config::{image_mismatches, Config};
use crate::constants::*;
use crate::mutation::unsupported;
use std::collections::BTreeMap;

const LIST: &str =
    "v0.15.0, v0.15.1, v0.15.2, v0.16.0, v0.17.0, v0.17.1, v0.18.0, v0.18.1, v0.19.0, v0.20.0, head";

#[test]
fn every_spelling_of_a_release_parses() {
    for release in ALL.into_iter().filter(|r| *r != Release::Head) {
        let tag = release.as_str();
        assert_eq!(tag.parse::<Release>(), Ok(release), "{tag}");
        assert_eq!(tag[1..].parse::<Release>(), Ok(release), "{tag}");
    }
    for text in ["v0.17.1", "0.17.1", "v0.17", "0.17"] {
        assert_eq!(text.parse::<Release>(), Ok(Release::V0_17_1), "{text}");
    }
    for text in ["v0.17.0", "0.17.0"] {
        assert_eq!(text.parse::<Release>(), Ok(Release::V0_17_0), "{text}");
    }
    assert_eq!("head".parse::<Release>(), Ok(Release::Head));
    assert_eq!("HEAD".parse::<Release>(), Ok(Release::Head));
    assert_eq!("v0.20".parse::<Release>(), Ok(Release::V0_20_0));
    assert_eq!(Release::default(), Release::Head);
}

#[test]
fn a_minor_alone_names_the_last_patch_release_of_its_line() {
    for (minor, last) in [
        ("v0.15", Release::V0_15_2),
        ("0.15", Release::V0_15_2),
        ("v0.16", Release::V0_16_0),
        ("v0.17", Release::V0_17_1),
        ("v0.18", Release::V0_18_1),
        ("v0.19", Release::V0_19_0),
        ("v0.20", Release::V0_20_0),
    ] {
        assert_eq!(minor.parse::<Release>(), Ok(last), "{minor}");
        let line = &minor[minor.len() - 4..];
        let newest = (ALL.into_iter())
            .filter(|r| r.as_str().starts_with(&format!("v{line}.")))
            .max();
        assert_eq!(newest, Some(last), "{minor}");
    }
}

#[test]
fn other_spellings_are_refused_with_the_supported_list() {
    for text in [
        "",
        "v0.14",
        "v0.14.0",
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
        "V0.17.1",
        "v0.17.3",
        "v0.15.3",
        "v0.20.1",
        "0.17.00",
        "v0.017",
        "Head",
        "v0.17.00",
        "v0.17.1-rc1",
        "vv0.17",
    ] {
        let err = text.parse::<Release>().unwrap_err();
        assert_eq!(err, ReleaseError::Unknown(text.to_string()));
        let message = err.to_string();
        assert!(message.contains(LIST), "{message}");
        assert!(
            message.contains("a minor alone, such as v0.15, names the last patch release of that line, v0.15.2, and v0.15.0 the first"),
            "{message}"
        );
    }
}

#[test]
fn every_release_is_supported() {
    assert_eq!(Release::SUPPORTED, ALL.as_slice());
    // Newest last, as the error's list reads.
    assert!(ALL.windows(2).all(|w| w[0] < w[1]));
    let names: Vec<&str> = ALL.iter().map(|r| r.as_str()).collect();
    assert_eq!(names.join(", "), LIST);
}

/// Tags whose pod mutator sources are the same have the same switches
/// (`git diff v0.17.0 v0.17.1 -- pkg cmd config/configmap` is empty, as
/// for v0.18.0 and v0.18.1; v0.15.1 to v0.15.2 changed only the shipped
/// ConfigMap; v0.18.0 to v0.19.0 only the controller's paths), and where
/// the shipped ConfigMap holds the same values too, one tag behaves
/// exactly as the other.
#[test]
fn patch_releases_share_the_behaviour_of_the_tag_whose_sources_they_equal() {
    let switches =
        |r: Release| -> Vec<bool> { Switch::ALL.iter().map(|s| s.in_release(r)).collect() };
    // Each group: one mutator; every two groups: two.
    let groups: [&[Release]; 7] = [
        &[Release::V0_15_0],
        &[Release::V0_15_1, Release::V0_15_2],
        &[Release::V0_16_0],
        &[Release::V0_17_0, Release::V0_17_1],
        &[Release::V0_18_0, Release::V0_18_1, Release::V0_19_0],
        &[Release::V0_20_0],
        &[Release::Head],
    ];
    assert_eq!(groups.concat(), ALL, "every release in one group, in order");
    for (i, group) in groups.iter().enumerate() {
        for r in *group {
            assert_eq!(switches(*r), switches(group[0]), "{r} and {}", group[0]);
        }
        for other in &groups[i + 1..] {
            assert_ne!(switches(group[0]), switches(other[0]), "{}", group[0]);
        }
    }
    // The same values shipped: the same pod from every input.
    let shipped = |r: Release| Config::shipped(r).for_release(Release::Head);
    for (patch, same_as) in [
        (Release::V0_17_1, Release::V0_17_0),
        (Release::V0_18_1, Release::V0_18_0),
        (Release::V0_19_0, Release::V0_18_0),
    ] {
        assert_eq!(shipped(patch), shipped(same_as), "{patch}'s defaults");
    }
    // v0.15.2 is v0.15.1's mutator with the modelcar shipped on.
    assert_ne!(shipped(Release::V0_15_2), shipped(Release::V0_15_1));
    // v0.15.1 differs from v0.15.0 in `--metadata-annotations` alone.
    let changed: Vec<&Switch> = (Switch::ALL.iter())
        .filter(|s| s.in_release(Release::V0_15_0) != s.in_release(Release::V0_15_1))
        .collect();
    assert_eq!(changed, [&Switch::LoggerMetadataAnnotations]);
}

#[test]
fn image_tags_name_a_release() {
    let of = |image| Release::of_image(image).map(|t| t.to_string());
    assert_eq!(of("kserve/agent:v0.17.0").as_deref(), Some("v0.17.0"));
    assert_eq!(
        of("registry:5000/kserve/agent:v0.19.1").as_deref(),
        Some("v0.19.1")
    );
    assert_eq!(
        of("kserve/storage-initializer:v0.20.0-rc1").as_deref(),
        Some("v0.20.0")
    );
    assert_eq!(of("kserve/agent:latest"), None);
    assert_eq!(of("kserve/agent:v0.17"), None);
    assert_eq!(of("registry:5000/kserve/agent"), None);
    assert_eq!(of("kserve/agent@sha256:abcd"), None);
    let tag = |image| Release::of_image(image).expect("a release tag");
    assert!(Release::V0_17_1.matches_image(tag("kserve/agent:v0.17.1")));
    assert!(!Release::V0_17_0.matches_image(tag("kserve/agent:v0.17.1")));
    assert!(!Release::V0_17_1.matches_image(tag("kserve/agent:v0.17.2")));
    assert!(!Release::V0_17_0.matches_image(tag("kserve/agent:v0.18.0")));
    // KServe v0.15.x's release manifests pin both images to the tag.
    assert!(Release::V0_15_0.matches_image(tag("kserve/storage-initializer:v0.15.0")));
    assert!(Release::V0_15_2.matches_image(tag("kserve/storage-initializer:v0.15.2")));
    assert!(!Release::V0_15_0.matches_image(tag("kserve/agent:v0.15.2")));
    assert!(!Release::V0_15_0.matches_image(tag("kserve/agent:v0.16.0")));
    assert!(!Release::Head.matches_image(tag("kserve/agent:v0.15.2")));
    // KServe's chart at HEAD still renders v0.20.0.
    assert!(Release::Head.matches_image(tag("kserve/agent:v0.20.0")));
    assert!(Release::Head.matches_image(tag("kserve/agent:v0.21.0")));
    assert!(!Release::Head.matches_image(tag("kserve/agent:v0.20.1")));
    assert!(!Release::Head.matches_image(tag("kserve/agent:v0.17.0")));
}

#[test]
fn image_mismatches_name_the_key_and_the_release() {
    let mut config = Config::default();
    config.agent.image = "kserve/agent:v0.17.0".into();
    config.storage_initializer.image = "kserve/storage-initializer:latest".into();
    assert!(image_mismatches(&config, Release::V0_17_0).is_empty());
    let found = image_mismatches(&config, Release::Head);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].key, "agent");
    assert_eq!(found[0].names.to_string(), "v0.17.0");
    config.storage_initializer.image = "kserve/storage-initializer:v0.19.0".into();
    assert_eq!(image_mismatches(&config, Release::V0_18_0).len(), 2);
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
    for release in [Release::Head, Release::V0_20_0] {
        let err = Config::from_data_with(&invalid, &Default::default(), release).unwrap_err();
        assert!(err.to_string().contains("ociModelMode"), "{err}");
    }
    for release in [Release::V0_19_0, Release::V0_18_0, Release::V0_17_0] {
        let config =
            Config::from_data_with(&invalid, &Default::default(), release).expect("key unknown");
        assert_eq!(config.storage_initializer.oci_mode(), "modelcar");
        assert_eq!(config.release, release);
    }
    let support_only = data(r#"{"enableOciModelSupport": true, "ociModelMode": "native"}"#);
    let v0_19 =
        Config::from_data_with(&support_only, &Default::default(), Release::V0_19_0).unwrap();
    assert_eq!(v0_19.storage_initializer.oci_mode(), "");
    let v0_20 =
        Config::from_data_with(&support_only, &Default::default(), Release::V0_20_0).unwrap();
    assert_eq!(v0_20.storage_initializer.oci_mode(), "native");
}

#[test]
fn insecure_registry_is_read_at_head_only() {
    let d = data(r#"{"ociModelMode": "fetch", "ociInsecureRegistry": true}"#);
    let at = |r| Config::from_data_with(&d, &Default::default(), r).unwrap();
    assert!(at(Release::Head).storage_initializer.oci_insecure_registry);
    assert!(
        !at(Release::V0_20_0)
            .storage_initializer
            .oci_insecure_registry
    );
}

#[test]
fn the_configmap_holds_only_kserve_keys_and_the_release_is_given() {
    // The release comes from --kserve-version or our settings file; a
    // `kserveVersion` key in KServe's ConfigMap is ignored, as KServe does.
    let mut d = data("{}");
    d.insert("kserveVersion".into(), "v0.15".into());
    assert_eq!(Config::from_data(&d).unwrap().release, Release::Head);
    let given = Config::from_data_with(&d, &Default::default(), Release::V0_19_0).unwrap();
    assert_eq!(given.release, Release::V0_19_0);
}

#[test]
fn logger_marshaller_keys_arrive_in_v0_17() {
    let mut config = Config::default();
    config.logger.marshaller_url = "http://m".into();
    config.logger.batch_size = 5;
    config.logger.batch_interval = "1s".into();
    let kept = config.clone().for_release(Release::V0_17_0);
    assert_eq!(kept.logger, config.logger);
    let gone = config.for_release(Release::V0_16_0);
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
    assert!(lacks(&native, Release::V0_20_0).is_empty());
    let got = lacks(&native, Release::V0_19_0);
    assert_eq!(got.len(), 1);
    assert!(got[0]
        .to_string()
        .starts_with("KServe v0.19.0 has no URI scheme oci+native://"));
    let fetch = pod(serde_json::json!({SOURCE_URI_ANNOTATION: "oci+fetch://r/m"}));
    assert!(lacks(&fetch, Release::Head).is_empty());
    assert!(lacks(&fetch, Release::V0_20_0)[0]
        .instead
        .contains("modelcar"));
    let both = pod(serde_json::json!({
        CONFIDENTIAL_ENABLED_ANNOTATION: "true",
        STORAGE_CONTAINER_NAME_ANNOTATION: "csc",
    }));
    assert_eq!(lacks(&both, Release::V0_19_0).len(), 2);
    assert!(lacks(&both, Release::V0_20_0).is_empty());
    assert!(lacks(&both, Release::Head).is_empty());
    let metadata = pod(serde_json::json!({
        LOGGER_ANNOTATION: "true",
        LOGGER_METADATA_ANNOTATIONS_ANNOTATION: "team",
    }));
    assert!(lacks(&metadata, Release::V0_15_1).is_empty());
    let got = lacks(&metadata, Release::V0_15_0);
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
        at(&absent, Release::V0_15_0)
            .unwrap()
            .storage_initializer
            .pvc_copy_mode
    );
    let direct = data(r#"{"enableDirectPvcVolumeMount": true}"#);
    assert!(
        !at(&direct, Release::V0_15_0)
            .unwrap()
            .storage_initializer
            .pvc_copy_mode
    );
    // Unknown to every later release: never read, so never refused.
    let odd = data(r#"{"enableDirectPvcVolumeMount": "yes"}"#);
    for release in [Release::V0_17_0, Release::Head] {
        assert!(
            !at(&absent, release)
                .unwrap()
                .storage_initializer
                .pvc_copy_mode
        );
        assert!(at(&odd, release).is_ok());
    }
    assert!(at(&odd, Release::V0_15_0).is_err());
    // KServe's shipped ConfigMap of v0.15.0 says true.
    let shipped = Config::default().for_release(Release::V0_15_0);
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
        .for_release(Release::V0_16_0)
        .logger
        .storage
        .is_some());
    assert!(config
        .for_release(Release::V0_15_0)
        .logger
        .storage
        .is_none());
}

#[test]
fn v0_15_storage_initializer_resource_error_text() {
    let bad = data(r#"{"memoryRequest": "lots"}"#);
    let err = Config::from_data_with(&bad, &Default::default(), Release::V0_15_0).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("Failed to parse resource configuration for \"storageInitializer\": \""),
        "{err}"
    );
    let err = Config::from_data_with(&bad, &Default::default(), Release::V0_16_0).unwrap_err();
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
    for release in [Release::V0_15_0, Release::V0_17_0, Release::Head] {
        assert!(Config::from_data_with(&absent, &Default::default(), release).is_ok());
    }
    assert!(Config::from_data_with(&absent, &Default::default(), Release::V0_16_0).is_err());
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
    for release in [Release::V0_16_0, Release::V0_20_0, Release::Head] {
        let named = |d: &BTreeMap<String, String>| {
            let err = Config::from_data_with(d, &Default::default(), release).unwrap_err();
            err.to_string()
        };
        assert!(named(&all_bad).contains(r#""storageInitializer"."memoryRequest""#));
        assert!(named(&modelcar_bad).contains(r#""storageInitializer"."cpuModelcar""#));
    }
}
