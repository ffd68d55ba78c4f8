//! The two editors, call by call: each test runs the same calls on the
//! working set and on the oracle's tree and requires the same pod (and, where
//! it says so, the same operations).

use k8s_openapi::api::core::v1::{
    Container, ContainerPort, EnvVar, EnvVarSource, ObjectFieldSelector, Volume, VolumeMount,
};
use kserve_injector_core::internals::{
    pod_from_value, Annotations, ContainerView, List, WorkingSet,
};
use kserve_injector_core::{apply_all, Op, OpKind};
use kserve_injector_oracle::{Edit, EditContainer, EitherDoc, TreeDoc};
use serde_json::json;
use serde_json::Value;

fn container(name: &str) -> Container {
    Container {
        name: name.to_string(),
        image: Some("img".to_string()),
        ..Default::default()
    }
}

fn volume(name: &str) -> Volume {
    Volume {
        name: name.to_string(),
        empty_dir: Some(Default::default()),
        ..Default::default()
    }
}

fn mount(name: &str, path: &str) -> VolumeMount {
    VolumeMount {
        name: name.to_string(),
        mount_path: path.to_string(),
        ..Default::default()
    }
}

fn var(name: &str, value: &str) -> EnvVar {
    EnvVar {
        name: name.to_string(),
        value: Some(value.to_string()),
        value_from: None,
    }
}

fn port(name: &str, number: i32) -> ContainerPort {
    ContainerPort {
        name: Some(name.to_string()),
        container_port: number,
        ..Default::default()
    }
}

/// A pod with one container whose body is `c`.
fn pod_with(c: Value) -> Value {
    json!({"metadata": {"name": "p"}, "spec": {"containers": [c]}})
}

/// The container as the injectors read it, as JSON (absent fields left out).
fn json_of(c: &ContainerView) -> Value {
    serde_json::to_value(c).expect("a view serialises")
}

fn tree_doc<'a>(root: &'a mut Value, ns: Option<&str>) -> TreeDoc<'a> {
    match ns {
        Some(ns) => TreeDoc::in_namespace(root, ns),
        None => TreeDoc::new(root),
    }
}

fn working_set<'a>(pod: &'a Value, ns: Option<&str>) -> WorkingSet<'a> {
    let view = pod_from_value(pod).expect("the view reads the pod");
    match ns {
        Some(ns) => WorkingSet::in_namespace(view, ns),
        None => WorkingSet::new(view),
    }
}

fn apply(pod: &Value, ops: &[Op]) -> Value {
    let mut patched = pod.clone();
    apply_all(ops, &mut patched).unwrap_or_else(|e| panic!("the operations apply: {e}\n{ops:?}"));
    patched
}

/// Runs `edit` on both backends and returns the edited pod, after checking
/// that they agree: the oracle ([`TreeDoc`]) edits a copy of `pod` in place,
/// and its operations replayed on `pod` give that copy; the [`WorkingSet`]
/// built from the view of `pod` gives operations that, applied to `pod`, give
/// the same pod. Both must agree on whether anything changed, and no change
/// must mean an unchanged pod. Assertions inside `edit` run on both.
fn both(pod: &Value, ns: Option<&str>, edit: impl Fn(&mut EitherDoc<'_, '_>)) -> Value {
    let mut tree = pod.clone();
    let mut doc = tree_doc(&mut tree, ns);
    edit(&mut EitherDoc::Tree(&mut doc));
    let tree_changed = doc.changes() > 0;
    drop(doc);

    // `into_ops` moves the values out of the tree, so the replay edits another copy.
    let mut scratch = pod.clone();
    let mut doc = tree_doc(&mut scratch, ns);
    edit(&mut EitherDoc::Tree(&mut doc));
    let tree_ops = doc.into_ops();
    assert_eq!(
        apply(pod, &tree_ops),
        tree,
        "the oracle's operations do not give its pod: {tree_ops:?}"
    );

    let mut ws = working_set(pod, ns);
    edit(&mut EitherDoc::Working(&mut ws));
    let ws_changed = ws.changes() > 0;
    let ops = ws.into_patch();
    assert_eq!(
        apply(pod, &ops),
        tree,
        "the working set's operations differ from the oracle: {ops:?}"
    );
    assert_eq!(
        ws_changed, tree_changed,
        "the backends disagree on a change"
    );
    if !tree_changed {
        assert_eq!(&tree, pod, "no change counted, yet the pod changed");
        assert!(ops.is_empty(), "no change counted, yet operations: {ops:?}");
    }
    tree
}

/// The working set's operations for `edit` on `pod`, as JSON with added
/// containers resolved, after checking the oracle agrees ([`both`]).
fn working_ops(pod: &Value, edit: impl Fn(&mut EitherDoc<'_, '_>)) -> Value {
    both(pod, None, &edit);
    let mut ws = working_set(pod, None);
    edit(&mut EitherDoc::Working(&mut ws));
    serde_json::to_value(ws.into_patch()).expect("operations serialise")
}

/// The working set's operations for `edit` on `pod`, after checking they are
/// the oracle's: whatever is created in the pass arrives whole in one `add`,
/// a later write inside it folded in, in both.
fn same_ops_as_tree(pod: &Value, edit: impl Fn(&mut EitherDoc<'_, '_>)) -> Value {
    let ops = working_ops(pod, &edit);
    let mut tree = pod.clone();
    let mut doc = TreeDoc::new(&mut tree);
    edit(&mut EitherDoc::Tree(&mut doc));
    let tree_ops = serde_json::to_value(doc.into_ops()).expect("operations serialise");
    assert_eq!(
        ops, tree_ops,
        "the working set's operations are not the oracle's"
    );
    ops
}

// --- containers -----------------------------------------------------------

#[test]
fn ensure_container_appends_once() {
    let pod = pod_with(json!({"name": "kserve-container"}));
    let out = both(&pod, None, |doc| {
        assert!(doc.ensure_container(List::Containers, container("agent")));
        assert!(!doc.ensure_container(List::Containers, container("agent")));
        assert_eq!(doc.changes(), 1);
    });
    assert_eq!(
        out["spec"]["containers"],
        json!([{"name": "kserve-container"}, {"name": "agent", "image": "img"}])
    );
}

#[test]
fn ensure_container_is_keyed_across_both_lists() {
    let pod = json!({"spec": {
        "containers": [{"name": "kserve-container"}],
        "initContainers": [{"name": "storage-initializer"}]
    }});
    let out = both(&pod, None, |doc| {
        // A name taken in the other list counts as present, both ways.
        assert!(!doc.ensure_container(List::Containers, container("storage-initializer")));
        assert!(!doc.ensure_container(List::InitContainers, container("kserve-container")));
        assert!(doc.has_container_named("storage-initializer"));
        assert!(doc.has_container_named("kserve-container"));
        assert!(!doc.has_container_named("agent"));
        assert_eq!(doc.changes(), 0);
    });
    assert_eq!(out, pod);
}

#[test]
fn ensure_container_creates_init_containers_when_absent_or_null() {
    for init in [None, Some(Value::Null)] {
        let mut pod = pod_with(json!({"name": "kserve-container"}));
        if let Some(v) = init {
            pod["spec"]["initContainers"] = v;
        }
        let out = both(&pod, None, |doc| {
            assert!(doc.ensure_container(List::InitContainers, container("storage-initializer")));
            assert_eq!(doc.changes(), 1);
        });
        assert_eq!(
            out["spec"]["initContainers"],
            json!([{"name": "storage-initializer", "image": "img"}])
        );
    }
}

#[test]
fn ensure_container_creates_spec_when_absent_or_null() {
    for spec in [None, Some(Value::Null)] {
        let mut pod = json!({"metadata": {}});
        if let Some(v) = spec {
            pod["spec"] = v;
        }
        let out = both(&pod, None, |doc| {
            assert!(doc.ensure_container(List::Containers, container("agent")));
            assert_eq!(doc.changes(), 1);
        });
        assert_eq!(
            out["spec"],
            json!({"containers": [{"name": "agent", "image": "img"}]})
        );
    }
}

#[test]
fn lookups_by_name() {
    let pod = json!({"spec": {
        "containers": [
            {"name": "kserve-container"},
            {"image": "nameless"},
            {"name": "agent", "image": "x", "args": ["--x"], "securityContext": {"runAsUser": 3}}
        ],
        "initContainers": [{"name": "i"}]
    }});
    both(&pod, None, |doc| {
        assert_eq!(doc.position(List::Containers, "agent"), Some(2));
        assert_eq!(doc.position(List::Containers, "i"), None);
        assert_eq!(doc.position(List::InitContainers, "i"), Some(0));
        // The typed read: what the view keeps (not the image).
        let agent = json!({"name": "agent", "args": ["--x"], "securityContext": {"runAsUser": 3}});
        let found = doc.container(List::Containers, "agent").expect("agent");
        assert_eq!(json_of(&found), agent);
        assert!(doc.container(List::Containers, "i").is_none());
        let all = doc.containers(List::Containers);
        assert_eq!(all.len(), 3);
        assert!(all[1].name.is_none());
        assert_eq!(json_of(&all[2]), agent);
        let init = doc.containers(List::InitContainers);
        assert_eq!(init.len(), 1);
        assert_eq!(json_of(&init[0]), json!({"name": "i"}));
    });
}

#[test]
fn an_undecodable_container_reads_as_empty_in_the_tree() {
    // The oracle reads every list of every container; one that does not
    // decode reads as an empty view (no name), though it is still found by
    // position and its neighbours read as usual.
    let mut raw = json!({"spec": {"containers": [
        {"name": "c", "ports": "not-a-list"},
        {"name": "kserve-container", "args": ["--a"]}
    ]}});
    let mut doc = TreeDoc::new(&mut raw);
    assert_eq!(doc.position(List::Containers, "c"), Some(0));
    let all = doc.containers(List::Containers);
    assert_eq!(all.len(), 2);
    assert_eq!(json_of(&all[0]), json!({}));
    assert_eq!(
        json_of(&all[1]),
        json!({"name": "kserve-container", "args": ["--a"]})
    );
    let c = doc.container(List::Containers, "c").expect("found by name");
    assert!(c.name.is_none());
    // The working set never sees such a container: the view refuses a
    // wrong type in a list it reads.
    let refused = json!({"spec": {"containers": [{"name": "kserve-container", "ports": "x"}]}});
    assert!(pod_from_value(&refused).is_err());
}

#[test]
fn container_mut_needs_an_entry_of_that_name() {
    let pod = pod_with(json!({"name": "kserve-container", "args": ["--a"]}));
    both(&pod, None, |doc| {
        assert!(doc.container_mut(List::Containers, "missing").is_none());
        assert!(doc
            .container_mut(List::InitContainers, "kserve-container")
            .is_none());
        assert!(doc.container_at(List::Containers, 1).is_none());
        assert!(doc.container_at(List::InitContainers, 0).is_none());
        let args = doc
            .container_at(List::Containers, 0)
            .map(|c| c.args().iter().map(|a| a.to_string()).collect::<Vec<_>>());
        assert_eq!(args, Some(vec!["--a".to_string()]));
        let args = doc
            .container_mut(List::Containers, "kserve-container")
            .map(|c| c.args().len());
        assert_eq!(args, Some(1));
    });
}

// --- volumes --------------------------------------------------------------

#[test]
fn ensure_volume_is_keyed_by_name() {
    let pod = json!({"spec": {"containers": [], "volumes": [{"name": "data", "configMap": {"name": "cm"}}]}});
    let out = both(&pod, None, |doc| {
        // Same name, different source: the existing volume wins.
        assert!(!doc.ensure_volume(&volume("data")));
        assert!(!doc.has_volume("model"));
        assert!(doc.ensure_volume(&volume("model")));
        assert!(!doc.ensure_volume(&volume("model")));
        assert_eq!(doc.changes(), 1);
        assert!(doc.has_volume("data"));
        assert!(doc.has_volume("model"));
        assert!(!doc.has_volume("cm"));
    });
    assert_eq!(
        out["spec"]["volumes"],
        json!([{"name": "data", "configMap": {"name": "cm"}}, {"name": "model", "emptyDir": {}}])
    );
}

#[test]
fn ensure_volume_creates_volumes_when_absent_or_null() {
    for volumes in [None, Some(Value::Null)] {
        let mut pod = json!({"spec": {"containers": []}});
        if let Some(v) = volumes {
            pod["spec"]["volumes"] = v;
        }
        let out = both(&pod, None, |doc| {
            assert!(doc.ensure_volume(&volume("model")));
            assert_eq!(doc.changes(), 1);
            assert!(doc.has_volume("model"));
        });
        assert_eq!(
            out["spec"]["volumes"],
            json!([{"name": "model", "emptyDir": {}}])
        );
    }
}

// --- mounts, env, ports ---------------------------------------------------

#[test]
fn ensure_mount_is_keyed_by_volume_name() {
    let pod = pod_with(
        json!({"name": "kserve-container", "volumeMounts": [{"name": "data", "mountPath": "/data"}]}),
    );
    let out = both(&pod, None, |doc| {
        {
            let mut c = doc
                .container_mut(List::Containers, "kserve-container")
                .expect("container");
            // A mount of that volume exists (at another path): nothing to do.
            assert!(!c.ensure_mount(&mount("data", "/elsewhere")));
            assert!(c.has_mount("data"));
            assert!(c.ensure_mount(&mount("model", "/mnt/models")));
            assert!(!c.ensure_mount(&mount("model", "/mnt/models")));
            assert!(c.has_mount("model"));
        }
        assert_eq!(doc.changes(), 1);
    });
    assert_eq!(
        out["spec"]["containers"][0]["volumeMounts"],
        json!([{"name": "data", "mountPath": "/data"}, {"name": "model", "mountPath": "/mnt/models"}])
    );
}

#[test]
fn ensure_env_is_keyed_by_name_and_keeps_the_existing_entry() {
    let from = json!({"name": "FROM", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}});
    let pod = pod_with(json!({"name": "kserve-container", "env": [from.clone()]}));
    let out = both(&pod, None, |doc| {
        {
            let mut c = doc
                .container_mut(List::Containers, "kserve-container")
                .expect("container");
            assert!(!c.ensure_env(&var("FROM", "literal")));
            assert!(c.ensure_env(&var("NEW", "1")));
            assert!(!c.ensure_env(&var("NEW", "2")));
            assert!(c.has_env("NEW"));
            assert_eq!(c.env_value("NEW"), Some("1"));
            assert!(c.has_env("FROM"));
            assert_eq!(c.env_value("FROM"), None);
        }
        assert_eq!(doc.changes(), 1);
    });
    assert_eq!(
        out["spec"]["containers"][0]["env"],
        json!([from, {"name": "NEW", "value": "1"}])
    );
}

#[test]
fn ensure_port_is_keyed_by_name() {
    let pod = pod_with(
        json!({"name": "queue-proxy", "ports": [{"name": "aggr-metric", "containerPort": 1234}]}),
    );
    let out = both(&pod, None, |doc| {
        {
            let mut c = doc
                .container_mut(List::Containers, "queue-proxy")
                .expect("container");
            assert!(!c.ensure_port(&port("aggr-metric", 9088)));
            assert!(c.ensure_port(&port("agent-port", 9081)));
            assert!(!c.ensure_port(&port("agent-port", 9081)));
        }
        assert_eq!(doc.changes(), 1);
    });
    assert_eq!(
        out["spec"]["containers"][0]["ports"],
        json!([{"name": "aggr-metric", "containerPort": 1234}, {"name": "agent-port", "containerPort": 9081}])
    );
}

#[test]
fn container_lists_are_created_when_absent_or_null() {
    for slot in [None, Some(Value::Null)] {
        let mut body = json!({"name": "kserve-container"});
        if let Some(v) = &slot {
            body["volumeMounts"] = v.clone();
            body["env"] = v.clone();
            body["ports"] = v.clone();
            body["args"] = v.clone();
        }
        let pod = pod_with(body);
        let out = both(&pod, None, |doc| {
            {
                let mut c = doc
                    .container_mut(List::Containers, "kserve-container")
                    .expect("container");
                assert!(c.ensure_mount(&mount("m", "/m")));
                assert!(c.ensure_env(&var("E", "v")));
                assert!(c.ensure_port(&port("p", 1)));
                c.push_args(&["--flag", "value"]);
                assert_eq!(c.args(), ["--flag", "value"]);
            }
            assert_eq!(doc.changes(), 5);
        });
        assert_eq!(
            out["spec"]["containers"][0],
            json!({
                "name": "kserve-container",
                "volumeMounts": [{"name": "m", "mountPath": "/m"}],
                "env": [{"name": "E", "value": "v"}],
                "ports": [{"name": "p", "containerPort": 1}],
                "args": ["--flag", "value"]
            })
        );
    }
}

// --- set_env ----------------------------------------------------------------

#[test]
fn set_env_adds_when_absent() {
    let pod = pod_with(json!({"name": "kserve-container"}));
    let out = both(&pod, None, |doc| {
        doc.container_mut(List::Containers, "kserve-container")
            .expect("container")
            .set_env("MODEL_INIT_MODE", "async");
        assert_eq!(doc.changes(), 1);
    });
    assert_eq!(
        out["spec"]["containers"][0]["env"],
        json!([{"name": "MODEL_INIT_MODE", "value": "async"}])
    );
}

#[test]
fn set_env_replaces_the_value_and_keeps_the_entry() {
    let pod = pod_with(json!({"name": "kserve-container", "env": [
        {"name": "A", "value": "1"},
        {"name": "USER_PORT", "value": "8080", "futureField": {"kept": true}}
    ]}));
    let out = both(&pod, None, |doc| {
        {
            let mut c = doc
                .container_mut(List::Containers, "kserve-container")
                .expect("container");
            c.set_env("USER_PORT", "9081");
            assert_eq!(c.env_value("USER_PORT"), Some("9081"));
            // The same value again is not a change.
            c.set_env("USER_PORT", "9081");
            c.set_env("A", "1");
        }
        assert_eq!(doc.changes(), 1);
    });
    assert_eq!(
        out["spec"]["containers"][0]["env"],
        json!([
            {"name": "A", "value": "1"},
            {"name": "USER_PORT", "value": "9081", "futureField": {"kept": true}}
        ])
    );
}

#[test]
fn set_env_sets_every_entry_of_that_name() {
    let pod = pod_with(json!({"name": "kserve-container", "env": [
        {"name": "X", "value": "1"},
        {"name": "X", "value": "2"},
        {"name": "X"}
    ]}));
    let out = both(&pod, None, |doc| {
        doc.container_mut(List::Containers, "kserve-container")
            .expect("container")
            .set_env("X", "new");
        assert_eq!(doc.changes(), 3);
    });
    assert_eq!(
        out["spec"]["containers"][0]["env"],
        json!([{"name": "X", "value": "new"}, {"name": "X", "value": "new"}, {"name": "X", "value": "new"}])
    );
}

#[test]
fn set_env_leaves_a_value_from_variable_alone() {
    let from = EnvVarSource {
        field_ref: Some(ObjectFieldSelector {
            field_path: "metadata.annotations['port']".to_string(),
            api_version: None,
        }),
        ..Default::default()
    };
    let entry = serde_json::to_value(EnvVar {
        name: "USER_PORT".to_string(),
        value: None,
        value_from: Some(from),
    })
    .expect("serialisable");
    let pod = pod_with(json!({"name": "kserve-container", "env": [entry.clone()]}));
    let out = both(&pod, None, |doc| {
        doc.container_mut(List::Containers, "kserve-container")
            .expect("container")
            .set_env("USER_PORT", "9081");
        // Neither a value next to valueFrom nor a second entry of that name.
        assert_eq!(doc.changes(), 0);
    });
    assert_eq!(out["spec"]["containers"][0]["env"], json!([entry]));
}

#[test]
fn set_env_treats_a_null_value_from_as_absent() {
    let pod =
        pod_with(json!({"name": "kserve-container", "env": [{"name": "X", "valueFrom": null}]}));
    let out = both(&pod, None, |doc| {
        doc.container_mut(List::Containers, "kserve-container")
            .expect("container")
            .set_env("X", "v");
        assert_eq!(doc.changes(), 1);
    });
    assert_eq!(
        out["spec"]["containers"][0]["env"],
        json!([{"name": "X", "valueFrom": null, "value": "v"}])
    );
}

// --- securityContext ----------------------------------------------------------

#[test]
fn set_run_as_user_keeps_other_security_context_fields() {
    let pod = pod_with(json!({"name": "c", "securityContext": {
        "runAsNonRoot": true,
        "runAsUser": 1,
        "capabilities": {"drop": ["ALL"]},
        "futureField": "kept"
    }}));
    let out = both(&pod, None, |doc| {
        {
            let mut c = doc.container_mut(List::Containers, "c").expect("container");
            c.set_run_as_user(1010);
            c.set_run_as_user(1010);
        }
        assert_eq!(doc.changes(), 1);
        let c = doc.container(List::Containers, "c").expect("container");
        let ctx = c.security_context.as_ref().expect("a security context");
        assert_eq!(ctx.run_as_user, Some(1010));
        assert_eq!(ctx.run_as_non_root, Some(true));
    });
    assert_eq!(
        out["spec"]["containers"][0]["securityContext"],
        json!({
            "runAsNonRoot": true,
            "runAsUser": 1010,
            "capabilities": {"drop": ["ALL"]},
            "futureField": "kept"
        })
    );
}

#[test]
fn set_run_as_user_creates_the_security_context_when_absent_or_null() {
    for slot in [None, Some(Value::Null)] {
        let mut body = json!({"name": "c"});
        if let Some(v) = slot {
            body["securityContext"] = v;
        }
        let pod = pod_with(body);
        let out = both(&pod, None, |doc| {
            doc.container_mut(List::Containers, "c")
                .expect("container")
                .set_run_as_user(1337);
            assert_eq!(doc.changes(), 1);
        });
        assert_eq!(
            out["spec"]["containers"][0]["securityContext"],
            json!({"runAsUser": 1337})
        );
    }
}

// --- metadata and spec fields ---------------------------------------------

#[test]
fn set_annotation_creates_metadata_and_annotations() {
    let cases = [
        json!({"spec": {"containers": []}}),
        json!({"metadata": null, "spec": {"containers": []}}),
        json!({"metadata": {"name": "p"}}),
        json!({"metadata": {"name": "p", "annotations": null}}),
    ];
    for pod in cases {
        let out = both(&pod, None, |doc| {
            doc.set_annotation("prometheus.io/port", "9088");
            doc.set_annotation("prometheus.io/port", "9088");
            assert_eq!(doc.changes(), 1);
            assert_eq!(doc.annotation("prometheus.io/port"), Some("9088"));
        });
        assert_eq!(
            out["metadata"]["annotations"],
            json!({"prometheus.io/port": "9088"})
        );
    }
}

#[test]
fn set_annotation_replaces_a_different_value_and_keeps_the_others() {
    let pod = json!({"metadata": {"annotations": {"a/b~c": "x", "prometheus.io/port": "9091"}}});
    let out = both(&pod, None, |doc| {
        doc.set_annotation("prometheus.io/port", "9088");
        assert_eq!(doc.changes(), 1);
        assert_eq!(doc.annotation("prometheus.io/port"), Some("9088"));
        assert_eq!(doc.annotation("a/b~c"), Some("x"));
    });
    assert_eq!(
        out["metadata"]["annotations"],
        json!({"a/b~c": "x", "prometheus.io/port": "9088"})
    );
}

#[test]
fn spec_fields_namespace_and_node_selector() {
    let pod = json!({"metadata": {"namespace": "default"}, "spec": {"containers": [], "nodeSelector": null}});
    let out = both(&pod, None, |doc| {
        doc.set_namespace("default");
        assert_eq!(doc.changes(), 0);
        doc.set_namespace("models");
        doc.set_share_process_namespace(true);
        doc.set_share_process_namespace(true);
        doc.set_node_selector("cloud.google.com/gke-accelerator", "nvidia-tesla-t4");
        doc.set_node_selector("cloud.google.com/gke-accelerator", "nvidia-tesla-t4");
        assert_eq!(doc.changes(), 3);
        assert_eq!(doc.namespace(), "models");
        assert_eq!(doc.service_account_name(), "");
    });
    assert_eq!(
        out,
        json!({"metadata": {"namespace": "models"}, "spec": {
            "containers": [],
            "nodeSelector": {"cloud.google.com/gke-accelerator": "nvidia-tesla-t4"},
            "shareProcessNamespace": true
        }})
    );
}

#[test]
fn set_share_process_namespace_replaces_a_different_value() {
    let pod = json!({"spec": {"containers": [], "shareProcessNamespace": false}});
    let out = both(&pod, None, |doc| {
        doc.set_share_process_namespace(true);
        assert_eq!(doc.changes(), 1);
    });
    assert_eq!(out["spec"]["shareProcessNamespace"], json!(true));
    let out = both(&json!({}), None, |doc| {
        doc.set_share_process_namespace(true);
        doc.set_namespace("ns");
        assert_eq!(doc.changes(), 2);
    });
    assert_eq!(
        out,
        json!({"metadata": {"namespace": "ns"}, "spec": {"shareProcessNamespace": true}})
    );
}

#[test]
fn reads_of_metadata_and_spec() {
    let pod = json!({
        "metadata": {
            "name": "p",
            "namespace": "ns",
            "labels": {"serving.kserve.io/inferenceservice": "sk"},
            "annotations": {"a": "1"}
        },
        "spec": {
            "serviceAccountName": "sa",
            "imagePullSecrets": [{"name": "first"}, {"name": "second"}]
        }
    });
    both(&pod, None, |doc| {
        assert_eq!(doc.name(), "p");
        assert_eq!(doc.namespace(), "ns");
        assert_eq!(doc.label("serving.kserve.io/inferenceservice"), Some("sk"));
        assert_eq!(doc.label("missing"), None);
        assert_eq!(doc.annotation("a"), Some("1"));
        assert_eq!(doc.annotation("c"), None);
        assert_eq!(doc.service_account_name(), "sa");
        assert_eq!(doc.first_image_pull_secret(), Some("first"));
    });
    both(&json!({"spec": {"imagePullSecrets": []}}), None, |doc| {
        assert_eq!(doc.first_image_pull_secret(), None);
        assert_eq!(doc.service_account_name(), "");
    });
}

#[test]
fn tree_reads_values_that_are_not_strings_as_absent() {
    // The view refuses such a pod, so only the oracle meets one.
    let mut raw = json!({"metadata": {
        "name": "p",
        "labels": {"serving.kserve.io/inferenceservice": "sk", "n": 1},
        "annotations": {"a": "1", "b": null}
    }});
    assert!(pod_from_value(&raw).is_err());
    let doc = TreeDoc::new(&mut raw);
    assert_eq!(doc.label("serving.kserve.io/inferenceservice"), Some("sk"));
    assert_eq!(doc.label("n"), None);
    assert_eq!(doc.annotation("a"), Some("1"));
    assert_eq!(doc.annotation("b"), None);
    assert_eq!(doc.annotation("c"), None);
}

#[test]
fn the_request_namespace_wins_over_the_pod_s() {
    let pod = json!({"metadata": {"namespace": "ns"}});
    both(&pod, Some("request-ns"), |doc| {
        assert_eq!(doc.namespace(), "request-ns");
    });
    both(&pod, None, |doc| assert_eq!(doc.namespace(), "ns"));
    both(&json!({}), None, |doc| {
        assert_eq!(doc.namespace(), "");
        assert_eq!(doc.name(), "");
    });
}

// --- change counter -------------------------------------------------------

#[test]
fn the_counter_counts_only_real_changes() {
    let pod = json!({
        "metadata": {"annotations": {"k": "v"}},
        "spec": {
            "containers": [{"name": "kserve-container", "env": [{"name": "E", "value": "v"}],
                "securityContext": {"runAsUser": 7},
                "volumeMounts": [{"name": "m", "mountPath": "/m"}],
                "ports": [{"name": "p", "containerPort": 1}]}],
            "volumes": [{"name": "m", "emptyDir": {}}],
            "nodeSelector": {"n": "1"},
            "shareProcessNamespace": true
        }
    });
    let out = both(&pod, Some("elsewhere"), |doc| {
        doc.set_annotation("k", "v");
        doc.set_share_process_namespace(true);
        doc.set_node_selector("n", "1");
        assert!(!doc.ensure_volume(&volume("m")));
        assert!(!doc.ensure_container(List::Containers, container("kserve-container")));
        {
            let mut c = doc
                .container_mut(List::Containers, "kserve-container")
                .expect("container");
            c.set_env("E", "v");
            c.set_run_as_user(7);
            assert!(!c.ensure_env(&var("E", "other")));
            assert!(!c.ensure_mount(&mount("m", "/other")));
            assert!(!c.ensure_port(&port("p", 2)));
        }
        assert_eq!(doc.changes(), 0);
    });
    assert_eq!(out, pod);
}

// --- odd shapes (the oracle only: the view refuses them) ------------------

#[test]
fn odd_shapes_are_left_alone_without_panicking() {
    let shapes = [
        json!([]),
        json!("pod"),
        json!(null),
        json!({"metadata": "m", "spec": "s"}),
        json!({"metadata": {"annotations": "a", "labels": []}, "spec": {
            "containers": {"name": "c"},
            "initContainers": 3,
            "volumes": "v",
            "nodeSelector": []
        }}),
    ];
    for shape in shapes {
        assert!(pod_from_value(&shape).is_err(), "{shape}");
        let mut raw = shape.clone();
        let mut doc = TreeDoc::new(&mut raw);
        doc.set_annotation("a", "b");
        doc.set_node_selector("k", "v");
        assert!(!doc.ensure_container(List::Containers, container("c")));
        assert!(!doc.ensure_container(List::InitContainers, container("i")));
        assert!(!doc.ensure_volume(&volume("v")));
        assert!(doc.container_mut(List::Containers, "c").is_none());
        assert_eq!(doc.containers(List::Containers).len(), 0);
        assert!(!doc.has_volume("v"));
        assert_eq!(doc.annotation("a"), None);
        assert_eq!(doc.changes(), 0, "{shape}");
        assert_eq!(raw, shape);
    }
}

#[test]
fn odd_container_shapes_are_left_alone_without_panicking() {
    let mut raw = json!({"spec": {"containers": [
        "not-an-object",
        {"name": "c", "env": "e", "volumeMounts": {"m": 1}, "ports": 5, "securityContext": "s", "args": "a"},
        {"name": "d", "env": [1, "x", null, {"name": 3}]}
    ]}});
    assert!(pod_from_value(&raw).is_err());
    let before = raw.clone();
    let mut doc = TreeDoc::new(&mut raw);
    assert_eq!(doc.position(List::Containers, "c"), Some(1));
    {
        let mut c = doc.container_mut(List::Containers, "c").expect("container");
        assert!(!c.ensure_mount(&mount("m", "/m")));
        assert!(!c.ensure_env(&var("E", "v")));
        assert!(!c.ensure_port(&port("p", 1)));
        c.set_env("E", "v");
        c.set_run_as_user(1);
        c.push_args(&["x"]);
        assert!(!c.has_env("E"));
        assert!(c.args().is_empty());
    }
    assert_eq!(doc.changes(), 0);
    assert_eq!(raw, before);

    // Entries that are not name-keyed objects are skipped, not failed on.
    let mut doc = TreeDoc::new(&mut raw);
    {
        let mut d = doc.container_mut(List::Containers, "d").expect("container");
        d.set_env("E", "v");
        assert_eq!(d.env_value("E"), Some("v"));
    }
    assert_eq!(doc.changes(), 1);
    assert_eq!(
        raw["spec"]["containers"][2]["env"],
        json!([1, "x", null, {"name": 3}, {"name": "E", "value": "v"}])
    );
}

// --- the operations -------------------------------------------------------

/// Edits inside things added in the same pass: the oracle folds them into
/// the `add`, the working set records them as operations of their own.
fn edit_inside_added(doc: &mut impl Edit) {
    doc.set_annotation("x/y", "1");
    doc.set_annotation("z", "2");
    doc.ensure_container(
        List::InitContainers,
        Container {
            name: "init".into(),
            ..Default::default()
        },
    );
    if let Some(mut c) = doc.container_mut(List::InitContainers, "init") {
        c.set_run_as_user(5);
        c.set_run_as_user(6);
    }
    if let Some(mut c) = doc.container_mut(List::Containers, "a") {
        c.set_run_as_user(7);
        c.set_run_as_user(8);
    }
}

#[test]
fn writes_into_something_added_in_the_same_pass_arrive_inside_its_add() {
    let input = json!({"spec": {"containers": [{"name": "a"}]}});
    // Checks too that the oracle's operations give its pod.
    let after = both(&input, None, |d| edit_inside_added(d));
    let mut out = input.clone();
    let mut doc = TreeDoc::new(&mut out);
    edit_inside_added(&mut doc);
    let ops = doc.into_ops();
    assert_eq!(
        serde_json::to_value(&ops).unwrap(),
        json!([
            {"op": "add", "path": "/metadata", "value": {"annotations": {"x/y": "1", "z": "2"}}},
            {"op": "add", "path": "/spec/initContainers",
             "value": [{"name": "init", "securityContext": {"runAsUser": 6}}]},
            {"op": "add", "path": "/spec/containers/0/securityContext", "value": {"runAsUser": 8}}
        ])
    );
    assert_eq!(apply(&input, &ops), after);
}

#[test]
fn the_working_set_sends_what_it_creates_whole_as_the_tree_does() {
    let input = json!({"spec": {"containers": [{"name": "a"}]}});
    assert_eq!(
        same_ops_as_tree(&input, |d| edit_inside_added(d)),
        json!([
            {"op": "add", "path": "/metadata", "value": {"annotations": {"x/y": "1", "z": "2"}}},
            {"op": "add", "path": "/spec/initContainers",
             "value": [{"name": "init", "securityContext": {"runAsUser": 6}}]},
            {"op": "add", "path": "/spec/containers/0/securityContext", "value": {"runAsUser": 8}}
        ])
    );
}

// --- containers added whole ---------------------------------------------------

#[test]
fn an_added_container_is_found_by_name_and_written_whole_into_the_patch() {
    let pod = pod_with(json!({"name": "kserve-container"}));
    let mut ws = working_set(&pod, None);
    assert!(ws.ensure_container(List::Containers, container("agent")));
    assert!(!ws.ensure_container(List::InitContainers, container("agent")));
    assert!(ws.has_container_named("agent"));
    assert_eq!(ws.position(List::Containers, "agent"), Some(1));
    assert_eq!(ws.positions(List::Containers, "agent"), [1]);
    assert_eq!(ws.containers(List::Containers).len(), 2);
    let read = ws.container(List::Containers, "agent").expect("agent");
    assert_eq!(json_of(read), json!({"name": "agent"}));
    assert!(ws.container_at(List::Containers, 1).is_some());
    assert_eq!(ws.changes(), 1);
    let ops = ws.into_patch();
    let [op] = ops.as_slice() else {
        panic!("one add: {ops:?}");
    };
    assert_eq!(op.kind, OpKind::Add);
    assert_eq!(op.path.as_str(), "/spec/containers/1");
    // The whole container, written once as JSON when it was added.
    let whole = serde_json::to_string(&container("agent")).expect("serialises");
    assert_eq!(op.value, whole);
}

#[test]
fn an_added_container_can_be_edited_in_the_same_pass() {
    let pod = pod_with(json!({"name": "kserve-container"}));
    let edit = |doc: &mut EitherDoc<'_, '_>| {
        assert!(doc.ensure_container(List::Containers, container("agent")));
        assert!(doc.ensure_container(List::InitContainers, container("init")));
        doc.container_mut(List::InitContainers, "init")
            .expect("the added container")
            .set_run_as_user(7);
        let init = doc.container(List::InitContainers, "init").expect("init");
        let ctx = init.security_context.as_ref().expect("a security context");
        assert_eq!(ctx.run_as_user, Some(7));
    };
    let init = json!({"name": "init", "image": "img", "securityContext": {"runAsUser": 7}});
    let agent = json!({"name": "agent", "image": "img"});
    let out = both(&pod, None, edit);
    assert_eq!(out["spec"]["initContainers"], json!([init]));
    assert_eq!(out["spec"]["containers"][1], agent);

    // The working set's own operations, applied to the input.
    let mut ws = working_set(&pod, None);
    edit(&mut EitherDoc::Working(&mut ws));
    let patched = apply(&pod, &ws.into_patch());
    assert_eq!(patched["spec"]["initContainers"], json!([init]));
    assert_eq!(
        patched["spec"]["containers"],
        json!([{"name": "kserve-container"}, agent])
    );
}

// --- the working set's operations -----------------------------------------

#[test]
fn set_env_adds_a_missing_value_and_replaces_a_different_one() {
    let pod = pod_with(json!({"name": "kserve-container", "env": [
        {"name": "X"},
        {"name": "Y", "value": "1"},
        {"name": "Z", "value": "same"}
    ]}));
    let ops = working_ops(&pod, |doc| {
        let mut c = doc
            .container_mut(List::Containers, "kserve-container")
            .expect("container");
        c.set_env("X", "a");
        c.set_env("Y", "2");
        c.set_env("Z", "same");
        c.set_env("Y", "2");
    });
    assert_eq!(
        ops,
        json!([
            {"op": "add", "path": "/spec/containers/0/env/0/value", "value": "a"},
            {"op": "replace", "path": "/spec/containers/0/env/1/value", "value": "2"}
        ])
    );
}

#[test]
fn set_env_addresses_the_container_and_entry_by_index() {
    let pod = json!({"spec": {"containers": [
        {"name": "istio-proxy", "env": [{"name": "X", "value": "1"}]},
        {"name": "kserve-container", "env": [{"name": "A", "value": "1"}, {"name": "X", "value": "1"}]}
    ]}});
    let ops = working_ops(&pod, |doc| {
        let mut c = doc
            .container_mut(List::Containers, "kserve-container")
            .expect("container");
        c.set_env("X", "2");
        c.set_env("NEW", "3");
    });
    assert_eq!(
        ops,
        json!([
            {"op": "replace", "path": "/spec/containers/1/env/1/value", "value": "2"},
            {"op": "add", "path": "/spec/containers/1/env/2", "value": {"name": "NEW", "value": "3"}}
        ])
    );
}

#[test]
fn set_annotation_operations() {
    // No metadata: one add of the whole object.
    let ops = working_ops(&json!({"spec": {}}), |doc| doc.set_annotation("k", "v"));
    assert_eq!(
        ops,
        json!([{"op": "add", "path": "/metadata", "value": {"annotations": {"k": "v"}}}])
    );
    // Metadata without annotations: one add of the map.
    let ops = working_ops(&json!({"metadata": {"name": "p"}}), |doc| {
        doc.set_annotation("k", "v")
    });
    assert_eq!(
        ops,
        json!([{"op": "add", "path": "/metadata/annotations", "value": {"k": "v"}}])
    );
    // The same value: nothing; another value: a replace; a new key: an add.
    let pod = json!({"metadata": {"annotations": {"k": "v", "o": "1"}}});
    assert_eq!(
        working_ops(&pod, |doc| doc.set_annotation("k", "v")),
        json!([])
    );
    let ops = working_ops(&pod, |doc| {
        doc.set_annotation("o", "2");
        doc.set_annotation("n", "3");
    });
    assert_eq!(
        ops,
        json!([
            {"op": "replace", "path": "/metadata/annotations/o", "value": "2"},
            {"op": "add", "path": "/metadata/annotations/n", "value": "3"}
        ])
    );
}

#[test]
fn an_annotation_key_is_escaped_in_the_path() {
    let pod = json!({"metadata": {"annotations": {}}});
    let ops = working_ops(&pod, |doc| {
        doc.set_annotation("a/b~c", "1");
        assert_eq!(doc.annotation("a/b~c"), Some("1"));
    });
    assert_eq!(
        ops,
        json!([{"op": "add", "path": "/metadata/annotations/a~1b~0c", "value": "1"}])
    );
    let out = both(&pod, None, |doc| doc.set_annotation("a/b~c", "1"));
    assert_eq!(out["metadata"]["annotations"], json!({"a/b~c": "1"}));
}

#[test]
fn ensure_volume_creates_spec_or_the_list_or_appends_at_the_next_index() {
    let edit = |doc: &mut EitherDoc<'_, '_>| {
        assert!(doc.ensure_volume(&volume("model")));
        assert!(doc.ensure_volume(&volume("data")));
        assert!(!doc.ensure_volume(&volume("model")));
    };
    let (model, data) = (
        json!({"name": "model", "emptyDir": {}}),
        json!({"name": "data", "emptyDir": {}}),
    );
    // No spec: one add of the whole object, both volumes in it.
    assert_eq!(
        same_ops_as_tree(&json!({"metadata": {}}), edit),
        json!([{"op": "add", "path": "/spec", "value": {"volumes": [model, data]}}])
    );
    // A spec with a null list: one add of the list.
    assert_eq!(
        same_ops_as_tree(&json!({"spec": {"volumes": null}}), edit),
        json!([{"op": "add", "path": "/spec/volumes", "value": [model, data]}])
    );
    // A list: each volume added at its index.
    let pod = json!({"spec": {"volumes": [{"name": "v", "secret": {"secretName": "s"}}]}});
    assert_eq!(
        working_ops(&pod, edit),
        json!([
            {"op": "add", "path": "/spec/volumes/1", "value": model},
            {"op": "add", "path": "/spec/volumes/2", "value": data}
        ])
    );
}

#[test]
fn spec_maps_and_flags_are_created_whole_when_spec_is_absent() {
    let edit = |doc: &mut EitherDoc<'_, '_>| {
        doc.set_node_selector("k", "v");
        doc.set_share_process_namespace(true);
        doc.set_node_selector("k2", "v2");
    };
    assert_eq!(
        same_ops_as_tree(&json!({}), edit),
        json!([{"op": "add", "path": "/spec",
                "value": {"nodeSelector": {"k": "v", "k2": "v2"}, "shareProcessNamespace": true}}])
    );
    // With a spec and a node selector: one operation per key.
    let pod = json!({"spec": {"nodeSelector": {"k": "old"}}});
    assert_eq!(
        working_ops(&pod, edit),
        json!([
            {"op": "replace", "path": "/spec/nodeSelector/k", "value": "v"},
            {"op": "add", "path": "/spec/shareProcessNamespace", "value": true},
            {"op": "add", "path": "/spec/nodeSelector/k2", "value": "v2"}
        ])
    );
}

#[test]
fn push_args_creates_the_list_then_appends() {
    let edit = |doc: &mut EitherDoc<'_, '_>| {
        let mut c = doc
            .container_mut(List::Containers, "kserve-container")
            .expect("container");
        c.push_args(&["--a", "--b"]);
        c.push_args(&["--c"]);
        assert!(c.args().ends_with(&["--a", "--b", "--c"]));
    };
    // No list: created with one add, the later arguments in it.
    let pod = pod_with(json!({"name": "kserve-container"}));
    assert_eq!(
        same_ops_as_tree(&pod, edit),
        json!([{"op": "add", "path": "/spec/containers/0/args", "value": ["--a", "--b", "--c"]}])
    );
    // A list: each argument appended at its index, in the right container.
    let pod = json!({"spec": {"containers": [
        {"name": "istio-proxy", "args": ["proxy"]},
        {"name": "kserve-container", "args": ["x"]}
    ]}});
    assert_eq!(
        working_ops(&pod, edit),
        json!([
            {"op": "add", "path": "/spec/containers/1/args/1", "value": "--a"},
            {"op": "add", "path": "/spec/containers/1/args/2", "value": "--b"},
            {"op": "add", "path": "/spec/containers/1/args/3", "value": "--c"}
        ])
    );
    let pod = json!({"spec": {"initContainers": [
        {"name": "storage-initializer", "args": ["src", "dst"]}
    ]}});
    let ops = working_ops(&pod, |doc| {
        doc.container_mut(List::InitContainers, "storage-initializer")
            .expect("container")
            .push_args(&["--x"]);
    });
    assert_eq!(
        ops,
        json!([{"op": "add", "path": "/spec/initContainers/0/args/2", "value": "--x"}])
    );
}

#[test]
fn an_added_container_reads_back_whole_on_both_backends() {
    // The working set keeps an added container as its name until read: a
    // read must still see every list, as the tree does.
    let pod = pod_with(json!({"name": "kserve-container"}));
    let added = Container {
        env: Some(vec![var("A", "1")]),
        volume_mounts: Some(vec![mount("data", "/data")]),
        ports: Some(vec![port("http", 8080)]),
        args: Some(vec!["--x".to_string()]),
        ..container("queue-proxy")
    };
    both(&pod, None, |doc| {
        assert!(doc.ensure_container(List::Containers, added.clone()));
        let read = doc
            .container(List::Containers, "queue-proxy")
            .expect("added");
        let env = read.env.as_ref().expect("env read back");
        assert_eq!(env.0.len(), 1);
        assert_eq!(env.0[0].value.as_ref().map(|v| v.as_str()), Some("1"));
        assert_eq!(read.ports.as_ref().map(|p| p.0.len()), Some(1));
        assert_eq!(read.args.as_ref().map(|a| a.0.len()), Some(1));
        let all = doc.containers(List::Containers);
        assert_eq!(all[1].volume_mounts.as_ref().map(|m| m.0.len()), Some(1));
        let mut c = doc
            .container_mut(List::Containers, "queue-proxy")
            .expect("added");
        assert!(c.has_env("A"));
        assert!(c.has_mount("data"));
        assert!(!c.ensure_mount(&mount("data", "/other")));
        c.set_env("A", "2");
    });
}
