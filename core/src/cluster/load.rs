//! The `--objects` loader: parsed documents (multi-document YAML/JSON, or a
//! List) in, a [`ClusterSnapshot`] out. Pure: the CLI reads and splits the file.
//!
//! The file a user has is a dump of a namespace (`kubectl get
//! sa,secret,configmap -o yaml`), so documents of kinds the mutator never
//! reads are passed over and counted, not refused.

use super::objects::{
    ClusterStorageContainer, InferenceService, IsvcLogger, Secret, ServiceAccount, UriFormat,
    INIT_CONTAINER_WORKLOAD,
};
use super::ClusterSnapshot;
use crate::config::LoggerStorage;
use crate::quantity::QuantityError;
use crate::shared_error::SharedError;
use k8s_openapi::api::core::v1::{self as api, Container};
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;

const CORE_V1: &str = "v1";
const SERVING_V1ALPHA1: &str = "serving.kserve.io/v1alpha1";
const SERVING_V1BETA1: &str = "serving.kserve.io/v1beta1";
const SUPPORTED: &str =
    "ServiceAccount, Secret, ClusterStorageContainer, InferenceService or a List of them";

/// What an objects file held: the snapshot, and how many documents of each
/// other kind were passed over.
#[derive(Debug, Default)]
pub struct LoadedSnapshot {
    pub data: ClusterSnapshot,
    pub(crate) ignored: BTreeMap<String, usize>,
}

impl LoadedSnapshot {
    /// One line per ignored kind, for the user's stderr or the log.
    pub fn ignored_lines(&self) -> impl Iterator<Item = String> + '_ {
        self.ignored.iter().map(|(kind, n)| {
            let documents = if *n == 1 { "document" } else { "documents" };
            format!("ignored {n} {kind} {documents} (only {SUPPORTED} are read)")
        })
    }
}

/// A document that cannot be used; `at` names it ("document 2", "document
/// 2, item 5").
#[derive(Debug, thiserror::Error)]
#[error("{at}: {problem}")]
pub struct ObjectsLoadError {
    pub(crate) at: String,
    #[source]
    pub(crate) problem: ObjectProblem,
}

/// What is wrong with a document of cluster objects.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ObjectProblem {
    #[error("{kind} has no items array")]
    NoItems { kind: String },
    #[error("no kind; expected {SUPPORTED}")]
    NoKind,
    #[error("{kind} must have apiVersion {expected:?}, found {found:?}")]
    ApiVersion {
        kind: String,
        expected: &'static str,
        found: String,
    },
    #[error("{kind} has no metadata.name")]
    NoName { kind: String },
    #[error("{kind} {name:?} has no metadata.namespace")]
    NoNamespace { kind: String, name: String },
    /// A ServiceAccount, Secret or InferenceService that does not decode.
    #[error("invalid {kind} {name:?}: {source}")]
    Invalid {
        kind: String,
        name: String,
        source: SharedError<serde_json::Error>,
    },
    #[error(transparent)]
    StorageContainer(#[from] StorageContainerLoadError),
    #[error("{kind} {name:?} appears more than once")]
    Duplicate { kind: String, name: String },
}

/// A ClusterStorageContainer that cannot be used (at load, or when the
/// server's watch reduces it).
#[derive(Debug, thiserror::Error, Clone)]
pub enum StorageContainerLoadError {
    #[error("invalid ClusterStorageContainer {name:?}: spec: {source}")]
    Spec {
        name: String,
        source: SharedError<serde_json::Error>,
    },
    #[error(
        "invalid ClusterStorageContainer {name:?}: resources.{list}.{resource} must be a quantity"
    )]
    NotAQuantity {
        name: String,
        list: &'static str,
        resource: String,
    },
    #[error("invalid ClusterStorageContainer {name:?}: resources.{list}.{resource}: {source}")]
    Quantity {
        name: String,
        list: &'static str,
        resource: String,
        source: QuantityError,
    },
    #[error("invalid ClusterStorageContainer {name:?}: spec.container: {source}")]
    Container {
        name: String,
        source: SharedError<serde_json::Error>,
    },
    #[error("invalid ClusterStorageContainer {name:?}: disabled must be a boolean")]
    Disabled { name: String },
}

impl ClusterSnapshot {
    /// Loads ServiceAccounts, Secrets, ClusterStorageContainers and
    /// InferenceServices (or Lists of them); documents are numbered from 1.
    /// Empty documents (`null`) are skipped, documents of other kinds are
    /// counted in [`LoadedSnapshot::ignored_lines`]. A document without a kind, a
    /// kind we read with a wrong apiVersion, a wrong type inside it, a
    /// missing name or namespace, or the same object twice is an error
    /// naming the document. Secrets are reduced on load.
    pub fn load(docs: Vec<Value>) -> Result<LoadedSnapshot, ObjectsLoadError> {
        let mut loaded = LoadedSnapshot::default();
        for (i, doc) in docs.iter().enumerate() {
            loaded.add_document(doc, &format!("document {}", i + 1))?;
        }
        Ok(loaded)
    }

    /// [`Self::load`] for callers that hold only objects we read.
    pub fn from_documents(docs: Vec<Value>) -> Result<Self, ObjectsLoadError> {
        Self::load(docs).map(|loaded| loaded.data)
    }
}

impl LoadedSnapshot {
    /// Adds one document (a List's items one by one); `at` names it in errors.
    pub(crate) fn add_document(&mut self, doc: &Value, at: &str) -> Result<(), ObjectsLoadError> {
        let fail = |problem: ObjectProblem| ObjectsLoadError {
            at: at.to_string(),
            problem,
        };
        if doc.is_null() {
            return Ok(());
        }
        let kind = doc.get("kind").and_then(Value::as_str).unwrap_or_default();
        let api_version = doc
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if kind.ends_with("List") {
            let items = doc.get("items").and_then(Value::as_array);
            let items = items.ok_or_else(|| {
                fail(ObjectProblem::NoItems {
                    kind: kind.to_string(),
                })
            })?;
            for (j, item) in items.iter().enumerate() {
                self.add_document(item, &format!("{at}, item {}", j + 1))?;
            }
            return Ok(());
        }
        let expected = match kind {
            "ServiceAccount" | "Secret" => CORE_V1,
            "ClusterStorageContainer" => SERVING_V1ALPHA1,
            "InferenceService" => SERVING_V1BETA1,
            "" => return Err(fail(ObjectProblem::NoKind)),
            other => {
                *self.ignored.entry(other.to_string()).or_default() += 1;
                return Ok(());
            }
        };
        if api_version != expected {
            return Err(fail(ObjectProblem::ApiVersion {
                kind: kind.to_string(),
                expected,
                found: api_version.to_string(),
            }));
        }
        let name = doc.pointer("/metadata/name").and_then(Value::as_str);
        let name = name.filter(|n| !n.is_empty());
        let name = name.ok_or_else(|| {
            fail(ObjectProblem::NoName {
                kind: kind.to_string(),
            })
        })?;
        let namespace = doc.pointer("/metadata/namespace").and_then(Value::as_str);
        let namespace = namespace.unwrap_or_default();
        let describe = |e: serde_json::Error| {
            fail(ObjectProblem::Invalid {
                kind: kind.to_string(),
                name: name.to_string(),
                source: e.into(),
            })
        };
        if kind != "ClusterStorageContainer" && namespace.is_empty() {
            return Err(fail(ObjectProblem::NoNamespace {
                kind: kind.to_string(),
                name: name.to_string(),
            }));
        }
        let data = &mut self.data;
        let duplicate = match kind {
            "ServiceAccount" => {
                let sa: api::ServiceAccount = parse(doc).map_err(describe)?;
                let sa = ServiceAccount::from_api(&sa, namespace);
                data.service_accounts
                    .insert(sa.object_ref(), sa.into())
                    .is_some()
            }
            "Secret" => {
                let secret: api::Secret = parse(doc).map_err(describe)?;
                let secret = Secret::from_api(&secret, namespace);
                data.secrets
                    .insert(secret.object_ref(), secret.into())
                    .is_some()
            }
            "ClusterStorageContainer" => {
                let csc = storage_container(doc, name).map_err(|e| fail(e.into()))?;
                data.storage_containers.insert(csc)
            }
            _ => {
                let isvc = inference_service(doc, namespace, name).map_err(describe)?;
                data.inference_services
                    .insert(isvc.object_ref(), isvc)
                    .is_some()
            }
        };
        if duplicate {
            return Err(fail(ObjectProblem::Duplicate {
                kind: kind.to_string(),
                name: name.to_string(),
            }));
        }
        Ok(())
    }
}

fn parse<T: serde::de::DeserializeOwned>(doc: &Value) -> Result<T, serde_json::Error> {
    T::deserialize(doc)
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CscSpec {
    container: Value,
    #[serde(default)]
    supported_uri_formats: Vec<CscUriFormat>,
    workload_type: Option<String>,
    #[serde(default)]
    supports_multi_model_download: bool,
}

#[derive(Deserialize)]
struct CscUriFormat {
    prefix: Option<String>,
    regex: Option<String>,
}

/// Parses a CSC; its container's quantities are canonicalised as Go's
/// typed decode and re-encode would, and an invalid one is an error here.
pub fn storage_container(
    doc: &Value,
    name: &str,
) -> Result<ClusterStorageContainer, StorageContainerLoadError> {
    let spec = doc.get("spec").cloned().unwrap_or(Value::Null);
    let spec: CscSpec =
        CscSpec::deserialize(spec).map_err(|e| StorageContainerLoadError::Spec {
            name: name.to_string(),
            source: e.into(),
        })?;
    let mut container = spec.container;
    if let Some(obj) = container.as_object_mut() {
        obj.entry("name").or_insert(Value::String(String::new()));
    }
    apply_crd_defaults(&mut container);
    canonicalize_resources(&mut container, name)?;
    let container =
        Container::deserialize(container).map_err(|e| StorageContainerLoadError::Container {
            name: name.to_string(),
            source: e.into(),
        })?;
    let disabled = match doc.get("disabled") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => {
            return Err(StorageContainerLoadError::Disabled {
                name: name.to_string(),
            })
        }
    };
    let formats = (spec.supported_uri_formats.iter())
        .map(|f| UriFormat::new(f.prefix.as_deref(), f.regex.as_deref()))
        .collect();
    let workload_type = (spec.workload_type.as_deref())
        .filter(|w| !w.is_empty())
        .unwrap_or(INIT_CONTAINER_WORKLOAD);
    ClusterStorageContainer::new(
        name,
        &container,
        formats,
        workload_type,
        disabled,
        spec.supports_multi_model_download,
    )
    .map_err(|e| StorageContainerLoadError::Container {
        name: name.to_string(),
        source: e.into(),
    })
}

/// The `default:` values of the ClusterStorageContainer CRD's container
/// schema (`serving.kserve.io_clusterstoragecontainers.yaml`), which the
/// API server writes into every CSC it stores: a file given to `--objects`
/// then reads as the watch cache does. Applying them twice changes nothing.
fn apply_crd_defaults(container: &mut Value) {
    fn default(object: Option<&mut Value>, field: &str, value: Value) {
        if let Some(Value::Object(map)) = object {
            map.entry(field).or_insert(value);
        }
    }
    fn items<'a>(container: &'a mut Value, list: &str) -> impl Iterator<Item = &'a mut Value> {
        container
            .get_mut(list)
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
    }
    for port in items(container, "ports") {
        default(Some(port), "protocol", Value::from("TCP"));
    }
    for var in items(container, "env") {
        let Some(source) = var.get_mut("valueFrom") else {
            continue;
        };
        for selector in ["configMapKeyRef", "secretKeyRef"] {
            default(source.get_mut(selector), "name", Value::from(""));
        }
        default(source.get_mut("fileKeyRef"), "optional", Value::from(false));
    }
    for source in items(container, "envFrom") {
        for reference in ["configMapRef", "secretRef"] {
            default(source.get_mut(reference), "name", Value::from(""));
        }
    }
    for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
        let grpc = container.get_mut(probe).and_then(|p| p.get_mut("grpc"));
        default(grpc, "service", Value::from(""));
    }
}

fn canonicalize_resources(
    container: &mut Value,
    name: &str,
) -> Result<(), StorageContainerLoadError> {
    for list in ["limits", "requests"] {
        let Some(map) = container
            .pointer_mut(&format!("/resources/{list}"))
            .and_then(Value::as_object_mut)
        else {
            continue;
        };
        for (resource, q) in map.iter_mut() {
            let text = match q {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                _ => {
                    return Err(StorageContainerLoadError::NotAQuantity {
                        name: name.to_string(),
                        list,
                        resource: resource.clone(),
                    })
                }
            };
            let canonical = crate::quantity::canonicalize(&text).map_err(|source| {
                StorageContainerLoadError::Quantity {
                    name: name.to_string(),
                    list,
                    resource: resource.clone(),
                    source,
                }
            })?;
            *q = Value::String(canonical);
        }
    }
    Ok(())
}

#[derive(Deserialize)]
struct IsvcDoc {
    spec: Option<IsvcSpec>,
}

#[derive(Deserialize)]
struct IsvcSpec {
    predictor: Option<Predictor>,
}

#[derive(Deserialize)]
struct Predictor {
    logger: Option<LoggerDoc>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct LoggerDoc {
    storage: Option<StorageDoc>,
    #[serde(alias = "marshallerURL")]
    marshaller_url: Option<String>,
    batch_size: Option<i64>,
    batch_interval: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct StorageDoc {
    path: Option<String>,
    parameters: Option<BTreeMap<String, String>>,
    key: Option<String>,
    service_account_name: Option<String>,
}

pub fn inference_service(
    doc: &Value,
    namespace: impl Into<std::sync::Arc<str>>,
    name: &str,
) -> Result<InferenceService, serde_json::Error> {
    let parsed: IsvcDoc = parse(doc)?;
    let logger = parsed
        .spec
        .and_then(|s| s.predictor)
        .and_then(|p| p.logger)
        .map(|l| {
            Box::new(IsvcLogger {
                storage: l.storage.map(|s| {
                    Box::new(LoggerStorage {
                        path: s.path.unwrap_or_default(),
                        parameters: s.parameters,
                        key: s.key.unwrap_or_default(),
                        service_account_name: s.service_account_name.unwrap_or_default(),
                    })
                }),
                marshaller_url: l.marshaller_url.map(String::into_boxed_str),
                batch_size: l.batch_size,
                batch_interval: l.batch_interval.map(String::into_boxed_str),
            })
        });
    Ok(InferenceService {
        namespace: namespace.into(),
        name: name.into(),
        predictor_logger: logger,
    })
}

#[cfg(test)]
mod tests;
