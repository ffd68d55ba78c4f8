//! Which ClusterStorageContainer (CSC) customises the storage-initializer
//! for a URI (KServe's `GetStorageContainerSpec`), and our guard against
//! injecting a renamed init container twice (KServe #3900).

use super::objects::{ClusterStorageContainer, UriFormat, INIT_CONTAINER_WORKLOAD};
use super::ClusterSnapshot;
use crate::constants::{
    DEFAULT_MODEL_LOCAL_MOUNT_PATH, PROVISION_LOCATION_VOLUME, STORAGE_INITIALIZER_CONTAINER,
};
use crate::view::{ContainerView, Str};

/// The pod annotation that selects a CSC by name.
pub(crate) const STORAGE_CONTAINER_NAME_ANNOTATION: &str =
    "internal.serving.kserve.io/storage-container-name";

/// KServe's messages; each denies the pod.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[cfg_attr(not(feature = "oracle"), allow(unreachable_pub))] // What `select` returns.
pub enum StorageContainerError {
    #[error("ClusterStorageContainer {0:?} not found")]
    NotFound(String),
    #[error("ClusterStorageContainer {0:?} is disabled")]
    Disabled(String),
    #[error("ClusterStorageContainer {name:?} has workloadType {workload_type:?}; explicit selection requires {:?}", INIT_CONTAINER_WORKLOAD)]
    WorkloadType { name: String, workload_type: String },
    #[error("ClusterStorageContainer {name:?} does not support storageUri {uri:?}")]
    Unsupported { name: String, uri: String },
    /// The text after the colon is the Rust regex error, not Go's.
    #[error("error checking storage container {name}: {source}")]
    Regex { name: String, source: regex::Error },
}

impl ClusterStorageContainer {
    /// KServe's `IsStorageUriSupported`: formats in order, prefix by string
    /// prefix, regex unanchored; an invalid regex is an error when reached.
    pub(crate) fn supports(&self, uri: &str) -> Result<bool, StorageContainerError> {
        for format in &self.supported_uri_formats {
            let matched = match format {
                UriFormat::Prefix(p) => uri.starts_with(&**p),
                UriFormat::Regex(regex) => match &regex.compiled {
                    Ok(re) => re.is_match(uri),
                    Err(source) => {
                        return Err(StorageContainerError::Regex {
                            name: self.name().to_string(),
                            source: source.clone(),
                        })
                    }
                },
                UriFormat::Empty => false,
            };
            if matched {
                return Ok(true);
            }
        }
        Ok(false)
    }
}

/// The CSC whose container is merged into the storage-initializer for
/// `uri` (the source URI before any storage-spec placeholder is resolved).
/// With `explicit` (the `STORAGE_CONTAINER_NAME_ANNOTATION` value): that
/// CSC, which must exist, be enabled, be an `initContainer` one and support
/// the URI. Without: the first CSC by name that is enabled, of workload type
/// `initContainer`, and supports the URI; `None` if there is none.
#[cfg_attr(not(feature = "oracle"), allow(unreachable_pub))] // `internals` (lib.rs), for the lookups bench.
pub fn select<'a>(
    cluster: &'a ClusterSnapshot,
    uri: &str,
    explicit: Option<&str>,
) -> Result<Option<&'a ClusterStorageContainer>, StorageContainerError> {
    if let Some(name) = explicit {
        let csc = cluster
            .storage_container(name)
            .ok_or_else(|| StorageContainerError::NotFound(name.to_string()))?;
        if csc.disabled {
            return Err(StorageContainerError::Disabled(name.to_string()));
        }
        if csc.workload_type() != INIT_CONTAINER_WORKLOAD {
            return Err(StorageContainerError::WorkloadType {
                name: name.to_string(),
                workload_type: csc.workload_type().to_string(),
            });
        }
        if !csc.supports(uri)? {
            return Err(StorageContainerError::Unsupported {
                name: name.to_string(),
                uri: uri.to_string(),
            });
        }
        return Ok(Some(csc));
    }
    for csc in cluster.storage_containers.candidates(uri) {
        if csc.disabled || csc.workload_type() != INIT_CONTAINER_WORKLOAD {
            continue;
        }
        if csc.supports(uri)? {
            return Ok(Some(csc));
        }
    }
    Ok(None)
}

/// Our "already injected" guard for the storage-initializer (the fix for
/// KServe #3900). KServe skips injection only when an init container named
/// `storage-initializer` exists; a CSC whose `container.name` differs
/// renames the injected container, so on reinvocation KServe injects a
/// second one (duplicate volume, mount and init container).
///
/// An init container counts as already injected when either
/// - it is named `storage-initializer` (KServe's own guard, kept so pods
///   KServe or we mutated before stay as they are), or
/// - it is named like the container of the CSC selected for this pod's URI
///   (`csc_container_name`, non-empty) **and** mounts
///   `kserve-provision-location` at `/mnt/models`: that mount on an init
///   container is only ever put there by this injection, so a user's own
///   init container that happens to share the name is not mistaken for it.
pub(crate) fn storage_initializer_injected(
    init_containers: &[ContainerView],
    csc_container_name: Option<&str>,
) -> bool {
    let is = |s: &Option<Str>, want: &str| s.as_ref().map(Str::as_str) == Some(want);
    init_containers.iter().any(|c| {
        is(&c.name, STORAGE_INITIALIZER_CONTAINER)
            || (csc_container_name.is_some_and(|n| !n.is_empty() && is(&c.name, n))
                && c.volume_mounts.iter().flat_map(|l| l.0.iter()).any(|m| {
                    is(&m.name, PROVISION_LOCATION_VOLUME)
                        && is(&m.mount_path, DEFAULT_MODEL_LOCAL_MOUNT_PATH)
                }))
    })
}

#[cfg(test)]
mod tests;
