//! The CLI's library side: the offline `mutate` command (documents in,
//! mutated documents, patches or AdmissionReview responses out, through the
//! same core as the webhook), and the flags of the other subcommands
//! (`serve`'s are the server's own: `server::args::ServeArgs`).

use crate::log_text::bounded;
use crate::lookups::LookupError;
use kserve_injector_core::admission;
use kserve_injector_core::cluster::ClusterSnapshot;
use kserve_injector_core::config::Config;
use kserve_injector_core::constants::ISVC_LABEL;
use kserve_injector_core::reader;
use kserve_injector_core::PodFacts;
use kserve_injector_core::{apply_all, Op};
use kserve_injector_core::{mutate, mutate_template, Inputs, MutationError};
use serde_json::Value;
use std::io::{BufRead, Write};

pub use crate::audit::AuditArgs;
pub use crate::check::CheckArgs;
pub use certs_args::CertsArgs;
pub use default_config_args::DefaultConfigArgs;
pub(crate) use error::{CliError, Denial, InputError};
pub(crate) use live_cluster::LiveCluster;
pub use mutate_args::{MutateArgs, MutateOutput};
pub use policy_args::PolicyArgs;

/// Where `mutate` gets the cluster objects one pod's mutation reads. The
/// objects of `--objects` are a [`ClusterSnapshot`]; a live cluster
/// (`--kubeconfig`) is read by the binary's own source.
pub(crate) trait MutateSource {
    /// The objects `facts` needs (see [`kserve_injector_core::cluster::needed_keys`]);
    /// an error is a lookup that could not be answered.
    fn snapshot(
        &mut self,
        facts: &PodFacts,
        config: &Config,
    ) -> Result<ClusterSnapshot, LookupError>;
}

/// A loaded snapshot answers with exactly the part one pod may read.
impl MutateSource for ClusterSnapshot {
    fn snapshot(
        &mut self,
        facts: &PodFacts,
        config: &Config,
    ) -> Result<ClusterSnapshot, LookupError> {
        Ok(self.restrict(facts, config))
    }
}

/// The inputs for one pod: `inputs` with the objects that pod needs.
fn pod_inputs(
    pod: &Value,
    namespace: &str,
    inputs: &Inputs,
    cluster: &mut dyn MutateSource,
    label: &str,
) -> Result<Inputs, CliError> {
    let facts = PodFacts::from_pod_value(pod, namespace, &inputs.config);
    let objects =
        cluster
            .snapshot(&facts, &inputs.config)
            .map_err(|source| InputError::Lookup {
                label: label.to_string(),
                source,
            })?;
    Ok(inputs.with_cluster(objects))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum OutputFormat {
    #[default]
    Yaml,
    Json,
    Patch,
}

const WORKLOADS: [&str; 5] = [
    "Deployment",
    "StatefulSet",
    "DaemonSet",
    "ReplicaSet",
    "Job",
];

/// Where a kind keeps its pod template.
fn template_pointer(kind: &str) -> Option<&'static str> {
    if WORKLOADS.contains(&kind) {
        Some("/spec/template")
    } else if kind == "CronJob" {
        Some("/spec/jobTemplate/spec/template")
    } else {
        None
    }
}

fn describe(doc: &Value, index: usize) -> String {
    let kind = doc.get("kind").and_then(Value::as_str).unwrap_or("object");
    let name = doc
        .pointer("/metadata/name")
        .or_else(|| doc.pointer("/metadata/generateName"))
        .and_then(Value::as_str);
    match name {
        Some(n) => format!("document {} ({kind} {n})", index + 1),
        None => format!("document {} ({kind})", index + 1),
    }
}

enum Processed {
    Object {
        object: Value,
        /// The recorded operations, with paths from the document's root.
        patch: Vec<Op>,
    },
    /// The response review, and the denial reason when it denies.
    Review(Value, Option<String>),
}

/// What the object asked for that the selected KServe release lacks.
fn log_unsupported(label: &str, lacks: &[kserve_injector_core::Unsupported]) {
    for lack in lacks {
        let (object, lack_text) = (bounded(label), bounded(lack));
        tracing::debug!(%object, kserve_version = %lack.release, "{lack_text}");
    }
}

/// A pod (or pod template) without KServe's label is mutated all the same,
/// but the webhook's objectSelector (manifests/base/webhook.yaml, the
/// chart's default) never sends such a pod to the webhook: a hint on
/// stderr says so, the output unchanged.
fn hint_unselected(pod: &Value, label: &str) {
    let labels = pod.pointer("/metadata/labels");
    if labels.and_then(|l| l.get(ISVC_LABEL)).is_none() {
        eprintln!("kserve-injector: {label}: no {ISVC_LABEL} label, so the webhook's objectSelector never sends this pod to the webhook and a cluster leaves it as it is; the output is what the webhook would make of it with the label");
    }
}

fn mutate_object(
    doc: &Value,
    label: &str,
    namespace: Option<&str>,
    inputs: &Inputs,
    cluster: &mut dyn MutateSource,
) -> Result<Processed, CliError> {
    let kind = doc.get("kind").and_then(Value::as_str).unwrap_or_default();
    let ns = namespace
        .or_else(|| doc.pointer("/metadata/namespace").and_then(Value::as_str))
        .unwrap_or("default");
    let fail = |e: MutationError| match e {
        MutationError::Decode { .. } => InputError::Decode {
            label: label.to_string(),
            source: e,
        }
        .into(),
        MutationError::Inject(e) => CliError::Denied(Denial::Injector(e)),
    };
    if kind == "Pod" {
        let pod_inputs = pod_inputs(doc, ns, inputs, cluster, label)?;
        let m = mutate(doc, ns, &pod_inputs).map_err(fail)?;
        hint_unselected(doc, label);
        log_unsupported(label, &m.unsupported);
        return Ok(Processed::Object {
            object: m.pod,
            patch: m.patch,
        });
    }
    let Some(pointer) = template_pointer(kind) else {
        return Err(InputError::Kind {
            label: label.to_string(),
            kind: kind.to_string(),
        }
        .into());
    };
    let template = doc.pointer(pointer).ok_or_else(|| InputError::NoTemplate {
        label: label.to_string(),
        pointer,
    })?;
    let pod_inputs = pod_inputs(template, ns, inputs, cluster, label)?;
    let m = mutate_template(template, ns, &pod_inputs).map_err(fail)?;
    hint_unselected(template, label);
    log_unsupported(label, &m.unsupported);
    // The template's operations, moved under it: the output is the input
    // with the same operations the webhook would send applied.
    let patch: Vec<Op> = m.patch.into_iter().map(|op| op.under(pointer)).collect();
    let mut object = doc.clone();
    apply_all(&patch, &mut object).map_err(|source| InputError::Patch {
        label: label.to_string(),
        source,
    })?;
    Ok(Processed::Object { object, patch })
}

fn process(
    doc: &Value,
    index: usize,
    namespace: Option<&str>,
    inputs: &Inputs,
    cluster: &mut dyn MutateSource,
) -> Result<Processed, CliError> {
    let label = describe(doc, index);
    match doc.get("kind").and_then(Value::as_str) {
        Some("AdmissionReview") => {
            let body = serde_json::to_vec(doc).map_err(|source| InputError::Json {
                label: label.clone(),
                source,
            })?;
            let pod = doc.pointer("/request/object").unwrap_or(&Value::Null);
            let ns = doc.pointer("/request/namespace").and_then(Value::as_str);
            let pod_inputs = pod_inputs(pod, ns.unwrap_or_default(), inputs, cluster, &label)?;
            let reviewed = admission::prepare(&body, admission::Mode::Mutate)
                .and_then(|prepared| prepared.answer(&pod_inputs))
                .map_err(|source| InputError::Review {
                    label: label.clone(),
                    source,
                })?;
            let response = serde_json::from_slice(&reviewed.body).map_err(InputError::Answer)?;
            Ok(Processed::Review(response, reviewed.denial))
        }
        Some(kind) if kind == "List" || kind.ends_with("List") => {
            let items =
                doc.get("items")
                    .and_then(Value::as_array)
                    .ok_or_else(|| InputError::NoItems {
                        label: label.clone(),
                    })?;
            let mut out = doc.clone();
            let mut patch = Vec::new();
            for (i, item) in items.iter().enumerate() {
                let item_label = format!("{label} item {}", i + 1);
                let Processed::Object {
                    object,
                    patch: item_patch,
                } = mutate_object(item, &item_label, namespace, inputs, cluster)?
                else {
                    return Err(CliError::from(InputError::ReviewInList {
                        label: item_label,
                    }));
                };
                let prefix = format!("/items/{i}");
                patch.extend(item_patch.into_iter().map(|op| op.under(&prefix)));
                out["items"][i] = object;
            }
            Ok(Processed::Object { object: out, patch })
        }
        _ => mutate_object(doc, &label, namespace, inputs, cluster),
    }
}

/// [`mutate_stream_within`] the default [`reader::Budget`].
#[cfg(test)]
pub(crate) fn mutate_stream(
    input: &mut impl BufRead,
    out: &mut impl Write,
    format: OutputFormat,
    namespace: Option<&str>,
    inputs: &Inputs,
    cluster: &mut dyn MutateSource,
) -> Result<(), CliError> {
    let budget = reader::Budget::default();
    mutate_stream_within(input, out, format, namespace, inputs, cluster, budget)
}

/// Runs `mutate` over every document of `input`, one document at a time,
/// writing each result to `out` as soon as it is ready (so memory follows the
/// largest document, not the input). Stops at the first document that fails;
/// the documents before it have been written. A denied AdmissionReview is
/// written (it is the answer) and then reported as [`CliError::Denied`].
/// Each pod's cluster objects come from `cluster`; the input is read within
/// `budget`.
pub(crate) fn mutate_stream_within(
    input: &mut impl BufRead,
    out: &mut impl Write,
    format: OutputFormat,
    namespace: Option<&str>,
    inputs: &Inputs,
    cluster: &mut dyn MutateSource,
    budget: reader::Budget,
) -> Result<(), CliError> {
    let mut index = 0;
    for doc in reader::documents_within(input, budget).map_err(read_error)? {
        let doc = doc.map_err(read_error)?;
        let processed = process(&doc, index, namespace, inputs, cluster)?;
        let label = describe(&doc, index);
        drop(doc);
        if index > 0 && format == OutputFormat::Yaml {
            out.write_all(b"---\n").map_err(write_error)?;
        }
        let denial = match processed {
            Processed::Review(response, denial) => {
                write_json(out, &response)?;
                denial
            }
            Processed::Object { object, patch } => {
                match format {
                    OutputFormat::Yaml => {
                        reader::write_yaml(out, &object).map_err(|e| match e {
                            reader::WriteError::Io(e) => write_error(e),
                            yaml => InputError::Yaml(yaml).into(),
                        })?
                    }
                    OutputFormat::Json => write_json(out, &object)?,
                    OutputFormat::Patch => write_json(out, &patch)?,
                }
                None
            }
        };
        out.flush().map_err(write_error)?;
        if let Some(reason) = denial {
            return Err(CliError::Denied(Denial::Review { label, reason }));
        }
        index += 1;
    }
    if index == 0 {
        return Err(InputError::Empty.into());
    }
    Ok(())
}

/// [`mutate_stream`] over text, for the unit tests; the cluster objects are
/// `inputs.cluster`.
#[cfg(test)]
pub(crate) fn run_mutate(
    text: &str,
    format: OutputFormat,
    namespace: Option<&str>,
    inputs: &Inputs,
) -> Result<String, CliError> {
    let mut out = Vec::new();
    let mut cluster = inputs.cluster.clone();
    mutate_stream(
        &mut text.as_bytes(),
        &mut out,
        format,
        namespace,
        inputs,
        &mut cluster,
    )?;
    Ok(String::from_utf8(out).expect("mutate writes UTF-8"))
}

fn read_error(e: reader::ReadError) -> CliError {
    InputError::Read(e).into()
}

fn write_error(e: std::io::Error) -> CliError {
    CliError::from_write(e)
}

fn write_json(out: &mut impl Write, value: &impl serde::Serialize) -> Result<(), CliError> {
    serde_json::to_writer_pretty(&mut *out, value).map_err(|e| match e.io_error_kind() {
        Some(_) => write_error(e.into()),
        None => InputError::Unwritable(e).into(),
    })?;
    out.write_all(b"\n").map_err(write_error)
}

mod certs_args;
pub mod commands;
mod compare;
mod default_config_args;
mod error;
mod live_cluster;
mod mutate_args;
mod policy_args;

#[cfg(test)]
mod tests;
