//! What KServe's pod mutator reads from the API server, as a plain snapshot
//! ([`ClusterSnapshot`]) and pure functions over it: which objects a pod needs
//! (`keys`), the credentials a ServiceAccount's Secrets give a container
//! (`credentials`), the ClusterStorageContainer for a storage URI and its
//! merge into the init container (`storage_container`, `container_merge`),
//! the storage-spec Secret's entry (`storage_spec`), and the logger
//! storage an InferenceService configures (`logger`).
//!
//! No I/O happens here: adapters (the CLI's `--objects` file via
//! [`ClusterSnapshot::from_documents`], server caches) fill the snapshot with
//! the objects [`keys::needed_keys`] names. An absent object is "not found",
//! exactly as a failed GET is for KServe.

pub(crate) mod container_merge;
pub(crate) mod credentials;
mod csc_index;
pub(crate) mod keys;
pub(crate) mod load;
pub(crate) mod logger;
pub(crate) mod objects;
mod packed;
mod s3;
mod secret_kinds;
pub(crate) mod storage_container;
pub(crate) mod storage_spec;

pub use csc_index::StorageContainers;
pub use keys::{needed_keys, ObjectKey};
pub use load::{
    inference_service, storage_container, LoadedSnapshot, ObjectsLoadError,
    StorageContainerLoadError,
};
pub use objects::{
    annotation_read, ClusterStorageContainer, InferenceService, Secret, ServiceAccount,
    NOT_A_STORAGE_SPEC,
};
pub(crate) use secret_kinds::secret_env_names;

use std::collections::BTreeMap;
use std::sync::Arc;

pub(crate) use crate::pod_facts::Annotations;

/// A namespaced object's identity.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectRef {
    pub namespace: String,
    pub name: String,
}

impl ObjectRef {
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
        }
    }
}

impl std::fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// The cluster objects a mutation may read, already reduced to what the
/// injectors use (see `objects`). Whatever is absent behaves as "not found".
#[derive(Debug, Clone, Default)]
#[cfg_attr(any(test, feature = "oracle"), derive(PartialEq))]
pub struct ClusterSnapshot {
    /// ServiceAccounts and Secrets are shared with the cache they came
    /// from: a snapshot never copies them.
    pub service_accounts: BTreeMap<ObjectRef, Arc<ServiceAccount>>,
    pub secrets: BTreeMap<ObjectRef, Arc<Secret>>,
    /// Cluster-scoped, by name: iteration order is the API server's LIST
    /// order (alphabetical), which KServe's first-match selection depends on.
    /// Shared, not copied, by every snapshot made from the same set.
    pub storage_containers: StorageContainers,
    pub inference_services: BTreeMap<ObjectRef, InferenceService>,
}

impl ClusterSnapshot {
    /// The kept part of a Secret: `get(key)` gives the values the storage-spec
    /// and credential code read (see `KEPT_SECRET_VALUE_KEYS`).
    pub fn secret(&self, namespace: &str, name: &str) -> Option<&Secret> {
        self.secrets
            .get(&ObjectRef::new(namespace, name))
            .map(|s| &**s)
    }

    pub fn service_account(&self, namespace: &str, name: &str) -> Option<&ServiceAccount> {
        (self.service_accounts.get(&ObjectRef::new(namespace, name))).map(|s| &**s)
    }

    pub fn inference_service(&self, namespace: &str, name: &str) -> Option<&InferenceService> {
        self.inference_services
            .get(&ObjectRef::new(namespace, name))
    }

    pub fn storage_container(&self, name: &str) -> Option<&ClusterStorageContainer> {
        self.storage_containers.get(name)
    }

    pub fn insert_secret(&mut self, secret: Secret) {
        self.secrets.insert(secret.object_ref(), Arc::new(secret));
    }

    pub fn insert_service_account(&mut self, sa: ServiceAccount) {
        self.service_accounts.insert(sa.object_ref(), Arc::new(sa));
    }

    pub fn insert_inference_service(&mut self, isvc: InferenceService) {
        self.inference_services.insert(isvc.object_ref(), isvc);
    }

    /// Number of objects held, all kinds together.
    pub fn len(&self) -> usize {
        self.service_accounts.len()
            + self.secrets.len()
            + self.storage_containers.len()
            + self.inference_services.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_lookup_is_namespaced() {
        let mut data = ClusterSnapshot::default();
        data.insert_secret(Secret::new("default", "storage-config").with_data("k", "v"));
        assert!(data.secret("default", "storage-config").is_some());
        assert!(data.secret("other", "storage-config").is_none());
        assert_eq!(data.len(), 1);
    }
}
