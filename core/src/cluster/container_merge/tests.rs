//! Vectors S25, S31–S34 at the merge, and the merge-key rules.

use super::*;
use crate::cluster::ClusterSnapshot;
use k8s_openapi::api::core::v1::{
    ConfigMapKeySelector, ContainerPort, EnvVar, EnvVarSource, ResourceRequirements,
    SecretKeySelector, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde_json::json;
use std::collections::BTreeMap;

fn lit(name: &str, value: &str) -> EnvVar {
    EnvVar {
        name: name.into(),
        value: Some(value.into()),
        value_from: None,
    }
}

fn from_secret(name: &str, secret: &str, key: &str) -> EnvVar {
    EnvVar {
        name: name.into(),
        value: None,
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: secret.into(),
                key: key.into(),
                optional: None,
            }),
            ..Default::default()
        }),
    }
}

fn quantities(cpu: &str, memory: &str) -> BTreeMap<String, Quantity> {
    BTreeMap::from([
        ("cpu".to_string(), Quantity(cpu.into())),
        ("memory".to_string(), Quantity(memory.into())),
    ])
}

/// The storage-initializer as built with SI-cfg, before any merge.
fn base() -> Container {
    Container {
        name: "storage-initializer".into(),
        image: Some("kserve/storage-initializer:latest".into()),
        args: Some(vec!["s3://foo".into(), "/mnt/models".into()]),
        resources: Some(ResourceRequirements {
            limits: Some(quantities("1", "1Gi")),
            requests: Some(quantities("100m", "200Mi")),
            ..Default::default()
        }),
        termination_message_policy: Some("FallbackToLogsOnError".into()),
        volume_mounts: Some(vec![VolumeMount {
            name: "kserve-provision-location".into(),
            mount_path: "/mnt/models".into(),
            ..Default::default()
        }]),
        ..Default::default()
    }
}

fn overlay(value: serde_json::Value) -> Container {
    let doc = json!({
        "apiVersion": "serving.kserve.io/v1alpha1",
        "kind": "ClusterStorageContainer",
        "metadata": {"name": "csc"},
        "spec": {"container": value, "supportedUriFormats": [{"prefix": "s3://"}]},
    });
    let data = ClusterSnapshot::from_documents(vec![doc]).unwrap();
    data.storage_container("csc").unwrap().container().unwrap()
}

#[test]
fn s25_resources_merge_per_key_and_env_is_added() {
    let csc = overlay(json!({"name": "name", "image": "img",
        "resources": {"limits": {"memory": "500Mi"}}, "env": [{"name": "name", "value": "value"}]}));
    let merged = merge_storage_container(&base(), &csc).unwrap();
    let resources = merged.resources.unwrap();
    assert_eq!(resources.limits.unwrap(), quantities("1", "500Mi"));
    assert_eq!(resources.requests.unwrap(), quantities("100m", "200Mi"));
    assert_eq!(merged.env.unwrap(), [lit("name", "value")]);
    assert_eq!(merged.image.as_deref(), Some("img"));
    // KServe's #3900: the CSC's name renames the init container.
    assert_eq!(merged.name, "name");
    assert_eq!(merged.args, base().args);
}

#[test]
fn nameless_overlay_keeps_the_base_name() {
    let merged = merge_storage_container(&base(), &overlay(json!({"image": "img"}))).unwrap();
    assert_eq!(merged.name, "storage-initializer");
}

#[test]
fn s31_s32_user_env_survives_the_merge_after_the_csc_env() {
    let mut with_env = base();
    with_env.env = Some(vec![lit("A", "1")]);
    let csc = overlay(json!({"name": "storage-initializer", "env": [
        {"name": "HF_HUB_ENABLE_HF_TRANSFER", "value": "0"},
        {"name": "HF_XET_HIGH_PERFORMANCE", "valueFrom": {"configMapKeyRef": {"name": "hf-config", "key": "transfer-enabled"}}},
    ]}));
    let merged = merge_storage_container(&with_env, &csc).unwrap();
    let env = merged.env.unwrap();
    assert_eq!(env[0], lit("HF_HUB_ENABLE_HF_TRANSFER", "0"));
    assert_eq!(env[1].value, None);
    assert_eq!(env[2], lit("A", "1"));
    assert_eq!(
        env[1].value_from.as_ref().unwrap().config_map_key_ref,
        Some(ConfigMapKeySelector {
            name: "hf-config".into(),
            key: "transfer-enabled".into(),
            optional: None
        })
    );
}

#[test]
fn s33_csc_env_replaces_value_of_the_same_name() {
    let mut with_env = base();
    with_env.env = Some(vec![lit("CA_BUNDLE_CONFIGMAP_NAME", "default-ca-bundle")]);
    let csc = overlay(json!({"name": "storage-initializer",
        "env": [{"name": "CA_BUNDLE_CONFIGMAP_NAME", "value": "user-custom-ca-bundle"}]}));
    let env = merge_storage_container(&with_env, &csc)
        .unwrap()
        .env
        .unwrap();
    assert_eq!(
        env,
        [lit("CA_BUNDLE_CONFIGMAP_NAME", "user-custom-ca-bundle")]
    );
}

#[test]
fn s34_overlay_form_wins_when_both_value_and_value_from_result() {
    let mut with_env = base();
    with_env.env = Some(vec![
        lit("AWS_ACCESS_KEY_ID", "literal"),
        lit("AWS_SECRET_ACCESS_KEY", "literal"),
    ]);
    let csc = overlay(
        json!({"name": "storage-initializer", "env": [{"name": "AWS_ACCESS_KEY_ID",
        "valueFrom": {"secretKeyRef": {"name": "my-creds", "key": "access-key"}}}]}),
    );
    let env = merge_storage_container(&with_env, &csc)
        .unwrap()
        .env
        .unwrap();
    assert_eq!(
        env,
        [
            from_secret("AWS_ACCESS_KEY_ID", "my-creds", "access-key"),
            lit("AWS_SECRET_ACCESS_KEY", "literal")
        ]
    );
    // Reverse: base from a Secret, overlay literal.
    let mut with_ref = base();
    with_ref.env = Some(vec![from_secret("AWS_ACCESS_KEY_ID", "s", "k")]);
    let csc = overlay(
        json!({"name": "storage-initializer", "env": [{"name": "AWS_ACCESS_KEY_ID", "value": "literal"}]}),
    );
    let env = merge_storage_container(&with_ref, &csc)
        .unwrap()
        .env
        .unwrap();
    assert_eq!(env, [lit("AWS_ACCESS_KEY_ID", "literal")]);
}

#[test]
fn mounts_merge_by_path_ports_by_number_and_args_are_replaced() {
    let mut with_ports = base();
    with_ports.ports = Some(vec![ContainerPort {
        container_port: 8080,
        name: Some("http".into()),
        ..Default::default()
    }]);
    let csc = overlay(json!({"name": "storage-initializer",
        "args": ["--x"],
        "volumeMounts": [{"name": "other", "mountPath": "/mnt/models", "readOnly": true},
                         {"name": "cache", "mountPath": "/cache"}],
        "ports": [{"containerPort": 8080, "protocol": "TCP"}, {"containerPort": 9090}]}));
    let merged = merge_storage_container(&with_ports, &csc).unwrap();
    let mounts = merged.volume_mounts.unwrap();
    assert_eq!(mounts.len(), 2);
    assert_eq!(
        (mounts[0].name.as_str(), mounts[0].read_only),
        ("other", Some(true))
    );
    assert_eq!(mounts[1].mount_path, "/cache");
    let ports = merged.ports.unwrap();
    assert_eq!(ports.len(), 2);
    assert_eq!(ports[0].name.as_deref(), Some("http"));
    assert_eq!(ports[0].protocol.as_deref(), Some("TCP"));
    assert_eq!(merged.args.unwrap(), ["--x"]);
}

#[test]
fn csc_quantities_are_canonical() {
    let csc =
        overlay(json!({"name": "x", "resources": {"limits": {"cpu": 0.5, "memory": "1024Mi"}}}));
    let limits = csc.resources.unwrap().limits.unwrap();
    assert_eq!(limits["cpu"].0, "500m");
    assert_eq!(limits["memory"].0, "1Gi");
}

/// apimachinery's ordering, checked against its own code (the base's
/// values end in 0, the patch's in 1).
#[test]
fn env_order_follows_strategic_merge() {
    let cases: [(&[&str], &[&str], &[&str]); 16] = [
        (
            &["A", "B", "C"],
            &["X", "Y"],
            &["X1", "Y1", "A0", "B0", "C0"],
        ),
        (&["A", "B", "C"], &["B", "X"], &["A0", "B1", "X1", "C0"]),
        (&["A", "B", "C"], &["X", "B"], &["X1", "A0", "B1", "C0"]),
        (&["A", "B", "C"], &["C", "A"], &["B0", "C1", "A1"]),
        (&["A", "B"], &["X", "X"], &["X1", "A0", "B0"]),
        (&[], &["X", "X"], &["X1", "X1"]),
        (&["A", "B"], &[], &["A0", "B0"]),
        (
            &["A", "B", "C"],
            &["Y", "X"],
            &["Y1", "X1", "A0", "B0", "C0"],
        ),
        (&["A", "B", "C"], &["B", "A"], &["B1", "A1", "C0"]),
        (&["A", "B", "C"], &["A", "X"], &["A1", "X1", "B0", "C0"]),
        (&["A", "B", "C"], &["C", "X"], &["A0", "B0", "C1", "X1"]),
        (
            &["A", "B", "C"],
            &["B", "X", "Y"],
            &["A0", "B1", "X1", "Y1", "C0"],
        ),
        (
            &["A", "B", "C"],
            &["C", "X", "A"],
            &["B0", "C1", "X1", "A1"],
        ),
        (
            &["A", "B", "C", "D"],
            &["X", "C", "Y"],
            &["X1", "A0", "B0", "C1", "Y1", "D0"],
        ),
        (&["A", "B"], &["B", "X", "B"], &["A0", "B1", "X1"]),
        (&["A", "B", "A"], &["X"], &["X1", "A0", "A0", "B0"]),
    ];
    for (original, patch, want) in cases {
        let mut with_env = base();
        with_env.env = (!original.is_empty())
            .then(|| original.iter().map(|n| lit(n, &format!("{n}0"))).collect());
        let csc_env: Vec<_> = patch
            .iter()
            .map(|n| json!({"name": n, "value": format!("{n}1")}))
            .collect();
        let merged =
            merge_storage_container(&with_env, &overlay(json!({"name": "", "env": csc_env})))
                .unwrap();
        let got: Vec<String> = merged
            .env
            .unwrap_or_default()
            .into_iter()
            .map(|e| e.value.unwrap_or_default())
            .collect();
        assert_eq!(got, want, "{original:?} + {patch:?}");
    }
}

#[test]
fn a_mount_path_in_both_takes_the_csc_volume_and_csc_mounts_come_first() {
    let mut two = base();
    two.volume_mounts.as_mut().unwrap().push(VolumeMount {
        name: "user-gcp-sa".into(),
        mount_path: "/var/secrets/".into(),
        read_only: Some(true),
        ..Default::default()
    });
    let csc = overlay(json!({"name": "", "volumeMounts": [
        {"name": "cache", "mountPath": "/cache", "readOnly": false},
        {"name": "mine", "mountPath": "/mnt/models"},
    ]}));
    let mounts = merge_storage_container(&two, &csc)
        .unwrap()
        .volume_mounts
        .unwrap();
    let got: Vec<_> = mounts
        .iter()
        .map(|m| (m.name.as_str(), m.mount_path.as_str(), m.read_only))
        .collect();
    assert_eq!(
        got,
        [
            ("cache", "/cache", None),
            ("mine", "/mnt/models", None),
            ("user-gcp-sa", "/var/secrets/", Some(true)),
        ]
    );
}

#[test]
fn zero_values_in_the_csc_do_not_override_and_empty_args_keep_the_built_ones() {
    let csc = overlay(json!({"name": "", "args": [], "image": "", "env": [
        {"name": "AWS_ACCESS_KEY_ID", "value": ""},
    ]}));
    let mut with_env = base();
    with_env.env = Some(vec![from_secret("AWS_ACCESS_KEY_ID", "s", "k")]);
    let merged = merge_storage_container(&with_env, &csc).unwrap();
    assert_eq!(merged.args, base().args);
    assert_eq!(merged.image, base().image);
    assert_eq!(
        merged.env.unwrap(),
        [from_secret("AWS_ACCESS_KEY_ID", "s", "k")]
    );
}

#[test]
fn crd_defaults_are_applied_to_a_csc_read_from_a_file() {
    let csc = overlay(json!({"name": "c", "ports": [{"containerPort": 8080}],
        "env": [{"name": "T", "valueFrom": {"secretKeyRef": {"key": "k"}}}]}));
    assert_eq!(
        csc.ports.unwrap()[0],
        ContainerPort {
            container_port: 8080,
            protocol: Some("TCP".into()),
            ..Default::default()
        }
    );
    assert_eq!(csc.env.unwrap()[0], from_secret("T", "", "k"));
}
