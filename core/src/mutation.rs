//! The core function both the CLI and the webhook call: the borrowed view of
//! a pod in, the patch operations the injectors' edits make (and which
//! injector changed something) out. [`edit`] is what `admission::review`
//! runs on the request body; [`mutate`] wraps it for pods held as JSON trees
//! (the CLI's documents), adds the CLI's whole-pod schema check, and returns
//! the input with the patch applied, so both paths share one source of truth.

use crate::constants::ISVC_LABEL;
use crate::injectors::modelcar::{self, ShapeChoice};
use crate::injectors::{self, InjectError, InjectorOutcome};
use crate::pod::{apply_all, Op, WorkingSet};
use crate::view::{self, PodView, ViewError};
use k8s_openapi::api::core::v1::PodSpec;
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;

pub(crate) use crate::inputs::Inputs;

#[derive(Debug, thiserror::Error)]
#[cfg_attr(any(test, feature = "oracle"), derive(PartialEq))]
pub enum MutationError {
    /// The object is not a decodable Pod; `path` names the offending field.
    #[error("cannot decode pod: {path}: {message}")]
    Decode {
        path: String,
        message: String,
        #[source]
        source: Option<crate::shared_error::SharedError<serde_json::Error>>,
    },
    /// An injector refused the pod; the message is KServe's.
    #[error(transparent)]
    Inject(#[from] InjectError),
}

impl From<ViewError> for MutationError {
    fn from(e: ViewError) -> Self {
        MutationError::Decode {
            path: e.path,
            message: e.message,
            source: e.source,
        }
    }
}

/// What the injectors did to one pod.
#[derive(Debug, Clone, Default)]
#[cfg_attr(any(test, feature = "oracle"), derive(PartialEq))]
#[cfg_attr(not(feature = "oracle"), allow(unreachable_pub))] // `internals` (lib.rs).
pub struct Edits {
    /// RFC 6902 operations on the pod, in the order they apply, each value
    /// already JSON text.
    pub ops: Vec<Op>,
    /// Per injector that ran: whether it changed the pod.
    pub outcomes: Vec<(&'static str, InjectorOutcome)>,
    /// Per operation, the injector it comes from ([`injectors::MUTATOR`]
    /// for the namespace the mutator itself writes).
    pub sources: Vec<&'static str>,
    /// The modelcar's shape and why, when the pod gets a modelcar.
    pub modelcar_shape: Option<ShapeChoice>,
    /// What the pod asks for that the selected KServe release lacks.
    pub unsupported: Vec<Unsupported>,
}

/// The API server's limit on an object's annotations, keys and values
/// together (`TotalAnnotationSizeLimitB` in apimachinery's validation). A
/// pod over it is denied before any injector runs: the API server would
/// refuse it after admission anyway, and the injectors copy annotations
/// (the storage URI into the modelcar and its init container) into the
/// patch, so a review's memory stays bounded whatever the pod. A pod the
/// injectors' own annotations (the metrics injector's two) take over it is
/// denied too: the API server would refuse the injected pod, and a
/// reinvocation would deny what the first review let through.
pub(crate) const MAX_ANNOTATION_BYTES: usize = 256 * 1024;

/// Runs the injectors on the view of a pod created in `namespace`. A pod
/// without the InferenceService label gets no edits, before any other work.
/// `write_namespace` is false for a workload's pod template, which does not
/// get a `metadata.namespace` (the injectors still see the namespace).
#[cfg_attr(not(feature = "oracle"), allow(unreachable_pub))] // `internals` (lib.rs).
pub fn edit(
    pod: PodView<'_>,
    namespace: &str,
    write_namespace: bool,
    inputs: &Inputs,
) -> Result<Edits, InjectError> {
    if pod.label(ISVC_LABEL).is_none() {
        return Ok(Edits::default());
    }
    let annotation_bytes = pod.annotation_bytes();
    if annotation_bytes > MAX_ANNOTATION_BYTES {
        let message = format!(
            "metadata.annotations: {annotation_bytes} bytes in all, more than the \
             {MAX_ANNOTATION_BYTES} the API server accepts on an object (it would refuse this pod \
             after admission)"
        );
        return Err(InjectError::new(injectors::MUTATOR, message));
    }
    let mut doc = WorkingSet::in_namespace(pod, namespace);
    // Go's encoder drops an empty namespace, so KServe never writes one.
    if write_namespace && !namespace.is_empty() {
        doc.set_namespace(namespace);
    }
    let plan = modelcar::Plan::of(&doc, inputs);
    let unsupported = unsupported(&doc, inputs.config.release);
    let before = doc.changes();
    let runs = injectors::run_steps(&mut doc, inputs, &plan)?;
    let injected_bytes = doc.annotation_bytes();
    if injected_bytes > MAX_ANNOTATION_BYTES {
        let message = format!(
            "metadata.annotations: {injected_bytes} bytes in all once injected ({annotation_bytes} \
             in the pod), more than the {MAX_ANNOTATION_BYTES} the API server accepts on an object \
             (it would refuse the injected pod after admission)"
        );
        return Err(InjectError::new(injectors::MUTATOR, message));
    }
    let mut ends = Vec::with_capacity(runs.len() + 1);
    ends.push((injectors::MUTATOR, before));
    ends.extend(runs.iter().map(|r| (r.name, r.changes_after)));
    let (ops, sources) = doc.into_sourced_patch(&ends);
    let outcomes = runs.into_iter().map(|r| (r.name, r.outcome)).collect();
    Ok(Edits {
        ops,
        outcomes,
        sources,
        modelcar_shape: plan.shape(),
        unsupported,
    })
}

#[derive(Debug)]
pub struct Mutation {
    pub pod: Value,
    /// RFC 6902 operations, in the order they apply.
    pub patch: Vec<Op>,
    /// Per injector that ran: whether it changed the pod.
    pub outcomes: Vec<(&'static str, InjectorOutcome)>,
    /// What the pod asks for that the selected KServe release lacks.
    pub unsupported: Vec<Unsupported>,
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
struct WholePod {
    metadata: Option<MetadataView>,
    spec: Option<PodSpec>,
}

/// The CLI's check: the whole pod against the Pod schema, so a hand-written
/// file is refused with the path of its first bad field, even in a field no
/// injector reads. (The webhook checks only what the injectors read.)
fn validate(raw: &str) -> Result<(), MutationError> {
    // Path tracking allocates at every field, so it runs only to explain a failure.
    if serde_json::from_str::<WholePod>(raw).is_ok() {
        return Ok(());
    }
    let mut de = serde_json::Deserializer::from_str(raw);
    match serde_path_to_error::deserialize::<_, WholePod>(&mut de) {
        Ok(_) => Ok(()),
        Err(e) => Err(MutationError::Decode {
            path: e.path().to_string(),
            message: view::message_of(e.inner()),
            source: Some(e.into_inner().into()),
        }),
    }
}

/// Mutates `pod` as KServe's pod mutator would for a CREATE in `namespace`:
/// the patch, and the pod with the patch applied. A pod without the
/// InferenceService label comes back unchanged.
pub fn mutate(pod: &Value, namespace: &str, inputs: &Inputs) -> Result<Mutation, MutationError> {
    mutate_inner(pod, namespace, true, inputs)
}

/// The same for a workload's pod template, whose namespace is the
/// workload's: the template itself does not get a `metadata.namespace`.
pub fn mutate_template(
    template: &Value,
    namespace: &str,
    inputs: &Inputs,
) -> Result<Mutation, MutationError> {
    mutate_inner(template, namespace, false, inputs)
}

fn mutate_inner(
    pod: &Value,
    namespace: &str,
    write_namespace: bool,
    inputs: &Inputs,
) -> Result<Mutation, MutationError> {
    // The pod is read from its JSON text, as the webhook reads a request, so
    // both paths decode (and explain a bad field) the same way.
    let raw = api_decoding::quantities_as_text(pod).to_string();
    // The view first: its caps refuse a hostile pod before the whole-pod
    // check decodes every field of it.
    let view = view::pod_from_str(&raw)?;
    validate(&raw)?;
    let edits = edit(view, namespace, write_namespace, inputs)?;
    let Edits {
        ops,
        outcomes,
        unsupported,
        ..
    } = edits;
    let mut mutated = pod.clone();
    apply_all(&ops, &mut mutated).map_err(|e| {
        // Our own operations on the pod they were made for: a bug if it fails.
        InjectError::caused_by(
            "patch",
            format!("internal error: the patch does not apply: {e}"),
            e,
        )
    })?;
    Ok(Mutation {
        pod: mutated,
        patch: ops,
        outcomes,
        unsupported,
    })
}

mod api_decoding;
mod unsupported;

pub(crate) use unsupported::unsupported;
pub use unsupported::Unsupported;

#[cfg(test)]
mod tests;
