//! The pod as the API server sent it (raw JSON), with the name-keyed "ensure"
//! helpers every injector uses. Reads may go through typed k8s-openapi structs;
//! writes insert typed values into the raw tree, so fields unknown to
//! k8s-openapi are never touched. Every write that changes the tree bumps a
//! counter, which tells the pipeline which injector changed what.

use k8s_openapi::api::core::v1::{Container, ContainerPort, EnvVar, Volume, VolumeMount};
use serde::Serialize;
use serde_json::{Map, Value};

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
    changes: u64,
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

/// Returns the object stored under `key`, creating it when absent or null.
/// `None` when something else is stored there; validation rules that out.
fn object_at<'v>(parent: &'v mut Value, key: &str) -> Option<&'v mut Map<String, Value>> {
    let obj = parent.as_object_mut()?;
    let slot = obj.entry(key.to_string()).or_insert(Value::Null);
    if slot.is_null() {
        *slot = Value::Object(Map::new());
    }
    slot.as_object_mut()
}

fn array_at<'v>(parent: &'v mut Value, key: &str) -> Option<&'v mut Vec<Value>> {
    let obj = parent.as_object_mut()?;
    let slot = obj.entry(key.to_string()).or_insert(Value::Null);
    if slot.is_null() {
        *slot = Value::Array(Vec::new());
    }
    slot.as_array_mut()
}

fn str_map_get<'v>(parent: &'v Value, map: &str, key: &str) -> Option<&'v str> {
    parent.get(map)?.get(key)?.as_str()
}

impl<'a> PodDoc<'a> {
    pub fn new(root: &'a mut Value) -> Self {
        Self {
            root,
            changes: 0,
            namespace: None,
        }
    }

    pub fn in_namespace(root: &'a mut Value, namespace: &str) -> Self {
        Self {
            namespace: Some(namespace.to_string()),
            ..Self::new(root)
        }
    }

    /// How many writes changed the pod so far.
    pub fn changes(&self) -> u64 {
        self.changes
    }

    pub fn raw(&self) -> &Value {
        self.root
    }

    fn metadata(&self) -> Option<&Value> {
        self.root.get("metadata")
    }

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

    pub fn spec_str(&self, key: &str) -> Option<&str> {
        self.spec()?.get(key)?.as_str()
    }

    fn set_if_different(slot: &mut Value, value: Value, changes: &mut u64) {
        if *slot != value {
            *slot = value;
            *changes += 1;
        }
    }

    fn set_in_map(&mut self, path: &[&str], key: &str, value: Value) {
        let Some(obj) = node_at(self.root, path).and_then(Value::as_object_mut) else {
            return;
        };
        match obj.get_mut(key) {
            Some(slot) => Self::set_if_different(slot, value, &mut self.changes),
            None => {
                obj.insert(key.to_string(), value);
                self.changes += 1;
            }
        }
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

    pub fn entries(&self, list: List) -> &[Value] {
        self.spec()
            .and_then(|s| s.get(list.key()))
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default()
    }

    pub fn position(&self, list: List, name: &str) -> Option<usize> {
        self.entries(list)
            .iter()
            .position(|c| name_of(c) == Some(name))
    }

    pub fn entry(&self, list: List, name: &str) -> Option<&Value> {
        self.entries(list).iter().find(|c| name_of(c) == Some(name))
    }

    /// Container names are unique across containers and init containers.
    pub fn has_container_named(&self, name: &str) -> bool {
        self.position(List::Containers, name).is_some()
            || self.position(List::InitContainers, name).is_some()
    }

    /// Typed copy of a container, for reading probes, ports and security contexts.
    pub fn typed(&self, list: List, name: &str) -> Option<Container> {
        let raw = self.entry(list, name)?;
        serde::Deserialize::deserialize(raw).ok()
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
    pub fn ensure_container(&mut self, list: List, container: &Container) -> bool {
        if self.has_container_named(&container.name) {
            return false;
        }
        self.append(&["spec"], list.key(), to_json(container))
    }

    /// Appends the volume unless a volume of that name exists.
    pub fn ensure_volume(&mut self, volume: &Volume) -> bool {
        if self.volume_names().any(|n| n == volume.name) {
            return false;
        }
        self.append(&["spec"], "volumes", to_json(volume))
    }

    fn append(&mut self, path: &[&str], key: &str, value: Value) -> bool {
        match node_at(self.root, path).and_then(|node| array_at(node, key)) {
            Some(items) => {
                items.push(value);
                self.changes += 1;
                true
            }
            None => false,
        }
    }

    /// A writable view of one container; `None` if no entry has that name.
    pub fn container_mut(&mut self, list: List, name: &str) -> Option<ContainerMut<'_>> {
        let index = self.position(list, name)?;
        self.container_at(list, index)
    }

    pub fn container_at(&mut self, list: List, index: usize) -> Option<ContainerMut<'_>> {
        let raw = self
            .root
            .get_mut("spec")?
            .get_mut(list.key())?
            .as_array_mut()?
            .get_mut(index)?;
        Some(ContainerMut {
            raw,
            changes: &mut self.changes,
        })
    }
}

/// Walks `path` from the root, creating missing or null objects on the way.
fn node_at<'v>(root: &'v mut Value, path: &[&str]) -> Option<&'v mut Value> {
    let mut node = root;
    for step in path {
        object_at(node, step)?;
        node = node.get_mut(*step)?;
    }
    Some(node)
}

/// A container inside the raw pod, with name-keyed ensure helpers.
pub struct ContainerMut<'a> {
    raw: &'a mut Value,
    changes: &'a mut u64,
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
        match array_at(self.raw, key) {
            Some(items) => {
                items.push(value);
                *self.changes += 1;
                true
            }
            None => false,
        }
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
            for entry in items.iter_mut().filter(|e| name_of(e) == Some(name)) {
                found = true;
                if entry.get("valueFrom").is_some_and(|v| !v.is_null()) {
                    continue;
                }
                if let Some(obj) = entry.as_object_mut() {
                    let slot = obj.entry("value").or_insert(Value::Null);
                    PodDoc::set_if_different(slot, Value::from(value), self.changes);
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
        let Some(ctx) = object_at(self.raw, "securityContext") else {
            return;
        };
        let slot = ctx.entry("runAsUser").or_insert(Value::Null);
        PodDoc::set_if_different(slot, Value::from(uid), self.changes);
    }

    /// Appends arguments; callers check first that they are not there yet.
    pub fn push_args(&mut self, args: &[&str]) {
        for arg in args {
            self.push("args", Value::from(*arg));
        }
    }
}

#[cfg(test)]
mod tests;
