//! kserve-injector's own settings file (`--config-file`): what KServe's
//! `inferenceservice-config` has no key for. Pure: text in, [`Settings`] or
//! a [`SettingsError`] out; the adapters read the file.
//!
//! ```yaml
//! kserveVersion: v0.17.1   # the KServe release to reproduce (--kserve-version wins)
//! storageInitializer:      # defaults below the ConfigMap's storageInitializer keys
//!   cpuRequest: 100m
//!   memoryLimit: 2Gi
//! modelVolume:             # the source of kserve-provision-location
//!   ephemeral:
//!     volumeClaimTemplate:
//!       spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 200Gi}}}
//! ```

use crate::config::{bounds, Resources};
use crate::constants::PROVISION_LOCATION_VOLUME;
use crate::quantity::{self, QuantityError};
use crate::reader::ReadError;
use crate::release::{Release, ReleaseError};
use crate::shared_error::SharedError;
use k8s_openapi::api::core::v1::Volume;
use serde_json::{Map, Value};

pub(crate) const STORAGE_INITIALIZER_KEY: &str = "storageInitializer";
pub(crate) const MODEL_VOLUME_KEY: &str = "modelVolume";
pub(crate) const KSERVE_VERSION_KEY: &str = "kserveVersion";
/// The storage-initializer keys, named as in KServe's ConfigMap.
pub(crate) const RESOURCE_KEYS: [&str; 4] =
    ["cpuRequest", "cpuLimit", "memoryRequest", "memoryLimit"];

/// Why the settings file cannot be used.
#[derive(Debug, thiserror::Error)]
#[cfg_attr(any(test, feature = "oracle"), derive(PartialEq))]
pub enum SettingsError {
    #[error("not UTF-8 text")]
    NotUtf8(#[source] std::str::Utf8Error),
    #[error(transparent)]
    Read(SharedError<ReadError>),
    #[error("more than one document: the settings are one mapping, in one document")]
    Documents,
    #[error("expected a mapping, found {0}")]
    NotAMapping(&'static str),
    #[error("unknown key {0:?} (known: {KSERVE_VERSION_KEY}, {STORAGE_INITIALIZER_KEY}, {MODEL_VOLUME_KEY})")]
    UnknownKey(String),
    #[error("{KSERVE_VERSION_KEY}: {0}")]
    Release(#[source] ReleaseError),
    #[error("{KSERVE_VERSION_KEY}: expected a release such as v0.17 or head, found {0}")]
    NotARelease(&'static str),
    #[error("{MODEL_VOLUME_KEY}: expected a mapping, found {0}")]
    VolumeNotAMapping(&'static str),
    #[error("{MODEL_VOLUME_KEY}: expected exactly one volume source (such as ephemeral, persistentVolumeClaim or emptyDir), found {0}")]
    VolumeSources(usize),
    #[error(
        "{MODEL_VOLUME_KEY}: the volume is named {PROVISION_LOCATION_VOLUME}; give only its source"
    )]
    VolumeNamed,
    /// The volume source does not decode (`volume_source` is its key).
    #[error("{MODEL_VOLUME_KEY}: {volume_source}: {source}")]
    Volume {
        volume_source: String,
        source: SharedError<serde_json::Error>,
    },
    /// The decoded volume does not encode again.
    #[error("{MODEL_VOLUME_KEY}: {0}")]
    VolumeJson(#[source] SharedError<serde_json::Error>),
    #[error("{MODEL_VOLUME_KEY}: {0:?} is not a volume source")]
    NotAVolumeSource(String),
    #[error("{STORAGE_INITIALIZER_KEY}: expected a mapping, found {0}")]
    ResourcesNotAMapping(&'static str),
    #[error("{STORAGE_INITIALIZER_KEY}.{key}: expected a quantity, found {found}")]
    QuantityType { key: String, found: &'static str },
    #[error("{STORAGE_INITIALIZER_KEY}.{key}: {source}")]
    OutOfRange {
        key: String,
        source: bounds::OutOfRange,
    },
    #[error("{STORAGE_INITIALIZER_KEY}.{key}: {text:?} is not a quantity ({source}); write one such as 500m, 2, 512Mi or 4Gi")]
    Quantity {
        key: String,
        text: String,
        source: QuantityError,
    },
    #[error("{STORAGE_INITIALIZER_KEY}: unknown key {0:?} (known: {keys})", keys = RESOURCE_KEYS.join(", "))]
    UnknownResource(String),
    #[error("{STORAGE_INITIALIZER_KEY}.{what}Limit {limit:?} is below {what}Request {request:?}")]
    LimitBelowRequest {
        what: &'static str,
        limit: String,
        request: String,
    },
}

/// The parsed settings; the default is an empty file (nothing changes).
#[derive(Debug, Default)]
#[cfg_attr(any(test, feature = "oracle"), derive(PartialEq))]
pub struct Settings {
    /// Storage-initializer requests and limits, canonical quantities, empty
    /// where unset: they fill the keys KServe's ConfigMap leaves out
    /// ([`crate::config::Config::from_data_with`]).
    pub storage_initializer: Resources,
    /// The `kserve-provision-location` volume the storage-initializer
    /// downloads into, instead of KServe's `emptyDir` (named already).
    pub model_volume: Option<Volume>,
    /// The KServe release whose pod mutator is reproduced, when the file
    /// names one ([`Self::release`]).
    pub kserve_version: Option<Release>,
}

impl Settings {
    /// Parses the file's text (YAML the way kubectl reads it, or JSON). An
    /// unknown key is an error, so a typo is not silently ignored.
    pub fn from_text(text: &str) -> Result<Self, SettingsError> {
        let read = |e: ReadError| SettingsError::Read(e.into());
        let mut bytes = text.as_bytes();
        let mut docs = crate::reader::documents(&mut bytes).map_err(read)?;
        let doc = match docs.next() {
            Some(doc) => doc.map_err(read)?,
            None => return Ok(Self::default()),
        };
        // A second document would otherwise go unread, however wrong.
        if let Some(second) = docs.next() {
            second.map_err(read)?;
            return Err(SettingsError::Documents);
        }
        let root = match doc {
            Value::Null => return Ok(Self::default()),
            Value::Object(map) => map,
            other => return Err(SettingsError::NotAMapping(kind(&other))),
        };
        let mut settings = Self::default();
        for (key, value) in &root {
            match key.as_str() {
                STORAGE_INITIALIZER_KEY => {
                    settings.storage_initializer = storage_initializer(value)?;
                }
                MODEL_VOLUME_KEY => settings.model_volume = model_volume(value)?,
                KSERVE_VERSION_KEY => settings.kserve_version = kserve_version(value)?,
                other => return Err(SettingsError::UnknownKey(other.to_string())),
            }
        }
        Ok(settings)
    }

    /// The release to reproduce: `flag` (`--kserve-version`) when given, else
    /// the file's `kserveVersion`, else HEAD.
    pub fn release(&self, flag: Option<Release>) -> Release {
        flag.or(self.kserve_version).unwrap_or_default()
    }
}

/// `v0.17`, `v0.17.0`, `0.17`, `head` or `HEAD`, as `--kserve-version`
/// reads it.
fn kserve_version(value: &Value) -> Result<Option<Release>, SettingsError> {
    match value {
        Value::Null => Ok(None),
        Value::String(text) => text.parse().map(Some).map_err(SettingsError::Release),
        // Unquoted `0.20` is a number, read with its text as written.
        Value::Number(n) => n
            .to_string()
            .parse()
            .map(Some)
            .map_err(SettingsError::Release),
        other => Err(SettingsError::NotARelease(kind(other))),
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

/// One volume source (`emptyDir`, `ephemeral`, `persistentVolumeClaim`, …),
/// as a pod's volume holds it, without the name.
fn model_volume(value: &Value) -> Result<Option<Volume>, SettingsError> {
    let map = match value {
        Value::Null => return Ok(None),
        Value::Object(map) => map,
        other => return Err(SettingsError::VolumeNotAMapping(kind(other))),
    };
    let keys: Vec<&String> = map.keys().collect();
    let [source] = keys.as_slice() else {
        return Err(SettingsError::VolumeSources(keys.len()));
    };
    if source.as_str() == "name" {
        return Err(SettingsError::VolumeNamed);
    }
    let mut named = map.clone();
    named.insert(
        "name".into(),
        Value::String(PROVISION_LOCATION_VOLUME.into()),
    );
    let volume: Volume =
        serde_json::from_value(Value::Object(named)).map_err(|e| SettingsError::Volume {
            volume_source: source.to_string(),
            source: e.into(),
        })?;
    // k8s-openapi skips fields it does not know: a misspelt source would
    // leave a volume without one.
    let known = serde_json::to_value(&volume).map_err(|e| SettingsError::VolumeJson(e.into()))?;
    if known.get(source.as_str()).is_none() {
        return Err(SettingsError::NotAVolumeSource(source.to_string()));
    }
    Ok(Some(volume))
}

fn storage_initializer(value: &Value) -> Result<Resources, SettingsError> {
    let empty = Map::new();
    let map = match value {
        Value::Null => &empty,
        Value::Object(map) => map,
        other => return Err(SettingsError::ResourcesNotAMapping(kind(other))),
    };
    let mut r = Resources::default();
    for (key, value) in map {
        let text = match value {
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            other => {
                return Err(SettingsError::QuantityType {
                    key: key.clone(),
                    found: kind(other),
                })
            }
        };
        let out_of_range = |source| SettingsError::OutOfRange {
            key: key.clone(),
            source,
        };
        bounds::check_length(&text).map_err(out_of_range)?;
        let canonical =
            quantity::canonicalize(&text).map_err(|source| SettingsError::Quantity {
                key: key.clone(),
                text: text.clone(),
                source,
            })?;
        let (slot, resource) = match key.as_str() {
            "cpuRequest" => (&mut r.cpu_request, "cpu"),
            "cpuLimit" => (&mut r.cpu_limit, "cpu"),
            "memoryRequest" => (&mut r.memory_request, "memory"),
            "memoryLimit" => (&mut r.memory_limit, "memory"),
            other => return Err(SettingsError::UnknownResource(other.to_string())),
        };
        bounds::check_quantity(resource, &text, &canonical).map_err(out_of_range)?;
        *slot = canonical;
    }
    for (what, request, limit) in [
        ("cpu", &r.cpu_request, &r.cpu_limit),
        ("memory", &r.memory_request, &r.memory_limit),
    ] {
        if request.is_empty() || limit.is_empty() {
            continue;
        }
        if quantity::compare(limit, request) == Ok(std::cmp::Ordering::Less) {
            return Err(SettingsError::LimitBelowRequest {
                what,
                limit: limit.clone(),
                request: request.clone(),
            });
        }
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_text_is_no_settings() {
        for text in ["", "---\n", "null\n", "{}"] {
            assert_eq!(
                Settings::from_text(text),
                Ok(Settings::default()),
                "{text:?}"
            );
        }
    }

    #[test]
    fn storage_initializer_keys_are_canonical_quantities() {
        let s = Settings::from_text(
            "storageInitializer:\n  cpuRequest: 0.5\n  cpuLimit: 2\n  memoryLimit: 2048Mi\n",
        )
        .unwrap();
        let r = &s.storage_initializer;
        assert_eq!(r.cpu_request, "500m");
        assert_eq!(r.cpu_limit, "2");
        assert_eq!(r.memory_limit, "2Gi");
        assert_eq!(r.memory_request, "");
    }

    #[test]
    fn model_volume_is_one_named_source() {
        let s = Settings::from_text(
            "modelVolume:\n  ephemeral:\n    volumeClaimTemplate:\n      spec:\n        accessModes: [ReadWriteOnce]\n        resources: {requests: {storage: 200Gi}}\n",
        )
        .unwrap();
        let v = s.model_volume.unwrap();
        assert_eq!(v.name, PROVISION_LOCATION_VOLUME);
        let claim = v.ephemeral.unwrap().volume_claim_template.unwrap().spec;
        assert_eq!(claim.access_modes.unwrap(), ["ReadWriteOnce"]);
    }

    #[test]
    fn kserve_version_names_the_release_and_the_flag_wins() {
        for (text, want) in [
            ("kserveVersion: v0.17\n", Release::V0_17_1),
            ("kserveVersion: v0.18.0\n", Release::V0_18_0),
            ("kserveVersion: v0.15.2\n", Release::V0_15_2),
            ("kserveVersion: 0.15.1\n", Release::V0_15_1),
            ("kserveVersion: v0.15\n", Release::V0_15_2),
            ("kserveVersion: '0.16'\n", Release::V0_16_0),
            ("kserveVersion: 0.20\n", Release::V0_20_0),
            ("{\"kserveVersion\": 0.20}", Release::V0_20_0),
            ("kserveVersion: HEAD\n", Release::Head),
        ] {
            let s = Settings::from_text(text).unwrap();
            assert_eq!(s.kserve_version, Some(want), "{text:?}");
            assert_eq!(s.release(None), want, "{text:?}");
            assert_eq!(
                s.release(Some(Release::V0_19_0)),
                Release::V0_19_0,
                "{text:?}"
            );
        }
        assert_eq!(Settings::default().release(None), Release::Head);
        assert_eq!(
            Settings::default().release(Some(Release::V0_20_0)),
            Release::V0_20_0
        );
    }

    #[test]
    fn bad_settings_are_errors_naming_the_key() {
        for (text, want) in [
            (
                "storageInitializer:\n  cpuLimit: lots\n",
                "storageInitializer.cpuLimit: \"lots\" is not a quantity",
            ),
            (
                "storageInitializer:\n  gpuLimit: 1\n",
                "unknown key \"gpuLimit\"",
            ),
            (
                "storageInitializer: 3\n",
                "expected a mapping, found a number",
            ),
            (
                "storageInitialiser: {}\n",
                "unknown key \"storageInitialiser\"",
            ),
            ("- a\n", "expected a mapping, found a list"),
            (
                "storageInitializer:\n  memoryRequest: 2Gi\n  memoryLimit: 1Gi\n",
                "memoryLimit \"1Gi\" is below memoryRequest \"2Gi\"",
            ),
            (
                "storageInitializer:\n  cpuLimit: [1]\n",
                "expected a quantity, found a list",
            ),
            (
                "kserveVersion: v0.14\n",
                "kserveVersion: \"v0.14\" is not a KServe version",
            ),
            (
                "kserveVersion: v1.2\n",
                "kserveVersion: \"v1.2\" is not a KServe version",
            ),
            ("kserveVersion: [v0.17]\n", "expected a release"),
            (
                "kserveVersion: V0.17\n",
                "kserveVersion: \"V0.17\" is not a KServe version",
            ),
            (
                "kserveVersion: ' v0.17'\n",
                "kserveVersion: \" v0.17\" is not a KServe version",
            ),
            (
                "kserveVersion: v0.17.3\n",
                "kserveVersion: \"v0.17.3\" is not a KServe version",
            ),
            (
                "kserveVersion: 0.17.00\n",
                "kserveVersion: \"0.17.00\" is not a KServe version",
            ),
        ] {
            let e = Settings::from_text(text).unwrap_err().to_string();
            assert!(e.contains(want), "{text:?}: {e}");
        }
    }

    #[test]
    fn a_settings_file_is_one_document_with_each_key_once() {
        for (text, want) in [
            (
                "{\"kserveVersion\": \"v0.17\", \"kserveVersion\": \"v0.18\"}",
                "document 1: not valid JSON: mapping key \"kserveVersion\" already defined at line 1 column 43",
            ),
            (
                "kserveVersion: v0.17\nkserveVersion: v0.18\n",
                "mapping key \"kserveVersion\" already defined",
            ),
            (
                "kserveVersion: v0.17\n---\nkserveVersion: v0.18\n",
                "more than one document: the settings are one mapping, in one document",
            ),
            (
                "{\"kserveVersion\": \"v0.17\"} {}",
                "more than one document: the settings are one mapping, in one document",
            ),
            (
                "kserveVersion: v0.17\n---\n- [\n",
                "document 2: not valid YAML or JSON",
            ),
        ] {
            let e = Settings::from_text(text).unwrap_err().to_string();
            assert!(e.contains(want), "{text:?}: {e}");
        }
        // Empty documents around the one are no second document.
        let s = Settings::from_text("---\n---\nkserveVersion: v0.17\n---\n").unwrap();
        assert_eq!(s.kserve_version, Some(Release::V0_17_1));
    }

    #[test]
    fn storage_initializer_quantities_every_pod_would_carry_are_refused() {
        let long = format!("0.{}1", "0".repeat(100));
        for (text, want) in [
            (
                "storageInitializer:\n  cpuRequest: '-1'\n".to_string(),
                "storageInitializer.cpuRequest: \"-1\" is negative, which the API server refuses",
            ),
            (
                "storageInitializer:\n  memoryLimit: 1e999999\n".to_string(),
                "storageInitializer.memoryLimit: \"1e999999\" is more than Kubernetes counts (9223372036854775807 bytes)",
            ),
            (
                format!("storageInitializer:\n  cpuLimit: '{long}'\n"),
                "storageInitializer.cpuLimit: 103 characters long, more than the 64 a quantity may have here",
            ),
        ] {
            let e = Settings::from_text(&text).unwrap_err().to_string();
            assert_eq!(e, want, "{text:?}");
        }
    }
}
