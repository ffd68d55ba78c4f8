//! A Container as Go's `encoding/json` writes a typed `corev1.Container`:
//! KServe marshals both containers of a ClusterStorageContainer merge
//! before the strategic merge (`mergeContainerSpecs` in
//! `pkg/webhook/admission/pod/storage_initializer_injector.go` up to
//! v0.19, `MergeContainerWithPatch` in `pkg/utils/container_merge.go` from
//! v0.20.0), so a field tagged `omitempty` that holds its zero value (`""`,
//! `false`, `0`, an empty list or map) is not in the patch and cannot
//! override the base. Pointer fields (`*bool`, `*int64`, the whole
//! `securityContext`) keep their zero values, and struct values
//! (`resources`) are always written.
//!
//! Hand-written because no crate reproduces Go's tags for core/v1: the
//! tags are [`super::tags`]'s, which the probe writer reads too.

use super::tags::{fields, GoType::Container};
use serde_json::{Map, Value};

fn is_go_zero(value: &Value) -> bool {
    match value {
        Value::String(s) => s.is_empty(),
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::Array(items) => items.is_empty(),
        Value::Object(map) => map.is_empty(),
        Value::Null => true,
    }
}

/// `container` (a serialised Container) as Go would marshal it.
pub(crate) fn as_go_marshals(container: &mut Value) {
    normalise(container, Container);
    if let Value::Object(map) = container {
        // `resources` is a struct value and `name` has no omitempty.
        map.entry("resources")
            .or_insert_with(|| Value::Object(Map::new()));
        map.entry("name")
            .or_insert_with(|| Value::String(String::new()));
    }
}

fn normalise(value: &mut Value, ty: super::tags::GoType) {
    let Value::Object(map) = value else {
        return;
    };
    let (omit_when_zero, nested) = fields(ty);
    for (field, child) in nested {
        match map.get_mut(*field) {
            Some(Value::Array(items)) => items.iter_mut().for_each(|i| normalise(i, *child)),
            Some(object) => normalise(object, *child),
            None => {}
        }
    }
    map.retain(|field, v| !(omit_when_zero.contains(&field.as_str()) && is_go_zero(v)));
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn zero_values_of_omitempty_fields_go_and_pointers_stay() {
        let mut c = json!({
            "name": "x", "args": [], "image": "", "tty": false,
            "env": [{"name": "A", "value": ""},
                    {"name": "B", "valueFrom": {"secretKeyRef": {"name": "", "key": "k", "optional": false}}}],
            "volumeMounts": [{"name": "v", "mountPath": "/m", "readOnly": false, "subPath": ""}],
            "ports": [{"containerPort": 0, "hostPort": 0, "protocol": "TCP"}],
            "resources": {"limits": {}},
            "securityContext": {"privileged": false, "capabilities": {"add": []}},
            "readinessProbe": {"periodSeconds": 0, "grpc": {"port": 0, "service": ""}}
        });
        as_go_marshals(&mut c);
        assert_eq!(
            c,
            json!({
                "name": "x",
                "env": [{"name": "A"},
                        {"name": "B", "valueFrom": {"secretKeyRef": {"key": "k", "optional": false}}}],
                "volumeMounts": [{"name": "v", "mountPath": "/m"}],
                "ports": [{"containerPort": 0, "protocol": "TCP"}],
                "resources": {},
                "securityContext": {"privileged": false, "capabilities": {}},
                "readinessProbe": {"grpc": {"port": 0, "service": ""}}
            })
        );
    }

    #[test]
    fn name_and_resources_are_always_written() {
        let mut c = json!({});
        as_go_marshals(&mut c);
        assert_eq!(c, json!({"name": "", "resources": {}}));
    }
}
