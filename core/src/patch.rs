//! The JSON Patch between two trees, for the CLI's workload documents and as
//! the tests' reference (the webhook's patch is recorded by the edits, see
//! [`crate::pod`]): same operations as `json_patch::diff`, but equal
//! subtrees are skipped before any path is built.

use json_patch::{AddOperation, Patch, PatchOperation, RemoveOperation, ReplaceOperation};
use jsonptr::PointerBuf;
use serde_json::Value;

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
        // Keys in the map's order (sorted), removals last.
        assert_eq!(paths, ["/list/1", "/list/2", "/new", "/x", "/gone"]);
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
