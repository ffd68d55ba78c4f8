//! The pod the injectors edit, with the name-keyed "ensure" helpers every
//! injector uses. On the webhook path the JSON tree here is a small working
//! set: only the fields the injectors read (see [`crate::view`]), built from
//! the borrowed view of the request. Reads may go through typed k8s-openapi
//! structs; writes insert typed values into the tree.
//!
//! Every write that changes the tree records the RFC 6902 operation that
//! makes the same change on the full pod, at the moment it decides: `add` of
//! a map key or of a list entry at its explicit index, `replace` of a value
//! that differs, and a missing (or null) list or map created whole with one
//! `add`. Operations apply in order, so an injector that reads an earlier
//! injector's write (it is in the tree) and edits it again gets a valid
//! patch. This works because the working set keeps every list whole (all
//! entries, at their indices) and every object on a written path exists in
//! it exactly when it exists in the pod; fields left out are never written.
//! No clone of the pod and no diff of trees: the patch is the record of edits.
//! On the webhook path a container an injector adds whole stays typed until
//! something reads it ([`Deferred`]); the tree holds a placeholder with its
//! name, and the answer serialises the container once.
use json_patch::{AddOperation, PatchOperation, ReplaceOperation};
use jsonptr::PointerBuf;
use k8s_openapi::api::core::v1::{Container, ContainerPort, EnvVar, Volume, VolumeMount};
use serde::Serialize;
use serde_json::{Map, Value};
use std::borrow::Cow;

/// `spec.containers` or `spec.initContainers`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum List {
    Containers,
    InitContainers,
}

impl List {
    fn key(self) -> &'static str {
        match self {
            List::Containers => "containers",
            List::InitContainers => "initContainers",
        }
    }
}

pub struct PodDoc<'a> {
    root: &'a mut Value,
    /// Containers added and not read since, kept typed (the working set's
    /// mode, [`PodDoc::deferring`]); `None` writes them into the tree at once.
    deferred: Option<Deferred>,
    /// The edits so far: where each write went, in order.
    ops: Recorded,
    /// The namespace the pod is created in, which a pod template does not carry.
    namespace: Option<String>,
}

fn to_json(value: &impl Serialize) -> Value {
    // k8s-openapi types serialise to JSON infallibly (string keys, no custom errors).
    serde_json::to_value(value).unwrap_or(Value::Null)
}

pub(crate) fn name_of(entry: &Value) -> Option<&str> {
    entry.get("name").and_then(Value::as_str)
}

/// A recorded write: its kind and where; the value is read from the tree
/// when the patch is taken ([`PodDoc::into_ops`]).
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

/// A token of a path: a map key (escaped as RFC 6901 says) or a list index.
enum Step<'s> {
    Key(&'s str),
    Index(usize),
}

impl<'s> From<&'s str> for Step<'s> {
    fn from(key: &'s str) -> Self {
        Step::Key(key)
    }
}

impl From<usize> for Step<'_> {
    fn from(index: usize) -> Self {
        Step::Index(index)
    }
}

/// `path` with `steps` appended. Built as text: jsonptr's `push_back`
/// allocates a token per step, which was a tenth of a small review.
fn child<'s, const N: usize>(path: &PointerBuf, steps: [Step<'s>; N]) -> PointerBuf {
    let mut text = String::with_capacity(path.as_str().len() + 32);
    text.push_str(path.as_str());
    for step in steps {
        text.push('/');
        match step {
            Step::Key(key) if key.bytes().any(|b| b == b'~' || b == b'/') => {
                text.push_str(jsonptr::Token::new(key).encoded())
            }
            Step::Key(key) => text.push_str(key),
            Step::Index(index) => text.push_str(itoa::Buffer::new().format(index)),
        }
    }
    // SAFETY: `path` is a valid pointer and every appended token starts
    // with '/' and has '~' and '/' escaped, so the text is a valid pointer.
    unsafe { PointerBuf::new_unchecked(text) }
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

impl<'a> PodDoc<'a> {
    pub fn new(root: &'a mut Value) -> Self {
        Self {
            root,
            deferred: None,
            ops: Vec::new(),
            namespace: None,
        }
    }

    /// The working set's mode: added containers stay typed until read
    /// ([`Deferred`]); take the patch with [`PodDoc::into_patch`].
    pub fn deferring(self) -> Self {
        Self {
            deferred: Some(Deferred::default()),
            ..self
        }
    }

    pub fn in_namespace(root: &'a mut Value, namespace: &str) -> Self {
        Self {
            namespace: Some(namespace.to_string()),
            ..Self::new(root)
        }
    }

    /// How many writes changed the pod so far.
    pub fn changes(&self) -> usize {
        self.ops.len()
    }

    /// The patch operations that make the edits on the full pod. Values are
    /// moved out of the tree (so it is left incomplete), not cloned: each
    /// recorded path takes the value it holds now, and a write inside
    /// something added earlier is already part of that `add`'s value (a map,
    /// list or container we create arrives whole in one `add`, as a diff
    /// would send it). Sound because the edits never remove, never insert in
    /// the middle of a list, and never write over an ancestor of an earlier
    /// write; a path written twice carries its last value once.
    pub fn into_patch(self) -> (Vec<PatchOperation>, Deferred) {
        // A pod's edits are a few dozen at most: linear scans over the
        // paths taken so far beat hashing and cloning pointers.
        let mut out: Vec<PatchOperation> = Vec::with_capacity(self.ops.len());
        for (kind, path) in self.ops {
            let p = path.as_str();
            let inside_added = out.iter().any(|op| {
                matches!(op, PatchOperation::Add(_)) && {
                    let a = op.path().as_str();
                    p.len() > a.len() && p.starts_with(a) && p.as_bytes()[a.len()] == b'/'
                }
            });
            if inside_added || out.iter().any(|op| op.path().as_str() == p) {
                continue;
            }
            let value = value_at(self.root, &path)
                .map(std::mem::take)
                .unwrap_or(Value::Null);
            out.push(match kind {
                Kind::Add => PatchOperation::Add(AddOperation { path, value }),
                Kind::Replace => PatchOperation::Replace(ReplaceOperation { path, value }),
            });
        }
        (out, self.deferred.unwrap_or_default())
    }

    /// The patch with every container as JSON, for applying it to a tree.
    pub fn into_ops(self) -> Vec<PatchOperation> {
        let (mut ops, mut deferred) = self.into_patch();
        resolve_ops(&mut ops, &mut deferred);
        ops
    }

    /// The tree as it stands; in the deferring mode a container added and
    /// not read since is a placeholder here (read it with [`PodDoc::entry`]).
    pub fn raw(&self) -> &Value {
        self.root
    }

    fn metadata(&self) -> Option<&Value> {
        self.root.get("metadata")
    }

    /// `spec`, with the placeholders [`PodDoc::raw`] describes.
    pub fn spec(&self) -> Option<&Value> {
        self.root.get("spec")
    }

    pub fn annotation(&self, key: &str) -> Option<&str> {
        str_map_get(self.metadata()?, "annotations", key)
    }

    pub fn label(&self, key: &str) -> Option<&str> {
        str_map_get(self.metadata()?, "labels", key)
    }

    pub fn name(&self) -> &str {
        self.metadata()
            .and_then(|m| m.get("name"))
            .and_then(Value::as_str)
            .unwrap_or_default()
    }

    pub fn namespace(&self) -> &str {
        if let Some(ns) = &self.namespace {
            return ns;
        }
        self.metadata()
            .and_then(|m| m.get("namespace"))
            .and_then(Value::as_str)
            .unwrap_or_default()
    }

    /// `spec.serviceAccountName`; empty means `default`.
    pub fn service_account_name(&self) -> &str {
        self.spec_str("serviceAccountName").unwrap_or_default()
    }

    pub fn spec_str(&self, key: &str) -> Option<&str> {
        self.spec()?.get(key)?.as_str()
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

    pub fn set_annotation(&mut self, key: &str, value: &str) {
        self.set_in_map(&["metadata", "annotations"], key, Value::from(value));
    }

    pub fn set_namespace(&mut self, namespace: &str) {
        self.set_in_map(&["metadata"], "namespace", Value::from(namespace));
    }

    pub fn set_spec_field(&mut self, key: &str, value: Value) {
        self.set_in_map(&["spec"], key, value);
    }

    pub fn set_node_selector(&mut self, key: &str, value: &str) {
        self.set_in_map(&["spec", "nodeSelector"], key, Value::from(value));
    }

    /// The list as stored: added containers may be placeholders that carry
    /// only their name.
    fn list(&self, list: List) -> &[Value] {
        self.spec()
            .and_then(|s| s.get(list.key()))
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default()
    }

    /// Every entry of the list, whole.
    pub fn entries(&mut self, list: List) -> &[Value] {
        for index in 0..self.list(list).len() {
            self.materialize(list, index);
        }
        self.list(list)
    }

    pub fn position(&self, list: List, name: &str) -> Option<usize> {
        self.list(list)
            .iter()
            .position(|c| name_of(c) == Some(name))
    }

    /// The indices of the entries named `name`.
    pub fn positions(&self, list: List, name: &str) -> Vec<usize> {
        let named = |(i, c): (usize, &Value)| (name_of(c) == Some(name)).then_some(i);
        self.list(list)
            .iter()
            .enumerate()
            .filter_map(named)
            .collect()
    }

    /// The entry named `name`, whole.
    pub fn entry(&mut self, list: List, name: &str) -> Option<&Value> {
        let index = self.position(list, name)?;
        self.materialize(list, index);
        self.list(list).get(index)
    }

    /// A held-back container at `index` becomes JSON in the tree.
    fn materialize(&mut self, list: List, index: usize) {
        let Some(deferred) = self.deferred.as_mut() else {
            return;
        };
        let entry = (self.root.get_mut("spec"))
            .and_then(|s| s.get_mut(list.key()))
            .and_then(|l| l.get_mut(index));
        if let Some(entry) = entry {
            deferred.materialize(entry);
        }
    }

    /// Container names are unique across containers and init containers.
    pub fn has_container_named(&self, name: &str) -> bool {
        self.position(List::Containers, name).is_some()
            || self.position(List::InitContainers, name).is_some()
    }

    /// Typed copies of every named entry of the list.
    pub fn typed_all(&self, list: List) -> Vec<Container> {
        let held = |c: &Value| self.deferred.as_ref()?.get(c).cloned();
        (self.list(list).iter())
            .filter_map(|c| held(c).or_else(|| serde::Deserialize::deserialize(c).ok()))
            .collect()
    }

    pub fn volume_names(&self) -> impl Iterator<Item = &str> {
        self.spec()
            .and_then(|s| s.get("volumes"))
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .filter_map(name_of)
    }

    /// Appends the container unless any container or init container has its name.
    pub fn ensure_container(&mut self, list: List, container: Container) -> bool {
        if self.has_container_named(&container.name) {
            return false;
        }
        let value = match self.deferred.as_mut() {
            Some(deferred) => deferred.hold(container),
            None => to_json(&container),
        };
        self.append(list.key(), value)
    }

    /// Appends the volume unless a volume of that name exists.
    pub fn ensure_volume(&mut self, volume: &Volume) -> bool {
        if self.volume_names().any(|n| n == volume.name) {
            return false;
        }
        self.append("volumes", to_json(volume))
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

    /// A writable view of one container; `None` if no entry has that name.
    pub fn container_mut(&mut self, list: List, name: &str) -> Option<ContainerMut<'_>> {
        let index = self.position(list, name)?;
        self.container_at(list, index)
    }

    pub fn container_at(&mut self, list: List, index: usize) -> Option<ContainerMut<'_>> {
        self.materialize(list, index);
        let raw = self
            .root
            .get_mut("spec")?
            .get_mut(list.key())?
            .as_array_mut()?
            .get_mut(index)?;
        let path = child(
            &PointerBuf::new(),
            ["spec".into(), list.key().into(), index.into()],
        );
        Some(ContainerMut {
            raw,
            path,
            ops: &mut self.ops,
        })
    }
}

/// The lookup rules read the working set's annotations in place.
impl crate::cluster::Annotations for PodDoc<'_> {
    fn annotation(&self, key: &str) -> Option<&str> {
        PodDoc::annotation(self, key)
    }
}

/// A container inside the raw pod, with name-keyed ensure helpers.
pub struct ContainerMut<'a> {
    raw: &'a mut Value,
    /// Where this container is in the pod.
    path: PointerBuf,
    ops: &'a mut Recorded,
}

impl ContainerMut<'_> {
    pub fn raw(&self) -> &Value {
        self.raw
    }

    fn named_entry_exists(&self, key: &str, name: &str) -> bool {
        self.raw
            .get(key)
            .and_then(Value::as_array)
            .is_some_and(|items| items.iter().any(|e| name_of(e) == Some(name)))
    }

    fn push(&mut self, key: &str, value: Value) -> bool {
        push_at(self.raw, &self.path, key, value, self.ops)
    }

    pub fn has_mount(&self, name: &str) -> bool {
        self.named_entry_exists("volumeMounts", name)
    }

    /// Appends the mount unless the container already mounts a volume of that name.
    pub fn ensure_mount(&mut self, mount: &VolumeMount) -> bool {
        if self.has_mount(&mount.name) {
            return false;
        }
        self.push("volumeMounts", to_json(mount))
    }

    pub fn env(&self, name: &str) -> Option<&Value> {
        self.raw
            .get("env")?
            .as_array()?
            .iter()
            .find(|e| name_of(e) == Some(name))
    }

    /// Appends the variable unless one of that name exists.
    pub fn ensure_env(&mut self, var: &EnvVar) -> bool {
        if self.named_entry_exists("env", &var.name) {
            return false;
        }
        self.push("env", to_json(var))
    }

    /// KServe's add-or-replace: every entry of that name gets the value; a
    /// variable the user sources from `valueFrom` is left alone, since giving it
    /// a value too would make the pod invalid.
    pub fn set_env(&mut self, name: &str, value: &str) {
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

    /// Appends the port unless a port of that name exists.
    pub fn ensure_port(&mut self, port: &ContainerPort) -> bool {
        if let Some(name) = &port.name {
            if self.named_entry_exists("ports", name) {
                return false;
            }
        }
        self.push("ports", to_json(port))
    }

    /// Sets `securityContext.runAsUser`, keeping every other field.
    pub fn set_run_as_user(&mut self, uid: i64) {
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

    /// Appends arguments; callers check first that they are not there yet.
    pub fn push_args(&mut self, args: &[&str]) {
        for arg in args {
            self.push("args", Value::from(*arg));
        }
    }
}

/// Turns the placeholders in the operations' values into JSON.
pub fn resolve_ops(ops: &mut [PatchOperation], deferred: &mut Deferred) {
    for op in ops {
        match op {
            PatchOperation::Add(o) => deferred.resolve(&mut o.value),
            PatchOperation::Replace(o) => deferred.resolve(&mut o.value),
            _ => {}
        }
    }
}

pub mod build;
mod deferred;

pub use deferred::Deferred;

#[cfg(test)]
mod tests;
