//! The ClusterStorageContainer merge, as KServe's `MergeContainerWithPatch`
//! (`pkg/utils/container_merge.go`): both containers are marshalled as Go
//! writes them (`json_text::go::container`), the CSC's is applied to the built
//! storage-initializer as a Kubernetes strategic merge patch, the result is
//! read back into a fresh Container, then `reconcileEnvValueConflicts` and
//! the empty-name repair run.
//!
//! No maintained Rust crate implements strategic merge, so the part a
//! Container needs is written here after apimachinery's
//! `pkg/util/strategicpatch/patch.go`:
//! - `mergeMap`: maps merge key by key; a key only the patch has is taken
//!   as it is (a list too, duplicates and all); a scalar, a list without a
//!   merge strategy (`args`, `command`, `envFrom`, …) or a value of
//!   another type is replaced by the patch's.
//! - `mergeSliceWithoutSpecialElements`: in the lists Container declares
//!   `patchStrategy: merge` (env by `name`, volumeMounts by `mountPath`,
//!   ports by `containerPort`, volumeDevices by `devicePath`) each patch
//!   item merges into the first item with its key, or is appended (so a
//!   second patch item of a new key merges into the first).
//! - `normalizeElementOrder` and `mergeSortedSlice` then order the result:
//!   the items the patch names come in the patch's order, the others keep
//!   theirs, and an item the patch names goes before every remaining other
//!   item unless that other item stood before it in the base. So CSC-only
//!   env comes *first*: base `[A, B, C]` with patch `[X, Y]` gives
//!   `[X, Y, A, B, C]`, with `[B, X]` gives `[A, B, X, C]`, with `[C, A]`
//!   gives `[B, C, A]`.

use crate::json_text::go::container::as_go_marshals;
use crate::shared_error::SharedError;
use k8s_openapi::api::core::v1::{Container, EnvVar};
use serde_json::{Map, Value};
use std::collections::HashMap;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum MergeError {
    /// A container that serde_json cannot write, or the merge that it
    /// cannot read back as a container.
    #[error("cannot merge ClusterStorageContainer container: {0}")]
    Json(#[source] SharedError<serde_json::Error>),
    #[error(
        "cannot merge ClusterStorageContainer container: a container must serialise to an object"
    )]
    NotAnObject,
    #[error("cannot merge ClusterStorageContainer container: map: {item} does not contain declared merge key: {key}")]
    NoMergeKey { item: Value, key: String },
}

/// Container fields whose lists merge by key (`k8s.io/api/core/v1` tags).
const MERGE_KEYS: [(&str, &str); 4] = [
    ("env", "name"),
    ("volumeMounts", "mountPath"),
    ("ports", "containerPort"),
    ("volumeDevices", "devicePath"),
];

/// `base` (the built init container) with `overlay` (the CSC's container)
/// merged in. A non-empty overlay name renames the container, as in
/// KServe (see
/// [`storage_initializer_injected`](super::storage_container::storage_initializer_injected));
/// `args` and `command` of the overlay replace the built ones.
pub(crate) fn merge_storage_container(
    base: &Container,
    overlay: &Container,
) -> Result<Container, MergeError> {
    let go_value = |c: &Container| {
        let mut value = serde_json::to_value(c).map_err(|e| MergeError::Json(e.into()))?;
        as_go_marshals(&mut value);
        Ok::<_, MergeError>(value)
    };
    let (Value::Object(mut merged), Value::Object(patch)) = (go_value(base)?, go_value(overlay)?)
    else {
        return Err(MergeError::NotAnObject);
    };
    for (field, value) in &patch {
        let key = MERGE_KEYS.iter().find(|(f, _)| f == field).map(|(_, k)| *k);
        match (key, merged.get_mut(field), value) {
            (Some(key), Some(Value::Array(items)), Value::Array(patch_items)) => {
                *items = merge_list(items, patch_items, key)?
            }
            (_, Some(slot), value) => merge_value(slot, value),
            (_, None, value) => {
                merged.insert(field.clone(), value.clone());
            }
        }
    }
    let mut container: Container =
        serde_json::from_value(Value::Object(merged)).map_err(|e| MergeError::Json(e.into()))?;
    if let Some(env) = container.env.as_mut() {
        reconcile_env_value_conflicts(env, overlay.env.as_deref().unwrap_or_default());
    }
    if container.name.is_empty() {
        container.name = base.name.clone();
    }
    Ok(container)
}

/// KServe's `reconcileEnvValueConflicts` (#5516): a merged variable with
/// both a non-empty `value` and a `valueFrom` keeps the form the overlay's
/// last entry of that name gives; a variable the overlay does not name is
/// left as it is.
fn reconcile_env_value_conflicts(env: &mut [EnvVar], overlay: &[EnvVar]) {
    let overlay_by_name: HashMap<&str, &EnvVar> =
        overlay.iter().map(|o| (o.name.as_str(), o)).collect();
    for var in env {
        let has_value = var.value.as_deref().is_some_and(|v| !v.is_empty());
        let Some(o) = overlay_by_name.get(var.name.as_str()) else {
            continue;
        };
        if !has_value || var.value_from.is_none() {
            continue;
        }
        if o.value_from.is_some() {
            var.value = None;
        } else if o.value.as_deref().is_some_and(|v| !v.is_empty()) {
            var.value_from = None;
        }
    }
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
        match base.get_mut(k) {
            Some(slot) => merge_value(slot, v),
            None => {
                base.insert(k.clone(), v.clone());
            }
        }
    }
}

/// The first position of `item`'s key in `list`.
fn index_of(list: &[Value], item: &Value, key: &str) -> Option<usize> {
    let id = item.get(key)?;
    list.iter().position(|i| i.get(key) == Some(id))
}

/// `mergeSliceWithoutSpecialElements`, then `normalizeElementOrder` and
/// `mergeSortedSlice` as apimachinery orders a merged list.
fn merge_list(original: &[Value], patch: &[Value], key: &str) -> Result<Vec<Value>, MergeError> {
    if original.is_empty() && patch.is_empty() {
        return Ok(Vec::new());
    }
    let mut merged = original.to_vec();
    for item in patch {
        if item.get(key).is_none() {
            return Err(MergeError::NoMergeKey {
                item: item.clone(),
                key: key.to_string(),
            });
        }
        match index_of(&merged, item, key) {
            Some(at) => merge_value(&mut merged[at], item),
            None => merged.push(item.clone()),
        }
    }
    let (mut named, mut others): (Vec<Value>, Vec<Value>) = merged
        .into_iter()
        .partition(|item| index_of(patch, item, key).is_some());
    named.sort_by_key(|item| index_of(patch, item, key));
    others.sort_by_key(|item| index_of(original, item, key));
    let mut out = Vec::with_capacity(named.len() + others.len());
    let (mut named, mut others) = (named.into_iter().peekable(), others.into_iter().peekable());
    loop {
        let take_other = match (others.peek(), named.peek()) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some(o), Some(n)) => {
                matches!((index_of(original, o, key), index_of(original, n, key)), (Some(oi), Some(ni)) if oi < ni)
            }
        };
        let next = if take_other {
            others.next()
        } else {
            named.next()
        };
        out.extend(next);
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
