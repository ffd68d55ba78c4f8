//! The lookup-free share of the injection as a Kubernetes
//! MutatingAdmissionPolicy (`admissionregistration.k8s.io/v1`, served by
//! kube-apiserver 1.36): CEL JSON Patch expressions the API server
//! evaluates itself, so the pods they take need no webhook call.
//!
//! Nothing here restates a rule of KServe's mutator. The policy is read off
//! the core: [`render`] runs [`crate::mutate`] on canonical pods of the
//! share (an InferenceService pod carrying none of the annotations any
//! injector reads), translates the operations it records into CEL
//! `JSONPatch` literals, and probes the same pod with each container the
//! injectors look up by name: a probe that changes the patch (or is denied)
//! adds a match condition that sends such pods to the webhook. Whatever the
//! translation cannot write exactly (a value other than a string or a map
//! of strings) fails the render rather than approximating. docs/policy.md
//! says which pods go where and why.

use crate::constants::*;
use crate::inputs::Inputs;
use crate::mutation::{mutate, MutationError};
use crate::pod::Op;
use serde_json::{json, Map, Value};

/// Why no policy could be written for these inputs.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// The canonical pod of the share is denied or cannot be mutated.
    #[error("the canonical {class} pod cannot be mutated: {source}")]
    Canonical {
        class: &'static str,
        #[source]
        source: MutationError,
    },
    /// The canonical pod's patch holds what the CEL translation does not
    /// write exactly.
    #[error("the canonical {class} pod's patch cannot be written in CEL: {op} {path}: {reason}")]
    Untranslatable {
        class: &'static str,
        op: &'static str,
        path: String,
        reason: &'static str,
    },
}

/// The policy and its binding, each a whole object ready to apply.
#[derive(Debug, Clone)]
pub struct Policy {
    /// The MutatingAdmissionPolicy.
    pub policy: Value,
    /// The MutatingAdmissionPolicyBinding that puts it in force.
    pub binding: Value,
}

/// The policy's and the binding's name.
const NAME: &str = "kserve-injector";

/// Every annotation an injector, a cluster rule or the per-pod inputs read
/// (by its constant). A pod carrying any of them goes to the webhook: with
/// one of them present the core may add containers, read the cluster, or
/// deny, none of which the policy writes. `the_trigger_list_names_every_annotation_constant`
/// fails when `constants.rs` gains an annotation this list does not name.
macro_rules! names {
    ($($name:ident),* $(,)?) => { &[$((stringify!($name), $name)),*] };
}
const TRIGGERS: &[(&str, &str)] = names![
    SOURCE_URI_ANNOTATION,
    SECURITY_PROFILE_ANNOTATION,
    INIT_CPU_REQUEST_ANNOTATION,
    INIT_CPU_LIMIT_ANNOTATION,
    INIT_MEMORY_REQUEST_ANNOTATION,
    INIT_MEMORY_LIMIT_ANNOTATION,
    STORAGE_SPEC_ANNOTATION,
    STORAGE_SPEC_PARAM_ANNOTATION,
    STORAGE_SPEC_KEY_ANNOTATION,
    READONLY_ANNOTATION,
    LOCAL_MODEL_SOURCE_URI_ANNOTATION,
    LOCAL_MODEL_PVC_NAME_ANNOTATION,
    CONFIDENTIAL_ENABLED_ANNOTATION,
    CONFIDENTIAL_RESOURCE_ID_ANNOTATION,
    AGENT_ANNOTATION,
    CONFIG_VOLUME_NAME_ANNOTATION,
    CONFIG_MOUNT_PATH_ANNOTATION,
    MODEL_DIR_ANNOTATION,
    BATCHER_ANNOTATION,
    BATCHER_MAX_BATCH_SIZE_ANNOTATION,
    BATCHER_MAX_LATENCY_ANNOTATION,
    LOGGER_ANNOTATION,
    LOGGER_SINK_URL_ANNOTATION,
    LOGGER_MODE_ANNOTATION,
    LOGGER_METADATA_HEADERS_ANNOTATION,
    LOGGER_METADATA_ANNOTATIONS_ANNOTATION,
    GKE_ACCELERATOR_ANNOTATION,
    STORAGE_INITIALIZER_UID_ANNOTATION,
    ISTIO_INTERCEPTION_MODE_ANNOTATION,
    ISTIO_STATUS_ANNOTATION,
    ENABLE_METRIC_AGGREGATION_ANNOTATION,
    ENABLE_PROMETHEUS_SCRAPING_ANNOTATION,
    KSERVE_PROMETHEUS_PORT_ANNOTATION,
    KSERVE_PROMETHEUS_PATH_ANNOTATION,
    MODELCAR_MODE_ANNOTATION,
];

/// Annotations the core writes and never reads: a pod carrying them is
/// still in the share (the policy's `add` replaces them as the webhook's
/// does).
#[cfg(test)]
const WRITTEN_ONLY: &[(&str, &str)] =
    names![PROMETHEUS_PORT_ANNOTATION, PROMETHEUS_PATH_ANNOTATION];

/// A list of the pod's containers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Containers {
    Regular,
    Init,
}

impl Containers {
    fn key(self) -> &'static str {
        match self {
            Containers::Regular => "containers",
            Containers::Init => "initContainers",
        }
    }
}

/// The containers the injectors look up by name, each probed beside the
/// canonical pod's model server.
const PROBES: &[(Containers, &str)] = &[
    (Containers::Regular, QUEUE_PROXY_CONTAINER),
    (Containers::Regular, AGENT_CONTAINER),
    (Containers::Regular, MODELCAR_CONTAINER),
    (Containers::Regular, TRANSFORMER_CONTAINER),
    (Containers::Regular, WORKER_CONTAINER),
    (Containers::Init, STORAGE_INITIALIZER_CONTAINER),
    (Containers::Init, ISTIO_INIT_CONTAINER),
    (Containers::Init, MODELCAR_CONTAINER),
    (Containers::Init, MODELCAR_INIT_CONTAINER),
];

/// The namespace the canonical pods are mutated in. The namespace the
/// mutator writes is left out of the policy: the API server sets
/// `metadata.namespace` from the request before admission, so the
/// webhook's operation writes what is there already.
const CANONICAL_NAMESPACE: &str = "policy-canonical";
const NAMESPACE_PATH: &str = "/metadata/namespace";

/// An annotation no rule reads, so the canonical pod has an annotations
/// map in the branch that needs one.
const UNREAD_ANNOTATION: &str = "policy.kserve-injector.io/canonical";

/// What the policy decided: the match conditions (name, CEL) and the two
/// patches, for pods with and without an annotations map.
#[derive(Debug, Clone)]
struct Share {
    /// Containers whose presence sends the pod to the webhook.
    excluded: Vec<(Containers, &'static str)>,
    with_annotations: Vec<Op>,
    without_annotations: Vec<Op>,
}

fn canonical(annotations: bool) -> Value {
    let mut pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "canonical", "labels": {ISVC_LABEL: "canonical"}},
        "spec": {"containers": [{"name": KSERVE_CONTAINER, "image": "canonical"}]}
    });
    if annotations {
        pod["metadata"]["annotations"] = json!({UNREAD_ANNOTATION: "x"});
    }
    pod
}

/// The core's patch for `pod`, without the namespace the API server has set.
fn patch(pod: &Value, inputs: &Inputs) -> Result<Vec<Op>, MutationError> {
    let mutation = mutate(pod, CANONICAL_NAMESPACE, inputs)?;
    Ok((mutation.patch.into_iter())
        .filter(|op| op.path != NAMESPACE_PATH)
        .collect())
}

/// The same operations (`Op` compares only in tests).
fn same(a: &[Op], b: &[Op]) -> bool {
    let key = |op: &Op| (op.name(), op.path.clone(), op.value.clone());
    a.iter().map(key).eq(b.iter().map(key))
}

fn with_container(mut pod: Value, list: Containers, name: &str) -> Value {
    let entry = json!({"name": name, "image": "probe"});
    match pod["spec"][list.key()].as_array_mut() {
        Some(items) => items.push(entry),
        None => pod["spec"][list.key()] = json!([entry]),
    }
    pod
}

fn share(inputs: &Inputs) -> Result<Share, PolicyError> {
    let canonical_error = |class| move |source| PolicyError::Canonical { class, source };
    let with_annotations = patch(&canonical(true), inputs).map_err(canonical_error("annotated"))?;
    let without_annotations =
        patch(&canonical(false), inputs).map_err(canonical_error("unannotated"))?;
    let mut excluded = Vec::new();
    for &(list, name) in PROBES {
        // Denied, or patched otherwise: the webhook's.
        let probed = patch(&with_container(canonical(true), list, name), inputs);
        if !probed.is_ok_and(|ops| same(&ops, &with_annotations)) {
            excluded.push((list, name));
        }
    }
    Ok(Share {
        excluded,
        with_annotations,
        without_annotations,
    })
}

/// A JSON value as a CEL literal: strings (serde_json's escapes are all
/// CEL escapes, and it escapes no `/`) and maps of them. Anything else
/// would need a typed `Object.…` value, which this translation does not
/// write.
fn cel_literal(value: &Value) -> Result<String, &'static str> {
    match value {
        Value::String(_) => Ok(value.to_string()),
        Value::Object(map) => {
            let entries: Result<Vec<String>, _> = (map.iter())
                .map(|(k, v)| match v {
                    Value::String(_) => Ok(format!("{}: {v}", Value::from(k.as_str()))),
                    _ => Err("a map value that is not a string"),
                })
                .collect();
            Ok(format!("{{{}}}", entries?.join(", ")))
        }
        _ => Err("a value that is neither a string nor a map of strings"),
    }
}

fn cel_patch(class: &'static str, ops: &[Op]) -> Result<String, PolicyError> {
    let mut out = Vec::with_capacity(ops.len());
    for op in ops {
        let untranslatable = |reason| PolicyError::Untranslatable {
            class,
            op: op.name(),
            path: op.path.clone(),
            reason,
        };
        let value: Value = serde_json::from_str(&op.value)
            .map_err(|_| untranslatable("a value that is not JSON"))?;
        let value = cel_literal(&value).map_err(untranslatable)?;
        out.push(format!(
            "JSONPatch{{op: \"{}\", path: {}, value: {value}}}",
            op.name(),
            Value::from(op.path.as_str())
        ));
    }
    Ok(format!("[{}]", out.join(", ")))
}

#[cfg(test)]
fn has_annotations(pod: &Value) -> bool {
    pod["metadata"]["annotations"]
        .as_object()
        .is_some_and(|m| !m.is_empty())
}

impl Share {
    /// The match conditions, as (name, CEL expression).
    fn conditions(&self) -> Vec<(String, String)> {
        let keys: Vec<String> = TRIGGERS
            .iter()
            .map(|(_, k)| Value::from(*k).to_string())
            .collect();
        let mut out = vec![
            (
                "inference-service-pod".to_string(),
                format!(
                    "has(object.metadata.labels) && {} in object.metadata.labels",
                    Value::from(ISVC_LABEL)
                ),
            ),
            (
                "no-annotation-an-injector-reads".to_string(),
                format!(
                    "!has(object.metadata.annotations) || ![{}].exists(k, k in object.metadata.annotations)",
                    keys.join(", ")
                ),
            ),
        ];
        for &(list, name) in &self.excluded {
            let key = list.key();
            let suffix = match list {
                Containers::Regular => "container",
                Containers::Init => "init-container",
            };
            out.push((
                format!("no-{name}-{suffix}"),
                format!(
                    "!has(object.spec.{key}) || !object.spec.{key}.exists(c, c.name == {})",
                    Value::from(name)
                ),
            ));
        }
        out
    }

    /// The conditions evaluated on a pod as the API server holds it: what
    /// the tests hold the CEL to.
    #[cfg(test)]
    fn takes(&self, pod: &Value) -> bool {
        let labelled = pod["metadata"]["labels"].get(ISVC_LABEL).is_some();
        let annotations = pod["metadata"]["annotations"].as_object();
        let triggered =
            annotations.is_some_and(|m| TRIGGERS.iter().any(|(_, k)| m.contains_key(*k)));
        let named = |list: Containers, name: &str| {
            pod["spec"][list.key()]
                .as_array()
                .is_some_and(|l| l.iter().any(|c| c["name"] == name))
        };
        let excluded = self.excluded.iter().any(|&(list, name)| named(list, name));
        labelled && !triggered && !excluded
    }

    /// The operations the policy applies to `pod` (one in its share).
    #[cfg(test)]
    fn ops_for(&self, pod: &Value) -> &[Op] {
        if has_annotations(pod) {
            &self.with_annotations
        } else {
            &self.without_annotations
        }
    }

    fn expression(&self) -> Result<String, PolicyError> {
        let with = cel_patch("annotated", &self.with_annotations)?;
        let without = cel_patch("unannotated", &self.without_annotations)?;
        // `has` is false for an empty map, as for none: the API server
        // drops an empty `annotations` before admission.
        Ok(format!(
            "has(object.metadata.annotations) ?\n  {with} :\n  {without}"
        ))
    }
}

/// The namespaces the webhook is never called for
/// (`manifests/base/webhook.yaml`): the control plane's, cert-manager's and
/// the controller's.
fn namespace_selector() -> Value {
    json!({"matchExpressions": [
        {"key": "control-plane", "operator": "DoesNotExist"},
        {"key": "kubernetes.io/metadata.name", "operator": "NotIn",
         "values": ["kube-system", "kube-public", "kube-node-lease", "cert-manager", DEFAULT_CONTROLLER_NAMESPACE]}
    ]})
}

/// The MutatingAdmissionPolicy and its binding for `inputs`: the share's
/// match conditions and its CEL JSON Patch, read off the core's own
/// mutation of the canonical pods.
pub fn render(inputs: &Inputs) -> Result<Policy, PolicyError> {
    let share = share(inputs)?;
    let conditions: Vec<Value> = (share.conditions().into_iter())
        .map(|(name, expression)| json!({"name": name, "expression": expression}))
        .collect();
    let labels = json!({"app.kubernetes.io/name": NAME});
    let mut spec = Map::new();
    spec.insert(
        "matchConstraints".into(),
        json!({
            "namespaceSelector": namespace_selector(),
            "objectSelector": {"matchExpressions": [{"key": ISVC_LABEL, "operator": "Exists"}]},
            "resourceRules": [{
                "apiGroups": [""], "apiVersions": ["v1"],
                "operations": ["CREATE"], "resources": ["pods"]
            }]
        }),
    );
    spec.insert("matchConditions".into(), Value::Array(conditions));
    spec.insert(
        "mutations".into(),
        json!([{"patchType": "JSONPatch", "jsonPatch": {"expression": share.expression()?}}]),
    );
    // As the webhook: a pod the policy cannot mutate is not created
    // unmutated, and a later mutator's change is seen again (the policy's
    // own patch takes the pod out of its share, so it adds nothing twice).
    spec.insert("failurePolicy".into(), json!("Fail"));
    spec.insert("reinvocationPolicy".into(), json!("IfNeeded"));
    Ok(Policy {
        policy: json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingAdmissionPolicy",
            "metadata": {"name": NAME, "labels": labels},
            "spec": spec,
        }),
        binding: json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingAdmissionPolicyBinding",
            "metadata": {"name": NAME, "labels": labels},
            "spec": {"policyName": NAME},
        }),
    })
}

#[cfg(test)]
mod tests;
