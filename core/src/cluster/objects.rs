//! The cluster objects the injectors read, reduced to the fields they use.
//! Each reduction is the one place that decides what of an API object is
//! held in memory; above all, what of a Secret's data.

use super::ObjectRef;
use crate::config::LoggerStorage;
use k8s_openapi::api::core::v1 as api;
use k8s_openapi::api::core::v1::Container;
use std::collections::BTreeMap;
use zeroize::Zeroizing;

/// Secret data keys whose values are kept verbatim, because an injector
/// copies them into the pod: the S3 settings KServe reads from a Secret's
/// data when no annotation sets them (the env names of `BuildS3EnvVars`),
/// and the two keys of an https-host Secret (env `<https-host>-headers` =
/// `headers`). Credentials proper (access keys, tokens, key files) are only
/// ever referenced by name (`secretKeyRef`, secret volumes), so their values
/// are never held. Every other value is replaced by its storage-spec
/// projection, see [`Secret::get`].
pub(crate) const KEPT_SECRET_VALUE_KEYS: [&str; 11] = [
    "S3_USE_HTTPS",
    "S3_ENDPOINT",
    "S3_VERIFY_SSL",
    "awsAnonymousCredential",
    "AWS_DEFAULT_REGION",
    "S3_USER_VIRTUAL_BUCKET",
    "S3_USE_ACCELERATE",
    "AWS_CA_BUNDLE",
    "AWS_CA_BUNDLE_CONFIGMAP",
    "https-host",
    "headers",
];

/// The members of a storage-spec entry (a JSON object in the storage
/// Secret) that KServe reads when the pod's parameters carry no `type`.
const STORAGE_SPEC_MEMBERS: [&str; 3] = ["type", "bucket", "cabundle_configmap"];

/// Stands for a value that is not a JSON object of strings: parsing it fails,
/// as parsing the original would (KServe unmarshals into `map[string]string`).
pub const NOT_A_STORAGE_SPEC: &str = "<not a JSON object of strings>";

/// Whether KServe's credential rules read an annotation of a ServiceAccount
/// or Secret: the IRSA role (`eks.amazonaws.com/role-arn`) and the
/// `serving.kserve.io/s3-*` settings (`s3.rs`). The others are dropped as
/// the object is reduced, so a large annotation costs nothing held.
pub fn annotation_read(key: &str) -> bool {
    key == IRSA_ANNOTATION || key.starts_with(S3_ANNOTATION_PREFIX)
}

/// The ServiceAccount annotation that turns on IAM-role (IRSA) S3 settings.
pub(crate) const IRSA_ANNOTATION: &str = "eks.amazonaws.com/role-arn";

const S3_ANNOTATION_PREFIX: &str = "serving.kserve.io/s3-";

/// Heap bytes one kept string costs: its bytes and the allocator's
/// rounding (allocations come in 16-byte steps).
fn heap(s: &str) -> usize {
    match s.len() {
        0 => 0,
        n => n.next_multiple_of(16),
    }
}

/// The nodes of a B-tree map of `n` string pairs: a node holds up to 11
/// pairs (544 bytes), the first whatever `n` is, then at least half full.
fn map_nodes(n: usize) -> usize {
    match n {
        0 => 0,
        n => 544 * (1 + 2 * n / 11),
    }
}

fn map_bytes<'a, V: AsRef<str> + 'a>(
    map: impl ExactSizeIterator<Item = (&'a String, &'a V)>,
) -> usize {
    let nodes = map_nodes(map.len());
    nodes + map.map(|(k, v)| heap(k) + heap(v.as_ref())).sum::<usize>()
}

fn annotations_bytes(annotations: &BTreeMap<String, String>) -> usize {
    map_bytes(annotations.iter())
}

/// A ServiceAccount: what the credential lookup reads.
#[derive(Debug, Clone)]
#[cfg_attr(any(test, feature = "oracle"), derive(Default, PartialEq))]
pub struct ServiceAccount {
    pub namespace: String,
    pub name: String,
    /// Includes the IRSA annotation `eks.amazonaws.com/role-arn` and the
    /// `serving.kserve.io/s3-*` settings it is read with.
    pub annotations: BTreeMap<String, String>,
    /// Names of the Secrets in `secrets`, in order.
    pub secrets: Vec<String>,
}

impl ServiceAccount {
    pub(crate) fn object_ref(&self) -> ObjectRef {
        ObjectRef::new(&self.namespace, &self.name)
    }

    /// What holding it costs: its strings, the list's and maps' slots and
    /// the struct itself (an upper bound of what the allocator hands out,
    /// checked against a counting allocator in `src/lookups/budget.rs`).
    pub fn kept_bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + heap(&self.namespace)
            + heap(&self.name)
            + annotations_bytes(&self.annotations)
            + (self.secrets.iter()).map(|s| 24 + heap(s)).sum::<usize>()
    }

    pub fn from_api(sa: &api::ServiceAccount, namespace: &str) -> Self {
        let annotations = sa.metadata.annotations.iter().flatten();
        Self {
            namespace: namespace.to_string(),
            name: sa.metadata.name.clone().unwrap_or_default(),
            annotations: (annotations.filter(|(k, _)| annotation_read(k)))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            secrets: (sa.secrets.iter().flatten())
                .map(|r| r.name.clone().unwrap_or_default())
                .collect(),
        }
    }
}

impl AsRef<str> for SecretValue {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

/// A kept Secret value: its memory is overwritten with zeros when dropped
/// (a copy freed by the cache does not linger in the heap), and its `Debug`
/// prints a placeholder, so no log or error built with `{:?}` shows it.
#[derive(Clone, Default, PartialEq, Eq)]
pub(crate) struct SecretValue(Zeroizing<String>);

/// What `Debug` prints in place of a Secret value.
pub(crate) const REDACTED: &str = "<redacted>";

impl std::fmt::Debug for SecretValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(REDACTED)
    }
}

/// A Secret: name, namespace, annotations, the names of its data keys and,
/// per key, only what an injector reads of the value (see [`Secret::get`]).
/// `Debug` shows the key names, never the values.
#[derive(Debug, Clone, Default)]
#[cfg_attr(any(test, feature = "oracle"), derive(PartialEq))]
pub struct Secret {
    pub(crate) namespace: String,
    pub(crate) name: String,
    pub annotations: BTreeMap<String, String>,
    /// One entry per data key; the value is verbatim for
    /// [`KEPT_SECRET_VALUE_KEYS`] and the storage-spec projection otherwise.
    values: BTreeMap<String, SecretValue>,
}

impl Secret {
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
            ..Self::default()
        }
    }

    /// A Secret from plain (already decoded) data, reduced on the way in.
    pub fn from_data<K: AsRef<str>, V: AsRef<str>>(
        namespace: impl Into<String>,
        name: impl Into<String>,
        data: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        let mut out = Self::new(namespace, name);
        for (k, v) in data {
            out = out.with_data(k.as_ref(), v.as_ref());
        }
        out
    }

    #[cfg(test)]
    pub(crate) fn with_annotation(mut self, key: &str, value: &str) -> Self {
        self.annotations.insert(key.to_string(), value.to_string());
        self
    }

    /// Adds a data entry, keeping only what [`Secret::get`] documents.
    pub fn with_data(mut self, key: &str, value: &str) -> Self {
        self.values
            .insert(key.to_string(), reduce_value(key, value));
        self
    }

    pub(crate) fn object_ref(&self) -> ObjectRef {
        ObjectRef::new(&self.namespace, &self.name)
    }

    /// Reduces an API Secret; `stringData` is folded into `data` as the API
    /// server does on write (it wins over `data`).
    pub fn from_api(secret: &api::Secret, namespace: &str) -> Self {
        let mut out = Self::new(namespace, secret.metadata.name.clone().unwrap_or_default());
        let annotations = secret.metadata.annotations.iter().flatten();
        out.annotations = (annotations.filter(|(k, _)| annotation_read(k)))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        for (key, bytes) in secret.data.iter().flatten() {
            let text = Zeroizing::new(String::from_utf8_lossy(&bytes.0).into_owned());
            out = out.with_data(key, &text);
        }
        for (key, value) in secret.string_data.iter().flatten() {
            out = out.with_data(key, value);
        }
        out
    }

    /// What holding it costs, as [`ServiceAccount::kept_bytes`] counts.
    pub fn kept_bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + heap(&self.namespace)
            + heap(&self.name)
            + annotations_bytes(&self.annotations)
            + map_bytes(self.values.iter())
    }

    pub(crate) fn has_key(&self, key: &str) -> bool {
        self.values.contains_key(key)
    }

    /// The data key names, sorted.
    #[cfg(test)]
    pub(crate) fn keys(&self) -> impl Iterator<Item = &str> {
        self.values.keys().map(String::as_str)
    }

    /// `Some` exactly when the key exists. For `KEPT_SECRET_VALUE_KEYS` the
    /// value itself; for any other key its storage-spec projection: the
    /// `type`, `bucket` and `cabundle_configmap` members when the value is a
    /// JSON object of strings (re-serialised, so a storage-spec entry parses
    /// to what KServe reads of it), else [`NOT_A_STORAGE_SPEC`].
    pub fn get(&self, key: &str) -> Option<&String> {
        self.values.get(key).map(|v| &*v.0)
    }
}

fn reduce_value(key: &str, value: &str) -> SecretValue {
    SecretValue(Zeroizing::new(projection(key, value)))
}

fn projection(key: &str, value: &str) -> String {
    if KEPT_SECRET_VALUE_KEYS.contains(&key) {
        return value.to_string();
    }
    match serde_json::from_str::<Option<BTreeMap<String, String>>>(value) {
        // Go unmarshals `null` into a nil map without error.
        Ok(None) => "null".to_string(),
        Ok(Some(map)) => {
            let mut kept = BTreeMap::new();
            for (k, mut v) in map {
                if STORAGE_SPEC_MEMBERS.contains(&k.as_str()) {
                    kept.insert(k, v);
                } else {
                    // The parsed copy of a credential (`secret_access_key`).
                    zeroize::Zeroize::zeroize(&mut v);
                }
            }
            crate::json_text::go::string_map(&kept)
        }
        Err(_) => NOT_A_STORAGE_SPEC.to_string(),
    }
}

/// One `supportedUriFormats` entry. A regex is compiled once, at load; a
/// compile error is kept and reported when KServe would report it (the
/// first time a lookup reaches this entry).
#[derive(Debug, Clone)]
pub(crate) enum UriFormat {
    Prefix(String),
    Regex {
        source: String,
        compiled: Result<regex::Regex, regex::Error>,
    },
    /// Neither set: never matches (KServe skips it).
    Empty,
}

impl PartialEq for UriFormat {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Prefix(a), Self::Prefix(b)) => a == b,
            (Self::Regex { source: a, .. }, Self::Regex { source: b, .. }) => a == b,
            (Self::Empty, Self::Empty) => true,
            _ => false,
        }
    }
}

impl UriFormat {
    /// KServe's rule: a non-empty prefix wins; else a non-empty regex.
    pub(crate) fn new(prefix: Option<&str>, regex: Option<&str>) -> Self {
        match (
            prefix.filter(|p| !p.is_empty()),
            regex.filter(|r| !r.is_empty()),
        ) {
            (Some(p), _) => Self::Prefix(p.to_string()),
            (None, Some(r)) => Self::Regex {
                source: r.to_string(),
                compiled: regex::Regex::new(r),
            },
            (None, None) => Self::Empty,
        }
    }
}

/// The workload type KServe's CRD defaults to, and the only one the pod
/// mutator may use.
pub(crate) const INIT_CONTAINER_WORKLOAD: &str = "initContainer";

/// A `ClusterStorageContainer` (`serving.kserve.io/v1alpha1`, cluster-scoped).
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterStorageContainer {
    pub name: String,
    /// The overlay merged into the init container; quantities canonical,
    /// `name` empty when the object gives none.
    pub container: Container,
    pub(crate) supported_uri_formats: Vec<UriFormat>,
    /// `spec.workloadType`, defaulted to `initContainer` as the CRD does.
    pub(crate) workload_type: String,
    /// Top-level `disabled` (not under `spec`).
    pub(crate) disabled: bool,
    pub(crate) supports_multi_model_download: bool,
}

/// What KServe reads of `spec.predictor.logger` (the values that override
/// the `logger` config); `None` fields were not set on the object.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IsvcLogger {
    pub storage: Option<LoggerStorage>,
    pub marshaller_url: Option<String>,
    pub batch_size: Option<i64>,
    pub batch_interval: Option<String>,
}

/// An `InferenceService` (`serving.kserve.io/v1beta1`): only what the
/// agent's logger storage needs.
#[derive(Debug, Clone)]
#[cfg_attr(any(test, feature = "oracle"), derive(PartialEq))]
pub struct InferenceService {
    pub(crate) namespace: String,
    pub(crate) name: String,
    pub predictor_logger: Option<IsvcLogger>,
}

impl InferenceService {
    /// What holding it costs, as [`ServiceAccount::kept_bytes`] counts.
    pub fn kept_bytes(&self) -> usize {
        let logger = self.predictor_logger.as_ref().map_or(0, |l| {
            let storage = l.storage.as_ref().map_or(0, |s| {
                heap(&s.path)
                    + heap(&s.key)
                    + heap(&s.service_account_name)
                    + s.parameters.as_ref().map_or(0, |p| map_bytes(p.iter()))
            });
            std::mem::size_of::<IsvcLogger>()
                + storage
                + l.marshaller_url.as_deref().map_or(0, heap)
                + l.batch_interval.as_deref().map_or(0, heap)
        });
        std::mem::size_of::<Self>() + heap(&self.namespace) + heap(&self.name) + logger
    }

    pub(crate) fn object_ref(&self) -> ObjectRef {
        ObjectRef::new(&self.namespace, &self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;

    #[test]
    fn secret_keeps_key_names_and_only_listed_values() {
        let api_secret = api::Secret {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some("s3-secret".into()),
                annotations: Some(BTreeMap::from([(
                    "serving.kserve.io/s3-endpoint".into(),
                    "s3.aws.com".into(),
                )])),
                ..Default::default()
            },
            data: Some(BTreeMap::from([
                (
                    "awsSecretAccessKey".into(),
                    ByteString(b"very-secret".to_vec()),
                ),
                ("S3_ENDPOINT".into(), ByteString(b"minio:9000".to_vec())),
            ])),
            string_data: Some(BTreeMap::from([("HF_TOKEN".into(), "hf_abc".into())])),
            ..Default::default()
        };
        let s = Secret::from_api(&api_secret, "default");
        assert_eq!(s.object_ref(), ObjectRef::new("default", "s3-secret"));
        let keys: Vec<&str> = s.keys().collect();
        assert_eq!(keys, ["HF_TOKEN", "S3_ENDPOINT", "awsSecretAccessKey"]);
        assert_eq!(s.get("S3_ENDPOINT").map(String::as_str), Some("minio:9000"));
        assert_eq!(
            s.get("awsSecretAccessKey").map(String::as_str),
            Some(NOT_A_STORAGE_SPEC)
        );
        assert_eq!(
            s.get("HF_TOKEN").map(String::as_str),
            Some(NOT_A_STORAGE_SPEC)
        );
        let held = format!("{s:?}");
        let plain = Secret::from_data("default", "s3-secret", [("S3_ENDPOINT", "minio:9000")]);
        assert_eq!(plain.get("S3_ENDPOINT"), s.get("S3_ENDPOINT"));
        assert!(
            !held.contains("very-secret") && !held.contains("hf_abc"),
            "{held}"
        );
        assert_eq!(s.annotations["serving.kserve.io/s3-endpoint"], "s3.aws.com");
    }

    #[test]
    fn storage_spec_entries_keep_only_what_kserve_reads() {
        let s = Secret::new("default", "storage-config")
            .with_data(
                "my-storage",
                r#"{"type":"s3","bucket":"b","region":"na","secret_access_key":"x","cabundle_configmap":"cm"}"#,
            )
            .with_data("typeless", r#"{"region":"na"}"#)
            .with_data("numbers", r#"{"type":"s3","port":9000}"#)
            .with_data("null", "null");
        assert_eq!(
            s.get("my-storage").unwrap(),
            r#"{"bucket":"b","cabundle_configmap":"cm","type":"s3"}"#
        );
        assert_eq!(s.get("typeless").unwrap(), "{}");
        // Go's map[string]string rejects a number member; so does the marker.
        assert_eq!(s.get("numbers").unwrap(), NOT_A_STORAGE_SPEC);
        assert!(serde_json::from_str::<serde_json::Value>(NOT_A_STORAGE_SPEC).is_err());
        assert_eq!(s.get("null").unwrap(), "null");
        assert!(s.get("absent").is_none());
    }

    #[test]
    fn https_and_s3_settings_are_verbatim() {
        let s = Secret::new("ns", "n")
            .with_data("https-host", "github.com")
            .with_data("headers", "{\n\"Authorization\": \"token x\"\n}")
            .with_data("AWS_CA_BUNDLE", "/path/ca.crt");
        assert_eq!(s.get("https-host").unwrap(), "github.com");
        assert!(s.get("headers").unwrap().starts_with("{\n"));
        assert_eq!(s.get("AWS_CA_BUNDLE").unwrap(), "/path/ca.crt");
        // Kept values (a header may carry a token) never reach `Debug`.
        let printed = format!("{s:?}");
        assert!(!printed.contains("token x") && !printed.contains("github.com"));
        assert!(printed.contains(REDACTED) && printed.contains("https-host"));
    }

    #[test]
    fn uri_format_prefers_prefix_and_keeps_regex_errors() {
        assert_eq!(
            UriFormat::new(Some("s3://"), Some("x")),
            UriFormat::Prefix("s3://".into())
        );
        assert_eq!(UriFormat::new(Some(""), None), UriFormat::Empty);
        match UriFormat::new(None, Some("(")) {
            UriFormat::Regex {
                compiled: Err(e), ..
            } => assert!(!e.to_string().is_empty()),
            other => panic!("{other:?}"),
        }
    }
}
