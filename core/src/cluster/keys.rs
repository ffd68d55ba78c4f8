//! Which cluster objects a pod's mutation may read, decided in one place.
//!
//! Some keys depend on objects (a ServiceAccount's `secrets`, an
//! InferenceService's logger), so [`needed_keys`] takes what is known so
//! far and adapters iterate: fetch the keys, call again, until no new key
//! appears (at most three rounds: InferenceService, ServiceAccounts,
//! Secrets). [`ClusterSnapshot::restrict`] does exactly that over a snapshot.

use super::credentials::{annotated_secret, DEFAULT_SERVICE_ACCOUNT};
use super::logger::{effective_logger, logger_service_account};
use super::storage_spec::storage_spec_secret_name;
use super::{ClusterSnapshot, ObjectRef};
use crate::config::Config;
use crate::constants::{
    AGENT_ANNOTATION, BATCHER_ANNOTATION, ISVC_LABEL, LOCAL_MODEL_LABEL, LOGGER_ANNOTATION,
    SOURCE_URI_ANNOTATION, STORAGE_SPEC_ANNOTATION,
};
use crate::pod_facts::PodFacts;
use crate::storage_uri::{oci_effective_mode, parse_oci_in, parse_pvc};
use std::collections::BTreeSet;

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum ObjectKey {
    ServiceAccount(ObjectRef),
    Secret(ObjectRef),
    InferenceService(ObjectRef),
    /// Every ClusterStorageContainer: KServe lists them all for a match.
    ClusterStorageContainers,
}

/// The keys the injectors may read for this pod, given what is `known`:
/// - nothing unless the pod has the `serving.kserve.io/inferenceservice` label;
/// - with a source-URI annotation: all ClusterStorageContainers (looked up
///   before any skip); then, unless the agent downloads the model, the URI
///   is a PVC (or local model; v0.15's copy mode excepted) or OCI handled
///   by the modelcar step: the
///   storage-spec Secret when `storage-spec` is `"true"`, else the pod's
///   ServiceAccount credentials;
/// - with a logger, agent or batcher annotation: the pod's ServiceAccount
///   credentials; with a logger also (since v0.16) the InferenceService
///   named by the label and, if the effective logger has storage, that ServiceAccount's
///   credentials (`logger-sa` by default).
///
/// A ServiceAccount's credentials are: the ServiceAccount; once it is known,
/// the Secret the pod's storage-secret annotation names (when the config
/// designates one and the pod has it) or else every Secret it lists.
pub fn needed_keys(
    pod: &PodFacts,
    config: &Config,
    known: &ClusterSnapshot,
) -> BTreeSet<ObjectKey> {
    let mut keys = BTreeSet::new();
    let Some(isvc_name) = pod.labels.get(ISVC_LABEL) else {
        return keys;
    };
    let ann = |k: &str| pod.annotations.get(k).map(String::as_str);
    if let Some(uri) = ann(SOURCE_URI_ANNOTATION) {
        keys.insert(ObjectKey::ClusterStorageContainers);
        let oci_mode = config.storage_initializer.oci_mode();
        // A PVC (a local model's too) is a download only in v0.15's copy mode.
        let pvc = pod.labels.contains_key(LOCAL_MODEL_LABEL) || parse_pvc(uri).is_some();
        let downloads = ann(AGENT_ANNOTATION).is_none()
            && (!pvc || config.storage_initializer.pvc_copy_mode)
            // As the release reads the URI: `oci+native://` is a download before v0.20.
            && parse_oci_in(uri, config.release)
                .is_none_or(|oci| oci_effective_mode(&oci, oci_mode).is_empty());
        if downloads && ann(STORAGE_SPEC_ANNOTATION) == Some("true") {
            keys.insert(ObjectKey::Secret(storage_spec_secret(pod, config)));
        } else if downloads {
            credential_keys(pod, config, known, &pod.service_account_name, &mut keys);
        }
    }
    let logger = ann(LOGGER_ANNOTATION).is_some();
    if logger || ann(AGENT_ANNOTATION).is_some() || ann(BATCHER_ANNOTATION).is_some() {
        credential_keys(pod, config, known, &pod.service_account_name, &mut keys);
    }
    if logger {
        let isvc = ObjectRef::new(&pod.namespace, isvc_name);
        // v0.15 does not fetch it.
        let fetched = config.release.logger_storage();
        let found = known.inference_services.get(&isvc).filter(|_| fetched);
        if !isvc_name.is_empty() && fetched {
            keys.insert(ObjectKey::InferenceService(isvc));
        }
        let effective = effective_logger(&config.logger, found);
        if let Some(sa) = logger_service_account(&effective) {
            credential_keys(pod, config, known, sa, &mut keys);
        }
    }
    keys
}

/// KServe's storage-spec Secret, in the pod's namespace.
pub(crate) fn storage_spec_secret(pod: &PodFacts, config: &Config) -> ObjectRef {
    let name = storage_spec_secret_name(&config.credentials, &pod.annotations);
    ObjectRef::new(&pod.namespace, name)
}

fn credential_keys(
    pod: &PodFacts,
    config: &Config,
    known: &ClusterSnapshot,
    sa_name: &str,
    keys: &mut BTreeSet<ObjectKey>,
) {
    let sa_name = if sa_name.is_empty() {
        DEFAULT_SERVICE_ACCOUNT
    } else {
        sa_name
    };
    let sa = ObjectRef::new(&pod.namespace, sa_name);
    let Some(account) = known.service_accounts.get(&sa) else {
        keys.insert(ObjectKey::ServiceAccount(sa));
        return;
    };
    keys.insert(ObjectKey::ServiceAccount(sa));
    let secret = |name: &str| ObjectKey::Secret(ObjectRef::new(&pod.namespace, name));
    match annotated_secret(&config.credentials, &pod.annotations) {
        Some(name) => {
            keys.insert(secret(name));
        }
        None => keys.extend(account.secrets().map(secret)),
    }
}

impl ClusterSnapshot {
    /// Copies of the objects `key` names that this snapshot holds.
    fn take(&self, key: &ObjectKey, into: &mut ClusterSnapshot) {
        match key {
            ObjectKey::ServiceAccount(r) => {
                if let Some(o) = self.service_accounts.get(r) {
                    into.service_accounts.insert(r.clone(), o.clone());
                }
            }
            ObjectKey::Secret(r) => {
                if let Some(o) = self.secrets.get(r) {
                    into.secrets.insert(r.clone(), o.clone());
                }
            }
            ObjectKey::InferenceService(r) => {
                if let Some(o) = self.inference_services.get(r) {
                    into.inference_services.insert(r.clone(), o.clone());
                }
            }
            // Shared, not copied: selection reads only the candidates.
            ObjectKey::ClusterStorageContainers => {
                into.storage_containers = self.storage_containers.clone();
            }
        }
    }

    /// The part of this snapshot one pod's mutation may read: [`needed_keys`]
    /// iterated to a fixed point. Mutating with the result gives the same pod
    /// as mutating with the whole snapshot.
    pub fn restrict(&self, pod: &PodFacts, config: &Config) -> ClusterSnapshot {
        let mut out = ClusterSnapshot::default();
        let mut seen = BTreeSet::new();
        loop {
            let keys = needed_keys(pod, config, &out);
            let new: Vec<ObjectKey> = keys.difference(&seen).cloned().collect();
            if new.is_empty() {
                return out;
            }
            for key in new {
                self.take(&key, &mut out);
                seen.insert(key);
            }
        }
    }
}

#[cfg(test)]
mod tests;
