use super::*;
use crate::config::Config;
use crate::constants::{MODELCAR_CONTAINER, MODELCAR_INIT_CONTAINER};
use crate::pod::recorded::written;
use crate::pod::{List, WorkingSet};
use crate::view::pod_from_value;
use crate::Inputs;
use serde_json::{json, Value};
use std::sync::Arc;

/// The pair written the typed way, for `image`.
fn typed_text(key: &PairKey<'_>, image: &str) -> (String, String) {
    let (sidecar, init) = containers(key, image);
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
        let key = PairKey::of(&config);
        let prewritten = Prewritten::write(key.clone()).expect("a plain config is prewritten");
        assert!(prewritten.fits(&key));
        for image in images {
            let (sidecar, init) = typed_text(&key, image);
            assert_eq!(prewritten.sidecar(image), sidecar, "{config:?} {image:?}");
            assert_eq!(prewritten.init(image), init, "{config:?} {image:?}");
            let _: Value = serde_json::from_str(&prewritten.init(image)).expect("valid JSON");
        }
    }
}

/// Each field the pair reads is part of the key: text written for one
/// config fits none of the others.
#[test]
fn text_fits_only_the_key_it_was_written_for() {
    let configs = configs();
    for (i, written_for) in configs.iter().enumerate() {
        let prewritten = Prewritten::write(PairKey::of(written_for)).expect("prewritten");
        for (j, other) in configs.iter().enumerate() {
            assert_eq!(prewritten.fits(&PairKey::of(other)), i == j, "{i} {j}");
        }
    }
}

/// The inputs keep the text of their own config; a config swapped in
/// behind their back gets no stale text, and one edited through
/// `edit_config` gets its own.
#[test]
fn inputs_never_hand_out_text_of_another_config() {
    let mut inputs = Inputs::new(Config::default());
    let key = PairKey::of(&inputs.config.storage_initializer).into_owned();
    let kept = inputs
        .modelcar_pair()
        .expect("the default config is prewritten");
    assert_eq!(kept.sidecar("i"), typed_text(&key, "i").0);
    let shared = inputs.with_cluster(Default::default());
    assert!(
        shared.modelcar_pair().is_some(),
        "a request's inputs share it"
    );

    let mut swapped = Config::default();
    swapped.storage_initializer.cpu_modelcar = "3".into();
    inputs.config = Arc::new(swapped);
    assert!(inputs.modelcar_pair().is_none(), "written for cpu \"\"");

    inputs.edit_config(|c| c.storage_initializer.uid_modelcar = Some(7));
    let key = PairKey::of(&inputs.config.storage_initializer).into_owned();
    let fresh = inputs.modelcar_pair().expect("edit_config writes it anew");
    assert_eq!(fresh.sidecar("i"), typed_text(&key, "i").0);
    assert!(
        fresh.sidecar("i").contains("\"runAsUser\":7"),
        "{}",
        fresh.sidecar("i")
    );
}

#[test]
fn a_config_holding_the_mark_is_not_prewritten() {
    let config = StorageInitializerConfig {
        memory_modelcar: MARK.to_string(),
        ..Default::default()
    };
    assert!(Prewritten::write(PairKey::of(&config)).is_none());
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
    let key = PairKey::of(&config);
    let (sidecar, init) = containers(&key, image);
    let prewritten = Prewritten::write(key).expect("prewritten");

    let mut typed = WorkingSet::new(pod_from_value(&pod).expect("view"));
    typed.ensure_container(List::Containers, sidecar.clone());
    typed.ensure_container(List::InitContainers, init.clone());
    let mut text = WorkingSet::new(pod_from_value(&pod).expect("view"));
    let json = prewritten.sidecar(image);
    assert!(text.ensure_prewritten_container(List::Containers, MODELCAR_CONTAINER, json));
    let json = prewritten.init(image);
    let init_name = MODELCAR_INIT_CONTAINER;
    assert!(text.ensure_prewritten_container(List::InitContainers, init_name, json));
    let again = prewritten.sidecar(image);
    assert!(
        !text.ensure_prewritten_container(List::Containers, MODELCAR_CONTAINER, again),
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
            serde_json::to_value(c).expect("a view serialises")
        };
        let from_text = read(&mut text, "text");
        assert!(from_text["resources"]["limits"].is_object(), "{from_text}");
        assert_eq!(from_text, read(&mut typed, "typed"), "{name}");
    }
    let ops = |ws: WorkingSet| serde_json::to_value(ws.into_patch()).expect("ops serialise");
    assert_eq!(ops(text), ops(typed));
}
