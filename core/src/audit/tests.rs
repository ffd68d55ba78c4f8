use super::*;
use crate::constants::SOURCE_URI_ANNOTATION;
use crate::mutation::mutate_template;

fn template() -> Value {
    json!({
        "metadata": {"labels": {ISVC_LABEL: "m", "pod-template-hash": "h"},
            "annotations": {SOURCE_URI_ANNOTATION: "gs://bucket/model"}},
        "spec": {"containers": [{"name": "kserve-container", "image": "kserve/sklearnserver"}]}
    })
}

fn replica_set(name: &str, deployment: &str) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"namespace": "ns", "name": name,
            "ownerReferences": [{"kind": "Deployment", "name": deployment, "controller": true}]},
        "spec": {"template": template()}})
}

/// A pod as the ReplicaSet controller creates it and our mutator admits it.
fn pod(name: &str, owner: Option<(&str, &str)>) -> Value {
    let mutated = mutate_template(&template(), "ns", &Inputs::default())
        .unwrap()
        .pod;
    let mut pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"namespace": "ns", "name": name, "labels": mutated["metadata"]["labels"],
            "annotations": mutated["metadata"]["annotations"]},
        "spec": mutated["spec"], "status": {"phase": "Running"}});
    if let Some((kind, owner)) = owner {
        pod["metadata"]["ownerReferences"] =
            json!([{"kind": kind, "name": owner, "controller": true}]);
    }
    pod
}

fn inventory(docs: Vec<Value>) -> Inventory {
    let mut inv = Inventory::default();
    for (i, doc) in docs.into_iter().enumerate() {
        inv.add(doc, &format!("object {i}")).unwrap();
    }
    inv
}

#[test]
fn pods_are_same_differ_or_skipped_with_their_reason() {
    let mut changed = pod("b-changed", Some(("ReplicaSet", "rs1")));
    let env = changed["spec"]["initContainers"][0]["env"]
        .as_array_mut()
        .unwrap();
    env.push(json!({"name": "EXTRA", "value": "1"}));
    let inv = inventory(vec![
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"namespace": "ns", "name": "d"}}),
        replica_set("rs1", "d"),
        pod("a-same", Some(("ReplicaSet", "rs1"))),
        changed,
        pod("c-orphan", None),
        pod("d-job", Some(("Job", "j"))),
        pod("e-lost", Some(("ReplicaSet", "gone"))),
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"namespace": "ns", "name": "plain"}, "spec": {}}),
    ]);
    let report = inv.audit(&Inputs::default(), &Rules::default());
    let rows: Vec<(&str, Status, &str)> = (report.pods.iter())
        .map(|r| (r.pod.as_str(), r.status, r.owner.as_str()))
        .collect();
    assert_eq!(
        rows,
        [
            ("a-same", Status::Same, "Deployment/d"),
            ("b-changed", Status::Differs, "Deployment/d"),
            ("c-orphan", Status::Skipped, ""),
            ("d-job", Status::Skipped, "Job/j"),
            ("e-lost", Status::Skipped, "ReplicaSet/gone"),
        ]
    );
    assert!(report.differs());
    let path = "spec.initContainers[storage-initializer].env[EXTRA]";
    assert_eq!(
        report.pods[1].differences,
        [Difference {
            path: path.into(),
            kind: DiffKind::Extra
        }]
    );
    assert_eq!(
        report.differences,
        [report::PathCount {
            path: path.into(),
            kind: DiffKind::Extra,
            pods: 1
        }]
    );
    assert!(report.pods[2]
        .reason
        .as_deref()
        .unwrap()
        .starts_with("no owner"));
    let table = report.table();
    assert!(
        table.contains("5 pods: 1 same, 1 differ, 3 skipped"),
        "{table}"
    );
}

#[test]
fn another_config_makes_every_pod_differ_at_the_same_path() {
    let inv = inventory(vec![
        replica_set("rs1", "d"),
        pod("a", Some(("ReplicaSet", "rs1"))),
        pod("b", Some(("ReplicaSet", "rs1"))),
    ]);
    let manifest =
        crate::reader::documents(&mut crate::config::Config::default_manifest().as_bytes())
            .unwrap()
            .next()
            .unwrap()
            .unwrap();
    let mut data: BTreeMap<String, String> =
        serde_json::from_value(manifest["data"].clone()).unwrap();
    data.insert(
        "storageInitializer".into(),
        data["storageInitializer"].replace("kserve/storage-initializer", "example.com/other"),
    );
    let inputs = Inputs::new(crate::config::Config::from_data(&data).unwrap());
    let report = inv.audit(&inputs, &Rules::default());
    assert_eq!(report.totals.differs, 2);
    assert_eq!(report.differences.len(), 1, "{:?}", report.differences);
    assert_eq!(
        report.differences[0].path,
        "spec.initContainers[storage-initializer].image"
    );
    assert_eq!(report.differences[0].pods, 2);
}

#[test]
fn the_config_map_is_kept_by_namespace_and_lookup_kinds_go_to_the_objects() {
    let inv = inventory(vec![
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"namespace": "kserve", "name": CONFIG_MAP_NAME}, "data": {"a": "b"}}),
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"namespace": "kserve", "name": "other"}}),
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"namespace": "ns", "name": "sa"}}),
    ]);
    assert_eq!(
        inv.config_data("kserve").map(|d| d["a"].as_str()),
        Some("b")
    );
    assert_eq!(inv.objects.data.len(), 1);
    assert_eq!(inv.objects.ignored.get("ConfigMap"), Some(&1));
}
