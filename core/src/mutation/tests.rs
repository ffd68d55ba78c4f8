use super::*;
use crate::cluster::ClusterSnapshot;
use crate::config::Config;
use serde_json::json;

fn isvc_pod() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "sklearn-predictor-0",
            "labels": {"serving.kserve.io/inferenceservice": "sklearn"}
        },
        "spec": {"containers": [{"name": "kserve-container", "image": "kserve/sklearnserver:latest"}]}
    })
}

fn paths(patch: &[Op]) -> Vec<String> {
    patch.iter().map(|op| op.path.clone()).collect()
}

/// The patch turns the raw input into the returned pod.
fn applied(input: &Value, m: &Mutation) -> Value {
    let mut patched = input.clone();
    // Applied by an independent RFC 6902 implementation, from the wire form.
    let patch: json_patch::Patch =
        serde_json::from_value(serde_json::to_value(&m.patch).expect("ops serialise"))
            .expect("RFC 6902 operations");
    json_patch::patch(&mut patched, &patch).expect("patch applies to the raw input");
    assert_eq!(patched, m.pod);
    patched
}

#[test]
fn a_pod_without_the_label_comes_back_unchanged() {
    let mut pod = isvc_pod();
    pod["metadata"]["labels"] = json!({"app": "sklearn"});
    pod["metadata"]["annotations"] =
        json!({"internal.serving.kserve.io/storage-initializer-sourceuri": "oci://a/b"});
    let m = mutate(&pod, "default", &Inputs::default()).unwrap();
    assert_eq!(m.pod, pod);
    assert!(m.patch.is_empty());
    assert!(m.outcomes.is_empty());
}

#[test]
fn an_empty_label_value_still_counts() {
    let mut pod = isvc_pod();
    pod["metadata"]["labels"] = json!({"serving.kserve.io/inferenceservice": ""});
    let m = mutate(&pod, "default", &Inputs::default()).unwrap();
    assert_eq!(m.pod["metadata"]["namespace"], "default");
    assert!(!m.outcomes.is_empty());
}

#[test]
fn unknown_fields_survive_and_no_op_touches_them() {
    let mut pod = isvc_pod();
    pod["spec"]["someFutureField"] = json!({"enabled": true});
    pod["spec"]["containers"][0]["someUnknownKey"] = json!([1, 2, 3]);
    pod["metadata"]["annotations"] = json!({
        "internal.serving.kserve.io/storage-initializer-sourceuri": "oci://myrepo/model",
        "internal.serving.kserve.io/logger": "true"
    });
    pod["status"] = json!({"phase": "Pending", "futureStatus": "x"});
    let m = mutate(&pod, "default", &Inputs::default()).unwrap();
    let out = applied(&pod, &m);
    assert_eq!(out["spec"]["someFutureField"], json!({"enabled": true}));
    assert_eq!(
        out["spec"]["containers"][0]["someUnknownKey"],
        json!([1, 2, 3])
    );
    assert_eq!(out["status"], pod["status"]);
    for path in paths(&m.patch) {
        assert!(
            !path.contains("someFutureField")
                && !path.contains("someUnknownKey")
                && !path.starts_with("/status"),
            "{path}"
        );
    }
}

#[test]
fn managed_fields_and_other_metadata_are_untouched() {
    let mut pod = isvc_pod();
    pod["metadata"]["managedFields"] = json!([{
        "manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1",
        "time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1",
        "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:serving.kserve.io/inferenceservice": {}}}}
    }]);
    pod["metadata"]["ownerReferences"] = json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet",
        "name": "rs", "uid": "u", "controller": true, "blockOwnerDeletion": true}]);
    pod["metadata"]["creationTimestamp"] = Value::Null;
    let m = mutate(&pod, "default", &Inputs::default()).unwrap();
    let out = applied(&pod, &m);
    for key in ["managedFields", "ownerReferences", "creationTimestamp"] {
        assert_eq!(out["metadata"][key], pod["metadata"][key], "{key}");
    }
    assert!(paths(&m.patch)
        .iter()
        .all(|p| p.starts_with("/metadata/annotations") || p == "/metadata/namespace"));
}

#[test]
fn absent_parents_are_added_whole_in_one_op() {
    let pod = isvc_pod();
    let m = mutate(&pod, "default", &Inputs::default()).unwrap();
    applied(&pod, &m);
    let ops = serde_json::to_value(&m.patch).unwrap();
    let mut ops = ops.as_array().unwrap().clone();
    ops.sort_by(|a, b| a["path"].as_str().cmp(&b["path"].as_str()));
    assert_eq!(
        ops,
        vec![
            json!({"op": "add", "path": "/metadata/annotations", "value": {
                "serving.kserve.io/enable-metric-aggregation": "false",
                "serving.kserve.io/enable-prometheus-scraping": "false"}}),
            json!({"op": "add", "path": "/metadata/namespace", "value": "default"}),
        ]
    );
}

#[test]
fn absent_volume_list_and_mount_list_are_added_whole() {
    let mut pod = isvc_pod();
    pod["metadata"]["annotations"] =
        json!({"internal.serving.kserve.io/storage-initializer-sourceuri": "oci://myrepo/model"});
    let m = mutate(&pod, "default", &Inputs::default()).unwrap();
    applied(&pod, &m);
    let paths = paths(&m.patch);
    assert!(paths.contains(&"/spec/volumes".to_string()), "{paths:?}");
    assert!(
        paths.contains(&"/spec/initContainers".to_string()),
        "{paths:?}"
    );
    assert!(
        paths.contains(&"/spec/containers/0/volumeMounts".to_string()),
        "{paths:?}"
    );
    assert!(
        !paths.iter().any(|p| p.starts_with("/spec/volumes/")),
        "{paths:?}"
    );
}

#[test]
fn annotation_keys_are_escaped_in_patch_paths() {
    let mut pod = isvc_pod();
    pod["metadata"]["annotations"] = json!({
        "example.com/a~b": "kept",
        "serving.kserve.io/enable-prometheus-scraping": "true",
        "prometheus.io/port": "1234"
    });
    let m = mutate(&pod, "default", &Inputs::default()).unwrap();
    let out = applied(&pod, &m);
    let paths = paths(&m.patch);
    assert!(paths.contains(&"/metadata/annotations/prometheus.io~1port".to_string()));
    assert!(paths.contains(&"/metadata/annotations/prometheus.io~1path".to_string()));
    assert!(paths.contains(
        &"/metadata/annotations/serving.kserve.io~1enable-metric-aggregation".to_string()
    ));
    assert!(!paths.iter().any(|p| p.contains("a~0b")), "{paths:?}");
    assert_eq!(out["metadata"]["annotations"]["example.com/a~b"], "kept");
    assert_eq!(out["metadata"]["annotations"]["prometheus.io/port"], "9091");
}

#[test]
fn the_namespace_is_written_from_the_request_and_replaces_a_different_one() {
    let m = mutate(&isvc_pod(), "models", &Inputs::default()).unwrap();
    assert_eq!(m.pod["metadata"]["namespace"], "models");
    let mut pod = isvc_pod();
    pod["metadata"]["namespace"] = json!("other");
    let m = mutate(&pod, "models", &Inputs::default()).unwrap();
    let out = applied(&pod, &m);
    assert_eq!(out["metadata"]["namespace"], "models");
}

#[test]
fn an_empty_request_namespace_is_not_written() {
    let pod = isvc_pod();
    let m = mutate(&pod, "", &Inputs::default()).unwrap();
    assert!(m.pod["metadata"].get("namespace").is_none());
    assert!(!paths(&m.patch).contains(&"/metadata/namespace".to_string()));
}

#[test]
fn templates_get_no_namespace_but_injectors_see_it() {
    let mut template = isvc_pod();
    template["metadata"]["annotations"] = json!({"internal.serving.kserve.io/logger": "true"});
    let m = mutate_template(&template, "models", &Inputs::default()).unwrap();
    assert!(m.pod["metadata"].get("namespace").is_none());
    let agent = m.pod["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "agent")
        .expect("agent");
    let args: Vec<&str> = agent["args"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let at = args.iter().position(|a| *a == "--namespace").unwrap();
    assert_eq!(args[at + 1], "models");
}

#[test]
fn a_second_pass_is_a_no_op_with_an_empty_patch() {
    let mut pod = isvc_pod();
    pod["metadata"]["annotations"] = json!({
        "internal.serving.kserve.io/storage-initializer-sourceuri": "oci://myrepo/model",
        "internal.serving.kserve.io/logger": "true",
        "serving.kserve.io/enable-metric-aggregation": "true"
    });
    pod["spec"]["containers"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "queue-proxy", "env": [{"name": "USER_PORT", "value": "8080"}]}));
    let first = mutate(&pod, "default", &Inputs::default()).unwrap();
    let second = mutate(&first.pod, "default", &Inputs::default()).unwrap();
    assert_eq!(second.pod, first.pod);
    assert!(second.patch.is_empty());
    assert!(second
        .outcomes
        .iter()
        .all(|(_, o)| *o == InjectorOutcome::Unchanged));
}

#[test]
fn outcomes_name_each_injector_in_kserve_order() {
    let mut pod = isvc_pod();
    pod["metadata"]["annotations"] = json!({"internal.serving.kserve.io/logger": "true"});
    let m = mutate(&pod, "default", &Inputs::default()).unwrap();
    let names: Vec<&str> = m.outcomes.iter().map(|(n, _)| *n).collect();
    assert_eq!(
        names,
        injectors::INJECTOR_NAMES.to_vec(),
        "modelcar is registered with KServe's default config"
    );
    let injected: Vec<&str> = m
        .outcomes
        .iter()
        .filter(|(_, o)| *o == InjectorOutcome::Injected)
        .map(|(n, _)| *n)
        .collect();
    assert_eq!(
        injected,
        [injectors::agent::NAME, injectors::metrics_aggregator::NAME]
    );
}

#[test]
fn f3_modelcar_is_not_registered_without_an_oci_mode() {
    let mut config = Config::default();
    config.storage_initializer.enable_modelcar = false;
    config.storage_initializer.enable_oci_model_support = false;
    config.storage_initializer.oci_model_mode.clear();
    let m = mutate(&isvc_pod(), "default", &Inputs::new(config)).unwrap();
    assert!(!m
        .outcomes
        .iter()
        .any(|(n, _)| *n == injectors::modelcar::NAME));
}

#[test]
fn decode_errors_name_the_field_path() {
    let cases = [
        (
            json!({"spec": {"containers": [{"name": "c", "ports": [{"containerPort": "abc"}]}]}}),
            "spec.containers[0].ports[0].containerPort",
        ),
        (
            json!({"metadata": {"labels": {"serving.kserve.io/inferenceservice": 1}}}),
            "metadata.labels.serving.kserve.io/inferenceservice",
        ),
        (
            json!({"metadata": {"annotations": "x"}}),
            "metadata.annotations",
        ),
        (json!({"spec": {"containers": {}}}), "spec.containers"),
        (json!("pod"), "."),
    ];
    for (pod, path) in cases {
        match mutate(&pod, "default", &Inputs::default()) {
            Err(MutationError::Decode { path: got, .. }) => assert_eq!(got, path, "{pod}"),
            other => panic!("{pod}: {other:?}"),
        }
    }
}

#[test]
fn injector_errors_carry_kserve_message() {
    let mut pod = isvc_pod();
    pod["metadata"]["annotations"] = json!({"internal.serving.kserve.io/agent": "true"});
    let err = mutate(&pod, "default", &Inputs::default()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "can not find internal.serving.kserve.io/configVolumeName label"
    );
    assert!(matches!(err, MutationError::Inject(_)));
}

#[test]
fn cluster_data_secret_lookup_is_namespaced() {
    let mut data = ClusterSnapshot::default();
    data.insert_secret(crate::cluster::Secret::from_data(
        "default",
        "storage-config",
        [("k", "v")],
    ));
    assert!(data.secret("default", "storage-config").is_some());
    assert!(data.secret("other", "storage-config").is_none());
}

#[test]
fn the_cli_still_checks_fields_no_injector_reads() {
    let mut pod = isvc_pod();
    pod["spec"]["containers"][0]["image"] = json!(5);
    match mutate(&pod, "default", &Inputs::default()) {
        Err(MutationError::Decode { path, .. }) => assert_eq!(path, "spec.containers[0].image"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_hostile_container_count_is_refused_by_the_cap_before_the_whole_pod_check() {
    let mut pod = isvc_pod();
    pod["spec"]["containers"] = Value::Array(vec![json!({}); 300_000]);
    match mutate(&pod, "default", &Inputs::default()) {
        Err(MutationError::Decode { path, message, .. }) => {
            assert_eq!(path, "spec.containers");
            assert!(message.starts_with("more than 4096 entries"), "{message}");
        }
        other => panic!("{other:?}"),
    }
}
