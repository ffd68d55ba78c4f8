use super::changes::diff;
use super::keys::GOVERNED;
use super::*;
use crate::constants::{ISVC_LABEL, SOURCE_URI_ANNOTATION};
use crate::release::{Behaviour, Switch, ALL};
use serde_json::json;
use std::convert::Infallible;

fn pod(annotations: Value, containers: Value) -> Value {
    json!({"metadata": {"labels": {ISVC_LABEL: "m"}, "annotations": annotations},
           "spec": {"containers": containers}})
}

fn model_pod(uri: &str) -> Value {
    pod(
        json!({SOURCE_URI_ANNOTATION: uri}),
        json!([{"name": "kserve-container", "image": "server:1"}]),
    )
}

fn head_data() -> BTreeMap<String, String> {
    shipped_data(Release::Head)
}

fn upgrade(current: Side, target: Side) -> Upgrade {
    Upgrade::new(current, target, &Inputs::default(), &Resources::default()).unwrap()
}

fn compare(u: &Upgrade, object: &Value) -> PodChanges {
    let none = |_: &PodFacts, _: &Config| Ok::<_, Infallible>(ClusterSnapshot::default());
    u.pod(object, Form::Template, "ns", none).unwrap()
}

fn find<'c>(changes: &'c [Change], path: &str) -> &'c Change {
    (changes.iter().find(|c| c.path == path))
        .unwrap_or_else(|| panic!("no change at {path}: {changes:#?}"))
}

#[test]
fn the_difference_names_entries_by_name_and_mounts_by_path() {
    let old = json!({"metadata": {"annotations": {"a/b": "1"}}, "spec": {
        "containers": [{"name": "c", "args": ["--x"], "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                        "volumeMounts": [{"name": "v", "mountPath": "/m"}]}],
        "volumes": [{"name": "v", "emptyDir": {}}]}});
    let new = json!({"metadata": {"annotations": {"a/b": "2"}}, "spec": {
        "containers": [{"name": "c", "args": ["--y"], "env": [{"name": "B", "value": "2"}, {"name": "A", "value": "3"}, {"name": "C", "value": "4"}],
                        "volumeMounts": [{"name": "w", "mountPath": "/m"}]}],
        "initContainers": [{"name": "i", "image": "x"}],
        "volumes": [{"name": "w", "emptyDir": {}}]}});
    let changes = diff(&old, &new);
    let summary: Vec<(String, Option<String>, bool, &str, ChangeKind)> = (changes.iter())
        .map(|c| {
            (
                c.path.clone(),
                c.container.clone(),
                c.init,
                c.field.as_str(),
                c.kind,
            )
        })
        .collect();
    let c = Some("c".to_string());
    assert_eq!(
        summary,
        [
            (
                r#"metadata.annotations["a/b"]"#.into(),
                None,
                false,
                r#"metadata.annotations["a/b"]"#,
                ChangeKind::Changed
            ),
            (
                "spec.containers[c].args".into(),
                c.clone(),
                false,
                "args",
                ChangeKind::Changed
            ),
            (
                "spec.containers[c].env[A].value".into(),
                c.clone(),
                false,
                "env[A].value",
                ChangeKind::Changed
            ),
            (
                "spec.containers[c].env[C]".into(),
                c.clone(),
                false,
                "env[C]",
                ChangeKind::Added
            ),
            (
                "spec.containers[c].env".into(),
                c.clone(),
                false,
                "env",
                ChangeKind::Reordered
            ),
            (
                "spec.containers[c].volumeMounts[/m].name".into(),
                c,
                false,
                "volumeMounts[/m].name",
                ChangeKind::Changed
            ),
            (
                "spec.volumes[v]".into(),
                None,
                false,
                "volumes[v]",
                ChangeKind::Removed
            ),
            (
                "spec.volumes[w]".into(),
                None,
                false,
                "volumes[w]",
                ChangeKind::Added
            ),
            (
                "spec.initContainers[i]".into(),
                Some("i".into()),
                true,
                "",
                ChangeKind::Added
            ),
        ]
    );
    let reordered = find(&changes, "spec.containers[c].env");
    assert_eq!(reordered.old, Some(json!(["A", "B"])));
    assert_eq!(reordered.new, Some(json!(["B", "A"])));
    assert!(diff(&old, &old).is_empty());
}

#[test]
fn the_same_release_and_configmap_change_nothing() {
    for release in ALL {
        let u = upgrade(
            Side::new(release, head_data()),
            Side::new(release, head_data()),
        );
        assert_eq!((u.walk.len(), u.flips.len()), (1, 0), "{release}");
        for uri in ["gs://b/m", "oci://r/m:1", "pvc://c/m"] {
            let found = compare(&u, &model_pod(uri));
            assert_eq!(
                found,
                PodChanges {
                    changes: vec![],
                    admission: None
                }
            );
        }
    }
}

#[test]
fn the_hugging_face_defaults_of_v0_16_are_row_15_7() {
    let u = upgrade(
        Side::new(Release::V0_15_0, head_data()),
        Side::new(Release::V0_16_0, head_data()),
    );
    let found = compare(&u, &model_pod("gs://bucket/model"));
    assert!(found.admission.is_none());
    let si = "spec.initContainers[storage-initializer]";
    for name in ["HF_HUB_ENABLE_HF_TRANSFER", "HF_XET_HIGH_PERFORMANCE"] {
        let change = find(&found.changes, &format!("{si}.env[{name}]"));
        assert_eq!(change.kind, ChangeKind::Added);
        assert_eq!(change.container.as_deref(), Some("storage-initializer"));
        assert!(change.init);
        assert_eq!(change.causes.rows, ["15.7"], "{change:?}");
    }
    assert!(found.changes.iter().all(|c| !c.causes.unexplained));
}

#[test]
fn a_worker_modelcar_denied_by_v0_16_is_admitted_by_v0_17_with_row_16_2() {
    let worker = pod(
        json!({SOURCE_URI_ANNOTATION: "oci://registry/model:1"}),
        json!([{"name": "worker-container", "image": "server:1"}]),
    );
    let u = upgrade(
        Side::new(Release::V0_16_0, head_data()),
        Side::new(Release::V0_17_0, head_data()),
    );
    let found = compare(&u, &worker);
    let admission = found.admission.expect("an admission change");
    assert!(admission
        .current
        .unwrap()
        .contains("no container found with name kserve-container"));
    assert_eq!(admission.target, None);
    assert_eq!(admission.causes.rows, ["16.2"]);
    assert!(found.changes.is_empty());
    let back = upgrade(
        Side::new(Release::V0_17_0, head_data()),
        Side::new(Release::V0_16_0, head_data()),
    );
    let denied = compare(&back, &worker).admission.expect("denied");
    assert_eq!(denied.current, None);
    assert!(denied.target.is_some());
}

#[test]
fn a_target_that_refuses_the_configmap_denies_every_pod_with_its_message() {
    let mut data = head_data();
    let mut si: Value = serde_json::from_str(&data["storageInitializer"]).unwrap();
    si["ociModelMode"] = json!("sideways");
    data.insert("storageInitializer".into(), si.to_string());
    let u = upgrade(
        Side::new(Release::V0_19_0, data.clone()),
        Side::new(Release::V0_20_0, data),
    );
    let found = compare(&u, &model_pod("gs://bucket/model"));
    let admission = found.admission.expect("denied");
    assert!(admission
        .target
        .unwrap()
        .contains("ociModelMode \"sideways\""));
    assert_eq!(admission.causes.rows, ["19.4"]);
    let keys = u.config_keys();
    let mode = keys
        .iter()
        .find(|k| k.key == "storageInitializer.ociModelMode")
        .unwrap();
    assert_eq!(mode.target_value, Some(json!("sideways")));
    assert_eq!(mode.current, "not read");
    let current_refuses = Upgrade::new(
        Side::new(Release::V0_20_0, u.target.data.clone()),
        Side::new(Release::V0_19_0, head_data()),
        &Inputs::default(),
        &Resources::default(),
    );
    assert!(current_refuses.is_err());
}

#[test]
fn shipped_configmaps_name_their_row_and_a_given_one_its_keys() {
    let u = upgrade(
        Side::shipped(Release::V0_15_0),
        Side::shipped(Release::V0_16_0),
    );
    let transformer = pod(
        json!({SOURCE_URI_ANNOTATION: "oci://registry/model:1"}),
        json!([{"name": "kserve-container", "image": "server:1"},
               {"name": "transformer-container", "image": "t:1"}]),
    );
    let found = compare(&u, &transformer);
    let modelcar = find(&found.changes, "spec.containers[modelcar]");
    assert_eq!(modelcar.kind, ChangeKind::Added);
    // v0.15.2 shipped the modelcar on (15.1.1: v0.15.0 and v0.15.1 did not).
    assert_eq!(modelcar.causes.rows, ["15.1.1"]);
    // The transformer's env needs the modelcar (the ConfigMap) and the
    // v0.16 shape (15.15): the walk with the keys first names both.
    let env = "spec.containers[transformer-container].env[MODEL_INIT_MODE]";
    assert_eq!(find(&found.changes, env).causes.rows, ["15.1.1", "15.15"]);
    let mut data = head_data();
    let mut si: Value = serde_json::from_str(&data["storageInitializer"]).unwrap();
    si["image"] = json!("registry.example.com/storage-initializer:v2");
    data.insert("storageInitializer".into(), si.to_string());
    data.insert("ingress".into(), "{}".into());
    let u = upgrade(
        Side::new(Release::Head, head_data()),
        Side::new(Release::Head, data),
    );
    let found = compare(&u, &model_pod("gs://bucket/model"));
    let image = find(
        &found.changes,
        "spec.initContainers[storage-initializer].image",
    );
    assert_eq!(image.causes.keys, ["storageInitializer.image"]);
    assert!(image.causes.rows.is_empty() && !image.causes.unexplained);
    assert_eq!(found.changes.len(), 1);
    // The unread key is the walk's last waypoint, which changes nothing.
    assert_eq!(u.walk.last().unwrap().0, Some(Mover::Rest));
    assert_eq!(u.flips.len(), 2, "the key alone, from either end");
}

#[test]
fn the_walk_ends_at_the_target_and_sets_switches_release_by_release() {
    for from in ALL {
        for to in ALL {
            let order = walk::switch_order(from, to);
            let mut behaviour = Behaviour::from(from);
            for s in &order {
                behaviour = behaviour.with(*s, s.in_release(to));
            }
            let same = |s: &Switch| behaviour.get(*s) == s.in_release(to);
            assert!(Switch::ALL.iter().all(same), "{from} → {to}");
            // A switch a nearer release already has comes first.
            let first_at = |s: &Switch| {
                let mut path: Vec<Release> = ALL
                    .into_iter()
                    .filter(|r| (from.min(to)..=from.max(to)).contains(r) && *r != from)
                    .collect();
                if from > to {
                    path.reverse();
                }
                path.iter()
                    .position(|r| s.in_release(*r) == s.in_release(to))
            };
            let positions: Vec<_> = order.iter().map(first_at).collect();
            assert!(
                positions.windows(2).all(|w| w[0] <= w[1]),
                "{from} → {to}: {order:?}"
            );
        }
    }
    assert!(walk::switch_order(Release::V0_18_0, Release::V0_19_0).is_empty());
}

#[test]
fn each_governed_key_is_read_through_its_switch_and_no_other_key_is() {
    // Every key HEAD ships, and those only some releases read.
    let mut keys: Vec<String> = Vec::new();
    for (section, text) in head_data() {
        let Ok(Value::Object(map)) = serde_json::from_str::<Value>(&text) else {
            continue;
        };
        keys.extend(map.keys().map(|k| format!("{section}.{k}")));
    }
    for g in &GOVERNED {
        if !keys.iter().any(|k| k == g.key) {
            keys.push(g.key.to_string());
        }
    }
    let candidates = [
        None,
        Some(json!(true)),
        Some(json!(false)),
        Some(json!("")),
        Some(json!("native")),
        Some(json!("1Gi")),
        Some(json!(3)),
        Some(json!({"path": "/logs"})),
    ];
    // Which candidates the parser tells apart: for each, the first one
    // read alike (an error is read alike with any error).
    let readings = |key: &str, behaviour: Behaviour| -> Vec<usize> {
        let (section, field) = key.split_once('.').unwrap();
        let read: Vec<Option<Config>> = (candidates.iter())
            .map(|value| {
                let mut data = head_data();
                let mut map: Value =
                    serde_json::from_str(data.get(section).map_or("{}", |s| s)).unwrap();
                match value {
                    Some(v) => map[field] = v.clone(),
                    None => drop(map.as_object_mut().unwrap().remove(field)),
                }
                data.insert(section.into(), map.to_string());
                Config::from_data_as(&data, &Resources::default(), behaviour).ok()
            })
            .collect();
        read.iter()
            .map(|r| read.iter().position(|o| o == r).unwrap())
            .collect()
    };
    for &switch in Switch::ALL {
        let on = Behaviour::from(Release::Head);
        let off = on.with(switch, false);
        let mut found: Vec<&str> = (keys.iter())
            .filter(|k| readings(k, on) != readings(k, off))
            .map(|k| k.as_str())
            .collect();
        found.sort_unstable();
        let mut listed: Vec<&str> = GOVERNED
            .iter()
            .filter(|g| g.switch == switch)
            .map(|g| g.key)
            .collect();
        listed.sort_unstable();
        assert_eq!(found, listed, "{switch:?}");
    }
}

#[test]
fn every_shipped_difference_that_is_read_has_a_row() {
    let u = upgrade(
        Side::shipped(Release::V0_17_0),
        Side::shipped(Release::V0_19_0),
    );
    assert_eq!(
        u.walk.last().unwrap().1.as_ref().unwrap().config.release,
        Release::V0_19_0
    );
    for pair in ALL.windows(2) {
        let (older, newer) = (pair[0], pair[1]);
        let read_as_newer =
            Config::from_data_with(&shipped_data(older), &Resources::default(), newer).unwrap();
        if read_as_newer != Config::shipped(newer) {
            assert!(Config::shipped_row(older).is_some(), "{older} → {newer}");
        }
    }
}

#[test]
fn a_change_that_needs_two_switches_names_both() {
    // S3 settings in a Secret's data: v0.16 reads the data (15.8) and
    // builds the endpoint env from it (15.9); either alone gives nothing.
    let cluster = ClusterSnapshot::from_documents(vec![
        json!({"apiVersion": "v1", "kind": "ServiceAccount",
               "metadata": {"name": "default", "namespace": "ns"}, "secrets": [{"name": "s3"}]}),
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s3", "namespace": "ns"},
               "stringData": {"AWS_ACCESS_KEY_ID": "id", "AWS_SECRET_ACCESS_KEY": "key",
                              "S3_ENDPOINT": "s3.example.com"}}),
    ])
    .unwrap();
    let u = upgrade(
        Side::new(Release::V0_15_0, head_data()),
        Side::new(Release::V0_16_0, head_data()),
    );
    let lookup =
        |facts: &PodFacts, config: &Config| Ok::<_, Infallible>(cluster.restrict(facts, config));
    let found = u
        .pod(
            &model_pod("s3://bucket/model"),
            Form::Template,
            "ns",
            lookup,
        )
        .unwrap();
    let endpoint = find(
        &found.changes,
        "spec.initContainers[storage-initializer].env[S3_ENDPOINT]",
    );
    assert_eq!(endpoint.kind, ChangeKind::Added);
    assert_eq!(endpoint.causes.rows, ["15.8", "15.9"]);
}
