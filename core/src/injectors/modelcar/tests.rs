use super::shape::ShapeReason;
use super::*;
use crate::injectors::test_support::{env_with, run_idempotent, run_with};
use crate::pod::WorkingSet;
use serde_json::{json, Value};

/// The step as the pipeline runs it, with the plan made for this pod.
fn inject(pod: &mut WorkingSet<'_>, inputs: &Inputs) -> Result<(), InjectError> {
    let plan = Plan::of(pod, inputs);
    super::inject(pod, inputs, &plan)
}

const PROBE_ARGS: &str = "echo 'Pre-fetching modelcar myrepo/mymodelimage: ' && [ -d /models ] && [ \"$$(ls -A /models)\" ] && echo 'OK ... Prefetched and valid (/models exists)' || (echo 'NOK ... Prefetched but modelcar is invalid (/models does not exist or is empty)' && exit 1)";

/// `config {}` of KServe's modelcar tests: no mode, no UID, default resources.
/// `inject` is called directly, so an empty mode takes the modelcar branch.
fn empty_config() -> Inputs {
    env_with(|c| c.storage_initializer = Default::default())
}

fn config(edit: impl FnOnce(&mut crate::config::StorageInitializerConfig)) -> Inputs {
    let mut env = empty_config();
    env.edit_config(|c| edit(&mut c.storage_initializer));
    env
}

fn pod_with(uri: Option<&str>, containers: Value) -> Value {
    let mut pod = json!({
        "metadata": {"name": "deployment", "namespace": "default"},
        "spec": {"containers": containers}
    });
    if let Some(uri) = uri {
        pod["metadata"]["annotations"] = json!({SOURCE_URI_ANNOTATION: uri});
    }
    pod
}

fn pod(uri: &str) -> Value {
    pod_with(Some(uri), json!([{"name": "kserve-container"}]))
}

fn kpl_mount() -> Value {
    json!({"mountPath": "/mnt", "name": "kserve-provision-location"})
}

fn resources(cpu: &str, memory: &str) -> Value {
    json!({"limits": {"cpu": cpu, "memory": memory}, "requests": {"cpu": cpu, "memory": memory}})
}

fn modelcar(image: &str) -> Value {
    json!({
        "args": ["sh", "-c", "ln -sf /proc/$$$$/root/models /mnt/models && sleep infinity"],
        "image": image,
        "name": "modelcar",
        "resources": resources("10m", "15Mi"),
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "volumeMounts": [kpl_mount()]
    })
}

fn modelcar_init() -> Value {
    json!({
        "args": ["sh", "-c", PROBE_ARGS],
        "image": "myrepo/mymodelimage",
        "name": "modelcar-init",
        "resources": resources("10m", "15Mi"),
        "terminationMessagePolicy": "FallbackToLogsOnError"
    })
}

fn configured(name: &str) -> Value {
    json!({
        "name": name,
        "env": [{"name": "MODEL_INIT_MODE", "value": "async"}],
        "volumeMounts": [kpl_mount()]
    })
}

fn names(list: &Value) -> Vec<&str> {
    list.as_array()
        .map(|a| a.iter().filter_map(|c| c["name"].as_str()).collect())
        .unwrap_or_default()
}

fn err(pod: &Value, inputs: &Inputs) -> String {
    run_with(inject, pod, inputs).unwrap_err().message
}

#[test]
fn m1_m2_non_oci_pods_are_unchanged() {
    let no_annotation = pod_with(None, json!([{"name": "kserve-container"}]));
    assert_eq!(
        run_with(inject, &no_annotation, &empty_config()).unwrap(),
        no_annotation
    );
    let s3 = pod("s3://bla/blub");
    assert_eq!(run_with(inject, &s3, &empty_config()).unwrap(), s3);
}

#[test]
fn m3_modelcar_sidecar_init_container_and_shared_volume() {
    let out = run_idempotent(inject, &pod("oci://myrepo/mymodelimage"), &empty_config());
    assert_eq!(
        out["spec"],
        json!({
            "containers": [configured("kserve-container"), modelcar("myrepo/mymodelimage")],
            "volumes": [{"emptyDir": {}, "name": "kserve-provision-location"}],
            "initContainers": [modelcar_init()],
            "shareProcessNamespace": true
        })
    );
}

#[test]
fn m4_m5_transformer_is_configured_once_and_reinjection_changes_nothing() {
    let p = pod_with(
        Some("oci://myrepo/mymodelimage"),
        json!([{"name": "kserve-container"}, {"name": "transformer-container"}]),
    );
    let out = run_idempotent(inject, &p, &empty_config());
    assert_eq!(
        out["spec"]["containers"],
        json!([
            configured("kserve-container"),
            configured("transformer-container"),
            modelcar("myrepo/mymodelimage")
        ])
    );
    assert_eq!(
        names(&out["spec"]["volumes"]),
        ["kserve-provision-location"]
    );
    assert_eq!(names(&out["spec"]["initContainers"]), ["modelcar-init"]);
}

#[test]
fn m6_uid_applies_to_modelcar_and_target_keeping_other_fields() {
    let p = pod_with(
        Some("oci://myrepo/mymodelimage"),
        json!([{"name": "kserve-container", "securityContext": {"runAsNonRoot": true, "runAsUser": 5}}]),
    );
    let out = run_idempotent(inject, &p, &config(|c| c.uid_modelcar = Some(10)));
    let containers = &out["spec"]["containers"];
    assert_eq!(
        containers[0]["securityContext"],
        json!({"runAsNonRoot": true, "runAsUser": 10})
    );
    assert_eq!(containers[1]["securityContext"], json!({"runAsUser": 10}));
    // modelcar-init runs without a security context.
    assert!(out["spec"]["initContainers"][0]
        .get("securityContext")
        .is_none());
}

#[test]
fn m7_configured_modelcar_resources() {
    let env = config(|c| {
        c.cpu_modelcar = "50m".into();
        c.memory_modelcar = "50Mi".into();
    });
    let out = run_with(inject, &pod("oci://myrepo/mymodelimage"), &env).unwrap();
    assert_eq!(
        out["spec"]["containers"][1]["resources"],
        resources("50m", "50Mi")
    );
    assert_eq!(
        out["spec"]["initContainers"][0]["resources"],
        resources("50m", "50Mi")
    );
}

#[test]
fn m8_worker_container_is_the_fallback_target() {
    let p = pod_with(
        Some("oci://myrepo/mymodelimage"),
        json!([{"name": "worker-container"}]),
    );
    let out = run_idempotent(inject, &p, &empty_config());
    assert_eq!(out["spec"]["containers"][0], configured("worker-container"));
    assert_eq!(
        names(&out["spec"]["volumes"]),
        ["kserve-provision-location"]
    );
}

#[test]
fn m9_no_target_container_is_an_error() {
    let p = pod_with(
        Some("oci://myrepo/mymodelimage"),
        json!([{"name": "some-other-container"}]),
    );
    assert_eq!(
        err(&p, &empty_config()),
        "Invalid configuration: cannot find container: kserve-container"
    );
}

#[test]
fn m10_kserve_container_wins_over_worker_container() {
    let p = pod_with(
        Some("oci://myrepo/mymodelimage"),
        json!([{"name": "kserve-container"}, {"name": "worker-container"}]),
    );
    let out = run_with(inject, &p, &empty_config()).unwrap();
    assert_eq!(out["spec"]["containers"][0], configured("kserve-container"));
    assert_eq!(
        out["spec"]["containers"][1],
        json!({"name": "worker-container"})
    );
}

#[test]
fn m11_worker_and_transformer_both_get_the_mount() {
    let p = pod_with(
        Some("oci://myrepo/mymodelimage"),
        json!([{"name": "worker-container"}, {"name": "transformer-container"}]),
    );
    let out = run_with(inject, &p, &empty_config()).unwrap();
    assert_eq!(out["spec"]["containers"][0], configured("worker-container"));
    assert_eq!(
        out["spec"]["containers"][1],
        configured("transformer-container")
    );
}

#[test]
fn model_init_mode_is_replaced_not_duplicated() {
    let p = pod_with(
        Some("oci://myrepo/mymodelimage"),
        json!([{"name": "kserve-container", "env": [{"name": "MODEL_INIT_MODE", "value": "sync"}]}]),
    );
    let out = run_with(inject, &p, &empty_config()).unwrap();
    assert_eq!(
        out["spec"]["containers"][0]["env"],
        json!([{"name": "MODEL_INIT_MODE", "value": "async"}])
    );
}

#[test]
fn bug_3506_reinvocation_after_another_webhook_adds_nothing() {
    let once = run_with(
        inject,
        &pod("oci://myrepo/mymodelimage"),
        &Inputs::default(),
    )
    .unwrap();
    let mut with_sidecar = once.clone();
    with_sidecar["spec"]["containers"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "istio-proxy", "image": "docker.io/istio/proxyv2:1.24.2"}));
    let again = run_with(inject, &with_sidecar, &Inputs::default()).unwrap();
    assert_eq!(again, with_sidecar);
    assert_eq!(
        names(&again["spec"]["containers"]),
        ["kserve-container", "modelcar", "istio-proxy"]
    );
}

fn image_volume() -> Value {
    json!({"image": {"pullPolicy": "IfNotPresent", "reference": "registry.io/mymodel:v1"}, "name": "mnt-models"})
}

fn image_mount() -> Value {
    json!({"mountPath": "/mnt/models", "name": "mnt-models", "readOnly": true, "subPath": "models"})
}

#[test]
fn m12_m13_native_mode_mounts_an_image_volume() {
    let expected = json!({
        "containers": [{"name": "kserve-container", "volumeMounts": [image_mount()]}],
        "volumes": [image_volume()]
    });
    let out = run_idempotent(
        inject,
        &pod("oci+native://registry.io/mymodel:v1"),
        &empty_config(),
    );
    assert_eq!(out["spec"], expected);
    let native = config(|c| c.oci_model_mode = "native".into());
    let out = run_idempotent(inject, &pod("oci://registry.io/mymodel:v1"), &native);
    assert_eq!(out["spec"], expected);
}

#[test]
fn native_mode_configures_the_transformer_and_ignores_the_uid() {
    let p = pod_with(
        Some("oci+native://registry.io/mymodel:v1"),
        json!([{"name": "kserve-container"}, {"name": "transformer-container"}]),
    );
    let out = run_idempotent(inject, &p, &Inputs::default());
    assert_eq!(
        out["spec"]["containers"],
        json!([
            {"name": "kserve-container", "volumeMounts": [image_mount()]},
            {"name": "transformer-container", "volumeMounts": [image_mount()]}
        ])
    );
}

#[test]
fn native_mode_mount_path_clash_is_an_error() {
    let p = pod_with(
        Some("oci+native://registry.io/mymodel:v1"),
        json!([{"name": "kserve-container", "volumeMounts": [{"name": "model-cache", "mountPath": "/mnt/models"}]}]),
    );
    assert_eq!(
        err(&p, &empty_config()),
        r#"mountPath "/mnt/models" already used by volume "model-cache""#
    );
}

#[test]
fn m14_enable_modelcar_and_unknown_modes_mean_modelcar() {
    let env = config(|c| c.enable_modelcar = true);
    for uri in [
        "oci://myrepo/mymodelimage",
        "oci+sidecar://myrepo/mymodelimage",
    ] {
        let out = run_with(inject, &pod(uri), &env).unwrap();
        assert_eq!(
            out["spec"]["containers"][1],
            modelcar("myrepo/mymodelimage"),
            "{uri}"
        );
    }
}

fn fetch_init(env: Option<Value>, extra_mounts: Vec<Value>) -> Value {
    let mut mounts = extra_mounts;
    mounts.push(json!({"mountPath": "/mnt/models", "name": "mnt-models"}));
    let mut init = json!({
        "args": ["oci://registry.io/mymodel:v1", "/mnt/models"],
        "image": "kserve/storage-initializer:latest",
        "name": "storage-initializer",
        "resources": {
            "limits": {"cpu": "1", "memory": "1Gi"},
            "requests": {"cpu": "100m", "memory": "100Mi"}
        },
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "volumeMounts": mounts
    });
    if let Some(env) = env {
        init["env"] = env;
    }
    init
}

fn fetch_config() -> Inputs {
    env_with(|c| c.storage_initializer.oci_model_mode = "fetch".into())
}

#[test]
fn m15_m16_m18_fetch_mode_injects_a_storage_initializer() {
    let expected = json!({
        "containers": [{"name": "kserve-container", "volumeMounts": [{"mountPath": "/mnt/models", "name": "mnt-models"}]}],
        "initContainers": [fetch_init(None, vec![])],
        "volumes": [{"emptyDir": {}, "name": "mnt-models"}]
    });
    let out = run_idempotent(
        inject,
        &pod("oci+fetch://registry.io/mymodel:v1"),
        &Inputs::default(),
    );
    assert_eq!(out["spec"], expected);
    let out = run_idempotent(
        inject,
        &pod("oci://registry.io/mymodel:v1"),
        &fetch_config(),
    );
    assert_eq!(out["spec"], expected);
}

#[test]
fn m17_first_pull_secret_becomes_the_docker_config() {
    let mut p = pod("oci+fetch://registry.io/mymodel:v1");
    p["spec"]["imagePullSecrets"] = json!([{"name": "my-reg-cred"}, {"name": "other"}]);
    let out = run_idempotent(inject, &p, &Inputs::default());
    assert_eq!(
        out["spec"]["initContainers"],
        json!([fetch_init(
            Some(
                json!([{"name": "KSERVE_OCI_DOCKER_CONFIG", "value": "/mnt/oci-fetch-auth/config.json"}])
            ),
            vec![
                json!({"mountPath": "/mnt/oci-fetch-auth", "name": "kserve-oci-fetch-docker-config", "readOnly": true})
            ]
        )])
    );
    assert_eq!(
        out["spec"]["volumes"],
        json!([
            {
                "name": "kserve-oci-fetch-docker-config",
                "secret": {
                    "defaultMode": 256,
                    "items": [{"key": ".dockerconfigjson", "path": "config.json"}],
                    "secretName": "my-reg-cred"
                }
            },
            {"emptyDir": {}, "name": "mnt-models"}
        ])
    );
}

#[test]
fn fetch_mode_ca_bundle_insecure_registry_and_transformer() {
    let mut env = fetch_config();
    env.edit_config(|c| {
        let si = &mut c.storage_initializer;
        si.ca_bundle_config_map_name = "registry-ca".into();
        si.ca_bundle_volume_mount_path = String::new();
        si.oci_insecure_registry = true;
    });
    let mut p = pod_with(
        Some("oci://registry.io/mymodel:v1"),
        json!([{"name": "kserve-container"}, {"name": "transformer-container"}]),
    );
    p["metadata"]["namespace"] = json!("kserve");
    let out = run_idempotent(inject, &p, &env);
    assert_eq!(
        out["spec"]["initContainers"],
        json!([fetch_init(
            Some(json!([
                {"name": "CA_BUNDLE_CONFIGMAP_NAME", "value": "registry-ca"},
                {"name": "CA_BUNDLE_VOLUME_MOUNT_POINT", "value": "/etc/ssl/custom-certs"},
                {"name": "KSERVE_OCI_INSECURE_REGISTRY", "value": "true"}
            ])),
            vec![
                json!({"mountPath": "/etc/ssl/custom-certs", "name": "cabundle-cert", "readOnly": true})
            ]
        )])
    );
    assert_eq!(
        names(&out["spec"]["volumes"]),
        ["cabundle-cert", "mnt-models"]
    );
    let model_mount = json!([{"mountPath": "/mnt/models", "name": "mnt-models"}]);
    assert_eq!(out["spec"]["containers"][0]["volumeMounts"], model_mount);
    assert_eq!(out["spec"]["containers"][1]["volumeMounts"], model_mount);
}

/// The volumes are ours from an earlier pass whose initializer another
/// webhook removed: the re-created initializer is wired to them again, and no
/// volume is duplicated.
#[test]
fn fetch_mode_rewires_credentials_whose_volume_exists() {
    let mut p = pod("oci+fetch://registry.io/mymodel:v1");
    p["spec"]["imagePullSecrets"] = json!([{"name": "my-reg-cred"}]);
    p["spec"]["volumes"] = json!([
        {"name": "kserve-oci-fetch-docker-config", "secret": {"secretName": "my-reg-cred"}},
        {"name": "cabundle-cert", "configMap": {"name": "global-ca-bundle"}}
    ]);
    let env = config(|c| {
        c.oci_model_mode = "fetch".into();
        c.ca_bundle_config_map_name = "registry-ca".into();
    });
    let out = run_idempotent(inject, &p, &env);
    let init = &out["spec"]["initContainers"][0];
    let mount_names: Vec<&str> = init["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        mount_names,
        [
            "kserve-oci-fetch-docker-config",
            "cabundle-cert",
            "mnt-models"
        ]
    );
    assert!(init["env"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["name"] == "KSERVE_OCI_DOCKER_CONFIG"));
    assert_eq!(
        names(&out["spec"]["volumes"]),
        [
            "kserve-oci-fetch-docker-config",
            "cabundle-cert",
            "mnt-models"
        ]
    );
}

#[test]
fn fetch_mode_adds_its_source_to_an_existing_initializer() {
    let mut p = pod("oci+fetch://registry.io/mymodel:v1");
    p["spec"]["initContainers"] = json!([{"name": "storage-initializer", "args": ["oci://registry.io/base:v1", "/mnt/base"]}]);
    let out = run_idempotent(inject, &p, &Inputs::default());
    assert_eq!(
        out["spec"]["initContainers"],
        json!([{
            "name": "storage-initializer",
            "args": ["oci://registry.io/base:v1", "/mnt/base", "oci://registry.io/mymodel:v1", "/mnt/models"],
            "volumeMounts": [{"mountPath": "/mnt/models", "name": "mnt-models"}]
        }])
    );
}

/// The pipeline's modelcar step (`injectors::PIPELINE`): modelcar, then
/// Istio CNI again.
fn modelcar_step(pod: &mut WorkingSet<'_>, inputs: &Inputs) -> Result<(), InjectError> {
    inject(pod, inputs)?;
    crate::injectors::istio_cni::inject(pod, inputs)
}

#[test]
fn fetch_mode_under_istio_cni_gets_the_sidecar_uid_in_one_pass() {
    let mut p = pod_with(
        Some("oci+fetch://registry.io/mymodel:v1"),
        json!([{"name": "kserve-container"}, {"name": "istio-proxy"}]),
    );
    p["metadata"]["annotations"]["sidecar.istio.io/status"] =
        json!(r#"{"containers":["istio-proxy"]}"#);
    p["metadata"]["annotations"]["sidecar.istio.io/interceptionMode"] = json!("REDIRECT");
    let out = run_idempotent(modelcar_step, &p, &Inputs::default());
    assert_eq!(
        out["spec"]["initContainers"][0]["securityContext"],
        json!({"runAsUser": 1337})
    );
}

fn native_mode(mut env: Inputs) -> Inputs {
    env.modelcar_mode = ModelcarMode::NativeSidecar;
    env
}

fn annotated(mut pod: Value, mode: &str) -> Value {
    pod["metadata"]["annotations"][MODELCAR_MODE_ANNOTATION] = json!(mode);
    pod
}

fn init_names(pod: &Value) -> Vec<&str> {
    names(&pod["spec"]["initContainers"])
}

#[test]
fn native_sidecar_is_an_init_container_probed_on_the_link_after_the_pods_own() {
    let mut p = pod("oci://myrepo/mymodelimage");
    p["spec"]["initContainers"] = json!([{"name": "user-init"}]);
    let env = native_mode(config(|c| c.uid_modelcar = Some(1010)));
    let out = run_idempotent(inject, &p, &env);
    assert_eq!(names(&out["spec"]["containers"]), ["kserve-container"]);
    assert_eq!(init_names(&out), ["user-init", "modelcar"]);
    let sidecar = &out["spec"]["initContainers"][1];
    assert_eq!(sidecar["restartPolicy"], "Always");
    assert_eq!(
        sidecar["startupProbe"]["exec"]["command"],
        json!(["sh", "-c", "test -e /mnt/models"])
    );
    // What the classic modelcar has, field for field, besides args and probe.
    let mut classic = modelcar("myrepo/mymodelimage");
    classic["securityContext"] = json!({"runAsUser": 1010});
    for field in [
        "image",
        "resources",
        "volumeMounts",
        "securityContext",
        "terminationMessagePolicy",
    ] {
        assert_eq!(sidecar[field], classic[field], "{field}");
    }
    let script = sidecar["args"][2].as_str().unwrap_or_default();
    assert!(script.ends_with("ln -sf /proc/$$$$/root/models /mnt/models && sleep infinity"));
    assert!(script.contains("exit 1"), "an empty image fails: {script}");
    assert_eq!(out["spec"]["shareProcessNamespace"], true);
    assert_eq!(
        out["spec"]["containers"][0]["env"],
        json!([{"name": "MODEL_INIT_MODE", "value": "async"}])
    );
}

#[test]
fn the_annotation_overrides_the_flag_both_ways() {
    let p = pod("oci://myrepo/mymodelimage");
    let classic_env = empty_config();
    let out = run_idempotent(
        inject,
        &annotated(p.clone(), "native-sidecar"),
        &classic_env,
    );
    assert_eq!(init_names(&out), ["modelcar"]);
    let out = run_idempotent(
        inject,
        &annotated(p.clone(), "classic"),
        &native_mode(classic_env),
    );
    assert_eq!(init_names(&out), ["modelcar-init"]);
    assert_eq!(
        names(&out["spec"]["containers"]),
        ["kserve-container", "modelcar"]
    );
}

#[test]
fn the_shape_present_wins_over_the_flag_and_the_annotation() {
    let p = pod("oci://myrepo/mymodelimage");
    let native = native_mode(empty_config());
    // A classic pod met in native mode, asked for native: stays classic.
    let classic_pod = run_idempotent(inject, &p, &empty_config());
    let again = run_with(
        inject,
        &annotated(classic_pod.clone(), "native-sidecar"),
        &native,
    );
    assert_eq!(again.unwrap(), annotated(classic_pod, "native-sidecar"));
    // A native pod met in classic mode, asked for classic: stays native.
    let native_pod = run_idempotent(inject, &p, &native);
    let again = run_with(
        inject,
        &annotated(native_pod.clone(), "classic"),
        &empty_config(),
    );
    assert_eq!(again.unwrap(), annotated(native_pod, "classic"));
    // modelcar-init alone (another webhook dropped the modelcar) means classic.
    let mut half = p.clone();
    half["spec"]["initContainers"] = json!([modelcar_init()]);
    let out = run_idempotent(inject, &half, &native);
    assert_eq!(init_names(&out), ["modelcar-init"]);
    assert_eq!(
        names(&out["spec"]["containers"]),
        ["kserve-container", "modelcar"]
    );
}

#[test]
fn an_annotation_naming_no_mode_is_refused_only_when_it_decides() {
    let p = annotated(pod("oci://myrepo/mymodelimage"), "Native");
    assert_eq!(
        err(&p, &empty_config()),
        "kserve-injector.io/modelcar-mode: \"Native\" is not a modelcar mode (expected classic or native-sidecar)"
    );
    let s3 = annotated(pod("s3://bucket/model"), "Native");
    assert_eq!(run_with(inject, &s3, &empty_config()).unwrap(), s3);
    let present = run_idempotent(inject, &pod("oci://myrepo/mymodelimage"), &empty_config());
    let present = annotated(present, "Native");
    assert_eq!(
        run_with(inject, &present, &empty_config()).unwrap(),
        present
    );
}

#[test]
fn the_plan_s_shape_says_why() {
    let p = pod("oci://myrepo/mymodelimage");
    let plan = |pod: &Value, inputs: &Inputs| {
        let view = crate::view::pod_from_value(pod).expect("a pod the view reads");
        Plan::of(&WorkingSet::new(view), inputs).shape()
    };
    let env = env_with(|_| {});
    let flag = plan(&p, &native_mode(env.clone()));
    assert_eq!(
        flag,
        Some(ShapeChoice {
            mode: ModelcarMode::NativeSidecar,
            reason: ShapeReason::Flag
        })
    );
    let by_annotation = plan(&annotated(p.clone(), "classic"), &native_mode(env.clone()));
    assert_eq!(
        by_annotation.map(|c| c.reason),
        Some(ShapeReason::Annotation)
    );
    let injected = run_with(inject, &p, &env).unwrap();
    let present = plan(&injected, &native_mode(env.clone())).unwrap();
    assert_eq!(present.mode, ModelcarMode::Classic);
    assert_eq!(present.reason, ShapeReason::Present);
    assert!(present.to_string().starts_with("classic ("), "{present}");
    assert_eq!(plan(&pod("s3://bucket/model"), &env), None);
    assert_eq!(plan(&pod("oci+native://registry.io/model:v1"), &env), None);
}

#[test]
fn native_mode_is_denied_where_the_cluster_drops_image_volumes() {
    let mut inputs = empty_config();
    inputs.drops_image_volumes = true;
    let denied =
        run_with(inject, &pod("oci+native://registry.io/mymodel:v1"), &inputs).expect_err("denied");
    let text = denied.to_string();
    assert!(text.contains("drops image volumes"), "{text}");
    assert!(text.contains("as a modelcar"), "{text}");
    // The modelcar itself needs no image volume.
    run_idempotent(inject, &pod("oci://registry.io/mymodel:v1"), &inputs);
}
