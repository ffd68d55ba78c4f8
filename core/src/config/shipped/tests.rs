//! Each release's built-in defaults against the keys and values extracted
//! from `config/configmap/inferenceservice.yaml` at its tag (`keys/<tag>.txt`:
//! one `section.key <JSON value>` per line, nested objects flattened with
//! dots, the six keys the pod mutator reads and nothing else).

use super::*;
use crate::release::ALL;
use serde_json::Value;
use std::collections::BTreeMap;

/// `keys/<tag>.txt` as a map from dotted key to value.
fn extracted(text: &str) -> BTreeMap<String, Value> {
    text.lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| {
            let (key, value) = line.split_once(' ').expect("`key value` lines");
            let value = serde_json::from_str(value).expect("a JSON value");
            (key.to_string(), value)
        })
        .collect()
}

fn flatten(prefix: &str, value: &Value, out: &mut BTreeMap<String, Value>) {
    match value {
        Value::Object(map) => {
            for (key, inner) in map {
                flatten(&format!("{prefix}.{key}"), inner, out);
            }
        }
        other => {
            out.insert(prefix.to_string(), other.clone());
        }
    }
}

/// The built-in manifest's data, every section's JSON flattened.
fn built_in(release: Release) -> BTreeMap<String, Value> {
    let mut text = manifest(release).as_bytes();
    let doc = crate::reader::documents(&mut text)
        .expect("readable YAML")
        .next()
        .expect("one document")
        .expect("a valid document");
    assert_eq!(doc["kind"], "ConfigMap");
    assert_eq!(doc["metadata"]["name"], "inferenceservice-config");
    let mut out = BTreeMap::new();
    for (key, section) in doc["data"].as_object().expect("a data map") {
        let json: Value = serde_json::from_str(section.as_str().expect("a string"))
            .unwrap_or_else(|e| panic!("{release}: data.{key}: {e}"));
        flatten(key, &json, &mut out);
    }
    out
}

/// The built-in defaults of `release` hold exactly the keys and values
/// `tag` shipped, the manifest's header names the tag, and the config
/// parses, read as `release`.
fn check(release: Release, tag: &str, keys: &str) {
    let want = extracted(keys);
    let got = built_in(release);
    let missing: Vec<_> = want
        .iter()
        .filter(|(k, v)| got.get(*k) != Some(v))
        .collect();
    let extra: Vec<_> = got
        .iter()
        .filter(|(k, v)| want.get(*k) != Some(v))
        .collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "{release}: built-in defaults differ from {tag}'s: shipped but not built in {missing:?}; built in but not shipped {extra:?}"
    );
    let header: Vec<&str> = (manifest(release).lines())
        .take_while(|line| line.starts_with('#'))
        .collect();
    assert!(header.concat().contains(tag), "{release}: {header:?}");
    assert_eq!(Config::shipped(release).release, release);
    assert_eq!(Config::shipped_manifest(release), manifest(release));
}

#[test]
fn v0_15_0_defaults_are_what_v0_15_0_shipped() {
    check(
        Release::V0_15_0,
        "v0.15.0",
        include_str!("keys/v0.15.0.txt"),
    );
}

#[test]
fn v0_15_1_defaults_are_what_v0_15_1_shipped() {
    check(
        Release::V0_15_1,
        "v0.15.1",
        include_str!("keys/v0.15.1.txt"),
    );
}

#[test]
fn v0_15_2_defaults_are_what_v0_15_2_shipped() {
    check(
        Release::V0_15_2,
        "v0.15.2",
        include_str!("keys/v0.15.2.txt"),
    );
}

#[test]
fn v0_16_0_defaults_are_what_v0_16_0_shipped() {
    check(
        Release::V0_16_0,
        "v0.16.0",
        include_str!("keys/v0.16.0.txt"),
    );
}

#[test]
fn v0_17_0_defaults_are_what_v0_17_0_shipped() {
    check(
        Release::V0_17_0,
        "v0.17.0",
        include_str!("keys/v0.17.0.txt"),
    );
}

#[test]
fn v0_17_1_defaults_are_what_v0_17_1_shipped() {
    check(
        Release::V0_17_1,
        "v0.17.1",
        include_str!("keys/v0.17.1.txt"),
    );
}

#[test]
fn v0_18_0_defaults_are_what_v0_18_0_shipped() {
    check(
        Release::V0_18_0,
        "v0.18.0",
        include_str!("keys/v0.18.0.txt"),
    );
}

#[test]
fn v0_18_1_defaults_are_what_v0_18_1_shipped() {
    check(
        Release::V0_18_1,
        "v0.18.1",
        include_str!("keys/v0.18.1.txt"),
    );
}

#[test]
fn v0_19_0_defaults_are_what_v0_19_0_shipped() {
    check(
        Release::V0_19_0,
        "v0.19.0",
        include_str!("keys/v0.19.0.txt"),
    );
}

#[test]
fn v0_20_0_defaults_are_what_v0_20_0_shipped() {
    check(
        Release::V0_20_0,
        "v0.20.0",
        include_str!("keys/v0.20.0.txt"),
    );
}

#[test]
fn head_defaults_are_what_head_ships() {
    check(Release::Head, "aaac4e2", include_str!("keys/aaac4e2.txt"));
    assert_eq!(Config::shipped(Release::Head), Config::default());
    assert_eq!(
        Config::shipped_manifest(Release::Head),
        Config::default_manifest()
    );
}

#[test]
fn v0_15_0_and_v0_15_1_defaults_turn_the_modelcar_off_and_mount_a_pvc_directly() {
    for release in [Release::V0_15_0, Release::V0_15_1] {
        let shipped = Config::shipped(release).storage_initializer;
        assert_eq!(shipped.oci_mode(), "", "{release}");
        assert_eq!(shipped.uid_modelcar, None, "{release}");
        assert!(!shipped.pvc_copy_mode, "{release}");
    }
    let head = Config::default()
        .for_release(Release::V0_15_0)
        .storage_initializer;
    assert_eq!(
        (head.oci_mode(), head.uid_modelcar),
        ("modelcar", Some(1010))
    );
}

#[test]
fn v0_15_2_defaults_turn_the_modelcar_on_with_uid_1010() {
    // kserve#4316, in v0.15.2: HEAD's modelcar values, and still v0.15's
    // `enableDirectPvcVolumeMount: true`.
    let v0_15_2 = Config::shipped(Release::V0_15_2);
    assert_eq!(v0_15_2.storage_initializer.oci_mode(), "modelcar");
    assert_eq!(v0_15_2.storage_initializer.uid_modelcar, Some(1010));
    assert!(!v0_15_2.storage_initializer.pvc_copy_mode);
    assert_eq!(v0_15_2, Config::default().for_release(Release::V0_15_2));
}

#[test]
fn from_v0_15_2_on_the_defaults_read_as_heads() {
    // v0.15.2 and v0.16.0 lack `s3CABundleConfigMap`, which reads as
    // HEAD's ""; v0.15.2's `enableDirectPvcVolumeMount: true` mounts a
    // PVC directly, as HEAD does.
    for release in ALL.into_iter().filter(|r| *r >= Release::V0_15_2) {
        assert_eq!(
            Config::shipped(release),
            Config::default().for_release(release),
            "{release}"
        );
    }
}

#[test]
fn patch_releases_ship_their_lines_data_where_kserve_did() {
    // The data (every key, every value) of each tag's manifest, without
    // the header naming the tag.
    let data = |r: Release| crate::config::manifest_data(manifest(r)).expect("shipped data");
    assert_eq!(data(Release::V0_15_1), data(Release::V0_15_0));
    assert_eq!(data(Release::V0_17_1), data(Release::V0_17_0));
    assert_eq!(data(Release::V0_18_1), data(Release::V0_18_0));
    assert_ne!(data(Release::V0_15_2), data(Release::V0_15_1));
}
