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
fn v0_15_defaults_are_what_v0_15_0_shipped() {
    check(Release::V0_15, "v0.15.0", include_str!("keys/v0.15.0.txt"));
}

#[test]
fn v0_16_defaults_are_what_v0_16_0_shipped() {
    check(Release::V0_16, "v0.16.0", include_str!("keys/v0.16.0.txt"));
}

#[test]
fn v0_17_defaults_are_what_v0_17_0_shipped() {
    check(Release::V0_17, "v0.17.0", include_str!("keys/v0.17.0.txt"));
}

#[test]
fn v0_18_defaults_are_what_v0_18_0_shipped() {
    check(Release::V0_18, "v0.18.0", include_str!("keys/v0.18.0.txt"));
}

#[test]
fn v0_19_defaults_are_what_v0_19_0_shipped() {
    check(Release::V0_19, "v0.19.0", include_str!("keys/v0.19.0.txt"));
}

#[test]
fn v0_20_defaults_are_what_v0_20_0_shipped() {
    check(Release::V0_20, "v0.20.0", include_str!("keys/v0.20.0.txt"));
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
fn v0_15_defaults_turn_the_modelcar_off_and_mount_a_pvc_directly() {
    let v0_15 = Config::shipped(Release::V0_15).storage_initializer;
    assert_eq!(v0_15.oci_mode(), "");
    assert_eq!(v0_15.uid_modelcar, None);
    assert!(!v0_15.pvc_copy_mode);
    let head = Config::default()
        .for_release(Release::V0_15)
        .storage_initializer;
    assert_eq!(
        (head.oci_mode(), head.uid_modelcar),
        ("modelcar", Some(1010))
    );
}

#[test]
fn from_v0_16_on_the_defaults_read_as_heads() {
    // v0.16.0 lacks `s3CABundleConfigMap`, which reads as HEAD's "".
    for release in ALL.into_iter().filter(|r| *r >= Release::V0_16) {
        assert_eq!(
            Config::shipped(release),
            Config::default().for_release(release),
            "{release}"
        );
    }
}
