//! The audit's comparison: the pod we would create from a template against
//! the pod the cluster runs, field by field. Lists of named entries
//! (containers, volumes, env) are matched by name, mounts by mount path;
//! what the API server, the kubelet and other webhooks add is passed over:
//! defaulted fields (`is_default`), the service account token volume and
//! its mount, and the sidecars named in [`Rules::sidecars`] with the volumes
//! only they mount.

use crate::quantity::canonicalize;
use serde::Serialize;
use serde_json::{Map, Value};
use std::collections::BTreeSet;

/// Sidecars other webhooks commonly add; `audit --ignore-container` adds names.
pub(crate) const KNOWN_SIDECARS: [&str; 6] = [
    "istio-proxy",
    "istio-init",
    "istio-validation",
    "linkerd-proxy",
    "linkerd-init",
    "linkerd-network-validator",
];

/// Pod annotations and labels those webhooks and admission plugins add
/// (prefixes).
const ADDED_METADATA: [&str; 8] = [
    "sidecar.istio.io/status",
    "security.istio.io/tlsMode",
    "service.istio.io/canonical-",
    "istio.io/rev",
    "linkerd.io/",
    "kubernetes.io/psp",
    "openshift.io/scc",
    "k8s.v1.cni.cncf.io/",
];

/// Where the service account admission plugin mounts the token.
const TOKEN_MOUNT_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// Fields the API server defaults, as (context, key): the context is the
/// path of object keys from the pod, with list entries left out and every
/// container list and probe named alike.
const DEFAULTED: [(&str, &str); 30] = [
    ("spec", "nodeName"),
    ("spec", "serviceAccount"),
    ("spec", "serviceAccountName"),
    ("spec", "schedulerName"),
    ("spec", "securityContext"),
    ("spec", "dnsPolicy"),
    ("spec", "restartPolicy"),
    ("spec", "terminationGracePeriodSeconds"),
    ("spec", "enableServiceLinks"),
    ("spec", "priority"),
    ("spec", "preemptionPolicy"),
    ("spec", "tolerations"),
    ("spec.containers", "terminationMessagePath"),
    ("spec.containers", "terminationMessagePolicy"),
    ("spec.containers", "imagePullPolicy"),
    ("spec.containers", "resources"),
    ("spec.containers.ports", "protocol"),
    ("spec.containers.probe", "timeoutSeconds"),
    ("spec.containers.probe", "periodSeconds"),
    ("spec.containers.probe", "successThreshold"),
    ("spec.containers.probe", "failureThreshold"),
    ("spec.containers.probe.httpGet", "scheme"),
    ("spec.containers.env.valueFrom.fieldRef", "apiVersion"),
    ("spec.containers.env.valueFrom.resourceFieldRef", "divisor"),
    ("spec.volumes.secret", "defaultMode"),
    ("spec.volumes.configMap", "defaultMode"),
    ("spec.volumes.projected", "defaultMode"),
    ("spec.volumes.downwardAPI", "defaultMode"),
    ("spec.volumes.downwardAPI.items.fieldRef", "apiVersion"),
    ("spec.volumes.hostPath", "type"),
];

/// Tolerations the DefaultTolerationSeconds plugin adds.
const DEFAULT_TOLERATIONS: [&str; 2] = [
    "node.kubernetes.io/not-ready",
    "node.kubernetes.io/unreachable",
];

/// What the comparison passes over besides the defaults.
#[derive(Debug)]
pub struct Rules {
    /// Containers (and init containers) other webhooks add.
    pub sidecars: BTreeSet<String>,
}

impl Default for Rules {
    fn default() -> Self {
        Self {
            sidecars: KNOWN_SIDECARS.iter().map(|s| s.to_string()).collect(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum DiffKind {
    /// We would set it; the running pod does not have it.
    Missing,
    /// The running pod has it; we would not set it.
    Extra,
    /// Both have it, with different values.
    Changed,
}

impl DiffKind {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            DiffKind::Missing => "missing",
            DiffKind::Extra => "extra",
            DiffKind::Changed => "changed",
        }
    }
}

/// One field that differs. `path` names list entries by their name
/// (`spec.containers[kserve-container].env[STORAGE_URI].value`), so the
/// same difference has the same path across pods.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub(crate) struct Difference {
    pub(crate) path: String,
    pub(crate) kind: DiffKind,
}

/// The differences between `want` (the template with our patch applied)
/// and `got` (the running pod): their labels, annotations and spec.
pub(crate) fn compare(want: &Value, got: &Value, rules: &Rules) -> Vec<Difference> {
    let mut walk = Walk {
        rules,
        sidecar_volumes: sidecar_volumes(got.get("spec"), rules),
        out: Vec::new(),
    };
    for key in ["labels", "annotations"] {
        let path = format!("metadata.{key}");
        let (w, g) = (
            want.pointer(&format!("/metadata/{key}")),
            got.pointer(&format!("/metadata/{key}")),
        );
        walk.field(&path, &path, w, g);
    }
    walk.field("spec", "spec", want.get("spec"), got.get("spec"));
    walk.out.sort();
    walk.out
}

struct Walk<'a> {
    rules: &'a Rules,
    /// Volumes mounted only by ignored sidecars.
    sidecar_volumes: BTreeSet<String>,
    out: Vec<Difference>,
}

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Object(m) => m.is_empty(),
        Value::Array(a) => a.is_empty(),
        _ => false,
    }
}

fn push_key(path: &str, key: &str) -> String {
    let plain = !key.is_empty()
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if plain {
        format!("{path}.{key}")
    } else {
        format!("{path}[{key:?}]")
    }
}

/// The context of `key` under `ctx`, with container lists and probes
/// named alike.
fn child_ctx(ctx: &str, key: &str) -> String {
    let key = match key {
        "initContainers" | "ephemeralContainers" if ctx == "spec" => "containers",
        "livenessProbe" | "readinessProbe" | "startupProbe" if ctx == "spec.containers" => "probe",
        other => other,
    };
    format!("{ctx}.{key}")
}

impl Walk<'_> {
    fn push(&mut self, path: String, kind: DiffKind) {
        self.out.push(Difference { path, kind });
    }

    fn field(&mut self, path: &str, ctx: &str, want: Option<&Value>, got: Option<&Value>) {
        match (want, got) {
            (Some(w), Some(g)) => self.value(path, ctx, w, g),
            (Some(w), None) if !is_empty(w) => self.push(path.to_string(), DiffKind::Missing),
            (None, Some(g)) if !is_empty(g) => self.push(path.to_string(), DiffKind::Extra),
            _ => {}
        }
    }

    fn value(&mut self, path: &str, ctx: &str, want: &Value, got: &Value) {
        match (want, got) {
            (Value::Object(w), Value::Object(g)) => self.object(path, ctx, w, g),
            (Value::Array(w), Value::Array(g)) => self.array(path, ctx, w, g),
            _ if same_scalar(ctx, want, got) => {}
            _ => self.push(path.to_string(), DiffKind::Changed),
        }
    }

    fn object(
        &mut self,
        path: &str,
        ctx: &str,
        want: &Map<String, Value>,
        got: &Map<String, Value>,
    ) {
        let metadata = ctx.starts_with("metadata.");
        for (key, w) in want {
            let (p, c) = (push_key(path, key), child_ctx(ctx, key));
            match (got.get(key), w) {
                (Some(g), _) => self.value(&p, &c, w, g),
                (None, _) if is_empty(w) => {}
                // Entry by entry, so each missing one is named.
                (None, Value::Array(w)) => self.array(&p, &c, w, &[]),
                (None, _) => self.push(p, DiffKind::Missing),
            }
        }
        for (key, g) in got.iter().filter(|(k, _)| !want.contains_key(*k)) {
            let added = metadata && ADDED_METADATA.iter().any(|p| key.starts_with(p));
            if added || is_empty(g) || is_default(ctx, key, g) {
                continue;
            }
            let (p, c) = (push_key(path, key), child_ctx(ctx, key));
            match g {
                // Entry by entry, so what others add is passed over.
                Value::Array(g) => self.array(&p, &c, &[], g),
                _ => self.push(p, DiffKind::Extra),
            }
        }
    }

    fn array(&mut self, path: &str, ctx: &str, want: &[Value], got: &[Value]) {
        let key = if ctx.ends_with(".volumeMounts") {
            "mountPath"
        } else {
            "name"
        };
        let got: Vec<&Value> = if ctx == "spec.tolerations" {
            got.iter().filter(|t| !is_default_toleration(t)).collect()
        } else {
            got.iter().collect()
        };
        match (keys(want.iter(), key), keys(got.iter().copied(), key)) {
            (Some(want_keys), Some(got_keys)) => {
                for (name, w) in want_keys.iter().zip(want) {
                    let p = format!("{path}[{name}]");
                    match got_keys.iter().position(|k| k == name) {
                        Some(i) => self.value(&p, ctx, w, got[i]),
                        None => self.push(p, DiffKind::Missing),
                    }
                }
                for (name, g) in got_keys.iter().zip(&got) {
                    if !want_keys.contains(name) && !self.added_entry(ctx, name, g) {
                        self.push(format!("{path}[{name}]"), DiffKind::Extra);
                    }
                }
            }
            _ if want.len() == got.len() => {
                for (i, (w, g)) in want.iter().zip(&got).enumerate() {
                    self.value(&format!("{path}[{i}]"), ctx, w, g);
                }
            }
            _ if want.is_empty() => self.push(path.to_string(), DiffKind::Extra),
            _ if got.is_empty() => self.push(path.to_string(), DiffKind::Missing),
            _ => self.push(path.to_string(), DiffKind::Changed),
        }
    }

    /// An entry someone else added: an ignored sidecar, the token volume
    /// and mount, or a volume only sidecars mount.
    fn added_entry(&self, ctx: &str, name: &str, entry: &Value) -> bool {
        match ctx {
            "spec.containers" => self.rules.sidecars.contains(name),
            "spec.volumes" => is_token_volume(name, entry) || self.sidecar_volumes.contains(name),
            "spec.containers.volumeMounts" => name == TOKEN_MOUNT_PATH,
            _ => false,
        }
    }
}

/// The entries' keys, when every entry has a distinct one.
fn keys<'v>(items: impl Iterator<Item = &'v Value>, key: &str) -> Option<Vec<String>> {
    let mut out = Vec::new();
    for item in items {
        let k = item.get(key)?.as_str()?.to_string();
        if out.contains(&k) {
            return None;
        }
        out.push(k);
    }
    Some(out)
}

fn is_default(ctx: &str, key: &str, value: &Value) -> bool {
    if ctx == "spec" && key == "tolerations" {
        return value
            .as_array()
            .is_some_and(|a| a.iter().all(is_default_toleration));
    }
    DEFAULTED.iter().any(|(c, k)| *c == ctx && *k == key)
}

fn is_default_toleration(t: &Value) -> bool {
    let key = t.get("key").and_then(Value::as_str).unwrap_or_default();
    DEFAULT_TOLERATIONS.contains(&key)
}

/// The projected token volume (`kube-api-access-*`), or the token Secret
/// volume of clusters before 1.21 (`default-token-*`, `<sa>-token-*`).
fn is_token_volume(name: &str, volume: &Value) -> bool {
    let projected_token = volume
        .pointer("/projected/sources")
        .and_then(Value::as_array)
        .is_some_and(|s| s.iter().any(|s| s.get("serviceAccountToken").is_some()));
    name.starts_with("kube-api-access-") && projected_token
        || volume
            .pointer("/secret/secretName")
            .and_then(Value::as_str)
            .is_some_and(|s| s == name && name.contains("-token-"))
}

/// Volumes mounted only by ignored sidecars.
fn sidecar_volumes(spec: Option<&Value>, rules: &Rules) -> BTreeSet<String> {
    let (mut sidecar, mut others) = (BTreeSet::new(), BTreeSet::new());
    let lists = ["containers", "initContainers"];
    let containers = lists
        .iter()
        .filter_map(|l| spec?.get(l)?.as_array())
        .flatten();
    for c in containers {
        let name = c.get("name").and_then(Value::as_str).unwrap_or_default();
        let target = if rules.sidecars.contains(name) {
            &mut sidecar
        } else {
            &mut others
        };
        let mounts = c
            .get("volumeMounts")
            .and_then(Value::as_array)
            .into_iter()
            .flatten();
        target.extend(
            mounts
                .filter_map(|m| m.get("name")?.as_str())
                .map(str::to_string),
        );
    }
    sidecar.difference(&others).cloned().collect()
}

/// Scalars compare as values; resource quantities by what they mean
/// (`0.5` and `500m`), since the API server rewrites them canonically.
fn same_scalar(ctx: &str, want: &Value, got: &Value) -> bool {
    if want == got {
        return true;
    }
    let parent = ctx.rsplit_once('.').map_or("", |(parent, _)| parent);
    let quantity =
        parent.ends_with(".limits") || parent.ends_with(".requests") || parent == "spec.overhead";
    let text = |v: &Value| match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    };
    quantity
        && match (text(want), text(got)) {
            (Some(w), Some(g)) => {
                matches!((canonicalize(&w), canonicalize(&g)), (Ok(a), Ok(b)) if a == b)
            }
            _ => false,
        }
}

#[cfg(test)]
mod tests;
