use super::*;
use k8s_openapi::api::core::v1::{EnvVarSource, ObjectFieldSelector};
use serde_json::json;

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

/// A pod with one container `c` whose body is `c`.
fn pod_with(c: Value) -> Value {
    json!({"metadata": {"name": "p"}, "spec": {"containers": [c]}})
}

// --- containers -----------------------------------------------------------

#[test]
fn ensure_container_appends_once() {
    let mut raw = pod_with(json!({"name": "kserve-container"}));
    let mut doc = PodDoc::new(&mut raw);
    assert!(doc.ensure_container(List::Containers, container("agent")));
    assert!(!doc.ensure_container(List::Containers, container("agent")));
    assert_eq!(doc.changes(), 1);
    assert_eq!(
        raw["spec"]["containers"],
        json!([{"name": "kserve-container"}, {"name": "agent", "image": "img"}])
    );
}

#[test]
fn ensure_container_is_keyed_across_both_lists() {
    let mut raw = json!({"spec": {
        "containers": [{"name": "kserve-container"}],
        "initContainers": [{"name": "storage-initializer"}]
    }});
    let before = raw.clone();
    let mut doc = PodDoc::new(&mut raw);
    // A name taken in the other list counts as present, both ways.
    assert!(!doc.ensure_container(List::Containers, container("storage-initializer")));
    assert!(!doc.ensure_container(List::InitContainers, container("kserve-container")));
    assert!(doc.has_container_named("storage-initializer"));
    assert!(doc.has_container_named("kserve-container"));
    assert!(!doc.has_container_named("agent"));
    assert_eq!(doc.changes(), 0);
    assert_eq!(raw, before);
}

#[test]
fn ensure_container_creates_init_containers_when_absent_or_null() {
    for init in [None, Some(Value::Null)] {
        let mut raw = pod_with(json!({"name": "kserve-container"}));
        if let Some(v) = init {
            raw["spec"]["initContainers"] = v;
        }
        let mut doc = PodDoc::new(&mut raw);
        assert!(doc.ensure_container(List::InitContainers, container("storage-initializer")));
        assert_eq!(doc.changes(), 1);
        assert_eq!(
            raw["spec"]["initContainers"],
            json!([{"name": "storage-initializer", "image": "img"}])
        );
    }
}

#[test]
fn ensure_container_creates_spec_when_absent_or_null() {
    for spec in [None, Some(Value::Null)] {
        let mut raw = json!({"metadata": {}});
        if let Some(v) = spec {
            raw["spec"] = v;
        }
        let mut doc = PodDoc::new(&mut raw);
        assert!(doc.ensure_container(List::Containers, container("agent")));
        assert_eq!(
            raw["spec"],
            json!({"containers": [{"name": "agent", "image": "img"}]})
        );
    }
}

#[test]
fn lookups_by_name() {
    let mut raw = json!({"spec": {
        "containers": [{"name": "a"}, {"image": "nameless"}, {"name": "b", "image": "x"}],
        "initContainers": [{"name": "i"}]
    }});
    let mut doc = PodDoc::new(&mut raw);
    assert_eq!(doc.position(List::Containers, "b"), Some(2));
    assert_eq!(doc.position(List::Containers, "i"), None);
    assert_eq!(doc.position(List::InitContainers, "i"), Some(0));
    assert_eq!(
        doc.entry(List::Containers, "b"),
        Some(&json!({"name": "b", "image": "x"}))
    );
    assert_eq!(doc.entries(List::Containers).len(), 3);
    let typed = doc.typed_all(List::Containers);
    assert_eq!(typed.len(), 3);
    assert_eq!(typed[2].image.as_deref(), Some("x"));
}

#[test]
fn typed_all_skips_a_container_that_does_not_decode() {
    let mut raw = pod_with(json!({"name": "c", "ports": "not-a-list"}));
    let mut doc = PodDoc::new(&mut raw);
    assert!(doc.entry(List::Containers, "c").is_some());
    assert!(doc.typed_all(List::Containers).is_empty());
}

#[test]
fn container_mut_needs_an_entry_of_that_name() {
    let mut raw = pod_with(json!({"name": "c"}));
    let mut doc = PodDoc::new(&mut raw);
    assert!(doc.container_mut(List::Containers, "missing").is_none());
    assert!(doc.container_mut(List::InitContainers, "c").is_none());
    assert!(doc.container_at(List::Containers, 1).is_none());
    assert_eq!(
        doc.container_at(List::Containers, 0)
            .map(|c| c.raw().clone()),
        Some(json!({"name": "c"}))
    );
}

// --- volumes --------------------------------------------------------------

#[test]
fn ensure_volume_is_keyed_by_name() {
    let mut raw = json!({"spec": {"containers": [], "volumes": [{"name": "data", "configMap": {"name": "cm"}}]}});
    let mut doc = PodDoc::new(&mut raw);
    // Same name, different source: the existing volume wins.
    assert!(!doc.ensure_volume(&volume("data")));
    assert!(doc.ensure_volume(&volume("model")));
    assert!(!doc.ensure_volume(&volume("model")));
    assert_eq!(doc.changes(), 1);
    assert_eq!(doc.volume_names().collect::<Vec<_>>(), ["data", "model"]);
    assert_eq!(
        raw["spec"]["volumes"],
        json!([{"name": "data", "configMap": {"name": "cm"}}, {"name": "model", "emptyDir": {}}])
    );
}

#[test]
fn ensure_volume_creates_volumes_when_absent_or_null() {
    for volumes in [None, Some(Value::Null)] {
        let mut raw = json!({"spec": {"containers": []}});
        if let Some(v) = volumes {
            raw["spec"]["volumes"] = v;
        }
        let mut doc = PodDoc::new(&mut raw);
        assert!(doc.ensure_volume(&volume("model")));
        assert_eq!(doc.changes(), 1);
        assert_eq!(
            raw["spec"]["volumes"],
            json!([{"name": "model", "emptyDir": {}}])
        );
    }
}

// --- mounts, env, ports ---------------------------------------------------

#[test]
fn ensure_mount_is_keyed_by_volume_name() {
    let mut raw =
        pod_with(json!({"name": "c", "volumeMounts": [{"name": "data", "mountPath": "/data"}]}));
    let mut doc = PodDoc::new(&mut raw);
    let mut c = doc.container_mut(List::Containers, "c").expect("container");
    // A mount of that volume exists (at another path): nothing to do.
    assert!(!c.ensure_mount(&mount("data", "/elsewhere")));
    assert!(c.has_mount("data"));
    assert!(c.ensure_mount(&mount("model", "/mnt/models")));
    assert!(!c.ensure_mount(&mount("model", "/mnt/models")));
    assert_eq!(doc.changes(), 1);
    assert_eq!(
        raw["spec"]["containers"][0]["volumeMounts"],
        json!([{"name": "data", "mountPath": "/data"}, {"name": "model", "mountPath": "/mnt/models"}])
    );
}

#[test]
fn ensure_env_is_keyed_by_name_and_keeps_the_existing_entry() {
    let mut raw = pod_with(json!({"name": "c", "env": [
        {"name": "FROM", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
    ]}));
    let mut doc = PodDoc::new(&mut raw);
    let mut c = doc.container_mut(List::Containers, "c").expect("container");
    assert!(!c.ensure_env(&var("FROM", "literal")));
    assert!(c.ensure_env(&var("NEW", "1")));
    assert!(!c.ensure_env(&var("NEW", "2")));
    assert_eq!(c.env("NEW"), Some(&json!({"name": "NEW", "value": "1"})));
    assert_eq!(doc.changes(), 1);
    assert_eq!(
        raw["spec"]["containers"][0]["env"][0],
        json!({"name": "FROM", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}})
    );
}

#[test]
fn ensure_port_is_keyed_by_name() {
    let mut raw =
        pod_with(json!({"name": "qp", "ports": [{"name": "aggr-metric", "containerPort": 1234}]}));
    let mut doc = PodDoc::new(&mut raw);
    let mut c = doc
        .container_mut(List::Containers, "qp")
        .expect("container");
    assert!(!c.ensure_port(&port("aggr-metric", 9088)));
    assert!(c.ensure_port(&port("agent-port", 9081)));
    assert!(!c.ensure_port(&port("agent-port", 9081)));
    assert_eq!(doc.changes(), 1);
    assert_eq!(
        raw["spec"]["containers"][0]["ports"],
        json!([{"name": "aggr-metric", "containerPort": 1234}, {"name": "agent-port", "containerPort": 9081}])
    );
}

#[test]
fn container_lists_are_created_when_absent_or_null() {
    for slot in [None, Some(Value::Null)] {
        let mut body = json!({"name": "c"});
        if let Some(v) = &slot {
            body["volumeMounts"] = v.clone();
            body["env"] = v.clone();
            body["ports"] = v.clone();
        }
        let mut raw = pod_with(body);
        let mut doc = PodDoc::new(&mut raw);
        let mut c = doc.container_mut(List::Containers, "c").expect("container");
        assert!(c.ensure_mount(&mount("m", "/m")));
        assert!(c.ensure_env(&var("E", "v")));
        assert!(c.ensure_port(&port("p", 1)));
        c.push_args(&["--flag", "value"]);
        assert_eq!(doc.changes(), 5);
        assert_eq!(
            raw["spec"]["containers"][0],
            json!({
                "name": "c",
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
    let mut raw = pod_with(json!({"name": "c"}));
    let mut doc = PodDoc::new(&mut raw);
    doc.container_mut(List::Containers, "c")
        .expect("container")
        .set_env("MODEL_INIT_MODE", "async");
    assert_eq!(doc.changes(), 1);
    assert_eq!(
        raw["spec"]["containers"][0]["env"],
        json!([{"name": "MODEL_INIT_MODE", "value": "async"}])
    );
}

#[test]
fn set_env_replaces_the_value_and_keeps_the_entry() {
    let mut raw = pod_with(json!({"name": "c", "env": [
        {"name": "A", "value": "1"},
        {"name": "USER_PORT", "value": "8080", "futureField": {"kept": true}}
    ]}));
    let mut doc = PodDoc::new(&mut raw);
    let mut c = doc.container_mut(List::Containers, "c").expect("container");
    c.set_env("USER_PORT", "9081");
    // The same value again is not a change.
    c.set_env("USER_PORT", "9081");
    c.set_env("A", "1");
    assert_eq!(doc.changes(), 1);
    assert_eq!(
        raw["spec"]["containers"][0]["env"],
        json!([
            {"name": "A", "value": "1"},
            {"name": "USER_PORT", "value": "9081", "futureField": {"kept": true}}
        ])
    );
}

#[test]
fn set_env_sets_every_entry_of_that_name() {
    let mut raw = pod_with(json!({"name": "c", "env": [
        {"name": "X", "value": "1"},
        {"name": "X", "value": "2"},
        {"name": "X"}
    ]}));
    let mut doc = PodDoc::new(&mut raw);
    doc.container_mut(List::Containers, "c")
        .expect("container")
        .set_env("X", "new");
    assert_eq!(doc.changes(), 3);
    assert_eq!(
        raw["spec"]["containers"][0]["env"],
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
    let mut raw = pod_with(json!({"name": "c", "env": [entry.clone()]}));
    let mut doc = PodDoc::new(&mut raw);
    doc.container_mut(List::Containers, "c")
        .expect("container")
        .set_env("USER_PORT", "9081");
    // Neither a value next to valueFrom nor a second entry of that name.
    assert_eq!(doc.changes(), 0);
    assert_eq!(raw["spec"]["containers"][0]["env"], json!([entry]));
}

#[test]
fn set_env_treats_a_null_value_from_as_absent() {
    let mut raw = pod_with(json!({"name": "c", "env": [{"name": "X", "valueFrom": null}]}));
    let mut doc = PodDoc::new(&mut raw);
    doc.container_mut(List::Containers, "c")
        .expect("container")
        .set_env("X", "v");
    assert_eq!(doc.changes(), 1);
    assert_eq!(
        raw["spec"]["containers"][0]["env"],
        json!([{"name": "X", "valueFrom": null, "value": "v"}])
    );
}

// --- securityContext ----------------------------------------------------------

#[test]
fn set_run_as_user_keeps_other_security_context_fields() {
    let mut raw = pod_with(json!({"name": "c", "securityContext": {
        "runAsNonRoot": true,
        "runAsUser": 1,
        "capabilities": {"drop": ["ALL"]},
        "futureField": "kept"
    }}));
    let mut doc = PodDoc::new(&mut raw);
    let mut c = doc.container_mut(List::Containers, "c").expect("container");
    c.set_run_as_user(1010);
    c.set_run_as_user(1010);
    assert_eq!(doc.changes(), 1);
    assert_eq!(
        raw["spec"]["containers"][0]["securityContext"],
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
        let mut raw = pod_with(body);
        let mut doc = PodDoc::new(&mut raw);
        doc.container_mut(List::Containers, "c")
            .expect("container")
            .set_run_as_user(1337);
        assert_eq!(doc.changes(), 1);
        assert_eq!(
            raw["spec"]["containers"][0]["securityContext"],
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
    for mut raw in cases {
        let mut doc = PodDoc::new(&mut raw);
        doc.set_annotation("prometheus.io/port", "9088");
        doc.set_annotation("prometheus.io/port", "9088");
        assert_eq!(doc.changes(), 1);
        assert_eq!(doc.annotation("prometheus.io/port"), Some("9088"));
        assert_eq!(
            raw["metadata"]["annotations"],
            json!({"prometheus.io/port": "9088"})
        );
    }
}

#[test]
fn set_annotation_replaces_a_different_value_and_keeps_the_others() {
    let mut raw =
        json!({"metadata": {"annotations": {"a/b~c": "x", "prometheus.io/port": "9091"}}});
    let mut doc = PodDoc::new(&mut raw);
    doc.set_annotation("prometheus.io/port", "9088");
    assert_eq!(doc.changes(), 1);
    assert_eq!(
        raw["metadata"]["annotations"],
        json!({"a/b~c": "x", "prometheus.io/port": "9088"})
    );
}

#[test]
fn spec_fields_namespace_and_node_selector() {
    let mut raw = json!({"metadata": {"namespace": "default"}, "spec": {"containers": [], "nodeSelector": null}});
    let mut doc = PodDoc::new(&mut raw);
    doc.set_namespace("default");
    assert_eq!(doc.changes(), 0);
    doc.set_namespace("models");
    doc.set_spec_field("shareProcessNamespace", json!(true));
    doc.set_spec_field("shareProcessNamespace", json!(true));
    doc.set_node_selector("cloud.google.com/gke-accelerator", "nvidia-tesla-t4");
    doc.set_node_selector("cloud.google.com/gke-accelerator", "nvidia-tesla-t4");
    assert_eq!(doc.changes(), 3);
    assert_eq!(doc.namespace(), "models");
    assert_eq!(doc.spec_str("missing"), None);
    assert_eq!(
        raw,
        json!({"metadata": {"namespace": "models"}, "spec": {
            "containers": [],
            "nodeSelector": {"cloud.google.com/gke-accelerator": "nvidia-tesla-t4"},
            "shareProcessNamespace": true
        }})
    );
}

#[test]
fn reads_of_metadata() {
    let mut raw = json!({"metadata": {
        "name": "p",
        "namespace": "ns",
        "labels": {"serving.kserve.io/inferenceservice": "sk", "n": 1},
        "annotations": {"a": "1", "b": null}
    }});
    let doc = PodDoc::new(&mut raw);
    assert_eq!(doc.name(), "p");
    assert_eq!(doc.namespace(), "ns");
    assert_eq!(doc.label("serving.kserve.io/inferenceservice"), Some("sk"));
    // Values that are not strings read as absent.
    assert_eq!(doc.label("n"), None);
    assert_eq!(doc.annotation("a"), Some("1"));
    assert_eq!(doc.annotation("b"), None);
    assert_eq!(doc.annotation("c"), None);
}

#[test]
fn the_request_namespace_wins_over_the_pod_s() {
    let mut raw = json!({"metadata": {"namespace": "ns"}});
    let doc = PodDoc::in_namespace(&mut raw, "request-ns");
    assert_eq!(doc.namespace(), "request-ns");
    let mut raw = json!({});
    let doc = PodDoc::new(&mut raw);
    assert_eq!(doc.namespace(), "");
    assert_eq!(doc.name(), "");
}

// --- change counter -------------------------------------------------------

#[test]
fn the_counter_counts_only_real_changes() {
    let mut raw = json!({
        "metadata": {"annotations": {"k": "v"}},
        "spec": {
            "containers": [{"name": "c", "env": [{"name": "E", "value": "v"}],
                "securityContext": {"runAsUser": 7},
                "volumeMounts": [{"name": "m", "mountPath": "/m"}],
                "ports": [{"name": "p", "containerPort": 1}]}],
            "volumes": [{"name": "m", "emptyDir": {}}],
            "shareProcessNamespace": true
        }
    });
    let before = raw.clone();
    let mut doc = PodDoc::new(&mut raw);
    doc.set_annotation("k", "v");
    doc.set_spec_field("shareProcessNamespace", json!(true));
    assert!(!doc.ensure_volume(&volume("m")));
    assert!(!doc.ensure_container(List::Containers, container("c")));
    let mut c = doc.container_mut(List::Containers, "c").expect("container");
    c.set_env("E", "v");
    c.set_run_as_user(7);
    assert!(!c.ensure_env(&var("E", "other")));
    assert!(!c.ensure_mount(&mount("m", "/other")));
    assert!(!c.ensure_port(&port("p", 2)));
    assert_eq!(doc.changes(), 0);
    assert_eq!(raw, before);
}

#[test]
fn an_unchanged_counter_means_an_unchanged_pod() {
    // Whatever a helper is asked to write, a counter at 0 means the tree is
    // as it was: the pipeline skips the diff on that promise.
    let mut raw = json!({"metadata": {}, "spec": {"containers": []}});
    let before = raw.clone();
    let mut doc = PodDoc::new(&mut raw);
    doc.set_spec_field("someField", Value::Null);
    if doc.changes() == 0 {
        assert_eq!(
            raw, before,
            "set_spec_field(key, null) on an absent key added `key: null` without counting a change"
        );
    }
}

// --- odd shapes -----------------------------------------------------------

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
        let mut raw = shape.clone();
        let mut doc = PodDoc::new(&mut raw);
        doc.set_annotation("a", "b");
        doc.set_node_selector("k", "v");
        assert!(!doc.ensure_container(List::Containers, container("c")));
        assert!(!doc.ensure_container(List::InitContainers, container("i")));
        assert!(!doc.ensure_volume(&volume("v")));
        assert!(doc.container_mut(List::Containers, "c").is_none());
        assert_eq!(doc.entries(List::Containers).len(), 0);
        assert_eq!(doc.volume_names().count(), 0);
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
    let before = raw.clone();
    let mut doc = PodDoc::new(&mut raw);
    assert_eq!(doc.position(List::Containers, "c"), Some(1));
    let mut c = doc.container_mut(List::Containers, "c").expect("container");
    assert!(!c.ensure_mount(&mount("m", "/m")));
    assert!(!c.ensure_env(&var("E", "v")));
    assert!(!c.ensure_port(&port("p", 1)));
    c.set_env("E", "v");
    c.set_run_as_user(1);
    c.push_args(&["x"]);
    assert_eq!(c.env("E"), None);
    assert_eq!(doc.changes(), 0);
    assert_eq!(raw, before);

    // Entries that are not name-keyed objects are skipped, not failed on.
    let mut doc = PodDoc::new(&mut raw);
    let mut d = doc.container_mut(List::Containers, "d").expect("container");
    d.set_env("E", "v");
    assert_eq!(doc.changes(), 1);
    assert_eq!(
        raw["spec"]["containers"][2]["env"],
        json!([1, "x", null, {"name": 3}, {"name": "E", "value": "v"}])
    );
}

#[test]
fn writes_into_something_added_in_the_same_pass_arrive_inside_its_add() {
    let input = json!({"spec": {"containers": [{"name": "a"}]}});
    let mut out = input.clone();
    let mut doc = PodDoc::new(&mut out);
    doc.set_annotation("x/y", "1");
    doc.set_annotation("z", "2");
    doc.ensure_container(
        List::InitContainers,
        k8s_openapi::api::core::v1::Container {
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
    let after = doc.raw().clone();
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
    let mut patched = input;
    json_patch::patch(&mut patched, &ops).unwrap();
    assert_eq!(patched, after);
}

#[test]
fn values_are_found_at_escaped_pointers() {
    let mut tree = serde_json::json!({"a/b": {"c~d": [0, {"e": 1}]}, "~1": 2});
    let path = jsonptr::PointerBuf::parse("/a~1b/c~0d/1/e").expect("a pointer");
    assert_eq!(
        super::value_at(&mut tree, &path),
        Some(&mut serde_json::json!(1))
    );
    let tilde_one = jsonptr::PointerBuf::parse("/~01").expect("a pointer");
    assert_eq!(
        super::value_at(&mut tree, &tilde_one),
        Some(&mut serde_json::json!(2))
    );
    let missing = jsonptr::PointerBuf::parse("/a~1b/c~0d/2").expect("a pointer");
    assert_eq!(super::value_at(&mut tree, &missing), None);
}

// --- containers held typed (the working set's mode) -------------------------

#[test]
fn a_held_container_is_found_by_name_and_written_whole_into_the_patch() {
    let mut raw = pod_with(json!({"name": "c"}));
    let mut doc = PodDoc::new(&mut raw).deferring();
    assert!(doc.ensure_container(List::Containers, container("agent")));
    assert!(!doc.ensure_container(List::InitContainers, container("agent")));
    assert_eq!(doc.position(List::Containers, "agent"), Some(1));
    assert_eq!(doc.typed_all(List::Containers)[1], container("agent"));
    let (ops, deferred) = doc.into_patch();
    let [PatchOperation::Add(op)] = ops.as_slice() else {
        panic!("one add: {ops:?}");
    };
    assert_eq!(op.path.as_str(), "/spec/containers/1");
    assert_eq!(deferred.get(&op.value), Some(&container("agent")));
}

#[test]
fn a_held_container_becomes_json_when_read_or_edited() {
    let mut raw = pod_with(json!({"name": "c"}));
    let mut doc = PodDoc::new(&mut raw).deferring();
    doc.ensure_container(List::Containers, container("agent"));
    let whole = json!({"name": "agent", "image": "img"});
    assert_eq!(doc.entry(List::Containers, "agent"), Some(&whole));
    doc.ensure_container(List::InitContainers, container("init"));
    if let Some(mut c) = doc.container_mut(List::InitContainers, "init") {
        c.set_run_as_user(7);
    }
    let ops = doc.into_ops();
    let values: Vec<&Value> = ops
        .iter()
        .map(|op| match op {
            PatchOperation::Add(o) => &o.value,
            other => panic!("only adds: {other:?}"),
        })
        .collect();
    assert_eq!(values[0], &whole);
    let init = json!([{"name": "init", "image": "img", "securityContext": {"runAsUser": 7}}]);
    assert_eq!(values[1], &init);
}
