//! JSON Patch helpers.
//!
//! [`compact`] folds the operations the edits recorded: a write into
//! something an earlier operation of the same patch added goes into that
//! operation's value, so a map, list or container we create arrives whole in
//! one `add`, as a diff would have sent it.
//!
//! [`diff`] is the patch between two trees, for the CLI's workload documents
//! and as the tests' reference: same operations as `json_patch::diff`, but
//! equal subtrees are skipped before any path is built.

use json_patch::{AddOperation, Patch, PatchOperation, RemoveOperation, ReplaceOperation};
use jsonptr::{Pointer, PointerBuf};
use serde_json::Value;
use std::collections::HashMap;

/// Folds every `add`/`replace` below the path of an earlier `add` into that
/// `add`'s value. Sound for the edits' patches: they never remove, and never
/// replace an ancestor of something added, so an operation in between that
/// is not inside the added value cannot change it.
pub fn compact(ops: Vec<PatchOperation>) -> Vec<PatchOperation> {
    let mut out: Vec<PatchOperation> = Vec::with_capacity(ops.len());
    // Paths of the `add`s kept so far, to their index in `out`.
    let mut added: HashMap<PointerBuf, usize> = HashMap::new();
    for op in ops {
        let (path, folded) = match &op {
            PatchOperation::Add(o) => (o.path.clone(), fold(&mut out, &added, &o.path, &op)),
            PatchOperation::Replace(o) => (o.path.clone(), fold(&mut out, &added, &o.path, &op)),
            _ => (PointerBuf::new(), false),
        };
        if folded {
            continue;
        }
        if matches!(op, PatchOperation::Add(_)) {
            added.insert(path, out.len());
        }
        out.push(op);
    }
    out
}

/// Applies `op` inside the value of the nearest earlier `add` above it.
fn fold(
    out: &mut [PatchOperation],
    added: &HashMap<PointerBuf, usize>,
    path: &Pointer,
    op: &PatchOperation,
) -> bool {
    let mut ancestor = path.parent();
    while let Some(at) = ancestor {
        if let Some(&index) = added.get(at) {
            let Some(rest) = path.strip_prefix(at) else {
                return false;
            };
            let inner = match op {
                PatchOperation::Add(o) => PatchOperation::Add(AddOperation {
                    path: rest.to_buf(),
                    value: o.value.clone(),
                }),
                PatchOperation::Replace(o) => PatchOperation::Replace(ReplaceOperation {
                    path: rest.to_buf(),
                    value: o.value.clone(),
                }),
                _ => return false,
            };
            let PatchOperation::Add(target) = &mut out[index] else {
                return false;
            };
            return json_patch::patch(&mut target.value, &[inner]).is_ok();
        }
        ancestor = at.parent();
    }
    false
}

pub fn diff(left: &Value, right: &Value) -> Patch {
    let mut ops = Vec::new();
    walk(left, right, &mut PointerBuf::new(), &mut ops);
    Patch(ops)
}

fn add(path: &PointerBuf, value: &Value, ops: &mut Vec<PatchOperation>) {
    ops.push(PatchOperation::Add(AddOperation {
        path: path.clone(),
        value: value.clone(),
    }));
}

fn remove(path: &PointerBuf, ops: &mut Vec<PatchOperation>) {
    ops.push(PatchOperation::Remove(RemoveOperation {
        path: path.clone(),
    }));
}

fn walk(left: &Value, right: &Value, path: &mut PointerBuf, ops: &mut Vec<PatchOperation>) {
    match (left, right) {
        (Value::Object(l), Value::Object(r)) => {
            for (key, rv) in r {
                match l.get(key) {
                    Some(lv) if lv == rv => {}
                    Some(lv) => {
                        path.push_back(key);
                        walk(lv, rv, path, ops);
                        path.pop_back();
                    }
                    None => {
                        path.push_back(key);
                        add(path, rv, ops);
                        path.pop_back();
                    }
                }
            }
            for key in l.keys().filter(|k| !r.contains_key(*k)) {
                path.push_back(key);
                remove(path, ops);
                path.pop_back();
            }
        }
        (Value::Array(l), Value::Array(r)) => {
            for (i, (lv, rv)) in l.iter().zip(r).enumerate() {
                if lv != rv {
                    path.push_back(i);
                    walk(lv, rv, path, ops);
                    path.pop_back();
                }
            }
            for (i, rv) in r.iter().enumerate().skip(l.len()) {
                path.push_back(i);
                add(path, rv, ops);
                path.pop_back();
            }
            // Removing from the end keeps the earlier indices valid.
            for i in (r.len()..l.len()).rev() {
                path.push_back(i);
                remove(path, ops);
                path.pop_back();
            }
        }
        _ if left == right => {}
        _ => ops.push(PatchOperation::Replace(ReplaceOperation {
            path: path.clone(),
            value: right.clone(),
        })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ops(v: Value) -> Vec<PatchOperation> {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn writes_into_added_values_are_folded_in_and_order_is_kept() {
        let recorded = ops(json!([
            {"op": "add", "path": "/m/a", "value": {"x": "1"}},
            {"op": "add", "path": "/n", "value": 1},
            {"op": "add", "path": "/m/a/y", "value": "2"},
            {"op": "add", "path": "/l", "value": [{"name": "c"}]},
            {"op": "add", "path": "/l/0/sc", "value": {"u": 1}},
            {"op": "replace", "path": "/l/0/sc/u", "value": 2},
            {"op": "add", "path": "/l/1", "value": {"name": "d"}},
            {"op": "replace", "path": "/m/b", "value": 3}
        ]));
        let doc = json!({"m": {"b": 0}, "l": null});
        let mut step_by_step = doc.clone();
        json_patch::patch(&mut step_by_step, &recorded).unwrap();
        let compacted = compact(recorded);
        assert_eq!(
            serde_json::to_value(&compacted).unwrap(),
            json!([
                {"op": "add", "path": "/m/a", "value": {"x": "1", "y": "2"}},
                {"op": "add", "path": "/n", "value": 1},
                {"op": "add", "path": "/l", "value": [{"name": "c", "sc": {"u": 2}}, {"name": "d"}]},
                {"op": "replace", "path": "/m/b", "value": 3}
            ])
        );
        let mut folded = doc;
        json_patch::patch(&mut folded, &compacted).unwrap();
        assert_eq!(folded, step_by_step);
    }

    fn roundtrip(left: Value, right: Value) -> Patch {
        let patch = diff(&left, &right);
        let mut doc = left;
        json_patch::patch(&mut doc, &patch).unwrap();
        assert_eq!(doc, right);
        patch
    }

    #[test]
    fn equal_documents_give_no_ops() {
        let v = json!({"a": [1, {"b": 2}], "c": {"d": null}});
        assert!(diff(&v, &v).0.is_empty());
    }

    #[test]
    fn additions_replacements_and_removals_apply() {
        let patch = roundtrip(
            json!({"keep": {"big": [1, 2, 3]}, "x": 1, "list": [1, 2, 3], "gone": true}),
            json!({"keep": {"big": [1, 2, 3]}, "x": 2, "list": [1, 5], "new": {"k": "v"}}),
        );
        let paths: Vec<String> = serde_json::to_value(&patch)
            .unwrap()
            .as_array()
            .unwrap()
            .iter()
            .map(|op| op["path"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(paths, ["/x", "/list/1", "/list/2", "/new", "/gone"]);
    }

    #[test]
    fn appended_array_items_are_added_at_their_index() {
        let patch = roundtrip(json!({"a": [1]}), json!({"a": [1, 2, 3]}));
        assert_eq!(
            serde_json::to_value(&patch).unwrap(),
            json!([
                {"op": "add", "path": "/a/1", "value": 2},
                {"op": "add", "path": "/a/2", "value": 3}
            ])
        );
    }

    #[test]
    fn keys_with_slash_and_tilde_are_escaped() {
        let patch = roundtrip(
            json!({"m": {}}),
            json!({"m": {"serving.kserve.io/x~y": "1"}}),
        );
        assert_eq!(
            serde_json::to_value(&patch).unwrap()[0]["path"],
            "/m/serving.kserve.io~1x~0y"
        );
    }

    #[test]
    fn agrees_with_json_patch_diff_on_results() {
        let left =
            json!({"spec": {"containers": [{"name": "a", "env": [{"name": "X", "value": "1"}]}]}});
        let right = json!({"spec": {"containers": [{"name": "a", "env": [{"name": "X", "value": "2"}, {"name": "Y"}]}, {"name": "b"}], "volumes": []}});
        let mut ours = left.clone();
        json_patch::patch(&mut ours, &diff(&left, &right)).unwrap();
        let mut theirs = left.clone();
        json_patch::patch(&mut theirs, &json_patch::diff(&left, &right)).unwrap();
        assert_eq!(ours, theirs);
    }
}
