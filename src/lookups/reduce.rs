//! What a cached or fetched object is when it cannot be used, and where
//! each kind is read from.

use super::Kind;
use kserve_injector_core::cluster::{ObjectRef, StorageContainerLoadError};
use kserve_injector_core::SharedError;
use kube::api::{ApiResource, GroupVersionKind};

/// A cached object, or why it cannot be used (reported by the lookup that
/// needs it, as KServe's typed decode would fail that lookup).
pub(super) type Parsed<T> = Result<T, InvalidObject>;

/// Why a watched or fetched object cannot be used; cloned out of the cache
/// with it.
#[derive(Debug, Clone, thiserror::Error)]
pub enum InvalidObject {
    /// The object's JSON does not decode as its kind.
    #[error("{at} does not decode: {source}")]
    Decode {
        at: String,
        #[source]
        source: SharedError<serde_json::Error>,
    },
    #[error(transparent)]
    StorageContainer(#[from] StorageContainerLoadError),
    #[error("invalid InferenceService {at}: {source}")]
    InferenceService {
        at: ObjectRef,
        #[source]
        source: SharedError<serde_json::Error>,
    },
    /// A ServiceAccount listing more Secrets than
    /// `--max-service-account-secrets`: its pods are denied before any of
    /// them is read.
    #[error("ServiceAccount {at} lists {listed} Secrets, more than the {limit} kserve-injector reads for one pod (--max-service-account-secrets); list only the Secrets its pods need, or name one with the storage secret annotation")]
    TooManySecrets {
        at: String,
        listed: usize,
        limit: usize,
    },
    /// What KServe's rules read of it is over `--max-lookup-object-bytes`.
    #[error("{kind} {at} is too large for kserve-injector: what KServe reads of it takes {bytes} bytes, more than the {limit} one object may hold (--max-lookup-object-bytes); trim its annotations, Secret list or data")]
    TooLarge {
        kind: &'static str,
        at: String,
        bytes: usize,
        limit: usize,
    },
}

pub(crate) fn storage_container_resource() -> ApiResource {
    let gvk = GroupVersionKind::gvk("serving.kserve.io", "v1alpha1", "ClusterStorageContainer");
    ApiResource::from_gvk_with_plural(&gvk, "clusterstoragecontainers")
}

pub(crate) fn inference_service_resource() -> ApiResource {
    let gvk = GroupVersionKind::gvk("serving.kserve.io", "v1beta1", "InferenceService");
    ApiResource::from_gvk_with_plural(&gvk, "inferenceservices")
}

/// Where a LIST or WATCH reads: the collection's path and its field selector.
#[derive(Clone)]
pub(super) struct Collection {
    pub url: String,
    pub fields: Option<&'static str>,
}

/// Helm's release records (often hundreds of KiB each, never a credential)
/// are left out of the Secrets' watch; should a pod ever name one it is
/// fetched by the fallback GET.
pub(super) const SECRET_FIELD_SELECTOR: &str = "type!=helm.sh/release.v1";

/// The collection of `kind` in `namespace` (`None`: every namespace; the
/// cluster-scoped ClusterStorageContainers ignore it).
pub(super) fn collection(kind: Kind, namespace: Option<&str>) -> Collection {
    let scoped = |prefix: &str, plural: &str| match namespace {
        Some(ns) => format!("{prefix}/namespaces/{ns}/{plural}"),
        None => format!("{prefix}/{plural}"),
    };
    let (url, fields) = match kind {
        Kind::ServiceAccounts => (scoped("/api/v1", "serviceaccounts"), None),
        Kind::Secrets => (scoped("/api/v1", "secrets"), Some(SECRET_FIELD_SELECTOR)),
        Kind::StorageContainers => (
            "/apis/serving.kserve.io/v1alpha1/clusterstoragecontainers".to_string(),
            None,
        ),
        Kind::InferenceServices => (
            scoped("/apis/serving.kserve.io/v1beta1", "inferenceservices"),
            None,
        ),
    };
    Collection { url, fields }
}

/// Whether `name` can name an object at all (a DNS subdomain, RFC 1123):
/// a name from a ServiceAccount's `secrets` list is not validated by the
/// API server, and anything else (`..`, `/`, `?`) must never reach a URL.
/// KServe's cached client finds no such object.
pub(super) fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && (name.bytes())
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_object_names_reach_a_url() {
        assert!(valid_name("s3-secret.v1"));
        for bad in [
            "",
            "../kube-system/secrets/x",
            "a/b",
            "a?watch=1",
            "UPPER",
            &"a".repeat(254),
        ] {
            assert!(!valid_name(bad), "{bad}");
        }
        let c = collection(Kind::Secrets, Some("team"));
        assert_eq!(c.url, "/api/v1/namespaces/team/secrets");
        assert_eq!(c.fields, Some(SECRET_FIELD_SELECTOR));
    }
}
