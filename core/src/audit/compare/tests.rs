use super::*;
use serde_json::json;

fn pod(spec: Value) -> Value {
    json!({"metadata": {"labels": {"app": "a"}}, "spec": spec})
}

fn paths(d: &[Difference]) -> Vec<(&str, DiffKind)> {
    d.iter().map(|d| (d.path.as_str(), d.kind)).collect()
}

#[test]
fn equal_pods_have_no_difference() {
    let p = pod(json!({"containers": [{"name": "c", "image": "i"}]}));
    assert!(compare(&p, &p, &Rules::default()).is_empty());
}

#[test]
fn named_entries_are_matched_by_name_whatever_their_order() {
    let want = pod(json!({"containers": [
        {"name": "a", "env": [{"name": "X", "value": "1"}, {"name": "Y", "value": "2"}]},
        {"name": "b"}]}));
    let got = pod(json!({"containers": [
        {"name": "b"},
        {"name": "a", "env": [{"name": "Y", "value": "2"}, {"name": "X", "value": "9"}]}]}));
    let d = compare(&want, &got, &Rules::default());
    assert_eq!(
        paths(&d),
        [("spec.containers[a].env[X].value", DiffKind::Changed)]
    );
}

#[test]
fn missing_and_extra_entries_and_fields_are_named() {
    let want = pod(
        json!({"initContainers": [{"name": "storage-initializer", "image": "s"}],
        "containers": [{"name": "c", "args": ["a"]}]}),
    );
    let got = pod(json!({"containers": [{"name": "c", "args": ["a", "b"]}, {"name": "debug"}]}));
    let d = compare(&want, &got, &Rules::default());
    assert_eq!(
        paths(&d),
        [
            ("spec.containers[c].args", DiffKind::Changed),
            ("spec.containers[debug]", DiffKind::Extra),
            (
                "spec.initContainers[storage-initializer]",
                DiffKind::Missing
            ),
        ]
    );
}

#[test]
fn what_the_api_server_and_admission_plugins_add_is_passed_over() {
    let want = pod(json!({
        "containers": [{"name": "c", "image": "i", "ports": [{"containerPort": 8080}],
            "readinessProbe": {"httpGet": {"path": "/", "port": 8080}},
            "env": [{"name": "N", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]}],
        "volumes": [{"name": "cfg", "configMap": {"name": "x"}}]}));
    let got = pod(json!({
        "nodeName": "n1", "serviceAccountName": "default", "serviceAccount": "default",
        "schedulerName": "default-scheduler", "securityContext": {}, "dnsPolicy": "ClusterFirst",
        "restartPolicy": "Always", "terminationGracePeriodSeconds": 30, "enableServiceLinks": true,
        "priority": 0, "preemptionPolicy": "PreemptLowerPriority",
        "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
            "effect": "NoExecute", "tolerationSeconds": 300}],
        "containers": [{"name": "c", "image": "i", "imagePullPolicy": "IfNotPresent",
            "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
            "resources": {}, "ports": [{"containerPort": 8080, "protocol": "TCP"}],
            "readinessProbe": {"httpGet": {"path": "/", "port": 8080, "scheme": "HTTP"},
                "timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3},
            "env": [{"name": "N", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}}],
            "volumeMounts": [{"name": "kube-api-access-x1", "readOnly": true,
                "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}]}],
        "volumes": [{"name": "cfg", "configMap": {"name": "x", "defaultMode": 420}},
            {"name": "kube-api-access-x1", "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]}}]}));
    let d = compare(&want, &got, &Rules::default());
    assert!(d.is_empty(), "{d:?}");
}

#[test]
fn a_sidecar_and_the_volumes_only_it_mounts_are_ignored_and_a_flag_adds_names() {
    let want = pod(json!({"containers": [{"name": "c"}]}));
    let got = pod(json!({
        "containers": [{"name": "c"}, {"name": "istio-proxy", "volumeMounts": [{"name": "istio-envoy", "mountPath": "/e"}]},
            {"name": "vault-agent"}],
        "volumes": [{"name": "istio-envoy", "emptyDir": {}}]}));
    let d = compare(&want, &got, &Rules::default());
    assert_eq!(
        paths(&d),
        [("spec.containers[vault-agent]", DiffKind::Extra)]
    );
    let mut rules = Rules::default();
    rules.sidecars.insert("vault-agent".into());
    assert!(compare(&want, &got, &rules).is_empty());
}

#[test]
fn quantities_compare_by_value_and_metadata_keys_are_quoted() {
    let want = json!({"metadata": {"annotations": {"a.b/c": "1"}},
        "spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": "0.5", "memory": "1Gi"}}}]}});
    let got = json!({"metadata": {"annotations": {"a.b/c": "2", "sidecar.istio.io/status": "{}"}},
        "spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": "500m", "memory": "1024Mi"}}}]}});
    let d = compare(&want, &got, &Rules::default());
    assert_eq!(
        paths(&d),
        [("metadata.annotations[\"a.b/c\"]", DiffKind::Changed)]
    );
}

#[test]
fn a_default_is_still_compared_when_we_set_it() {
    let want = pod(json!({"containers": [{"name": "c", "imagePullPolicy": "Always"}]}));
    let got = pod(json!({"containers": [{"name": "c", "imagePullPolicy": "IfNotPresent"}]}));
    let d = compare(&want, &got, &Rules::default());
    assert_eq!(
        paths(&d),
        [("spec.containers[c].imagePullPolicy", DiffKind::Changed)]
    );
}
