//! What the cluster rules read of a pod, in a form any pod representation
//! (the webhook's view, the CLI's JSON tree, a test's map) can fill.

use crate::config::Config;
use crate::constants::{
    AGENT_ANNOTATION, BATCHER_ANNOTATION, ISVC_LABEL, LOCAL_MODEL_LABEL, LOGGER_ANNOTATION,
    SOURCE_URI_ANNOTATION, STORAGE_SPEC_ANNOTATION,
};
use std::collections::BTreeMap;

/// A pod's annotations as the lookup rules read them, one key at a time, so
/// that a caller holding the pod in any form lends it without copying
/// (`kubectl.kubernetes.io/last-applied-configuration` can be megabytes).
#[cfg_attr(not(feature = "oracle"), allow(unreachable_pub))] // `internals` (lib.rs).
pub trait Annotations {
    fn annotation(&self, key: &str) -> Option<&str>;
}

impl Annotations for BTreeMap<String, String> {
    fn annotation(&self, key: &str) -> Option<&str> {
        self.get(key).map(String::as_str)
    }
}

/// What the rules read of a pod; any pod representation can fill it.
#[derive(Debug)]
#[cfg_attr(any(test, feature = "oracle"), derive(Clone, Default, PartialEq))]
pub struct PodFacts {
    /// The request namespace (pods arrive without one).
    pub namespace: String,
    /// `spec.serviceAccountName`; empty means `default`.
    pub service_account_name: String,
    pub annotations: BTreeMap<String, String>,
    pub labels: BTreeMap<String, String>,
}

/// The annotations [`crate::cluster::keys::needed_keys`] reads, besides the storage-secret
/// annotation the config names.
const READ_ANNOTATIONS: [&str; 5] = [
    SOURCE_URI_ANNOTATION,
    AGENT_ANNOTATION,
    STORAGE_SPEC_ANNOTATION,
    LOGGER_ANNOTATION,
    BATCHER_ANNOTATION,
];
const READ_LABELS: [&str; 2] = [ISVC_LABEL, LOCAL_MODEL_LABEL];

impl PodFacts {
    /// Keeps, of the pod's annotations and labels, only those the rules read
    /// (a pod's other annotations can be megabytes, e.g. kubectl's
    /// last-applied-configuration).
    pub(crate) fn new<'a>(
        namespace: &str,
        service_account_name: &str,
        annotations: impl IntoIterator<Item = (&'a str, &'a str)>,
        labels: impl IntoIterator<Item = (&'a str, &'a str)>,
        config: &Config,
    ) -> Self {
        let configured = config.credentials.storage_secret_name_annotation.as_str();
        let read = |k: &str| READ_ANNOTATIONS.contains(&k) || (!k.is_empty() && k == configured);
        let own = |(k, v): (&str, &str)| (k.to_string(), v.to_string());
        Self {
            namespace: namespace.to_string(),
            service_account_name: service_account_name.to_string(),
            annotations: (annotations.into_iter())
                .filter(|(k, _)| read(k))
                .map(own)
                .collect(),
            labels: (labels.into_iter())
                .filter(|(k, _)| READ_LABELS.contains(k))
                .map(own)
                .collect(),
        }
    }

    /// From a raw pod object (as the CLI holds it) and the request
    /// namespace; non-string values are skipped (the pod decode rejects them
    /// before any lookup matters).
    pub fn from_pod_value(pod: &serde_json::Value, namespace: &str, config: &Config) -> Self {
        let strings = |pointer: &str| {
            (pod.pointer(pointer).and_then(|v| v.as_object()))
                .into_iter()
                .flatten()
                .filter_map(|(k, v)| Some((k.as_str(), v.as_str()?)))
        };
        let sa = pod.pointer("/spec/serviceAccountName");
        Self::new(
            namespace,
            sa.and_then(|v| v.as_str()).unwrap_or_default(),
            strings("/metadata/annotations"),
            strings("/metadata/labels"),
            config,
        )
    }
}
