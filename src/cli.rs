//! The offline `mutate` command: documents in, mutated documents (or patches,
//! or AdmissionReview responses) out, through the same core as the webhook.

use crate::admission;
use crate::mutation::{mutate, mutate_template, Env, MutationError};
use serde::Deserialize;
use serde_json::Value;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OutputFormat {
    #[default]
    Yaml,
    Json,
    Patch,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CliError {
    /// Unreadable input (exit code 2).
    #[error("{0}")]
    Input(String),
    /// KServe's mutator would deny this pod (exit code 1).
    #[error("{0}")]
    Denied(String),
}

impl CliError {
    pub fn exit_code(&self) -> i32 {
        match self {
            CliError::Input(_) => 2,
            CliError::Denied(_) => 1,
        }
    }
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

/// Splits YAML or JSON text into documents, skipping empty ones.
pub fn parse_documents(text: &str) -> Result<Vec<Value>, CliError> {
    let mut docs = Vec::new();
    for (i, de) in serde_yaml::Deserializer::from_str(text).enumerate() {
        let doc = Value::deserialize(de).map_err(|e| {
            CliError::Input(format!("document {}: not valid YAML or JSON: {e}", i + 1))
        })?;
        if !doc.is_null() {
            docs.push(doc);
        }
    }
    if docs.is_empty() {
        return Err(CliError::Input("input holds no document".into()));
    }
    Ok(docs)
}

enum Processed {
    Object {
        object: Value,
        patch: json_patch::Patch,
    },
    Review(Value),
}

fn mutate_object(
    doc: &Value,
    label: &str,
    namespace: Option<&str>,
    env: &Env,
) -> Result<Processed, CliError> {
    let kind = doc.get("kind").and_then(Value::as_str).unwrap_or_default();
    let ns = namespace
        .or_else(|| doc.pointer("/metadata/namespace").and_then(Value::as_str))
        .unwrap_or("default");
    let fail = |e: MutationError| match e {
        MutationError::Decode { .. } => CliError::Input(format!("{label}: {e}")),
        MutationError::Inject(e) => CliError::Denied(e.message),
    };
    if kind == "Pod" {
        let m = mutate(doc, ns, env).map_err(fail)?;
        return Ok(Processed::Object {
            object: m.pod,
            patch: m.patch,
        });
    }
    let Some(pointer) = template_pointer(kind) else {
        return Err(CliError::Input(format!(
            "{label}: kind {kind:?} is not a Pod, a workload with a pod template, a List or an AdmissionReview"
        )));
    };
    let template = doc
        .pointer(pointer)
        .ok_or_else(|| CliError::Input(format!("{label}: no pod template at {pointer}")))?;
    let m = mutate_template(template, ns, env).map_err(fail)?;
    let mut object = doc.clone();
    if let Some(slot) = object.pointer_mut(pointer) {
        *slot = m.pod;
    }
    let patch = crate::patch::diff(doc, &object);
    Ok(Processed::Object { object, patch })
}

fn process(
    doc: &Value,
    index: usize,
    namespace: Option<&str>,
    env: &Env,
) -> Result<Processed, CliError> {
    let label = describe(doc, index);
    match doc.get("kind").and_then(Value::as_str) {
        Some("AdmissionReview") => {
            let body =
                serde_json::to_vec(doc).map_err(|e| CliError::Input(format!("{label}: {e}")))?;
            let reviewed = admission::review(&body, env)
                .map_err(|e| CliError::Input(format!("{label}: {e}")))?;
            let response = serde_json::from_slice(&reviewed.body)
                .map_err(|e| CliError::Input(e.to_string()))?;
            Ok(Processed::Review(response))
        }
        Some(kind) if kind == "List" || kind.ends_with("List") => {
            let items = doc
                .get("items")
                .and_then(Value::as_array)
                .ok_or_else(|| CliError::Input(format!("{label}: a List needs an items array")))?;
            let mut out = doc.clone();
            let mut patch = Vec::new();
            for (i, item) in items.iter().enumerate() {
                let item_label = format!("{label} item {}", i + 1);
                let Processed::Object {
                    object,
                    patch: item_patch,
                } = mutate_object(item, &item_label, namespace, env)?
                else {
                    return Err(CliError::Input(format!(
                        "{item_label}: an AdmissionReview cannot be a List item"
                    )));
                };
                for mut op in item_patch.0 {
                    prefix_path(&mut op, &format!("/items/{i}"));
                    patch.push(op);
                }
                out["items"][i] = object;
            }
            Ok(Processed::Object {
                object: out,
                patch: json_patch::Patch(patch),
            })
        }
        _ => mutate_object(doc, &label, namespace, env),
    }
}

fn prefix_path(op: &mut json_patch::PatchOperation, prefix: &str) {
    use json_patch::PatchOperation::*;
    let path = match op {
        Add(o) => &mut o.path,
        Remove(o) => &mut o.path,
        Replace(o) => &mut o.path,
        Move(o) => &mut o.path,
        Copy(o) => &mut o.path,
        Test(o) => &mut o.path,
    };
    let joined = format!("{prefix}{path}");
    if let Ok(p) = jsonptr::PointerBuf::parse(joined) {
        *path = p;
    }
}

/// Runs `mutate` over every document in `text` and renders the result.
pub fn run_mutate(
    text: &str,
    format: OutputFormat,
    namespace: Option<&str>,
    env: &Env,
) -> Result<String, CliError> {
    let docs = parse_documents(text)?;
    let mut rendered = Vec::new();
    for (index, doc) in docs.iter().enumerate() {
        let out = match process(doc, index, namespace, env)? {
            Processed::Review(response) => to_json(&response)?,
            Processed::Object { object, patch } => match format {
                OutputFormat::Yaml => {
                    serde_yaml::to_string(&object).map_err(|e| CliError::Input(e.to_string()))?
                }
                OutputFormat::Json => to_json(&object)?,
                OutputFormat::Patch => to_json(&patch)?,
            },
        };
        rendered.push(out);
    }
    let separator = if format == OutputFormat::Yaml {
        "---\n"
    } else {
        ""
    };
    Ok(rendered.join(separator))
}

fn to_json(value: &impl serde::Serialize) -> Result<String, CliError> {
    serde_json::to_string_pretty(value)
        .map(|s| s + "\n")
        .map_err(|e| CliError::Input(e.to_string()))
}

#[cfg(test)]
mod tests;
