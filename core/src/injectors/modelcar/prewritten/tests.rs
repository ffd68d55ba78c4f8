use super::*;
use crate::constants::{MODELCAR_CONTAINER, MODELCAR_INIT_CONTAINER};
use crate::pod::{List, PodEdit, WorkingSet};
use crate::view::pod_from_value;
use serde_json::{json, Value};

/// The pair written the typed way, for `image`.
fn typed_text(config: &StorageInitializerConfig, image: &str) -> (String, String) {
    let (sidecar, init) = modelcar_containers(config, image, modelcar_mount());
    let text = |c| written(k8s::container(c));
    (text(&sidecar), text(&init))
}

fn configs() -> Vec<StorageInitializerConfig> {
    let with = |edit: fn(&mut StorageInitializerConfig)| {
        let mut config = StorageInitializerConfig::default();
        edit(&mut config);
        config
    };
    vec![
        StorageInitializerConfig::default(),
        with(|c| {
            c.cpu_modelcar = "250m".into();
            c.memory_modelcar = "2Gi".into();
        }),
        with(|c| c.uid_modelcar = Some(1010)),
        with(|c| c.uid_modelcar = Some(-1)),
    ]
}

#[test]
fn the_text_is_the_typed_pairs_own_for_every_image() {
    let images = [
        "registry.example/models/llama:v1",
        "quay.io/m@sha256:0123456789abcdef",
        "odd\"quote\\back\nline\u{1}ctl",
        "unicodé/模型:τ",
        "",
    ];
    for config in configs() {
        let prewritten = Prewritten::of(&config).expect("a plain config is prewritten");
        for image in images {
            let (sidecar, init) = typed_text(&config, image);
            assert_eq!(prewritten.sidecar(image), sidecar, "{config:?} {image:?}");
            assert_eq!(prewritten.init(image), init, "{config:?} {image:?}");
            let _: Value = serde_json::from_str(&prewritten.init(image)).expect("valid JSON");
        }
    }
}

#[test]
fn a_config_changed_in_place_gets_no_stale_text() {
    let mut config = StorageInitializerConfig::default();
    assert!(Prewritten::of(&config).is_some());
    config.cpu_modelcar = "3".into();
    assert!(Prewritten::of(&config).is_none(), "written for cpu \"\"");
    let copy = config.clone();
    let fresh = Prewritten::of(&copy).expect("a clone writes its own");
    assert_eq!(fresh.sidecar("i"), typed_text(&copy, "i").0);
    config.cpu_modelcar = String::new();
    config.uid_modelcar = Some(7);
    assert!(Prewritten::of(&config).is_none(), "written for no uid");
}

#[test]
fn a_config_holding_the_mark_is_not_prewritten() {
    let config = StorageInitializerConfig {
        memory_modelcar: MARK.to_string(),
        ..Default::default()
    };
    assert!(Prewritten::of(&config).is_none());
}

/// An added container read back after it was added as text reads as the
/// typed one does, and both give the same operations.
#[test]
fn a_prewritten_container_reads_back_as_the_typed_one() {
    let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}});
    let config = StorageInitializerConfig {
        uid_modelcar: Some(1010),
        ..Default::default()
    };
    let image = "registry.example/m:1";
    let (sidecar, init) = modelcar_containers(&config, image, modelcar_mount());
    let prewritten = Prewritten::of(&config).expect("prewritten");

    let mut typed = WorkingSet::new(pod_from_value(&pod).expect("view"));
    typed.ensure_container(List::Containers, sidecar.clone());
    typed.ensure_container(List::InitContainers, init.clone());
    let mut text = WorkingSet::new(pod_from_value(&pod).expect("view"));
    let json = prewritten.sidecar(image);
    assert!(
        text.ensure_prewritten_container(List::Containers, MODELCAR_CONTAINER, json, || {
            sidecar.clone()
        })
    );
    let json = prewritten.init(image);
    let init_name = MODELCAR_INIT_CONTAINER;
    assert!(text
        .ensure_prewritten_container(List::InitContainers, init_name, json, || { init.clone() }));
    let again = prewritten.sidecar(image);
    assert!(
        !text.ensure_prewritten_container(List::Containers, MODELCAR_CONTAINER, again, || {
            sidecar.clone()
        }),
        "keyed by name"
    );

    for (list, name) in [
        (List::Containers, MODELCAR_CONTAINER),
        (List::InitContainers, MODELCAR_INIT_CONTAINER),
    ] {
        let read = |ws: &mut WorkingSet, what: &str| {
            let c = ws
                .container(list, name)
                .unwrap_or_else(|| panic!("{what} has {name}"));
            serde_json::to_value(&*c).expect("a view serialises")
        };
        let from_text = read(&mut text, "text");
        assert!(from_text["resources"]["limits"].is_object(), "{from_text}");
        assert_eq!(from_text, read(&mut typed, "typed"), "{name}");
    }
    let ops = |ws: WorkingSet| serde_json::to_value(ws.into_patch()).expect("ops serialise");
    assert_eq!(ops(text), ops(typed));
}
