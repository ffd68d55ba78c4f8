//! API objects to the core's reduced objects, at the watch and after a GET.

pub use super::cache::Reduce;
use k8s_openapi::api::core::v1 as api;
use kserve_injector_core::cluster::{
    inference_service, storage_container, StorageContainerLoadError,
};
use kserve_injector_core::cluster::{
    ClusterStorageContainer, InferenceService, ObjectRef, Secret, ServiceAccount,
};
use kserve_injector_core::SharedError;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use kube::ResourceExt;
use std::sync::Arc;

/// A cached custom object, or why it cannot be used (reported by the lookup
/// that needs it, as KServe's typed decode would fail that lookup).
pub type Parsed<T> = Result<T, InvalidObject>;

/// Why a watched or fetched custom object cannot be used; cloned out of the
/// cache with it.
#[derive(Debug, Clone, thiserror::Error)]
pub enum InvalidObject {
    /// The API object does not serialise as JSON.
    #[error(transparent)]
    Json(SharedError<serde_json::Error>),
    #[error(transparent)]
    StorageContainer(#[from] StorageContainerLoadError),
    #[error("invalid InferenceService {at}: {source}")]
    InferenceService {
        at: ObjectRef,
        source: SharedError<serde_json::Error>,
    },
}

fn to_json(o: &DynamicObject) -> Result<serde_json::Value, InvalidObject> {
    serde_json::to_value(o).map_err(|e| InvalidObject::Json(e.into()))
}

pub fn storage_container_resource() -> ApiResource {
    let gvk = GroupVersionKind::gvk("serving.kserve.io", "v1alpha1", "ClusterStorageContainer");
    ApiResource::from_gvk_with_plural(&gvk, "clusterstoragecontainers")
}

pub fn inference_service_resource() -> ApiResource {
    let gvk = GroupVersionKind::gvk("serving.kserve.io", "v1beta1", "InferenceService");
    ApiResource::from_gvk_with_plural(&gvk, "inferenceservices")
}

fn object_ref<O: ResourceExt>(o: &O) -> ObjectRef {
    ObjectRef::new(o.namespace().unwrap_or_default(), o.name_any())
}

#[derive(Clone, Copy)]
pub struct ServiceAccounts;

impl Reduce<api::ServiceAccount> for ServiceAccounts {
    const KIND: &'static str = "serviceaccounts";
    type Key = ObjectRef;
    type Value = ServiceAccount;
    fn key(&self, o: &api::ServiceAccount) -> ObjectRef {
        object_ref(o)
    }
    fn value(&self, o: &api::ServiceAccount) -> ServiceAccount {
        ServiceAccount::from_api(o, o.metadata.namespace.as_deref().unwrap_or_default())
    }
}

/// Keeps what [`Secret::from_api`] keeps: names, annotations, data key
/// names and only the values listed in `KEPT_SECRET_VALUE_KEYS` (others are
/// reduced to their storage-spec projection). The API object's values are
/// overwritten with zeros right after.
#[derive(Clone, Copy)]
pub struct Secrets;

impl Reduce<api::Secret> for Secrets {
    const KIND: &'static str = "secrets";
    type Key = ObjectRef;
    type Value = Secret;
    fn key(&self, o: &api::Secret) -> ObjectRef {
        object_ref(o)
    }
    fn value(&self, o: &api::Secret) -> Secret {
        Secret::from_api(o, o.metadata.namespace.as_deref().unwrap_or_default())
    }
    fn value_owned(&self, o: api::Secret) -> Secret {
        let namespace = o.metadata.namespace.clone().unwrap_or_default();
        Secret::from_api_owned(o, &namespace)
    }
}

#[derive(Clone, Copy)]
pub struct StorageContainers;

impl Reduce<DynamicObject> for StorageContainers {
    const KIND: &'static str = "clusterstoragecontainers";
    type Key = String;
    type Value = Parsed<Arc<ClusterStorageContainer>>;
    fn key(&self, o: &DynamicObject) -> String {
        o.name_any()
    }
    fn value(&self, o: &DynamicObject) -> Parsed<Arc<ClusterStorageContainer>> {
        let doc = to_json(o)?;
        Ok(Arc::new(storage_container(&doc, &o.name_any())?))
    }
}

#[derive(Clone, Copy)]
pub struct InferenceServices;

impl Reduce<DynamicObject> for InferenceServices {
    const KIND: &'static str = "inferenceservices";
    type Key = ObjectRef;
    type Value = Parsed<InferenceService>;
    fn key(&self, o: &DynamicObject) -> ObjectRef {
        object_ref(o)
    }
    fn value(&self, o: &DynamicObject) -> Parsed<InferenceService> {
        let r = object_ref(o);
        let doc = to_json(o)?;
        inference_service(&doc, &r.namespace, &r.name).map_err(|e| {
            InvalidObject::InferenceService {
                at: r.clone(),
                source: e.into(),
            }
        })
    }
}
