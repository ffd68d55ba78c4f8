//! The core function both the CLI and the webhook call: a raw pod in, the
//! mutated pod and the JSON Patch that produces it out.

use crate::config::Config;
use crate::constants::{DEFAULT_CONTROLLER_NAMESPACE, ISVC_LABEL};
use crate::injectors::{self, InjectError, InjectorOutcome};
use crate::pod::PodDoc;
use k8s_openapi::api::core::v1::PodSpec;
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;

/// Data KServe's mutator reads from the API server. Lookups arrive here as
/// plain data (filled by an informer in the server, or by files in tests);
/// an injector never performs I/O. What is absent behaves as "not found".
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterData {
    /// Secret data by `namespace/name`, for the storage-spec credentials.
    pub secrets: BTreeMap<String, BTreeMap<String, String>>,
}

impl ClusterData {
    pub fn secret(&self, namespace: &str, name: &str) -> Option<&BTreeMap<String, String>> {
        self.secrets.get(&format!("{namespace}/{name}"))
    }
}

/// Everything a mutation depends on besides the pod.
#[derive(Debug, Clone)]
pub struct Env {
    pub config: Config,
    /// The namespace KServe's controller runs in (its `POD_NAMESPACE`).
    pub controller_namespace: String,
    pub cluster: ClusterData,
}

impl Env {
    pub fn new(config: Config) -> Self {
        Self {
            config,
            controller_namespace: DEFAULT_CONTROLLER_NAMESPACE.to_string(),
            cluster: ClusterData::default(),
        }
    }
}

impl Default for Env {
    fn default() -> Self {
        Self::new(Config::default())
    }
}

#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum MutationError {
    /// The object is not a decodable Pod; `path` names the offending field.
    #[error("cannot decode pod: {path}: {message}")]
    Decode { path: String, message: String },
    /// An injector refused the pod; the message is KServe's.
    #[error(transparent)]
    Inject(#[from] InjectError),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Mutation {
    pub pod: Value,
    pub patch: json_patch::Patch,
    /// Per injector that ran: whether it changed the pod.
    pub outcomes: Vec<(&'static str, InjectorOutcome)>,
}

/// Only the metadata fields the mutator reads; `managedFields` and anything
/// else stay raw and unread.
#[derive(Deserialize)]
#[allow(dead_code)] // Fields exist to be type-checked, not read.
struct MetadataView {
    name: Option<String>,
    #[serde(rename = "generateName")]
    generate_name: Option<String>,
    namespace: Option<String>,
    labels: Option<BTreeMap<String, String>>,
    annotations: Option<BTreeMap<String, String>>,
}

#[derive(Deserialize)]
#[allow(dead_code)] // Fields exist to be type-checked, not read.
struct PodView {
    metadata: Option<MetadataView>,
    spec: Option<PodSpec>,
}

/// Checks the fields the injectors read against the Pod schema, so a
/// malformed pod is refused with the path of its first bad field.
fn validate(pod: &Value) -> Result<(), MutationError> {
    if !pod.is_object() {
        return Err(MutationError::Decode {
            path: ".".into(),
            message: "a Pod must be a JSON object".into(),
        });
    }
    // Path tracking allocates at every field, so it runs only to explain a failure.
    if PodView::deserialize(pod).is_ok() {
        return Ok(());
    }
    match serde_path_to_error::deserialize::<_, PodView>(pod) {
        Ok(_) => Ok(()),
        Err(e) => Err(MutationError::Decode {
            path: e.path().to_string(),
            message: e.inner().to_string(),
        }),
    }
}

/// Mutates a copy of `pod` as KServe's pod mutator would for a CREATE in
/// `namespace`, and returns it with the patch that turns `pod` into it.
/// A pod without the InferenceService label comes back unchanged.
pub fn mutate(pod: &Value, namespace: &str, env: &Env) -> Result<Mutation, MutationError> {
    mutate_inner(pod, namespace, true, env)
}

/// The same for a workload's pod template, whose namespace is the
/// workload's: the template itself does not get a `metadata.namespace`.
pub fn mutate_template(
    template: &Value,
    namespace: &str,
    env: &Env,
) -> Result<Mutation, MutationError> {
    mutate_inner(template, namespace, false, env)
}

fn mutate_inner(
    pod: &Value,
    namespace: &str,
    write_namespace: bool,
    env: &Env,
) -> Result<Mutation, MutationError> {
    validate(pod)?;
    let mut mutated = pod.clone();
    let mut doc = PodDoc::in_namespace(&mut mutated, namespace);
    if doc.label(ISVC_LABEL).is_none() {
        return Ok(Mutation {
            pod: mutated,
            patch: json_patch::Patch::default(),
            outcomes: Vec::new(),
        });
    }
    // Go's encoder drops an empty namespace, so KServe never writes one.
    if write_namespace && !namespace.is_empty() {
        doc.set_namespace(namespace);
    }
    let outcomes = injectors::run_all(&mut doc, env)?;
    let changed = doc.changes() > 0;
    let patch = if changed {
        crate::patch::diff(pod, &mutated)
    } else {
        json_patch::Patch::default()
    };
    Ok(Mutation {
        pod: mutated,
        patch,
        outcomes,
    })
}

#[cfg(test)]
mod tests;
