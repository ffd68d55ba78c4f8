//! The test oracle's pod: the whole pod as a JSON tree, edited in place
//! (the pipeline before the borrowed view), with the same operations
//! recorded as the core's `WorkingSet` records. Reads deserialise the typed
//! views from the tree, with every list, so a field the view leaves out
//! that an injector turns out to read shows up as a difference.

use crate::{Edit, EditContainer};
use jsonptr::PointerBuf;
use k8s_openapi::api::core::v1::{Container, ContainerPort, EnvVar, Volume, VolumeMount};
use kserve_injector_core::internals::{self as view, Annotations, ContainerView, List};
use kserve_injector_core::{Op, OpKind};
use serde::Serialize;
use serde_json::{Map, Value};
use std::borrow::Cow;

fn to_json(value: &impl Serialize) -> Value {
    // k8s-openapi types serialise to JSON infallibly (string keys, no custom errors).
    serde_json::to_value(value).unwrap_or(Value::Null)
}

fn name_of(entry: &Value) -> Option<&str> {
    entry.get("name").and_then(Value::as_str)
}

/// `spec.containers` or `spec.initContainers`: the list's key.
fn key_of(list: List) -> &'static str {
    match list {
        List::Containers => "containers",
        List::InitContainers => "initContainers",
    }
}

/// A token of a path: a map key or a list index.
enum PathStep<'s> {
    Key(&'s str),
    Index(usize),
}

impl<'s> From<&'s str> for PathStep<'s> {
    fn from(key: &'s str) -> Self {
        PathStep::Key(key)
    }
}

impl From<usize> for PathStep<'_> {
    fn from(index: usize) -> Self {
        PathStep::Index(index)
    }
}

/// A pointer with `steps` appended, built by jsonptr's tokens (the
/// working set writes pointer text by hand).
fn child<'s, const N: usize>(path: &jsonptr::Pointer, steps: [PathStep<'s>; N]) -> PointerBuf {
    let mut pointer = path.to_buf();
    for step in steps {
        match step {
            PathStep::Key(key) => pointer.push_back(jsonptr::Token::new(key)),
            PathStep::Index(index) => pointer.push_back(index),
        }
    }
    pointer
}

pub struct TreeDoc<'a> {
    root: &'a mut Value,
    /// The edits so far: where each write went, in order.
    ops: Recorded,
    /// The namespace the pod is created in, which a pod template does not carry.
    namespace: Option<String>,
}

/// A recorded write: its kind and where; the value is read from the tree
/// when the patch is taken ([`TreeDoc::into_ops`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Add,
    Replace,
}

type Recorded = Vec<(Kind, PointerBuf)>;

fn add(ops: &mut Recorded, path: PointerBuf) {
    ops.push((Kind::Add, path));
}

fn replace(ops: &mut Recorded, path: PointerBuf) {
    ops.push((Kind::Replace, path));
}

/// The slot under `key`, made an empty object or array (`empty`) when absent
/// or null; `None` when something else is stored there (the view rules that
/// out). The flag says whether the slot was created.
fn slot_at<'v>(
    parent: &'v mut Value,
    key: &str,
    empty: fn() -> Value,
) -> Option<(&'v mut Value, bool)> {
    let obj = parent.as_object_mut()?;
    let slot = obj.entry(key.to_string()).or_insert(Value::Null);
    let created = slot.is_null();
    if created {
        *slot = empty();
    }
    Some((slot, created))
}

fn empty_object() -> Value {
    Value::Object(Map::new())
}

fn empty_array() -> Value {
    Value::Array(Vec::new())
}

/// Sets `obj[key]` to `value` and records the operation at `path` (the
/// pointer of `obj[key]`); nothing when the value is already there.
fn set_member(
    obj: &mut Map<String, Value>,
    key: &str,
    value: Value,
    path: impl FnOnce() -> PointerBuf,
    ops: &mut Recorded,
) {
    match obj.get_mut(key) {
        Some(slot) if *slot == value => {}
        Some(slot) => {
            *slot = value;
            replace(ops, path());
        }
        None => {
            obj.insert(key.to_string(), value);
            add(ops, path());
        }
    }
}

/// Appends to the list under `key` in `parent` (at `path`), creating the
/// list with one `add` when it is absent or null.
fn push_at(
    parent: &mut Value,
    path: &PointerBuf,
    key: &str,
    value: Value,
    ops: &mut Recorded,
) -> bool {
    let Some((slot, created)) = slot_at(parent, key, empty_array) else {
        return false;
    };
    let Some(items) = slot.as_array_mut() else {
        return false;
    };
    items.push(value);
    let list = child(path, [key.into()]);
    if created {
        add(ops, list);
    } else {
        let index = items.len() - 1;
        add(ops, child(&list, [index.into()]));
    }
    true
}

/// `Value::pointer_mut` without its allocations: tokens are found by a byte
/// scan (`str::split` sets up a char search per call, costly on paths this
/// short) and decoded, by jsonptr, only when they hold an escape.
fn value_at<'v>(root: &'v mut Value, path: &PointerBuf) -> Option<&'v mut Value> {
    let mut node = root;
    let mut rest = path.as_str();
    while let Some(after) = rest.strip_prefix('/') {
        let end = after.bytes().position(|b| b == b'/').unwrap_or(after.len());
        let (encoded, tail) = after.split_at(end);
        rest = tail;
        let key = match encoded.as_bytes().contains(&b'~') {
            true => Cow::Owned(
                jsonptr::Token::from_encoded(encoded)
                    .ok()?
                    .decoded()
                    .into_owned(),
            ),
            false => Cow::Borrowed(encoded),
        };
        node = match node {
            Value::Object(map) => map.get_mut(key.as_ref())?,
            Value::Array(items) => items.get_mut(key.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(node)
}

fn str_map_get<'v>(parent: &'v Value, map: &str, key: &str) -> Option<&'v str> {
    parent.get(map)?.get(key)?.as_str()
}

impl<'a> TreeDoc<'a> {
    pub fn new(root: &'a mut Value) -> Self {
        Self {
            root,
            ops: Vec::new(),
            namespace: None,
        }
    }

    pub fn in_namespace(root: &'a mut Value, namespace: &str) -> Self {
        Self {
            namespace: Some(namespace.to_string()),
            ..Self::new(root)
        }
    }

    /// The patch operations that make the edits on the full pod. Values are
    /// moved out of the tree (so it is left incomplete), not cloned: each
    /// recorded path takes the value it holds now, and a write inside
    /// something added earlier is already part of that `add`'s value (a map,
    /// list or container we create arrives whole in one `add`, as a diff
    /// would send it). Sound because the edits never remove, never insert in
    /// the middle of a list, and never write over an ancestor of an earlier
    /// write; a path written twice carries its last value once.
    pub fn into_ops(self) -> Vec<Op> {
        // A pod's edits are a few dozen at most: linear scans over the
        // paths taken so far beat hashing and cloning pointers.
        let mut out: Vec<Op> = Vec::with_capacity(self.ops.len());
        for (kind, path) in self.ops {
            let p = path.as_str();
            let inside_added = out.iter().any(|op| {
                op.kind == OpKind::Add && {
                    let a = op.path.as_str();
                    p.len() > a.len() && p.starts_with(a) && p.as_bytes()[a.len()] == b'/'
                }
            });
            if inside_added || out.iter().any(|op| op.path == p) {
                continue;
            }
            let value = value_at(self.root, &path)
                .map(std::mem::take)
                .unwrap_or(Value::Null);
            out.push(Op {
                kind: match kind {
                    Kind::Add => OpKind::Add,
                    Kind::Replace => OpKind::Replace,
                },
                path: path.to_string(),
                // serde_json's own text: the oracle shares no writer with
                // the working set it checks.
                value: serde_json::to_string(&value).unwrap_or_else(|_| "null".to_string()),
            });
        }
        out
    }

    fn metadata(&self) -> Option<&Value> {
        self.root.get("metadata")
    }

    fn spec(&self) -> Option<&Value> {
        self.root.get("spec")
    }

    /// Sets `key` in the object at `path`, creating the objects on the way.
    fn set_in_map(&mut self, path: &[&str], key: &str, value: Value) {
        let ops = &mut self.ops;
        let mut node = &mut *self.root;
        // How many steps of `path` exist already: a map created for this
        // write goes in with one `add`, whole.
        let mut existing = path.len();
        for (depth, step) in path.iter().enumerate() {
            let Some((slot, new)) = slot_at(node, step, empty_object) else {
                return;
            };
            if new && existing == path.len() {
                existing = depth;
            }
            node = slot;
        }
        let Some(obj) = node.as_object_mut() else {
            return;
        };
        let pointer = |steps: &[&str]| {
            (steps.iter()).fold(PointerBuf::new(), |p, step| child(&p, [(*step).into()]))
        };
        if existing < path.len() {
            obj.insert(key.to_string(), value);
            add(ops, pointer(&path[..=existing]));
            return;
        }
        set_member(obj, key, value, || child(&pointer(path), [key.into()]), ops);
    }

    fn list(&self, list: List) -> &[Value] {
        self.spec()
            .and_then(|s| s.get(key_of(list)))
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default()
    }

    /// Appends to the list `spec.<key>`, creating `spec` and the list as needed.
    fn append(&mut self, key: &str, value: Value) -> bool {
        let spec = child(&PointerBuf::new(), ["spec".into()]);
        let Some((node, created)) = slot_at(self.root, "spec", empty_object) else {
            return false;
        };
        if created {
            let Some(obj) = node.as_object_mut() else {
                return false;
            };
            obj.insert(key.to_string(), Value::Array(vec![value]));
            add(&mut self.ops, spec);
            return true;
        }
        push_at(node, &spec, key, value, &mut self.ops)
    }
}

impl Annotations for TreeDoc<'_> {
    fn annotation(&self, key: &str) -> Option<&str> {
        str_map_get(self.metadata()?, "annotations", key)
    }
}

impl Edit for TreeDoc<'_> {
    type Container<'c>
        = TreeContainer<'c>
    where
        Self: 'c;

    fn label(&self, key: &str) -> Option<&str> {
        str_map_get(self.metadata()?, "labels", key)
    }

    fn name(&self) -> &str {
        self.metadata()
            .and_then(|m| m.get("name"))
            .and_then(Value::as_str)
            .unwrap_or_default()
    }

    fn namespace(&self) -> &str {
        if let Some(ns) = &self.namespace {
            return ns;
        }
        self.metadata()
            .and_then(|m| m.get("namespace"))
            .and_then(Value::as_str)
            .unwrap_or_default()
    }

    fn service_account_name(&self) -> &str {
        (self.spec().and_then(|s| s.get("serviceAccountName")))
            .and_then(Value::as_str)
            .unwrap_or_default()
    }

    fn first_image_pull_secret(&self) -> Option<&str> {
        self.spec()?
            .get("imagePullSecrets")?
            .as_array()?
            .first()
            .and_then(name_of)
    }

    fn has_volume(&self, name: &str) -> bool {
        (self.spec().and_then(|s| s.get("volumes")))
            .and_then(Value::as_array)
            .is_some_and(|items| items.iter().any(|v| name_of(v) == Some(name)))
    }

    fn changes(&self) -> usize {
        self.ops.len()
    }

    fn positions(&self, list: List, name: &str) -> Vec<usize> {
        let named = |(i, c): (usize, &Value)| (name_of(c) == Some(name)).then_some(i);
        self.list(list)
            .iter()
            .enumerate()
            .filter_map(named)
            .collect()
    }

    fn containers(&mut self, list: List) -> Cow<'_, [ContainerView<'_>]> {
        Cow::Owned(
            self.list(list)
                .iter()
                .map(view::container_from_value)
                .collect(),
        )
    }

    fn set_annotation(&mut self, key: &str, value: &str) {
        self.set_in_map(&["metadata", "annotations"], key, Value::from(value));
    }

    fn set_namespace(&mut self, namespace: &str) {
        self.set_in_map(&["metadata"], "namespace", Value::from(namespace));
    }

    fn set_node_selector(&mut self, key: &str, value: &str) {
        self.set_in_map(&["spec", "nodeSelector"], key, Value::from(value));
    }

    fn set_share_process_namespace(&mut self, on: bool) {
        self.set_in_map(&["spec"], "shareProcessNamespace", Value::Bool(on));
    }

    fn ensure_container(&mut self, list: List, container: Container) -> bool {
        if self.has_container_named(&container.name) {
            return false;
        }
        self.append(key_of(list), to_json(&container))
    }

    /// The text read as a typed container and added the typed way, so the
    /// comparison checks the text.
    fn ensure_prewritten_container(&mut self, list: List, name: &str, json: String) -> bool {
        if self.has_container_named(name) {
            return false;
        }
        match serde_json::from_str::<Container>(&json) {
            Ok(container) if container.name == name => {
                self.append(key_of(list), to_json(&container))
            }
            // Text that is not a container of that name: left out, so
            // the comparison with the working set, which adds it, fails.
            _ => false,
        }
    }

    fn ensure_volume(&mut self, volume: &Volume) -> bool {
        if self.has_volume(&volume.name) {
            return false;
        }
        self.append("volumes", to_json(volume))
    }

    fn container_at(&mut self, list: List, index: usize) -> Option<Self::Container<'_>> {
        let raw = self
            .root
            .get_mut("spec")?
            .get_mut(key_of(list))?
            .as_array_mut()?
            .get_mut(index)?;
        let path = child(
            &PointerBuf::new(),
            ["spec".into(), key_of(list).into(), index.into()],
        );
        Some(TreeContainer {
            raw,
            path,
            ops: &mut self.ops,
        })
    }
}

/// A container inside the tree.
pub struct TreeContainer<'a> {
    raw: &'a mut Value,
    /// Where this container is in the pod.
    path: PointerBuf,
    ops: &'a mut Recorded,
}

impl TreeContainer<'_> {
    fn named_entry_exists(&self, key: &str, name: &str) -> bool {
        self.raw
            .get(key)
            .and_then(Value::as_array)
            .is_some_and(|items| items.iter().any(|e| name_of(e) == Some(name)))
    }

    fn push(&mut self, key: &str, value: Value) -> bool {
        push_at(self.raw, &self.path, key, value, self.ops)
    }

    fn env(&self, name: &str) -> Option<&Value> {
        self.raw
            .get("env")?
            .as_array()?
            .iter()
            .find(|e| name_of(e) == Some(name))
    }
}

impl EditContainer for TreeContainer<'_> {
    fn has_mount(&self, name: &str) -> bool {
        self.named_entry_exists("volumeMounts", name)
    }

    fn has_env(&self, name: &str) -> bool {
        self.env(name).is_some()
    }

    fn env_value(&self, name: &str) -> Option<&str> {
        self.env(name)?.get("value")?.as_str()
    }

    fn args(&self) -> Vec<&str> {
        (self.raw.get("args").and_then(Value::as_array))
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default()
    }

    fn ensure_mount(&mut self, mount: &VolumeMount) -> bool {
        if self.has_mount(&mount.name) {
            return false;
        }
        self.push("volumeMounts", to_json(mount))
    }

    fn ensure_mount_at(&mut self, mount: &VolumeMount) -> bool {
        let same = |e: &Value| {
            name_of(e) == Some(mount.name.as_str())
                && e.get("mountPath").and_then(Value::as_str) == Some(mount.mount_path.as_str())
        };
        let mounts = self.raw.get("volumeMounts").and_then(Value::as_array);
        if mounts.is_some_and(|items| items.iter().any(same)) {
            return false;
        }
        self.push("volumeMounts", to_json(mount))
    }

    fn ensure_env(&mut self, var: &EnvVar) -> bool {
        if self.named_entry_exists("env", &var.name) {
            return false;
        }
        self.push("env", to_json(var))
    }

    fn set_env(&mut self, name: &str, value: &str) {
        let mut found = false;
        if let Some(items) = self.raw.get_mut("env").and_then(Value::as_array_mut) {
            for (index, entry) in items.iter_mut().enumerate() {
                if name_of(entry) != Some(name) {
                    continue;
                }
                found = true;
                if entry.get("valueFrom").is_some_and(|v| !v.is_null()) {
                    continue;
                }
                if let Some(obj) = entry.as_object_mut() {
                    let path = || child(&self.path, ["env".into(), index.into(), "value".into()]);
                    set_member(obj, "value", Value::from(value), path, self.ops);
                }
            }
        }
        if !found {
            self.push(
                "env",
                to_json(&EnvVar {
                    name: name.to_string(),
                    value: Some(value.to_string()),
                    value_from: None,
                }),
            );
        }
    }

    fn ensure_port(&mut self, port: &ContainerPort) -> bool {
        if let Some(name) = &port.name {
            if self.named_entry_exists("ports", name) {
                return false;
            }
        }
        self.push("ports", to_json(port))
    }

    fn set_run_as_user(&mut self, uid: i64) {
        let Some((ctx, created)) = slot_at(self.raw, "securityContext", empty_object) else {
            return;
        };
        let Some(obj) = ctx.as_object_mut() else {
            return;
        };
        let path = child(&self.path, ["securityContext".into()]);
        if created {
            obj.insert("runAsUser".to_string(), Value::from(uid));
            add(self.ops, path);
        } else {
            set_member(
                obj,
                "runAsUser",
                Value::from(uid),
                || child(&path, ["runAsUser".into()]),
                self.ops,
            );
        }
    }

    fn push_args(&mut self, args: &[&str]) {
        for arg in args {
            self.push("args", Value::from(*arg));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_found_at_escaped_pointers() {
        let mut tree = serde_json::json!({"a/b": {"c~d": [0, {"e": 1}]}, "~1": 2});
        let path = jsonptr::PointerBuf::parse("/a~1b/c~0d/1/e").expect("a pointer");
        assert_eq!(value_at(&mut tree, &path), Some(&mut serde_json::json!(1)));
        let tilde_one = jsonptr::PointerBuf::parse("/~01").expect("a pointer");
        assert_eq!(
            value_at(&mut tree, &tilde_one),
            Some(&mut serde_json::json!(2))
        );
        let missing = jsonptr::PointerBuf::parse("/a~1b/c~0d/2").expect("a pointer");
        assert_eq!(value_at(&mut tree, &missing), None);
    }
}
