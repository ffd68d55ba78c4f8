//! The difference between two mutated pods, field by field. Lists of
//! named entries (containers, volumes, env) are matched by name, mounts by
//! mount path, so an entry added, removed or changed is one change however
//! its list was reordered; a change of their order is a change of its own.
//! Any other list (args, command) is one value. A named list that is
//! absent is read as an empty one.
//!
//! Both pods are our own output, so nothing is passed over: unlike the
//! audit's comparison with a running pod, there is no API server default
//! or other webhook's sidecar to ignore.

use serde::Serialize;
use serde_json::{Map, Value};

/// One step of a change's location.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Seg {
    /// An object's key.
    Field(String),
    /// A list entry, by its name (or, in `volumeMounts`, its mount path).
    Entry(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ChangeKind {
    /// Only the target release's pod has it.
    Added,
    /// Only the current release's pod has it.
    Removed,
    /// Both have it, with different values.
    Changed,
    /// The entries both pods have come in another order (old and new are
    /// their names, in each pod's order).
    Reordered,
}

impl ChangeKind {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ChangeKind::Added => "added",
            ChangeKind::Removed => "removed",
            ChangeKind::Changed => "changed",
            ChangeKind::Reordered => "reordered",
        }
    }
}

/// Why a change happens: the docs/compatibility.md rows of the behaviours
/// that cause it, the ConfigMap keys that differ, or neither (a bug of ours).
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Causes {
    pub rows: Vec<&'static str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub keys: Vec<String>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub unexplained: bool,
}

impl Causes {
    /// `17.1, 15.4`, the keys after the rows, or `unexplained`.
    pub(crate) fn text(&self) -> String {
        let mut parts: Vec<String> = self.rows.iter().map(|r| r.to_string()).collect();
        parts.extend(self.keys.iter().map(|k| format!("ConfigMap {k}")));
        if self.unexplained {
            parts.push("unexplained".into());
        }
        parts.join(", ")
    }
}

/// One field of the pod that the target release makes differently.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Change {
    /// The whole location, as the audit names fields
    /// (`spec.initContainers[storage-initializer].env[HF_TOKEN]`).
    pub path: String,
    /// The container the field is in; `None` for the pod's own fields.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) container: Option<String>,
    /// Whether that container is an init container.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub(crate) init: bool,
    /// The field inside the container (`env[HF_TOKEN]`), empty for the
    /// container itself; for the pod's own fields, the path without `spec.`.
    pub(crate) field: String,
    pub kind: ChangeKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub old: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub new: Option<Value>,
    pub causes: Causes,
    #[serde(skip)]
    pub(super) at: Vec<Seg>,
}

const CONTAINER_LISTS: [&str; 3] = ["containers", "initContainers", "ephemeralContainers"];

/// Every change from `old` to `new` (labels, annotations and spec).
pub(super) fn diff(old: &Value, new: &Value) -> Vec<Change> {
    let mut out = Vec::new();
    let mut at = Vec::new();
    for (parent, key) in [("metadata", "labels"), ("metadata", "annotations")] {
        at.push(Seg::Field(parent.into()));
        at.push(Seg::Field(key.into()));
        let (o, n) = (old.get(parent), new.get(parent));
        value(
            &mut at,
            o.and_then(|o| o.get(key)),
            n.and_then(|n| n.get(key)),
            &mut out,
        );
        at.truncate(0);
    }
    at.push(Seg::Field("spec".into()));
    value(&mut at, old.get("spec"), new.get("spec"), &mut out);
    out
}

fn value(at: &mut Vec<Seg>, old: Option<&Value>, new: Option<&Value>, out: &mut Vec<Change>) {
    match (old, new) {
        (None, None) => {}
        (Some(o), Some(n)) if o == n => {}
        (Some(Value::Object(o)), Some(Value::Object(n))) => object(at, o, n, out),
        (Some(Value::Array(o)), Some(Value::Array(n))) => match key_of(at) {
            key if keyed(o, key) && keyed(n, key) => list(at, key, o, n, out),
            _ => push(at, ChangeKind::Changed, old, new, out),
        },
        (Some(_), Some(_)) => push(at, ChangeKind::Changed, old, new, out),
        // Entry by entry, so each container or variable added is named.
        (None, Some(Value::Array(n))) if keyed(n, key_of(at)) => list(at, key_of(at), &[], n, out),
        (Some(Value::Array(o)), None) if keyed(o, key_of(at)) => list(at, key_of(at), o, &[], out),
        (None, Some(_)) => push(at, ChangeKind::Added, None, new, out),
        (Some(_), None) => push(at, ChangeKind::Removed, old, None, out),
    }
}

fn object(
    at: &mut Vec<Seg>,
    old: &Map<String, Value>,
    new: &Map<String, Value>,
    out: &mut Vec<Change>,
) {
    let added = new.keys().filter(|k| !old.contains_key(*k));
    for key in old.keys().chain(added) {
        at.push(Seg::Field(key.clone()));
        value(at, old.get(key), new.get(key), out);
        at.pop();
    }
}

fn list(at: &mut Vec<Seg>, key: &str, old: &[Value], new: &[Value], out: &mut Vec<Change>) {
    let name = |v: &Value| entry_name(v, key).unwrap_or_default().to_string();
    let find = |items: &[Value], n: &str| {
        items
            .iter()
            .find(|v| entry_name(v, key) == Some(n))
            .cloned()
    };
    let added = new.iter().filter(|n| find(old, &name(n)).is_none());
    for entry in old.iter().chain(added) {
        let n = name(entry);
        at.push(Seg::Entry(n.clone()));
        value(at, find(old, &n).as_ref(), find(new, &n).as_ref(), out);
        at.pop();
    }
    let order = |items: &[Value], other: &[Value]| -> Vec<Value> {
        (items.iter())
            .map(name)
            .filter(|n| find(other, n).is_some())
            .map(Value::String)
            .collect()
    };
    let (was, now) = (order(old, new), order(new, old));
    if was != now {
        let (was, now) = (Value::Array(was), Value::Array(now));
        push(at, ChangeKind::Reordered, Some(&was), Some(&now), out);
    }
}

/// The field that names a list's entries: a mount's path, else `name`.
pub(super) fn key_of(at: &[Seg]) -> &'static str {
    match at.last() {
        Some(Seg::Field(f)) if f == "volumeMounts" => "mountPath",
        _ => "name",
    }
}

pub(super) fn entry_name<'v>(entry: &'v Value, key: &str) -> Option<&'v str> {
    entry.get(key)?.as_str()
}

/// Every entry has a name of its own.
fn keyed(items: &[Value], key: &str) -> bool {
    let mut names: Vec<&str> = Vec::with_capacity(items.len());
    for item in items {
        match entry_name(item, key) {
            Some(n) if !names.contains(&n) => names.push(n),
            _ => return false,
        }
    }
    true
}

fn push(
    at: &[Seg],
    kind: ChangeKind,
    old: Option<&Value>,
    new: Option<&Value>,
    out: &mut Vec<Change>,
) {
    let (container, init, field) = match at {
        [Seg::Field(spec), Seg::Field(list), Seg::Entry(name), rest @ ..]
            if spec == "spec" && CONTAINER_LISTS.contains(&list.as_str()) =>
        {
            (Some(name.clone()), list == "initContainers", render(rest))
        }
        [Seg::Field(spec), rest @ ..] if spec == "spec" => (None, false, render(rest)),
        _ => (None, false, render(at)),
    };
    out.push(Change {
        path: render(at),
        container,
        init,
        field,
        kind,
        old: old.cloned(),
        new: new.cloned(),
        causes: Causes::default(),
        at: at.to_vec(),
    });
}

/// `a.b[entry]["odd/key"]`, as the audit writes paths.
pub(super) fn render(at: &[Seg]) -> String {
    let mut out = String::new();
    for seg in at {
        match seg {
            Seg::Field(k) if plain(k) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(k);
            }
            Seg::Field(k) => out.push_str(&format!("[{k:?}]")),
            Seg::Entry(n) => out.push_str(&format!("[{n}]")),
        }
    }
    out
}

fn plain(key: &str) -> bool {
    !key.is_empty()
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// The value at `at` in `pod`, when there is one.
pub(super) fn value_at<'v>(pod: &'v Value, at: &[Seg]) -> Option<&'v Value> {
    let mut here = pod;
    for (i, seg) in at.iter().enumerate() {
        here = match seg {
            Seg::Field(k) => here.get(k)?,
            Seg::Entry(n) => {
                let key = key_of(&at[..i]);
                (here.as_array()?.iter()).find(|v| entry_name(v, key) == Some(n))?
            }
        };
    }
    Some(here)
}

/// The names of a list's entries, in order, that are among `names`.
pub(super) fn order_among(pod: &Value, at: &[Seg], names: &[Value]) -> Option<Vec<Value>> {
    let key = key_of(at);
    let items = value_at(pod, at)?.as_array()?;
    let among = |n: &&str| names.iter().any(|v| v.as_str() == Some(n));
    Some(
        (items.iter())
            .filter_map(|v| entry_name(v, key))
            .filter(among)
            .map(|n| Value::String(n.to_string()))
            .collect(),
    )
}
