//! Storage-spec credentials (KServe's `CreateStorageSpecSecretEnvs`): with
//! `internal.serving.kserve.io/storage-spec: "true"` the storage-initializer
//! reads one entry of the storage Secret instead of ServiceAccount Secrets.

use super::credentials::annotated_secret;
use super::s3::literal;
use super::secret_kinds::secret_key_ref;
use super::{Annotations, ClusterSnapshot};
use crate::config::CredentialConfig;
use crate::constants::{
    AWS_CA_BUNDLE_CONFIGMAP_ENV, DEFAULT_STORAGE_SPEC_SECRET, STORAGE_CONFIG_ENV,
    STORAGE_OVERRIDE_CONFIG_ENV, STORAGE_SPEC_ANNOTATION, STORAGE_SPEC_KEY_ANNOTATION,
    STORAGE_SPEC_PARAM_ANNOTATION, STORAGE_URI_PLACEHOLDER_SCHEME,
};
use crate::shared_error::SharedError;
use k8s_openapi::api::core::v1::EnvVar;
use std::collections::BTreeMap;

const STORAGE_TYPES: [&str; 3] = ["s3", "hdfs", "webhdfs"];

/// KServe's messages; each denies the pod.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum StorageSpecError {
    #[error("invalid {STORAGE_SPEC_PARAM_ANNOTATION} annotation: {0}")]
    Params(#[source] SharedError<serde_json::Error>),
    #[error("specified storage key {key} not found in storage secret {secret}")]
    KeyNotFound { key: String, secret: String },
    #[error("can't read storage secret {0}: secrets \"{0}\" not found")]
    SecretNotFound(String),
    #[error("invalid json encountered in key {key} of storage secret {secret}: {source}")]
    Json {
        key: String,
        secret: String,
        source: SharedError<serde_json::Error>,
    },
    #[error("storage type must be one of [{types}]. storage type [{found}] is not supported", types = STORAGE_TYPES.join(", "))]
    UnsupportedType { found: String },
    #[error("unable to determine storage type")]
    UnknownType,
    #[error("format [{0}] requires a bucket but one wasn't found in storage data or parameters")]
    MissingBucket(String),
}

/// The pod's storage-spec annotations.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct StorageSpec {
    pub params: BTreeMap<String, String>,
    /// `storage-spec-key`; empty selects `default` or `default_<type>`.
    pub key: String,
}

impl StorageSpec {
    /// `None` unless `storage-spec` is `"true"`. The parameters parse as
    /// Go's `json.Unmarshal` into a map: `null` is none, other non-maps fail.
    pub(crate) fn from_annotations(
        annotations: &dyn Annotations,
    ) -> Result<Option<Self>, StorageSpecError> {
        if annotations.annotation(STORAGE_SPEC_ANNOTATION) != Some("true") {
            return Ok(None);
        }
        let params = match annotations.annotation(STORAGE_SPEC_PARAM_ANNOTATION) {
            None => BTreeMap::new(),
            Some(text) => serde_json::from_str::<Option<BTreeMap<String, String>>>(text)
                .map_err(|e| StorageSpecError::Params(e.into()))?
                .unwrap_or_default(),
        };
        let key = (annotations.annotation(STORAGE_SPEC_KEY_ANNOTATION))
            .unwrap_or_default()
            .to_string();
        Ok(Some(Self { params, key }))
    }
}

/// The storage Secret's name: the pod's storage-secret annotation (when the
/// config designates one), else `credentials.storageSpecSecretName`, else
/// `storage-config`.
pub(crate) fn storage_spec_secret_name<'a>(
    config: &'a CredentialConfig,
    annotations: &'a dyn Annotations,
) -> &'a str {
    annotated_secret(config, annotations).unwrap_or(
        match config.storage_spec_secret_name.as_str() {
            "" => DEFAULT_STORAGE_SPEC_SECRET,
            name => name,
        },
    )
}

/// Appends the storage-spec env to `env` and resolves
/// `<scheme-placeholder>://` in every URI argument (even index) of `args`,
/// in KServe's order: `AWS_CA_BUNDLE_CONFIGMAP` (from the entry's
/// `cabundle_configmap`), `STORAGE_CONFIG` (a reference to the entry), then
/// `STORAGE_OVERRIDE_CONFIG` (the parameters as Go's sorted JSON). The env
/// is left untouched when an error is returned.
pub(crate) fn add_storage_spec_credentials(
    cluster: &ClusterSnapshot,
    config: &CredentialConfig,
    namespace: &str,
    annotations: &dyn Annotations,
    spec: &StorageSpec,
    env: &mut Vec<EnvVar>,
    args: &mut [String],
) -> Result<(), StorageSpecError> {
    let secret_name = storage_spec_secret_name(config, annotations);
    let param_type = spec.params.get("type").filter(|t| !t.is_empty());
    let key = match (spec.key.as_str(), param_type) {
        ("", Some(t)) => format!("default_{t}"),
        ("", None) => "default".to_string(),
        (key, _) => key.to_string(),
    };
    let data = match cluster.secret(namespace, secret_name) {
        Some(secret) => match secret.get(&key) {
            None if !spec.key.is_empty() => {
                return Err(StorageSpecError::KeyNotFound {
                    key,
                    secret: secret_name.to_string(),
                })
            }
            found => found,
        },
        None if !spec.key.is_empty() => {
            return Err(StorageSpecError::SecretNotFound(secret_name.to_string()))
        }
        None => None,
    };
    let mut storage_type = param_type.cloned();
    let mut bucket = spec.params.get("bucket").filter(|b| !b.is_empty()).cloned();
    let mut added = Vec::new();
    if let Some(data) = data {
        if storage_type.is_none() {
            let parsed = serde_json::from_str::<Option<BTreeMap<String, String>>>(data)
                .map_err(|e| StorageSpecError::Json {
                    key: key.clone(),
                    secret: secret_name.to_string(),
                    source: e.into(),
                })?
                .unwrap_or_default();
            if let Some(t) = parsed.get("type") {
                if !STORAGE_TYPES.contains(&t.as_str()) {
                    return Err(StorageSpecError::UnsupportedType { found: t.clone() });
                }
                storage_type = Some(t.clone());
            }
            if bucket.is_none() {
                bucket = parsed.get("bucket").cloned();
            }
            if let Some(cm) = parsed.get("cabundle_configmap") {
                added.push(literal(AWS_CA_BUNDLE_CONFIGMAP_ENV, cm));
            }
        }
        added.push(secret_key_ref(STORAGE_CONFIG_ENV, secret_name, &key));
    }
    let storage_type = storage_type.ok_or(StorageSpecError::UnknownType)?;
    resolve_placeholders(args, &storage_type, bucket.as_deref())?;
    if !spec.params.is_empty() {
        let json = crate::json_text::go::string_map(&spec.params);
        added.push(literal(STORAGE_OVERRIDE_CONFIG_ENV, &json));
    }
    env.extend(added);
    Ok(())
}

/// Every URI argument (even index) with the placeholder scheme gets the
/// real one: `s3://<bucket>/<path>` or `<type>://<path>`.
fn resolve_placeholders(
    args: &mut [String],
    storage_type: &str,
    bucket: Option<&str>,
) -> Result<(), StorageSpecError> {
    let prefix = format!("{STORAGE_URI_PLACEHOLDER_SCHEME}://");
    if !args.first().is_some_and(|a| a.starts_with(&prefix)) {
        return Ok(());
    }
    let mut resolved = args.to_vec();
    for arg in resolved.iter_mut().step_by(2) {
        let path = arg.strip_prefix(&prefix).unwrap_or(arg).to_string();
        *arg = if storage_type == "s3" {
            let bucket = bucket.filter(|b| !b.is_empty());
            let bucket = bucket.ok_or_else(|| StorageSpecError::MissingBucket("s3".into()))?;
            format!("s3://{bucket}/{path}")
        } else {
            format!("{storage_type}://{path}")
        };
    }
    args.clone_from_slice(&resolved);
    Ok(())
}

#[cfg(test)]
mod tests;
