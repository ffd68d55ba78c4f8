use super::*;
use k8s_openapi::api::core::v1::{
    Container, ContainerPort, EnvVar, EnvVarSource, ObjectFieldSelector, Probe,
    ResourceRequirements, SecurityContext, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::json;
use std::collections::BTreeMap;

fn same_as_serde_json<T: Serialize + ?Sized>(value: &T) {
    assert_eq!(
        to_string(value).expect("writes"),
        serde_json::to_string(value).expect("serde_json writes"),
    );
}

#[test]
fn containers_and_volumes_are_written_as_serde_json_writes_them() {
    let container = Container {
        name: "kserve-container".into(),
        image: Some("img:\"quoted\"\\ \u{1}\n\té\u{2028}😀\u{7f}".into()),
        args: Some(vec![
            "sh".into(),
            "-c".into(),
            "ln -sf /proc/$$/root".into(),
        ]),
        env: Some(vec![
            EnvVar {
                name: "A".into(),
                value: Some(String::new()),
                value_from: None,
            },
            EnvVar {
                name: "POD".into(),
                value: None,
                value_from: Some(EnvVarSource {
                    field_ref: Some(ObjectFieldSelector {
                        api_version: Some("v1".into()),
                        field_path: "metadata.name".into(),
                    }),
                    ..Default::default()
                }),
            },
        ]),
        ports: Some(vec![ContainerPort {
            container_port: 8080,
            name: Some("http".into()),
            protocol: Some("TCP".into()),
            ..Default::default()
        }]),
        resources: Some(ResourceRequirements {
            limits: Some(BTreeMap::from([
                ("cpu".into(), Quantity("1".into())),
                ("memory".into(), Quantity("2Gi".into())),
            ])),
            ..Default::default()
        }),
        readiness_probe: Some(Probe {
            http_get: Some(k8s_openapi::api::core::v1::HTTPGetAction {
                path: Some("/".into()),
                port: IntOrString::Int(8080),
                ..Default::default()
            }),
            ..Default::default()
        }),
        security_context: Some(SecurityContext {
            run_as_user: Some(-1),
            privileged: Some(false),
            ..Default::default()
        }),
        volume_mounts: Some(vec![VolumeMount {
            name: "m".into(),
            mount_path: "/mnt".into(),
            read_only: Some(true),
            ..Default::default()
        }]),
        ..Default::default()
    };
    same_as_serde_json(&container);
    let volume = Volume {
        name: "v".into(),
        empty_dir: Some(Default::default()),
        ..Default::default()
    };
    same_as_serde_json(&volume);
}

#[test]
fn every_json_shape_is_written_as_serde_json_writes_it() {
    let value = json!({
        "plain": "abc", "quote": "a\"b", "slash": "a\\b/c", "control": "\u{1}\n\t",
        "unicode": "é\u{2028}😀", "del": "\u{7f}", "": [1, -2, 1.5, -0.0, 1e300, true, null, {}, []],
        "nested": {"k~/": ["x", {"y": "z"}]}, "big": u64::MAX, "small": i64::MIN
    });
    same_as_serde_json(&value);
    same_as_serde_json(&BTreeMap::from([(1, "a"), (-2, "b")]));
    same_as_serde_json(&BTreeMap::from([(true, 1)]));
    same_as_serde_json(&(1u8, 'c', "s", (), Some(2.5f32), None::<i32>));
    same_as_serde_json(b"bytes".as_slice());
    same_as_serde_json(&IntOrString::String("80%".into()));
    for text in ["", "\"", "\\", "\u{0}", "\u{1f}", " ", "~", "\u{7f}\u{80}"] {
        same_as_serde_json(text);
        let mut out = String::new();
        write_str(&mut out, text);
        assert_eq!(
            out,
            serde_json::to_string(text).expect("serde_json"),
            "{text:?}"
        );
    }
}

#[derive(serde::Serialize)]
enum Shapes {
    Unit,
    Newtype(i32),
    Tuple(i32, &'static str),
    Struct { a: i32, b: Vec<i32> },
}

#[test]
fn enum_variants_are_written_as_serde_json_writes_them() {
    for v in [
        Shapes::Unit,
        Shapes::Newtype(1),
        Shapes::Tuple(1, "x"),
        Shapes::Struct {
            a: 1,
            b: vec![2, 3],
        },
    ] {
        same_as_serde_json(&v);
    }
}

#[test]
fn a_key_that_is_not_a_string_or_number_is_refused_like_serde_json() {
    let map = BTreeMap::from([(vec![1], 1)]);
    assert!(serde_json::to_string(&map).is_err());
    assert!(to_string(&map).is_err());
    let map = BTreeMap::from([(None::<i32>, 1)]);
    assert_eq!(
        to_string(&map).is_err(),
        serde_json::to_string(&map).is_err()
    );
}

#[test]
fn the_escape_check_finds_every_escaped_byte_at_every_position() {
    for len in 0..20 {
        for at in 0..len {
            for b in (0u8..=0x7f).chain([0x80, 0xc3]) {
                let mut bytes = vec![b'a'; len];
                bytes[at] = b;
                let expected = (b < 0x20 || b == b'"' || b == b'\\').then_some(at);
                assert_eq!(escape_at(&bytes), expected, "byte {b:#x} at {at} of {len}");
                assert_eq!(needs_escape(&bytes), expected.is_some());
            }
        }
    }
    assert_eq!(escape_at("é\u{2028}😀\u{7f}~/".as_bytes()), None);
    assert!(!needs_escape("é\u{2028}😀\u{7f}~/".as_bytes()));
}

#[test]
fn every_ascii_character_is_escaped_as_serde_json_escapes_it() {
    for b in 0u8..0x80 {
        let c = char::from(b);
        for text in [
            c.to_string(),
            format!("ab{c}"),
            format!("{c}cdé{c}{c}\u{2028}x"),
            format!("0123456789{c}abcdef"),
        ] {
            let mut out = String::new();
            write_str(&mut out, &text);
            assert_eq!(out, serde_json::to_string(&text).expect("writes"), "{b:#x}");
        }
    }
}
