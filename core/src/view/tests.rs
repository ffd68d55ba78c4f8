use super::*;
use serde_json::json;
use std::borrow::Cow;

#[test]
fn strings_without_escapes_are_borrowed() {
    let raw = r#"{"metadata": {"name": "plain", "labels": {"a": "x\"y"}}}"#;
    let view = pod_from_str(raw).unwrap();
    let meta = view.metadata.as_ref().unwrap();
    assert!(matches!(
        meta.name.as_ref().unwrap().0,
        Cow::Borrowed("plain")
    ));
    assert_eq!(view.label("a"), Some("x\"y"));
}

#[test]
fn lists_of_containers_no_injector_reads_are_skipped_unchecked() {
    let raw = r#"{"spec": {"containers": [
        {"name": "istio-proxy", "env": [{"name": "A", "value": 1}], "args": 7,
         "ports": "x", "securityContext": {"runAsUser": 1337}},
        {"env": [{"name": "B", "value": "b"}], "name": "queue-proxy"},
        {"env": [{"name": "C", "value": "c"}], "name": "late-name"}]}}"#;
    let view = pod_from_str(raw).unwrap();
    assert_eq!(
        serde_json::to_value(&view).unwrap()["spec"]["containers"],
        json!([{"name": "istio-proxy", "securityContext": {"runAsUser": 1337}},
               {"name": "queue-proxy", "env": [{"name": "B", "value": "b"}]},
               {"name": "late-name"}])
    );
    let dup = r#"{"spec": {"containers": [{"name": "a", "name": "b"}]}}"#;
    assert!(pod_from_str(dup)
        .unwrap_err()
        .message
        .contains("duplicate field `name`"));
}

#[test]
fn unread_fields_are_not_checked_and_not_kept() {
    let raw = r#"{"metadata": {"managedFields": 7, "uid": [1]},
        "spec": {"containers": [{"name": "c", "image": 5, "lifecycle": "x"}], "tolerations": "bad"}}"#;
    let view = pod_from_str(raw).unwrap();
    assert_eq!(
        serde_json::to_value(&view).unwrap(),
        json!({"metadata": {}, "spec": {"containers": [{"name": "c"}]}})
    );
}

#[test]
fn a_wrong_type_in_a_read_field_names_its_path_without_position() {
    let raw = r#"{"spec": {"containers": [{"name": "kserve-container", "ports": [{"containerPort": "http"}]}]}}"#;
    let e = pod_from_str(raw).unwrap_err();
    assert_eq!(e.path, "spec.containers[0].ports[0].containerPort");
    assert_eq!(e.message, "invalid type: string \"http\", expected i32");
    let tree: serde_json::Value = serde_json::from_str(raw).unwrap();
    assert_eq!(pod_from_value(&tree).unwrap_err(), e);
}

#[test]
fn non_objects_are_refused() {
    for raw in ["[1]", "\"pod\"", "7", "null"] {
        assert_eq!(
            pod_from_str(raw).unwrap_err().message,
            "a Pod must be a JSON object"
        );
    }
}

#[test]
fn lists_and_maps_past_the_cap_are_refused() {
    let containers = vec![json!({}); MAX_ENTRIES + 1];
    let raw = json!({"spec": {"containers": containers}}).to_string();
    let e = pod_from_str(&raw).unwrap_err();
    assert_eq!(e.path, "spec.containers");
    assert!(
        e.message.contains("more than 4096 entries"),
        "{}",
        e.message
    );

    let labels: serde_json::Map<String, serde_json::Value> = (0..=MAX_ENTRIES)
        .map(|i| (format!("k{i}"), json!("v")))
        .collect();
    let raw = json!({"metadata": {"labels": labels}}).to_string();
    assert_eq!(pod_from_str(&raw).unwrap_err().path, "metadata.labels");

    let at_cap = vec![json!({}); MAX_ENTRIES];
    let raw = json!({"spec": {"containers": at_cap}}).to_string();
    assert!(pod_from_str(&raw).is_ok());
}

#[test]
fn a_repeated_key_keeps_its_last_value() {
    let view = pod_from_str(r#"{"metadata": {"labels": {"a": "1", "a": "2"}}}"#).unwrap();
    assert_eq!(view.label("a"), Some("2"));
    assert_eq!(
        serde_json::to_value(&view).unwrap()["metadata"]["labels"],
        json!({"a": "2"})
    );
}

#[test]
fn pods_past_the_total_budget_are_refused_before_any_work() {
    let env: Vec<_> = (0..MAX_ENTRIES)
        .map(|i| json!({"name": format!("E{i}")}))
        .collect();
    let containers: Vec<_> = (LIST_READ_CONTAINERS.iter().take(5))
        .map(|name| json!({"name": name, "env": env}))
        .collect();
    let raw = json!({"spec": {"containers": containers}}).to_string();
    let e = pod_from_str(&raw).unwrap_err();
    assert_eq!(e.path, ".");
    assert!(e.message.contains("more than 16384"), "{}", e.message);
    let tree: serde_json::Value = serde_json::from_str(&raw).unwrap();
    assert_eq!(pod_from_value(&tree).unwrap_err(), e);
}

/// Found by the review fuzz target: the same pod with its container's keys
/// in another order must get the same answer.
#[test]
fn a_container_reads_the_same_whatever_the_order_of_its_keys() {
    let bad_env = r#"[{"name": "A", "valueFrom": "x"}]"#;
    for name in ["sidecar", "kserve-container"] {
        let first =
            format!(r#"{{"spec": {{"containers": [{{"name": "{name}", "env": {bad_env}}}]}}}}"#);
        let last =
            format!(r#"{{"spec": {{"containers": [{{"env": {bad_env}, "name": "{name}"}}]}}}}"#);
        let (a, b) = (pod_from_str(&first), pod_from_str(&last));
        assert_eq!(a.is_ok(), b.is_ok(), "{name}");
        assert_eq!(a.is_ok(), name == "sidecar", "{name}");
        if let (Err(a), Err(b)) = (a, b) {
            assert!(a.message.contains("expected EnvVarSource"), "{}", a.message);
            assert!(b.message.contains("env[0].valueFrom"), "{}", b.message);
        }
    }
    let ok_last = r#"{"spec": {"containers": [{"env": [{"name": "A", "value": "a"}], "args": ["x"], "name": "queue-proxy"}]}}"#;
    let view = pod_from_str(ok_last).unwrap();
    assert_eq!(
        serde_json::to_value(&view).unwrap()["spec"]["containers"][0],
        json!({"name": "queue-proxy", "env": [{"name": "A", "value": "a"}], "args": ["x"]})
    );
}

#[test]
fn readiness_probes_are_read_of_the_first_container_and_the_transformer_only() {
    let probe = json!({"httpGet": {"path": "/ready", "port": 8080}});
    let raw = json!({"spec": {
        "containers": [
            {"name": "kserve-container", "readinessProbe": probe},
            {"name": "queue-proxy", "readinessProbe": probe},
            {"readinessProbe": probe, "name": "transformer-container"},
            {"readinessProbe": probe, "name": "late-name"}],
        "initContainers": [{"name": "init", "readinessProbe": probe}]}})
    .to_string();
    let view = pod_from_str(&raw).unwrap();
    let spec = view.spec.as_ref().unwrap();
    let read: Vec<bool> = (spec.containers.as_ref().unwrap().0.iter())
        .map(|c| c.readiness_probe.is_some())
        .collect();
    assert_eq!(read, [true, false, true, false]);
    assert!(spec.init_containers.as_ref().unwrap().0[0]
        .readiness_probe
        .is_none());
    let first = spec.containers.as_ref().unwrap().0[0]
        .readiness_probe
        .as_deref();
    let path = first
        .and_then(|p| p.http_get.as_ref())
        .and_then(|h| h.path.as_deref());
    assert_eq!(path, Some("/ready"));
}

#[test]
fn a_wrong_type_in_a_read_probe_names_its_path_in_either_key_order() {
    let bad = json!({"httpGet": {"port": 8080, "path": 7}});
    for first in [
        json!({"name": "kserve-container", "readinessProbe": bad}),
        json!({"readinessProbe": bad, "name": "kserve-container"}),
    ] {
        let raw = json!({"spec": {"containers": [first]}}).to_string();
        let e = pod_from_str(&raw).unwrap_err();
        assert!(e.path.starts_with("spec.containers[0]"), "{e:?}");
        assert!(e.message.contains("expected a string"), "{e:?}");
    }
    let unread =
        json!({"spec": {"containers": [{"name": "a"}, {"name": "b", "readinessProbe": bad}]}});
    assert!(pod_from_str(&unread.to_string()).is_ok());
}

#[test]
fn a_null_list_or_probe_reads_as_absent_in_either_key_order() {
    for field in ["env", "volumeMounts", "ports", "args", "readinessProbe"] {
        let first = json!({"spec": {"containers": [{"name": "kserve-container", field: null}]}});
        let last = format!(
            r#"{{"spec": {{"containers": [{{"{field}": null, "name": "kserve-container"}}]}}}}"#
        );
        for raw in [first.to_string(), last] {
            let view = pod_from_str(&raw).unwrap_or_else(|e| panic!("{field}: {e:?}"));
            assert_eq!(
                serde_json::to_value(&view).unwrap()["spec"]["containers"][0],
                json!({"name": "kserve-container"}),
                "{field}"
            );
        }
    }
}
