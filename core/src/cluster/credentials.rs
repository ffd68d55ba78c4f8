//! Storage credentials from a ServiceAccount, as KServe's
//! `CreateSecretVolumeAndEnv`: the storage-initializer container and the
//! agent get env, mounts and pod volumes from the ServiceAccount's IRSA
//! annotation and its Secrets (or the one Secret a pod annotation names).
//!
//! Wiring: build the container, put its env and mounts in a
//! `CredentialTarget`, call `add_service_account_credentials`, then set
//! the container's env and mounts to the target's and ensure each of
//! `target.volumes` on the pod by name (KServe's `AppendVolumeIfNotExists`).

use super::objects::Secret;
use super::s3::s3_env;
use super::secret_kinds::{
    contribution, secret_key_ref, Contribution, DEFAULT_GCS_CREDENTIAL_FILE_NAME,
    DEFAULT_S3_ACCESS_KEY_ID_NAME, DEFAULT_S3_SECRET_ACCESS_KEY_NAME,
};
use super::{Annotations, ClusterSnapshot};
use crate::config::CredentialConfig;
use k8s_openapi::api::core::v1::{EnvVar, Volume, VolumeMount};

pub(crate) use super::objects::IRSA_ANNOTATION;
pub(crate) const DEFAULT_SERVICE_ACCOUNT: &str = "default";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum CredentialError {
    /// A Secret the ServiceAccount (or the pod annotation) names does not
    /// exist: KServe denies the pod with the API server's NotFound text.
    #[error("secrets \"{0}\" not found")]
    SecretNotFound(String),
}

/// Whose credentials, for which pod.
#[derive(Clone, Copy)]
pub(crate) struct CredentialRequest<'a> {
    pub namespace: &'a str,
    /// `spec.serviceAccountName` (or the logger storage's); empty means `default`.
    pub service_account_name: &'a str,
    pub pod_annotations: &'a dyn Annotations,
    /// The KServe release whose Secret kinds apply.
    pub release: crate::release::Behaviour,
}

/// The container being built (its env and mounts so far) and the pod
/// volumes to ensure by name.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct CredentialTarget {
    pub env: Vec<EnvVar>,
    pub volume_mounts: Vec<VolumeMount>,
    pub volumes: Vec<Volume>,
}

/// KServe's `MergeEnvs`: a variable already present gets the new `value`
/// (its `valueFrom` is left as it was); others are appended in order.
fn merge_env_values(env: &mut Vec<EnvVar>, overrides: Vec<EnvVar>) {
    let mut extra = Vec::new();
    for o in overrides {
        match env.iter_mut().find(|e| e.name == o.name) {
            Some(existing) => existing.value = o.value,
            None => extra.push(o),
        }
    }
    env.extend(extra);
}

/// Adds what the ServiceAccount gives, in KServe's order:
/// 1. ServiceAccount missing: nothing (KServe logs and goes on).
/// 2. IRSA annotation: the S3 env from the ServiceAccount's annotations and
///    the config, appended.
/// 3. If the config names a storage-secret annotation and the pod has it:
///    that one Secret only; else every Secret the ServiceAccount lists. A
///    missing Secret is an error (the pod is denied).
/// 4. Per Secret, the first matching kind (see `secret_kinds`): S3 env is
///    merged by name (so a Secret's settings override IRSA's), other env is
///    appended, a volume is added unless one of that name is already there.
///
/// One deliberate difference: KServe appends a credential mount even when
/// an identical one is there (two GCS Secrets, or the agent's second pass
/// for `logger-sa`), which the API server rejects as a duplicate mount path;
/// an identical mount is added once here.
pub(crate) fn add_service_account_credentials(
    cluster: &ClusterSnapshot,
    config: &CredentialConfig,
    request: &CredentialRequest<'_>,
    target: &mut CredentialTarget,
) -> Result<(), CredentialError> {
    let sa_name = match request.service_account_name {
        "" => DEFAULT_SERVICE_ACCOUNT,
        name => name,
    };
    let Some(sa) = cluster.service_account(request.namespace, sa_name) else {
        return Ok(());
    };
    let secret_names: Vec<&str> = match annotated_secret(config, request.pod_annotations) {
        Some(name) => vec![name],
        None => sa.secrets().collect(),
    };
    // Resolve first, so an error leaves the target untouched.
    let secrets = secret_names
        .iter()
        .map(|name| {
            cluster
                .secret(request.namespace, name)
                .ok_or_else(|| CredentialError::SecretNotFound(name.to_string()))
        })
        .collect::<Result<Vec<&Secret>, _>>()?;
    if sa.annotation(IRSA_ANNOTATION).is_some() {
        target
            .env
            .extend(s3_env(sa, None, &config.s3, request.release));
    }
    for secret in secrets {
        add_secret(secret, config, request.release, target);
    }
    Ok(())
}

/// The Secret named by the pod annotation the config designates, if any.
pub(crate) fn annotated_secret<'a>(
    config: &CredentialConfig,
    pod_annotations: &'a dyn Annotations,
) -> Option<&'a str> {
    let key = &config.storage_secret_name_annotation;
    if key.is_empty() {
        return None;
    }
    pod_annotations.annotation(key)
}

fn or_default<'a>(configured: &'a str, default: &'a str) -> &'a str {
    if configured.is_empty() {
        default
    } else {
        configured
    }
}

fn add_secret(
    secret: &Secret,
    config: &CredentialConfig,
    release: crate::release::Behaviour,
    target: &mut CredentialTarget,
) {
    let s3 = &config.s3;
    let secret_key = or_default(
        &s3.secret_access_key_name,
        DEFAULT_S3_SECRET_ACCESS_KEY_NAME,
    );
    let gcs_file = or_default(
        &config.gcs_credential_file_name,
        DEFAULT_GCS_CREDENTIAL_FILE_NAME,
    );
    match contribution(secret, secret_key, gcs_file, release) {
        Contribution::S3 => {
            let key_id = or_default(&s3.access_key_id_name, DEFAULT_S3_ACCESS_KEY_ID_NAME);
            let mut env = vec![
                secret_key_ref("AWS_ACCESS_KEY_ID", secret.name(), key_id),
                secret_key_ref("AWS_SECRET_ACCESS_KEY", secret.name(), secret_key),
            ];
            env.extend(s3_env(secret, Some(secret), s3, release));
            merge_env_values(&mut target.env, env);
        }
        Contribution::Env(env) => target.env.extend(env),
        Contribution::Volume { volume, mount, env } => {
            if !target.volumes.iter().any(|v| v.name == volume.name) {
                target.volumes.push(*volume);
            }
            if !target.volume_mounts.contains(&mount) {
                target.volume_mounts.push(mount);
            }
            target.env.extend(env);
        }
        Contribution::None => {}
    }
}

#[cfg(test)]
mod tests;
