use super::*;
use crate::injectors::test_support::{env_with, run_idempotent, run_with};
use serde_json::{json, Value};

const SPEC: &str = "internal.serving.kserve.io/storage-spec";
const SPEC_PARAM: &str = "internal.serving.kserve.io/storage-spec-param";
const SPEC_KEY: &str = "internal.serving.kserve.io/storage-spec-key";
const PLACEHOLDER_URI: &str = "<scheme-placeholder>://foo/bar";

/// SI-cfg: the storage initializer config of KServe's tests (image empty).
fn si_cfg() -> Inputs {
    env_with(|c| {
        let si = &mut c.storage_initializer;
        *si = Default::default();
        si.resources = crate::config::Resources {
            cpu_request: "100m".into(),
            cpu_limit: "1".into(),
            memory_request: "200Mi".into(),
            memory_limit: "1Gi".into(),
        };
        si.ca_bundle_volume_mount_path = "/etc/ssl/custom-certs".into();
    })
}

fn with_secret(mut env: Inputs, name: &str, data: &[(&str, &str)]) -> Inputs {
    env.cluster.insert_secret(crate::cluster::Secret::from_data(
        "default",
        name,
        data.iter().copied(),
    ));
    env
}

fn pod_with(annotations: Value, containers: Value) -> Value {
    json!({
        "metadata": {"name": "deployment", "namespace": "default", "annotations": annotations},
        "spec": {"containers": containers}
    })
}

fn pod(annotations: Value) -> Value {
    pod_with(annotations, json!([{"name": "kserve-container"}]))
}

fn si(uri: &str) -> Value {
    json!({SOURCE_URI_ANNOTATION: uri})
}

fn hf3() -> Vec<Value> {
    vec![
        json!({"name": "HF_HUB_ENABLE_HF_TRANSFER", "value": "1"}),
        json!({"name": "HF_XET_HIGH_PERFORMANCE", "value": "1"}),
        json!({"name": "HF_XET_NUM_CONCURRENT_RANGE_GETS", "value": "8"}),
    ]
}

/// The storage-initializer of S3 with `args` and `env` (credential env first, HF3 last).
fn init_container(args: &[&str], env: Vec<Value>) -> Value {
    json!({
        "args": args,
        "env": env,
        "image": "kserve/storage-initializer:latest",
        "name": "storage-initializer",
        "resources": {
            "limits": {"cpu": "1", "memory": "1Gi"},
            "requests": {"cpu": "100m", "memory": "200Mi"}
        },
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "volumeMounts": [{"mountPath": "/mnt/models", "name": "kserve-provision-location"}]
    })
}

fn kpl_volume() -> Value {
    json!({"emptyDir": {}, "name": "kserve-provision-location"})
}

fn kpl_user_mount(read_only: bool) -> Value {
    let mut mount = json!({"mountPath": "/mnt/models", "name": "kserve-provision-location"});
    if read_only {
        mount["readOnly"] = json!(true);
    }
    mount
}

fn pvc_user_mount(sub_path: &str, read_only: bool) -> Value {
    let mut mount = json!({"mountPath": "/mnt/models", "name": "kserve-pvc-source"});
    if !sub_path.is_empty() {
        mount["subPath"] = json!(sub_path);
    }
    if read_only {
        mount["readOnly"] = json!(true);
    }
    mount
}

fn pvc_volume(claim: &str) -> Value {
    json!({"name": "kserve-pvc-source", "persistentVolumeClaim": {"claimName": claim}})
}

fn env_names(container: &Value) -> Vec<&str> {
    container["env"]
        .as_array()
        .map(|a| a.iter().filter_map(|e| e["name"].as_str()).collect())
        .unwrap_or_default()
}

fn err(pod: &Value, inputs: &Inputs) -> String {
    run_with(inject, pod, inputs).unwrap_err().message
}

#[test]
fn s1_no_source_uri_is_unchanged() {
    let p = pod(json!({}));
    assert_eq!(run_with(inject, &p, &si_cfg()).unwrap(), p);
}

#[test]
fn s2_existing_storage_initializer_is_unchanged() {
    let mut p = pod(si("gs://foo"));
    p["spec"]["initContainers"] = json!([{"name": "storage-initializer"}]);
    assert_eq!(run_with(inject, &p, &si_cfg()).unwrap(), p);
}

#[test]
fn s3_s4_injects_init_container_volume_and_read_only_mount() {
    let out = run_idempotent(inject, &pod(si("gs://foo")), &si_cfg());
    assert_eq!(
        out["spec"],
        json!({
            "containers": [{"name": "kserve-container", "volumeMounts": [kpl_user_mount(true)]}],
            "initContainers": [init_container(&["gs://foo", "/mnt/models"], hf3())],
            "volumes": [kpl_volume()]
        })
    );
}

#[test]
fn s5_s6_readonly_annotation() {
    let mount = |value: &str| {
        let mut annotations = si("gs://foo");
        annotations[READONLY_ANNOTATION] = json!(value);
        let out = run_with(inject, &pod(annotations), &si_cfg()).unwrap();
        out["spec"]["containers"][0]["volumeMounts"][0].clone()
    };
    // Go's omitempty drops `readOnly: false`.
    assert_eq!(mount("false"), kpl_user_mount(false));
    assert_eq!(mount("true"), kpl_user_mount(true));
    assert_eq!(mount("False"), kpl_user_mount(true));
}

#[test]
fn s7_s8_s9_pvc_is_mounted_directly() {
    let inputs = Inputs::default();
    let out = run_idempotent(
        inject,
        &pod(si("pvc://mypvcname/some/path/on/pvc")),
        &inputs,
    );
    assert_eq!(
        out["spec"],
        json!({
            "containers": [{"name": "kserve-container", "volumeMounts": [pvc_user_mount("some/path/on/pvc", true)]}],
            "volumes": [pvc_volume("mypvcname")]
        })
    );
    let out = run_with(inject, &pod(si("pvc://mypvcname")), &inputs).unwrap();
    assert_eq!(
        out["spec"]["containers"][0]["volumeMounts"],
        json!([pvc_user_mount("", true)])
    );
    let mut annotations = si("pvc://mypvcname/some/path/on/pvc");
    annotations[READONLY_ANNOTATION] = json!("false");
    let out = run_with(inject, &pod(annotations), &inputs).unwrap();
    assert_eq!(
        out["spec"]["containers"][0]["volumeMounts"],
        json!([pvc_user_mount("some/path/on/pvc", false)])
    );
}

#[test]
fn pvc_path_keeps_a_trailing_slash() {
    let out = run_with(inject, &pod(si("pvc://claim/dir/")), &Inputs::default()).unwrap();
    assert_eq!(
        out["spec"]["containers"][0]["volumeMounts"],
        json!([pvc_user_mount("dir/", true)])
    );
}

#[test]
fn s10_storage_spec_without_secret_resolves_placeholder() {
    let annotations = json!({
        SOURCE_URI_ANNOTATION: PLACEHOLDER_URI,
        SPEC: "true",
        SPEC_PARAM: r#"{"type": "s3", "bucket": "my-bucket"}"#
    });
    let out = run_idempotent(inject, &pod(annotations), &si_cfg());
    let mut env = vec![
        json!({"name": "STORAGE_OVERRIDE_CONFIG", "value": r#"{"bucket":"my-bucket","type":"s3"}"#}),
    ];
    env.extend(hf3());
    assert_eq!(
        out["spec"]["initContainers"],
        json!([init_container(
            &["s3://my-bucket/foo/bar", "/mnt/models"],
            env
        )])
    );
    assert_eq!(out["spec"]["volumes"], json!([kpl_volume()]));
}

#[test]
fn s11_missing_user_container_is_an_error() {
    let p = pod_with(
        si("pvc://mypvcname/some/path/on/pvc"),
        json!([{"name": "random-container"}]),
    );
    assert_eq!(
        err(&p, &si_cfg()),
        "Invalid configuration: cannot find container"
    );
}

#[test]
fn s12_storage_uri_env_is_rewritten_only_when_set() {
    let env_after = |env: Value| {
        let p = pod_with(
            si("pvc://mypvcname/some/path/on/pvc"),
            json!([{"name": "kserve-container", "env": env}]),
        );
        run_with(inject, &p, &si_cfg()).unwrap()["spec"]["containers"][0]["env"].clone()
    };
    assert_eq!(
        env_after(json!([{"name": "STORAGE_URI", "value": "pvc://mypvcname/some/path/on/pvc"}])),
        json!([{"name": "STORAGE_URI", "value": "/mnt/models"}])
    );
    assert_eq!(
        env_after(json!([{"name": "STORAGE_URI", "value": ""}])),
        json!([{"name": "STORAGE_URI", "value": ""}])
    );
    assert_eq!(
        env_after(json!([{"name": "TestRandom", "value": "val"}])),
        json!([{"name": "TestRandom", "value": "val"}])
    );
    // A value taken from elsewhere is not a URI to rewrite.
    let from_secret =
        json!([{"name": "STORAGE_URI", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]);
    assert_eq!(env_after(from_secret.clone()), from_secret);
}

#[test]
fn s15_storage_spec_secret_with_key() {
    let env = with_secret(
        si_cfg(),
        "storage-config",
        &[(
            "my-storage",
            r#"{"type":"s3","bucket":"my-bucket","region":"na"}"#,
        )],
    );
    let annotations = json!({
        SOURCE_URI_ANNOTATION: PLACEHOLDER_URI,
        SPEC: "true",
        SPEC_PARAM: r#"{"some-param": "some-val"}"#,
        SPEC_KEY: "my-storage"
    });
    let out = run_idempotent(inject, &pod(annotations), &env);
    let mut vars = vec![
        json!({"name": "STORAGE_CONFIG", "valueFrom": {"secretKeyRef": {"name": "storage-config", "key": "my-storage"}}}),
        json!({"name": "STORAGE_OVERRIDE_CONFIG", "value": r#"{"some-param":"some-val"}"#}),
    ];
    vars.extend(hf3());
    assert_eq!(
        out["spec"]["initContainers"][0],
        init_container(&["s3://my-bucket/foo/bar", "/mnt/models"], vars)
    );
}

#[test]
fn s16_storage_spec_default_key() {
    let env = with_secret(
        si_cfg(),
        "storage-config",
        &[("default", r#"{"type":"s3","bucket":"my-bucket"}"#)],
    );
    let annotations = json!({
        SOURCE_URI_ANNOTATION: PLACEHOLDER_URI,
        SPEC: "true",
        SPEC_PARAM: r#"{"some-param": "some-val"}"#
    });
    let init =
        run_with(inject, &pod(annotations), &env).unwrap()["spec"]["initContainers"][0].clone();
    assert_eq!(
        init["args"],
        json!(["s3://my-bucket/foo/bar", "/mnt/models"])
    );
    assert_eq!(
        init["env"][0],
        json!({"name": "STORAGE_CONFIG", "valueFrom": {"secretKeyRef": {"name": "storage-config", "key": "default"}}})
    );
}

#[test]
fn storage_spec_type_parameter_selects_default_type_key() {
    let env = with_secret(
        si_cfg(),
        "storage-config",
        &[("default", "not json"), ("default_hdfs", "opaque")],
    );
    let annotations = json!({
        SOURCE_URI_ANNOTATION: PLACEHOLDER_URI,
        SPEC: "true",
        SPEC_PARAM: r#"{"type": "hdfs"}"#
    });
    let init =
        run_with(inject, &pod(annotations), &env).unwrap()["spec"]["initContainers"][0].clone();
    // A typed parameter means the secret data is passed through unparsed.
    assert_eq!(init["args"], json!(["hdfs://foo/bar", "/mnt/models"]));
    assert_eq!(
        env_names(&init),
        [
            "STORAGE_CONFIG",
            "STORAGE_OVERRIDE_CONFIG",
            "HF_HUB_ENABLE_HF_TRANSFER",
            "HF_XET_HIGH_PERFORMANCE",
            "HF_XET_NUM_CONCURRENT_RANGE_GETS"
        ]
    );
    assert_eq!(
        init["env"][0]["valueFrom"]["secretKeyRef"]["key"],
        "default_hdfs"
    );
}

#[test]
fn storage_spec_bucket_from_secret_when_parameter_is_absent_or_empty() {
    let env = with_secret(
        si_cfg(),
        "storage-config",
        &[("default", r#"{"type":"s3","bucket":"secret-bucket"}"#)],
    );
    for params in [r#"{"region": "eu"}"#, r#"{"bucket": ""}"#] {
        let annotations =
            json!({SOURCE_URI_ANNOTATION: PLACEHOLDER_URI, SPEC: "true", SPEC_PARAM: params});
        let out = run_with(inject, &pod(annotations), &env).unwrap();
        assert_eq!(
            out["spec"]["initContainers"][0]["args"][0], "s3://secret-bucket/foo/bar",
            "{params}"
        );
    }
}

#[test]
fn storage_spec_secret_ca_bundle_configmap_mounts_the_bundle() {
    let env = with_secret(
        si_cfg(),
        "storage-config",
        &[(
            "default",
            r#"{"type":"s3","bucket":"b","cabundle_configmap":"cabundle-annotation"}"#,
        )],
    );
    let annotations = json!({SOURCE_URI_ANNOTATION: PLACEHOLDER_URI, SPEC: "true"});
    let out = run_idempotent(inject, &pod(annotations), &env);
    let init = &out["spec"]["initContainers"][0];
    assert_eq!(
        env_names(init),
        [
            "AWS_CA_BUNDLE_CONFIGMAP",
            "STORAGE_CONFIG",
            "CA_BUNDLE_CONFIGMAP_NAME",
            "CA_BUNDLE_VOLUME_MOUNT_POINT",
            "HF_HUB_ENABLE_HF_TRANSFER",
            "HF_XET_HIGH_PERFORMANCE",
            "HF_XET_NUM_CONCURRENT_RANGE_GETS"
        ]
    );
    assert_eq!(init["env"][2]["value"], "cabundle-annotation");
    assert_eq!(init["env"][3]["value"], "/etc/ssl/custom-certs");
    assert_eq!(
        init["volumeMounts"][1],
        json!({"mountPath": "/etc/ssl/custom-certs", "name": "cabundle-cert", "readOnly": true})
    );
    assert_eq!(
        out["spec"]["volumes"],
        json!([kpl_volume(), {"configMap": {"name": "cabundle-annotation"}, "name": "cabundle-cert"}])
    );
}

#[test]
fn storage_spec_secret_name_annotation_overrides_the_secret() {
    // KServe's default config names this annotation.
    let env = with_secret(
        si_cfg(),
        "my-secret",
        &[("default", r#"{"type":"s3","bucket":"b"}"#)],
    );
    let annotations = json!({
        SOURCE_URI_ANNOTATION: PLACEHOLDER_URI,
        SPEC: "true",
        "serving.kserve.io/storageSecretName": "my-secret"
    });
    let init =
        run_with(inject, &pod(annotations), &env).unwrap()["spec"]["initContainers"][0].clone();
    assert_eq!(
        init["env"][0]["valueFrom"]["secretKeyRef"]["name"],
        "my-secret"
    );
}

#[test]
fn storage_spec_errors() {
    let spec = |params: &str, key: &str| {
        let mut annotations =
            json!({SOURCE_URI_ANNOTATION: PLACEHOLDER_URI, SPEC: "true", SPEC_PARAM: params});
        if !key.is_empty() {
            annotations[SPEC_KEY] = json!(key);
        }
        pod(annotations)
    };
    let secret = |data: &str| with_secret(si_cfg(), "storage-config", &[("default", data)]);
    assert_eq!(
        err(&spec("{}", "missing"), &secret("{}")),
        "specified storage key missing not found in storage secret storage-config"
    );
    assert_eq!(
        err(&spec("{}", "my-key"), &si_cfg()),
        r#"can't read storage secret storage-config: secrets "storage-config" not found"#
    );
    assert!(err(&spec("{}", ""), &secret("not json"))
        .starts_with("invalid json encountered in key default of storage secret storage-config: "));
    assert_eq!(
        err(&spec("{}", ""), &secret(r#"{"type":"gcs"}"#)),
        "storage type must be one of [s3, hdfs, webhdfs]. storage type [gcs] is not supported"
    );
    // Secret data without a type, or no data at all: the type is unknown.
    assert_eq!(
        err(&spec("{}", ""), &secret(r#"{"bucket":"b"}"#)),
        "unable to determine storage type"
    );
    assert_eq!(
        err(&spec("{}", ""), &si_cfg()),
        "unable to determine storage type"
    );
    assert_eq!(
        err(&spec(r#"{"type": "s3"}"#, ""), &si_cfg()),
        "format [s3] requires a bucket but one wasn't found in storage data or parameters"
    );
    // As in Go, an empty parameter annotation is invalid JSON.
    for params in ["{not json", ""] {
        assert!(err(&spec(params, ""), &si_cfg()).starts_with(&format!(
            "invalid {STORAGE_SPEC_PARAM_ANNOTATION} annotation: "
        )));
    }
}

#[test]
fn storage_spec_null_or_absent_parameters_mean_none() {
    let env = with_secret(
        si_cfg(),
        "storage-config",
        &[("default", r#"{"type":"webhdfs"}"#)],
    );
    for annotations in [
        json!({SOURCE_URI_ANNOTATION: PLACEHOLDER_URI, SPEC: "true", SPEC_PARAM: "null"}),
        json!({SOURCE_URI_ANNOTATION: PLACEHOLDER_URI, SPEC: "true"}),
    ] {
        let init =
            run_with(inject, &pod(annotations), &env).unwrap()["spec"]["initContainers"][0].clone();
        assert_eq!(init["args"][0], "webhdfs://foo/bar");
        assert!(!env_names(&init).contains(&"STORAGE_OVERRIDE_CONFIG"));
    }
}

#[test]
fn storage_spec_is_ignored_unless_exactly_true() {
    let annotations =
        json!({SOURCE_URI_ANNOTATION: "s3://b/m", SPEC: "True", SPEC_PARAM: "{not json"});
    let init = run_with(inject, &pod(annotations), &si_cfg()).unwrap()["spec"]["initContainers"][0]
        .clone();
    assert_eq!(init["env"], json!(hf3()));
}

#[test]
fn s17_configured_image() {
    let env =
        env_with(|c| c.storage_initializer.image = "kserve/storage-initializer@sha256:xxx".into());
    let out = run_with(inject, &pod(si("gs://foo")), &env).unwrap();
    assert_eq!(
        out["spec"]["initContainers"][0]["image"],
        "kserve/storage-initializer@sha256:xxx"
    );
}

#[test]
fn s19_configured_ca_bundle_outside_the_controller_namespace() {
    let mut env = si_cfg();
    env.edit_config(|c| c.storage_initializer.ca_bundle_config_map_name = "custom-certs".into());
    let out = run_idempotent(inject, &pod(si("gs://foo")), &env);
    let mut vars = vec![
        json!({"name": "CA_BUNDLE_CONFIGMAP_NAME", "value": "global-ca-bundle"}),
        json!({"name": "CA_BUNDLE_VOLUME_MOUNT_POINT", "value": "/etc/ssl/custom-certs"}),
    ];
    vars.extend(hf3());
    let mut init = init_container(&["gs://foo", "/mnt/models"], vars);
    init["volumeMounts"].as_array_mut().unwrap().push(
        json!({"mountPath": "/etc/ssl/custom-certs", "name": "cabundle-cert", "readOnly": true}),
    );
    assert_eq!(out["spec"]["initContainers"], json!([init]));
    assert_eq!(
        out["spec"]["volumes"],
        json!([kpl_volume(), {"configMap": {"name": "global-ca-bundle"}, "name": "cabundle-cert"}])
    );
    // In the controller's namespace the configured name is used.
    let mut p = pod(si("gs://foo"));
    p["metadata"]["namespace"] = json!("kserve");
    let out = run_with(inject, &p, &env).unwrap();
    assert_eq!(
        out["spec"]["volumes"][1]["configMap"]["name"],
        "custom-certs"
    );
}

#[test]
fn s24_transformer_gets_the_pvc_mount_too() {
    let p = pod_with(
        si("pvc://mypvcname/some/path/on/pvc"),
        json!([
            {"name": "kserve-container", "env": [{"name": "STORAGE_URI", "value": "pvc://mypvcname/some/path/on/pvc"}]},
            {"name": "transformer-container", "image": "test/image:latest"}
        ]),
    );
    let out = run_idempotent(inject, &p, &si_cfg());
    let mount = json!([pvc_user_mount("some/path/on/pvc", true)]);
    assert_eq!(
        out["spec"]["containers"],
        json!([
            {"name": "kserve-container", "env": [{"name": "STORAGE_URI", "value": "/mnt/models"}], "volumeMounts": mount},
            {"name": "transformer-container", "image": "test/image:latest", "volumeMounts": mount}
        ])
    );
    assert_eq!(out["spec"]["volumes"], json!([pvc_volume("mypvcname")]));
}

#[test]
fn s30_local_model_mounts_the_node_cache_pvc() {
    let sub_path = |uri: &str, local: &str| {
        let mut p = pod(json!({
            SOURCE_URI_ANNOTATION: uri,
            LOCAL_MODEL_SOURCE_URI_ANNOTATION: local,
            LOCAL_MODEL_PVC_NAME_ANNOTATION: "model-h100"
        }));
        p["metadata"]["labels"] = json!({LOCAL_MODEL_LABEL: "bar"});
        let out = run_with(inject, &p, &Inputs::default()).unwrap();
        assert_eq!(out["spec"]["volumes"], json!([pvc_volume("model-h100")]));
        assert!(out["spec"].get("initContainers").is_none());
        out["spec"]["containers"][0]["volumeMounts"][0]["subPath"].clone()
    };
    assert_eq!(sub_path("s3://foo", "s3://foo"), "models/83fbff445b51876f/");
    assert_eq!(
        sub_path("s3://foo/", "s3://foo"),
        "models/83fbff445b51876f/"
    );
    assert_eq!(
        sub_path("s3://foo/model1", "s3://foo"),
        "models/83fbff445b51876f/model1"
    );
    assert_eq!(
        sub_path("s3://foo/model1", "s3://foo/"),
        "models/e65e626ad747873c/model1"
    );
}

#[test]
fn s30_local_model_without_pvc_name_is_an_error() {
    let mut p = pod(si("s3://foo"));
    p["metadata"]["labels"] = json!({LOCAL_MODEL_LABEL: "bar"});
    assert_eq!(
        err(&p, &Inputs::default()),
        "Annotation internal.serving.kserve.io/localmodel-pvc-name not found"
    );
}

#[test]
fn s35_confidential_env_follows_hf_defaults() {
    let mut annotations = si("gs://foo");
    annotations[CONFIDENTIAL_ENABLED_ANNOTATION] = json!("true");
    annotations[CONFIDENTIAL_RESOURCE_ID_ANNOTATION] = json!("kbs:///default/key/model-key");
    let out = run_idempotent(inject, &pod(annotations.clone()), &si_cfg());
    let mut vars = hf3();
    vars.push(json!({"name": "CONFIDENTIAL_ENABLED", "value": "true"}));
    vars.push(json!({"name": "CONFIDENTIAL_RESOURCE_ID", "value": "kbs:///default/key/model-key"}));
    assert_eq!(
        out["spec"]["initContainers"][0],
        init_container(&["gs://foo", "/mnt/models"], vars)
    );
    let mut without_id = annotations.clone();
    without_id
        .as_object_mut()
        .unwrap()
        .remove(CONFIDENTIAL_RESOURCE_ID_ANNOTATION);
    let mut empty_id = annotations;
    empty_id[CONFIDENTIAL_RESOURCE_ID_ANNOTATION] = json!("");
    for a in [without_id, empty_id] {
        let out = run_with(inject, &pod(a), &si_cfg()).unwrap();
        let names = env_names(&out["spec"]["initContainers"][0]).join(",");
        assert!(names.ends_with("HF_XET_NUM_CONCURRENT_RANGE_GETS,CONFIDENTIAL_ENABLED"));
    }
}

#[test]
fn model_puller_pods_are_left_to_the_agent() {
    let mut annotations = si("gs://foo");
    annotations[AGENT_ANNOTATION] = json!("true");
    let p = pod(annotations);
    assert_eq!(run_with(inject, &p, &si_cfg()).unwrap(), p);
}

#[test]
fn oci_uris_are_left_to_the_modelcar_injector_when_oci_is_enabled() {
    let modelcar = Inputs::default();
    for uri in ["oci://r/m:v1", "oci+native://r/m:v1", "oci+fetch://r/m:v1"] {
        let p = pod(si(uri));
        assert_eq!(run_with(inject, &p, &modelcar).unwrap(), p, "{uri}");
    }
    // OCI disabled: bare oci:// is downloaded by the storage initializer, while
    // a pinned mode is skipped (and no modelcar injector runs).
    let disabled = si_cfg();
    let out = run_with(inject, &pod(si("oci://r/m:v1")), &disabled).unwrap();
    assert_eq!(
        out["spec"]["initContainers"][0]["args"],
        json!(["oci://r/m:v1", "/mnt/models"])
    );
    let p = pod(si("oci+native://r/m:v1"));
    assert_eq!(run_with(inject, &p, &disabled).unwrap(), p);
}

#[test]
fn worker_container_is_the_fallback_target() {
    let p = pod_with(si("gs://foo"), json!([{"name": "worker-container"}]));
    let out = run_with(inject, &p, &si_cfg()).unwrap();
    assert_eq!(
        out["spec"]["containers"],
        json!([{"name": "worker-container", "volumeMounts": [kpl_user_mount(true)]}])
    );
}

#[test]
fn bug_766_existing_volume_is_not_duplicated() {
    let mut p = pod(si("gs://foo"));
    let user_volume =
        json!({"name": "kserve-provision-location", "emptyDir": {"medium": "Memory"}});
    p["spec"]["volumes"] = json!([user_volume]);
    let out = run_idempotent(inject, &p, &si_cfg());
    assert_eq!(out["spec"]["volumes"], json!([user_volume]));
    assert_eq!(out["spec"]["initContainers"].as_array().unwrap().len(), 1);
}

#[test]
fn existing_user_mount_is_kept_and_the_volume_still_added() {
    let p = pod_with(
        si("gs://foo"),
        json!([{"name": "kserve-container", "volumeMounts": [kpl_user_mount(false)]}]),
    );
    let out = run_idempotent(inject, &p, &si_cfg());
    assert_eq!(
        out["spec"]["containers"][0]["volumeMounts"],
        json!([kpl_user_mount(false)])
    );
    assert_eq!(out["spec"]["volumes"], json!([kpl_volume()]));
}

#[test]
fn bug_2896_existing_pvc_mount_is_not_duplicated() {
    let p = pod_with(
        si("pvc://mypvcname/some/path/on/pvc"),
        json!([{"name": "kserve-container", "volumeMounts": [pvc_user_mount("some/path/on/pvc", true)]}]),
    );
    let mut p = p;
    p["spec"]["volumes"] = json!([pvc_volume("mypvcname")]);
    assert_eq!(run_with(inject, &p, &si_cfg()).unwrap(), p);
}

#[test]
fn bug_4761_user_hf_env_on_an_existing_initializer_is_kept() {
    let mut p = pod(si("hf://org/model"));
    p["spec"]["initContainers"] = json!([{
        "name": "storage-initializer",
        "env": [{"name": "HF_HUB_ENABLE_HF_TRANSFER", "value": "0"}]
    }]);
    assert_eq!(run_with(inject, &p, &si_cfg()).unwrap(), p);
}

#[test]
fn init_container_goes_after_existing_init_containers() {
    let mut p = pod(si("gs://foo"));
    p["spec"]["initContainers"] = json!([{"name": "istio-init"}]);
    let out = run_with(inject, &p, &si_cfg()).unwrap();
    let names: Vec<&str> = out["spec"]["initContainers"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(names, ["istio-init", "storage-initializer"]);
}

/// [`si_cfg`] read as KServe v0.15 reads it (a `pvc://` URI mounted directly).
fn v0_15_cfg() -> Inputs {
    let mut env = si_cfg();
    env.edit_config(|c| c.release = crate::release::Release::V0_15_0.into());
    env
}

#[test]
fn v0_15_mounts_the_model_again_where_the_server_mounts_it_elsewhere() {
    // The pod lacks the volume: v0.15 adds it and a second mount of it at
    // /mnt/models, a valid pod; HEAD's mount by name adds no second one.
    let elsewhere = json!({"name": "kserve-provision-location", "mountPath": "/data"});
    let p = pod_with(
        si("gs://foo"),
        json!([{"name": "kserve-container", "volumeMounts": [elsewhere]}]),
    );
    let out = run_idempotent(inject, &p, &v0_15_cfg());
    assert_eq!(
        out["spec"]["containers"][0]["volumeMounts"],
        json!([elsewhere, kpl_user_mount(true)])
    );
    assert_eq!(out["spec"]["volumes"], json!([kpl_volume()]));
    let head = run_idempotent(inject, &p, &si_cfg());
    assert_eq!(
        head["spec"]["containers"][0]["volumeMounts"],
        json!([elsewhere])
    );
    // Never two mounts at one path, which the API server refuses.
    let same_path = pod_with(
        si("gs://foo"),
        json!([{"name": "kserve-container", "volumeMounts": [kpl_user_mount(false)]}]),
    );
    let out = run_idempotent(inject, &same_path, &v0_15_cfg());
    assert_eq!(
        out["spec"]["containers"][0]["volumeMounts"],
        json!([kpl_user_mount(false)])
    );
}

#[test]
fn v0_15_keeps_one_model_volume_where_the_pod_has_it() {
    // v0.15 would append a second `kserve-provision-location` (rejected):
    // the pod gets HEAD's mounts and keeps its own volume.
    let elsewhere = json!({"name": "kserve-provision-location", "mountPath": "/data"});
    let mut p = pod_with(
        si("gs://foo"),
        json!([{"name": "kserve-container", "volumeMounts": [elsewhere]}]),
    );
    p["spec"]["volumes"] = json!([kpl_volume()]);
    let out = run_idempotent(inject, &p, &v0_15_cfg());
    assert_eq!(
        out["spec"]["containers"][0]["volumeMounts"],
        json!([elsewhere])
    );
    assert_eq!(out["spec"]["volumes"], json!([kpl_volume()]));
}

#[test]
fn v0_15_direct_pvc_mount_stops_at_a_container_that_mounts_the_claim() {
    let p = pod_with(
        si("pvc://my-pvc/m"),
        json!([
            {"name": "kserve-container",
             "env": [{"name": "STORAGE_URI", "value": "pvc://my-pvc/m"}],
             "volumeMounts": [{"name": "kserve-pvc-source", "mountPath": "/data"}]},
            {"name": "transformer-container"}
        ]),
    );
    // Without the volume, v0.15's unchanged pod is rejected: HEAD's pod.
    let head = run_idempotent(inject, &p, &si_cfg());
    assert_eq!(run_idempotent(inject, &p, &v0_15_cfg()), head);
    assert_eq!(head["spec"]["volumes"], json!([pvc_volume("my-pvc")]));
    assert_eq!(
        head["spec"]["containers"][1]["volumeMounts"],
        json!([pvc_user_mount("m", true)])
    );
    // With it, v0.15 returns the pod as it is.
    let mut with_volume = p.clone();
    with_volume["spec"]["volumes"] = json!([pvc_volume("my-pvc")]);
    assert_eq!(
        run_with(inject, &with_volume, &v0_15_cfg()).unwrap(),
        with_volume
    );
    // The transformer mounting it: the server gets its mount, nothing else.
    let mut transformer_first = with_volume.clone();
    let mount = transformer_first["spec"]["containers"][0]["volumeMounts"].take();
    transformer_first["spec"]["containers"][0]
        .as_object_mut()
        .unwrap()
        .remove("volumeMounts");
    transformer_first["spec"]["containers"][1]["volumeMounts"] = mount;
    let out = run_idempotent(inject, &transformer_first, &v0_15_cfg());
    assert_eq!(
        out["spec"]["containers"][0]["volumeMounts"],
        json!([pvc_user_mount("m", true)])
    );
    assert_eq!(
        out["spec"]["containers"][0]["env"][0]["value"],
        "pvc://my-pvc/m"
    );
    assert_eq!(out["spec"]["volumes"], json!([pvc_volume("my-pvc")]));
}

#[test]
fn an_image_model_volume_is_denied_where_the_cluster_drops_image_volumes() {
    let mut inputs = si_cfg();
    inputs.model_volume = Some(
        serde_json::from_value(json!({"name": "kserve-provision-location",
            "image": {"reference": "registry.example.com/models/base:1"}}))
        .unwrap(),
    );
    let p = pod_with(si("gs://foo"), json!([{"name": "kserve-container"}]));
    let kept = run_idempotent(inject, &p, &inputs);
    assert!(kept["spec"]["volumes"][0]["image"].is_object(), "{kept}");
    inputs.drops_image_volumes = true;
    let denied = run_with(inject, &p, &inputs).expect_err("denied");
    let text = denied.to_string();
    assert!(text.contains("drops image volumes"), "{text}");
    assert!(text.contains("ImageVolume feature gate"), "{text}");
    assert!(text.contains("modelVolume another source"), "{text}");
    // Any other source is not an image volume: nothing to lose.
    inputs.model_volume = None;
    run_idempotent(inject, &p, &inputs);
    // A pod that already has the volume keeps its own (nothing is added).
    let mut own = p.clone();
    own["spec"]["volumes"] = json!([kpl_volume()]);
    inputs.model_volume = Some(
        serde_json::from_value(json!({"name": "kserve-provision-location",
            "image": {"reference": "registry.example.com/models/base:1"}}))
        .unwrap(),
    );
    run_idempotent(inject, &own, &inputs);
}
