//! The `inferenceservice-config` ConfigMap: parsed and validated once, at load.
//! Pure: text or a key→value map in, a [`Config`] or a [`ConfigError`] out.

pub(crate) mod bounds;
mod fields;
mod release;
mod shipped;

pub use release::{image_mismatches, release_of_images, ImageMismatch, ReleaseOfImagesError};

use crate::quantity::{self, QuantityError};
use crate::reader::ReadError;
use crate::release::{Behaviour, Release};
use crate::shared_error::SharedError;
use fields::Fields;
use serde_json::Value;
use std::collections::BTreeMap;

pub(crate) const STORAGE_INITIALIZER_KEY: &str = "storageInitializer";
pub(crate) const CREDENTIALS_KEY: &str = "credentials";
pub(crate) const LOGGER_KEY: &str = "logger";
pub(crate) const BATCHER_KEY: &str = "batcher";
pub(crate) const AGENT_KEY: &str = "agent";
pub(crate) const METRICS_AGGREGATOR_KEY: &str = "metricsAggregator";

const DEFAULT_CONFIGMAP: &str = shipped::manifest(Release::Head);

#[derive(Debug, thiserror::Error, Clone)]
pub enum ConfigError {
    #[error("invalid JSON in {key:?}: {source}")]
    Json {
        key: String,
        source: SharedError<serde_json::Error>,
    },
    #[error("invalid {section:?} configuration: field {field:?} must be a{} {expected}, found a{} {found}", article(expected), article(found))]
    Type {
        section: String,
        field: String,
        expected: &'static str,
        found: &'static str,
    },
    /// A resource quantity that is not one, in the wording of KServe's
    /// releases that name the key.
    #[error("failed to parse resource configuration for \"{section}\".\"{key}\": {source}")]
    KeyQuantity {
        section: &'static str,
        key: String,
        source: QuantityError,
    },
    /// The same, in the wording that quotes the quantity's error as Go's
    /// `%q` does.
    #[error("Failed to parse resource configuration for \"{section}\": {:?}", .source.to_string())]
    QuotedQuantity {
        section: &'static str,
        source: QuantityError,
    },
    /// The same, in the agent's wording.
    #[error("failed to parse resource configuration for \"{section}\": {source}")]
    Quantity {
        section: &'static str,
        source: QuantityError,
    },
    #[error("invalid \"{STORAGE_INITIALIZER_KEY}\".ociModelMode {mode:?}: must be one of \"modelcar\", \"native\", \"fetch\"")]
    OciModelMode { mode: String },
    #[error("invalid ConfigMap manifest: {0}")]
    Manifest(#[source] ManifestError),
    /// The sections the mutator reads hold more than a ConfigMap can.
    #[error("the ConfigMap's {keys} hold {bytes} bytes, more than the {MAX_CONFIGMAP_BYTES} the API server stores in a whole ConfigMap")]
    TooLarge { keys: String, bytes: usize },
    /// A value KServe loads that every pod made with it would carry
    /// (`bounds`).
    #[error("invalid {section:?} configuration: {key:?}: {source}; every {container} container would be made with it")]
    OutOfRange {
        section: &'static str,
        key: &'static str,
        container: &'static str,
        #[source]
        source: bounds::OutOfRange,
    },
}

/// Why a ConfigMap manifest could not be read.
#[derive(Debug, thiserror::Error, Clone)]
pub enum ManifestError {
    #[error(transparent)]
    Read(SharedError<ReadError>),
    #[error("the manifest holds no document")]
    Empty,
    #[error("expected kind ConfigMap, found {0:?}")]
    Kind(String),
    #[error("data.{0} must be a string")]
    NotAString(String),
}

fn article(word: &str) -> &'static str {
    if word.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "n"
    } else {
        ""
    }
}

/// Requests and limits, already in Kubernetes' canonical quantity form.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Resources {
    pub(crate) cpu_request: String,
    pub(crate) cpu_limit: String,
    pub(crate) memory_request: String,
    pub(crate) memory_limit: String,
}

#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(any(test, feature = "oracle"), derive(Default))]
pub struct StorageInitializerConfig {
    pub image: String,
    pub(crate) resources: Resources,
    pub ca_bundle_config_map_name: String,
    pub ca_bundle_volume_mount_path: String,
    pub enable_modelcar: bool,
    pub enable_oci_model_support: bool,
    pub oci_model_mode: String,
    pub(crate) cpu_modelcar: String,
    pub(crate) memory_modelcar: String,
    pub uid_modelcar: Option<i64>,
    pub oci_insecure_registry: bool,
    /// v0.15 only: `enableDirectPvcVolumeMount` false or absent, so a
    /// `pvc://` model is copied into the emptyDir by the storage-initializer
    /// (`Release::direct_pvc_always`); always false under other releases.
    pub pvc_copy_mode: bool,
}

impl StorageInitializerConfig {
    /// KServe's `resolveMode`: the explicit mode wins, either legacy switch means modelcar.
    pub(crate) fn oci_mode(&self) -> &str {
        if !self.oci_model_mode.is_empty() {
            &self.oci_model_mode
        } else if self.enable_modelcar || self.enable_oci_model_support {
            "modelcar"
        } else {
            ""
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct S3Config {
    pub(crate) access_key_id_name: String,
    pub(crate) secret_access_key_name: String,
    pub endpoint: String,
    pub use_https: String,
    pub(crate) region: String,
    pub(crate) verify_ssl: String,
    pub(crate) use_virtual_bucket: String,
    pub(crate) use_accelerate: String,
    pub(crate) use_anonymous_credential: String,
    pub ca_bundle_config_map: String,
    pub ca_bundle: String,
}

#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(any(test, feature = "oracle"), derive(Default))]
pub struct CredentialConfig {
    pub(crate) storage_spec_secret_name: String,
    pub storage_secret_name_annotation: String,
    pub(crate) gcs_credential_file_name: String,
    pub s3: S3Config,
}

#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(any(test, feature = "oracle"), derive(Default))]
pub struct LoggerStorage {
    pub path: String,
    pub parameters: Option<BTreeMap<String, String>>,
    pub key: String,
    pub service_account_name: String,
}

#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(any(test, feature = "oracle"), derive(Default))]
pub struct LoggerConfig {
    pub(crate) image: String,
    pub(crate) resources: Resources,
    pub(crate) default_url: String,
    pub ca_bundle: String,
    pub(crate) ca_cert_file: String,
    pub(crate) tls_skip_verify: bool,
    pub storage: Option<LoggerStorage>,
    pub(crate) marshaller_url: String,
    pub(crate) batch_size: i64,
    pub(crate) batch_interval: String,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct BatcherConfig {
    pub(crate) image: String,
    pub(crate) resources: Resources,
    pub(crate) max_batch_size: String,
    pub(crate) max_latency: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct AgentConfig {
    pub image: String,
    pub(crate) resources: Resources,
}

#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(any(test, feature = "oracle"), derive(Default))]
pub struct MetricsAggregatorConfig {
    pub enable_metric_aggregation: String,
    pub enable_prometheus_scraping: String,
}

/// Everything the injectors read from `inferenceservice-config`.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub storage_initializer: StorageInitializerConfig,
    pub credentials: CredentialConfig,
    pub logger: LoggerConfig,
    pub(crate) batcher: BatcherConfig,
    pub agent: AgentConfig,
    pub metrics_aggregator: MetricsAggregatorConfig,
    /// The KServe release whose mutator is reproduced (its switches, as
    /// `--kserve-version` gives them, or some flipped by `audit
    /// --upgrade-to`); the config is read as that release reads it.
    pub(crate) release: Behaviour,
}

impl Default for Config {
    /// KServe's shipped ConfigMap. It is a compile-time constant, so failing to
    /// parse it is a build defect that the unit tests catch.
    fn default() -> Self {
        match Self::from_manifest(DEFAULT_CONFIGMAP) {
            Ok(config) => config,
            Err(e) => unreachable!("embedded default ConfigMap is invalid: {e}"),
        }
    }
}

impl Config {
    /// The embedded default ConfigMap manifest, for users who want a starting point.
    pub fn default_manifest() -> &'static str {
        DEFAULT_CONFIGMAP
    }

    /// Parses a ConfigMap manifest (YAML or JSON) and reads its `data`.
    pub fn from_manifest(text: &str) -> Result<Self, ConfigError> {
        Self::from_manifest_with(text, &Resources::default(), Release::Head)
    }

    /// [`Self::from_manifest`], with `defaults` for the storage-initializer
    /// resource keys the ConfigMap leaves out or empty, read as `release`
    /// reads it (see [`Self::from_data_with`]).
    pub(crate) fn from_manifest_with(
        text: &str,
        defaults: &Resources,
        release: Release,
    ) -> Result<Self, ConfigError> {
        Self::from_data_with(&manifest_data(text)?, defaults, release)
    }

    /// Builds the config from ConfigMap data, in KServe's order: the first
    /// invalid section is the error reported; as HEAD reads it.
    pub fn from_data(data: &BTreeMap<String, String>) -> Result<Self, ConfigError> {
        Self::from_data_with(data, &Resources::default(), Release::Head)
    }

    /// [`Self::from_data`], where a storage-initializer resource key that the
    /// ConfigMap leaves out or empty takes its value from `defaults` (our own
    /// settings file, `crate::settings`); a key the ConfigMap sets wins.
    /// An empty default changes nothing: the key is KServe's error as before.
    /// The data is read as `release` reads it (`--kserve-version`, else the
    /// settings file's `kserveVersion`, [`crate::settings::Settings::release`]).
    pub fn from_data_with(
        data: &BTreeMap<String, String>,
        defaults: &Resources,
        release: Release,
    ) -> Result<Self, ConfigError> {
        Self::from_data_as(data, defaults, release.into())
    }

    /// [`Self::from_data_with`], read as `release` (a release's switches,
    /// some perhaps flipped) reads it.
    pub(crate) fn from_data_as(
        data: &BTreeMap<String, String>,
        defaults: &Resources,
        release: Behaviour,
    ) -> Result<Self, ConfigError> {
        let read = [
            CREDENTIALS_KEY,
            STORAGE_INITIALIZER_KEY,
            LOGGER_KEY,
            BATCHER_KEY,
            AGENT_KEY,
            METRICS_AGGREGATOR_KEY,
        ];
        // Parsed JSON takes up to twenty times its text: bounded by what a
        // real ConfigMap can hold, a hostile file cannot grow a reload.
        let bytes = read
            .iter()
            .filter_map(|k| data.get(*k))
            .map(String::len)
            .sum();
        if bytes > MAX_CONFIGMAP_BYTES {
            let keys = read.join(", ");
            return Err(ConfigError::TooLarge { keys, bytes });
        }
        let section = |key: &str| -> Result<Value, ConfigError> {
            match data.get(key) {
                None => Ok(Value::Null),
                Some(text) => serde_json::from_str(text).map_err(|e| ConfigError::Json {
                    key: key.to_string(),
                    source: e.into(),
                }),
            }
        };
        let credentials = parse_credentials(&section(CREDENTIALS_KEY)?)?;
        let storage_initializer_json = section(STORAGE_INITIALIZER_KEY)?;
        let storage_initializer =
            parse_storage_initializer(&storage_initializer_json, defaults, release)?;
        let logger = parse_logger(&section(LOGGER_KEY)?)?;
        let batcher = parse_batcher(&section(BATCHER_KEY)?)?;
        let agent = parse_agent(&section(AGENT_KEY)?)?;
        let metrics_aggregator = parse_metrics_aggregator(&section(METRICS_AGGREGATOR_KEY)?)?;
        let config = Self {
            storage_initializer,
            credentials,
            logger,
            batcher,
            agent,
            metrics_aggregator,
            release,
        }
        .for_behaviour(release);
        // After KServe's checks, so a config KServe refuses keeps its message.
        bounds::check(&storage_initializer_json, &config.storage_initializer)?;
        Ok(config)
    }
}

/// A ConfigMap's `data`: key to text.
pub type ConfigMapData = BTreeMap<String, String>;

/// The API server's limit on a ConfigMap's data (`MaxSecretSize`, which
/// `ValidateConfigMap` applies to ConfigMaps too).
pub(crate) const MAX_CONFIGMAP_BYTES: usize = 1 << 20;

/// What reading a ConfigMap manifest may cost: its text, aliases expanded,
/// at most the 4 MiB a file `serve` reads may hold (four times what the API
/// server stores), in at most 100,000 nodes (the shipped manifest has a few
/// dozen). Smaller than the reader's default, which is sized for pods and
/// lists: a reload then costs the server a few MiB at most.
pub(crate) const MANIFEST_BUDGET: crate::reader::Budget = crate::reader::Budget {
    document_bytes: 4 << 20,
    document_nodes: 100_000,
    depth: crate::reader::MAX_DEPTH,
    input_bytes: 4 << 20,
    input_nodes: 100_000,
};

/// The `data` of a ConfigMap manifest (YAML or JSON), read as the CLI reads
/// it: JSON as JSON, YAML the way kubectl reads it, within
/// `MANIFEST_BUDGET`.
pub fn manifest_data(text: &str) -> Result<ConfigMapData, ConfigError> {
    let read = |e: ReadError| ConfigError::Manifest(ManifestError::Read(e.into()));
    let mut bytes = text.as_bytes();
    let docs = crate::reader::documents_within(&mut bytes, MANIFEST_BUDGET);
    let mut docs = docs.map_err(read)?;
    let doc = match docs.next() {
        Some(doc) => doc.map_err(read)?,
        None => return Err(ConfigError::Manifest(ManifestError::Empty)),
    };
    let kind = doc.get("kind").and_then(Value::as_str).unwrap_or_default();
    if kind != "ConfigMap" {
        return Err(ConfigError::Manifest(ManifestError::Kind(kind.to_string())));
    }
    let mut data = BTreeMap::new();
    if let Some(map) = doc.get("data").and_then(Value::as_object) {
        for (k, v) in map {
            let Value::String(s) = v else {
                return Err(ConfigError::Manifest(ManifestError::NotAString(k.clone())));
            };
            data.insert(k.clone(), s.clone());
        }
    }
    Ok(data)
}

/// Reads the four resource keys in KServe's validation order and canonicalises them.
fn parse_resources(
    f: &Fields,
    defaults: &Resources,
    on_error: impl Fn(&str, QuantityError) -> ConfigError,
) -> Result<Resources, ConfigError> {
    let q = |key: &str, default: &str| -> Result<String, ConfigError> {
        let mut raw = f.string(key)?;
        if raw.is_empty() {
            raw = default.to_string();
        }
        quantity::canonicalize(&raw).map_err(|e| on_error(key, e))
    };
    let memory_request = q("memoryRequest", &defaults.memory_request)?;
    let memory_limit = q("memoryLimit", &defaults.memory_limit)?;
    let cpu_request = q("cpuRequest", &defaults.cpu_request)?;
    let cpu_limit = q("cpuLimit", &defaults.cpu_limit)?;
    Ok(Resources {
        cpu_request,
        cpu_limit,
        memory_request,
        memory_limit,
    })
}

fn parse_storage_initializer(
    v: &Value,
    defaults: &Resources,
    release: Behaviour,
) -> Result<StorageInitializerConfig, ConfigError> {
    let f = Fields::new(STORAGE_INITIALIZER_KEY, v)?;
    let refused = |key: &str, source: QuantityError| {
        if release.storage_initializer_error_names_key() {
            ConfigError::KeyQuantity {
                section: STORAGE_INITIALIZER_KEY,
                key: key.to_string(),
                source,
            }
        } else {
            ConfigError::QuotedQuantity {
                section: STORAGE_INITIALIZER_KEY,
                source,
            }
        }
    };
    let resources = parse_resources(&f, defaults, refused)?;
    let optional_quantity = |key: &str| -> Result<String, ConfigError> {
        let raw = f.string(key)?;
        if raw.is_empty() && release.modelcar_quantities_optional() {
            return Ok(raw);
        }
        quantity::canonicalize(&raw).map_err(|e| refused(key, e))
    };
    let cpu_modelcar = optional_quantity("cpuModelcar")?;
    let memory_modelcar = optional_quantity("memoryModelcar")?;
    let oci_model_mode = f.string("ociModelMode")?;
    // Before v0.20 the key is unknown to KServe, so never refused.
    if release.oci_model_mode_validated()
        && !matches!(
            oci_model_mode.as_str(),
            "" | "modelcar" | "native" | "fetch"
        )
    {
        return Err(ConfigError::OciModelMode {
            mode: oci_model_mode,
        });
    }
    Ok(StorageInitializerConfig {
        image: f.string("image")?,
        resources,
        ca_bundle_config_map_name: f.string("caBundleConfigMapName")?,
        ca_bundle_volume_mount_path: f.string("caBundleVolumeMountPath")?,
        enable_modelcar: f.boolean("enableModelcar")?,
        enable_oci_model_support: f.boolean("enableOciModelSupport")?,
        oci_model_mode,
        cpu_modelcar,
        memory_modelcar,
        uid_modelcar: f.integer("uidModelcar")?,
        oci_insecure_registry: f.boolean("ociInsecureRegistry")?,
        // Other releases do not know the key, so never read (nor refuse) it.
        pvc_copy_mode: !release.direct_pvc_always() && !f.boolean("enableDirectPvcVolumeMount")?,
    })
}

fn parse_credentials(v: &Value) -> Result<CredentialConfig, ConfigError> {
    let f = Fields::new(CREDENTIALS_KEY, v)?;
    let gcs_credential_file_name = match f.object("gcs")? {
        Some(gcs) => gcs.string("gcsCredentialFileName")?,
        None => String::new(),
    };
    let s3 = match f.object("s3")? {
        Some(s3) => S3Config {
            access_key_id_name: s3.string("s3AccessKeyIDName")?,
            secret_access_key_name: s3.string("s3SecretAccessKeyName")?,
            endpoint: s3.string("s3Endpoint")?,
            use_https: s3.string("s3UseHttps")?,
            region: s3.string("s3Region")?,
            verify_ssl: s3.string("s3VerifySSL")?,
            use_virtual_bucket: s3.string("s3UseVirtualBucket")?,
            use_accelerate: s3.string("s3UseAccelerate")?,
            use_anonymous_credential: s3.string("s3UseAnonymousCredential")?,
            ca_bundle_config_map: s3.string("s3CABundleConfigMap")?,
            ca_bundle: s3.string("s3CABundle")?,
        },
        None => S3Config::default(),
    };
    Ok(CredentialConfig {
        storage_spec_secret_name: f.string("storageSpecSecretName")?,
        storage_secret_name_annotation: f.string("storageSecretNameAnnotation")?,
        gcs_credential_file_name,
        s3,
    })
}

fn parse_logger(v: &Value) -> Result<LoggerConfig, ConfigError> {
    let f = Fields::new(LOGGER_KEY, v)?;
    let resources = parse_resources(&f, &Resources::default(), |_, source| {
        ConfigError::QuotedQuantity {
            section: LOGGER_KEY,
            source,
        }
    })?;
    let storage = match f.object("storage")? {
        Some(s) => Some(LoggerStorage {
            path: s.string("path")?,
            parameters: s.string_map("parameters")?,
            key: s.string("key")?,
            service_account_name: s.string("serviceAccountName")?,
        }),
        None => None,
    };
    Ok(LoggerConfig {
        image: f.string("image")?,
        resources,
        default_url: f.string("defaultUrl")?,
        ca_bundle: f.string("caBundle")?,
        ca_cert_file: f.string("caCertFile")?,
        tls_skip_verify: f.boolean("tlsSkipVerify")?,
        storage: storage.map(with_logger_storage_defaults),
        marshaller_url: f.string("marshallerUrl")?,
        batch_size: f.integer("batchSize")?.unwrap_or(0),
        batch_interval: f.string("batchInterval")?,
    })
}

/// KServe fills these two after any InferenceService override.
fn with_logger_storage_defaults(mut s: LoggerStorage) -> LoggerStorage {
    if s.key.is_empty() {
        s.key = crate::constants::DEFAULT_LOGGER_STORAGE_KEY.to_string();
    }
    if s.service_account_name.is_empty() {
        s.service_account_name = crate::constants::DEFAULT_LOGGER_SERVICE_ACCOUNT.to_string();
    }
    s
}

fn parse_batcher(v: &Value) -> Result<BatcherConfig, ConfigError> {
    let f = Fields::new(BATCHER_KEY, v)?;
    let resources = parse_resources(&f, &Resources::default(), |_, source| {
        ConfigError::QuotedQuantity {
            section: BATCHER_KEY,
            source,
        }
    })?;
    Ok(BatcherConfig {
        image: f.string("image")?,
        resources,
        max_batch_size: f.string("maxBatchSize")?,
        max_latency: f.string("maxLatency")?,
    })
}

fn parse_agent(v: &Value) -> Result<AgentConfig, ConfigError> {
    let f = Fields::new(AGENT_KEY, v)?;
    let resources = parse_resources(&f, &Resources::default(), |_, source| {
        ConfigError::Quantity {
            section: AGENT_KEY,
            source,
        }
    })?;
    Ok(AgentConfig {
        image: f.string("image")?,
        resources,
    })
}

fn parse_metrics_aggregator(v: &Value) -> Result<MetricsAggregatorConfig, ConfigError> {
    let f = Fields::new(METRICS_AGGREGATOR_KEY, v)?;
    Ok(MetricsAggregatorConfig {
        enable_metric_aggregation: f.string("enableMetricAggregation")?,
        enable_prometheus_scraping: f.string("enablePrometheusScraping")?,
    })
}

#[cfg(test)]
mod tests;
