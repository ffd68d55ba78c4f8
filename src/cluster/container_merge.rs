//! The ClusterStorageContainer merge: KServe applies the CSC's container to
//! the built storage-initializer as a Kubernetes strategic merge patch.
//! No maintained Rust crate implements strategic merge for typed
//! containers, so the part a Container needs is written here: maps merge
//! recursively, the lists Kubernetes declares `patchStrategy: merge` merge
//! by their key (env by `name`, volumeMounts by `mountPath`, ports by
//! `containerPort`, volumeDevices by `devicePath`), every other list and
//! scalar is replaced by the overlay's.

use k8s_openapi::api::core::v1::Container;
use serde_json::{Map, Value};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot merge ClusterStorageContainer container: {0}")]
pub struct MergeError(String);

/// Container fields whose lists merge by key (`k8s.io/api/core/v1` tags).
const MERGE_KEYS: [(&str, &str); 4] = [
    ("env", "name"),
    ("volumeMounts", "mountPath"),
    ("ports", "containerPort"),
    ("volumeDevices", "devicePath"),
];

/// `base` (the built init container) with `overlay` (the CSC's container)
/// merged in, then KServe's two repairs: an empty merged name becomes the
/// base name, and a variable that ends up with both `value` and `valueFrom`
/// keeps only the overlay's form (#5516). A non-empty overlay name renames
/// the container, as in KServe (see
/// [`storage_initializer_injected`](super::storage_container::storage_initializer_injected)).
pub fn merge_storage_container(
    base: &Container,
    overlay: &Container,
) -> Result<Container, MergeError> {
    let to_value = |c: &Container| serde_json::to_value(c).map_err(|e| MergeError(e.to_string()));
    let (Value::Object(mut merged), Value::Object(patch)) = (to_value(base)?, to_value(overlay)?)
    else {
        return Err(MergeError("a container must serialise to an object".into()));
    };
    for (field, value) in &patch {
        let key = MERGE_KEYS.iter().find(|(f, _)| f == field).map(|(_, k)| *k);
        let slot = merged.entry(field.clone()).or_insert(Value::Null);
        match (key, slot, value) {
            (Some(key), Value::Array(items), Value::Array(patch_items)) => {
                merge_list(items, patch_items, key)
            }
            (_, slot, value) => merge_value(slot, value),
        }
    }
    let mut container: Container =
        serde_json::from_value(Value::Object(merged)).map_err(|e| MergeError(e.to_string()))?;
    if container.name.is_empty() {
        container.name = base.name.clone();
    }
    for var in container.env.iter_mut().flatten() {
        if var.value.is_some() && var.value_from.is_some() {
            let from_overlay = overlay.env.iter().flatten().find(|o| o.name == var.name);
            if from_overlay.is_some_and(|o| o.value_from.is_some()) {
                var.value = None;
            } else {
                var.value_from = None;
            }
        }
    }
    Ok(container)
}

/// Maps merge key by key; anything else is replaced.
fn merge_value(base: &mut Value, patch: &Value) {
    match (base, patch) {
        (Value::Object(b), Value::Object(p)) => merge_map(b, p),
        (slot, p) => *slot = p.clone(),
    }
}

fn merge_map(base: &mut Map<String, Value>, patch: &Map<String, Value>) {
    for (k, v) in patch {
        merge_value(base.entry(k.clone()).or_insert(Value::Null), v);
    }
}

/// An item whose key matches a base item is merged into it in place; the
/// others are appended in the overlay's order.
fn merge_list(base: &mut Vec<Value>, patch: &[Value], key: &str) {
    for item in patch {
        let id = item.get(key);
        match base.iter_mut().find(|b| id.is_some() && b.get(key) == id) {
            Some(existing) => merge_value(existing, item),
            None => base.push(item.clone()),
        }
    }
}

#[cfg(test)]
mod tests;
