//! Storage initializer: downloads the model into an emptyDir before the
//! server starts, or mounts a PVC directly (KServe's legacy single-URI path).

use super::ca_bundle;
use super::storage_uri::{local_model_uri, oci_effective_mode, parse_oci, parse_pvc};
use super::InjectError;
use crate::constants::*;
use crate::env::Env;
use crate::pod::build::{
    empty_dir_volume, env_var, initializer_image, model_containers, push_env_if_absent, resources,
};
use crate::pod::{List, PodDoc};
use k8s_openapi::api::core::v1::{
    Container, EnvVar, EnvVarSource, PersistentVolumeClaimVolumeSource, SecretKeySelector, Volume,
    VolumeMount,
};
use std::collections::BTreeMap;

pub const NAME: &str = "storage-initializer";

fn error(message: impl Into<String>) -> InjectError {
    InjectError::new(NAME, message)
}

pub fn inject(pod: &mut PodDoc, env: &Env) -> Result<(), InjectError> {
    let Some(mut src) = pod.annotation(SOURCE_URI_ANNOTATION).map(str::to_string) else {
        return Ok(());
    };
    if pod.label(LOCAL_MODEL_LABEL).is_some() {
        let pvc = pod
            .annotation(LOCAL_MODEL_PVC_NAME_ANNOTATION)
            .ok_or_else(|| {
                error(format!(
                    "Annotation {LOCAL_MODEL_PVC_NAME_ANNOTATION} not found"
                ))
            })?;
        let local_source = pod
            .annotation(LOCAL_MODEL_SOURCE_URI_ANNOTATION)
            .unwrap_or_default();
        src = local_model_uri(&src, local_source, pvc);
    }
    let storage_spec = StorageSpec::from_pod(pod)?;
    let read_only = pod.annotation(READONLY_ANNOTATION) != Some("false");
    // The model puller (agent) downloads models itself.
    if pod.annotation(AGENT_ANNOTATION).is_some() {
        return Ok(());
    }
    if let Some(oci) = parse_oci(&src) {
        if !oci_effective_mode(&oci, env.config.storage_initializer.oci_mode()).is_empty() {
            return Ok(());
        }
    }
    if pod.has_container_named(STORAGE_INITIALIZER_CONTAINER) {
        return Ok(());
    }
    let user_containers = model_containers(pod)
        .ok_or_else(|| error("Invalid configuration: cannot find container"))?;
    let target = user_containers[0];

    let (volumes, mount) = match parse_pvc(&src) {
        Some((claim, sub_path)) => pvc_volume(claim, sub_path, read_only),
        None => {
            let init = init_container(pod, env, &src, storage_spec.as_ref())?;
            pod.ensure_container(List::InitContainers, &init.container);
            let mut volumes = vec![empty_dir_volume(PROVISION_LOCATION_VOLUME)];
            volumes.extend(init.volumes);
            let mount = VolumeMount {
                read_only: read_only.then_some(true),
                ..model_mount(PROVISION_LOCATION_VOLUME)
            };
            (volumes, mount)
        }
    };
    for volume in &volumes {
        pod.ensure_volume(volume);
    }
    for name in &user_containers {
        if let Some(mut c) = pod.container_mut(List::Containers, name) {
            c.ensure_mount(&mount);
        }
    }
    rewrite_storage_uri(pod, target);
    Ok(())
}

fn model_mount(volume: &str) -> VolumeMount {
    VolumeMount {
        name: volume.to_string(),
        mount_path: DEFAULT_MODEL_LOCAL_MOUNT_PATH.to_string(),
        ..Default::default()
    }
}

fn pvc_volume(claim: &str, sub_path: &str, read_only: bool) -> (Vec<Volume>, VolumeMount) {
    let volume = Volume {
        name: PVC_SOURCE_VOLUME.to_string(),
        persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
            claim_name: claim.to_string(),
            read_only: None,
        }),
        ..Default::default()
    };
    let mount = VolumeMount {
        sub_path: (!sub_path.is_empty()).then(|| sub_path.to_string()),
        read_only: read_only.then_some(true),
        ..model_mount(PVC_SOURCE_VOLUME)
    };
    (vec![volume], mount)
}

/// The server reads the model from the mount, not from the remote URI.
fn rewrite_storage_uri(pod: &mut PodDoc, target: &str) {
    let Some(mut c) = pod.container_mut(List::Containers, target) else {
        return;
    };
    let has_uri = c
        .env(STORAGE_URI_ENV)
        .and_then(|e| e.get("value"))
        .and_then(|v| v.as_str())
        .is_some_and(|v| !v.is_empty());
    if has_uri {
        c.set_env(STORAGE_URI_ENV, DEFAULT_MODEL_LOCAL_MOUNT_PATH);
    }
}

struct InitPlan {
    container: Container,
    volumes: Vec<Volume>,
}

fn init_container(
    pod: &PodDoc,
    env: &Env,
    src: &str,
    storage_spec: Option<&StorageSpec>,
) -> Result<InitPlan, InjectError> {
    let mut vars = Vec::new();
    let mut args = vec![src.to_string(), DEFAULT_MODEL_LOCAL_MOUNT_PATH.to_string()];
    let mut mounts = vec![model_mount(PROVISION_LOCATION_VOLUME)];
    let mut volumes = Vec::new();
    if let Some(spec) = storage_spec {
        spec.apply(pod, env, &mut vars, &mut args)?;
    }
    if let Some((volume, mount, ca_vars)) = ca_bundle::plan(env, pod.namespace(), &vars, true) {
        for var in ca_vars {
            push_env_if_absent(&mut vars, var);
        }
        volumes.push(volume);
        mounts.push(mount);
    }
    for (name, value) in HF_DEFAULT_ENV {
        push_env_if_absent(&mut vars, env_var(name, value));
    }
    apply_confidential(pod, &mut vars);
    let container = Container {
        name: STORAGE_INITIALIZER_CONTAINER.to_string(),
        image: Some(initializer_image(env)),
        args: Some(args),
        resources: Some(resources(&env.config.storage_initializer.resources)),
        termination_message_policy: Some(FALLBACK_TO_LOGS_ON_ERROR.to_string()),
        volume_mounts: Some(mounts),
        env: (!vars.is_empty()).then_some(vars),
        ..Default::default()
    };
    Ok(InitPlan { container, volumes })
}

fn set_var(vars: &mut Vec<EnvVar>, name: &str, value: &str) {
    match vars.iter_mut().find(|v| v.name == name) {
        Some(existing) => existing.value = Some(value.to_string()),
        None => vars.push(env_var(name, value)),
    }
}

fn apply_confidential(pod: &PodDoc, vars: &mut Vec<EnvVar>) {
    if pod.annotation(CONFIDENTIAL_ENABLED_ANNOTATION) != Some("true") {
        return;
    }
    set_var(vars, CONFIDENTIAL_ENABLED_ENV, "true");
    if let Some(id) = pod
        .annotation(CONFIDENTIAL_RESOURCE_ID_ANNOTATION)
        .filter(|v| !v.is_empty())
    {
        set_var(vars, CONFIDENTIAL_RESOURCE_ID_ENV, id);
    }
}

/// The `storage-spec` annotations: parameters and a key into the storage secret.
struct StorageSpec {
    params: BTreeMap<String, String>,
    key: String,
}

const STORAGE_TYPES: [&str; 3] = ["s3", "hdfs", "webhdfs"];

impl StorageSpec {
    fn from_pod(pod: &PodDoc) -> Result<Option<Self>, InjectError> {
        if pod.annotation(STORAGE_SPEC_ANNOTATION) != Some("true") {
            return Ok(None);
        }
        // As Go's json.Unmarshal into a map: `null` is no parameters, while an
        // empty value is invalid JSON.
        let params = match pod.annotation(STORAGE_SPEC_PARAM_ANNOTATION) {
            None => BTreeMap::new(),
            Some(text) => serde_json::from_str::<Option<BTreeMap<String, String>>>(text)
                .map_err(|e| {
                    error(format!(
                        "invalid {STORAGE_SPEC_PARAM_ANNOTATION} annotation: {e}"
                    ))
                })?
                .unwrap_or_default(),
        };
        let key = pod
            .annotation(STORAGE_SPEC_KEY_ANNOTATION)
            .unwrap_or_default()
            .to_string();
        Ok(Some(Self { params, key }))
    }

    fn secret_name(&self, pod: &PodDoc, env: &Env) -> String {
        let creds = &env.config.credentials;
        if !creds.storage_secret_name_annotation.is_empty() {
            if let Some(name) = pod.annotation(&creds.storage_secret_name_annotation) {
                return name.to_string();
            }
        }
        if creds.storage_spec_secret_name.is_empty() {
            DEFAULT_STORAGE_SPEC_SECRET.to_string()
        } else {
            creds.storage_spec_secret_name.clone()
        }
    }

    /// Reads the secret data (if any), adds the credential env, and resolves
    /// `<scheme-placeholder>://` arguments.
    fn apply(
        &self,
        pod: &PodDoc,
        env: &Env,
        vars: &mut Vec<EnvVar>,
        args: &mut [String],
    ) -> Result<(), InjectError> {
        let secret_name = self.secret_name(pod, env);
        let param_type = self.params.get("type").filter(|t| !t.is_empty());
        let key = if !self.key.is_empty() {
            self.key.clone()
        } else if let Some(t) = param_type {
            format!("default_{t}")
        } else {
            "default".to_string()
        };
        let data = match env.cluster.secret(pod.namespace(), &secret_name) {
            Some(secret) => match secret.get(&key) {
                Some(data) => Some(data),
                None if !self.key.is_empty() => {
                    return Err(error(format!(
                        "specified storage key {key} not found in storage secret {secret_name}"
                    )))
                }
                None => None,
            },
            None if !self.key.is_empty() => {
                return Err(error(format!(
                    "can't read storage secret {secret_name}: secrets \"{secret_name}\" not found"
                )))
            }
            None => None,
        };
        let mut storage_type = param_type.cloned();
        // An empty bucket parameter counts as none, as in Go.
        let mut bucket = self.params.get("bucket").filter(|b| !b.is_empty()).cloned();
        if let Some(data) = data {
            if storage_type.is_none() {
                let parsed: BTreeMap<String, serde_json::Value> = serde_json::from_str(data)
                    .map_err(|e| {
                        error(format!(
                            "invalid json encountered in key {key} of storage secret {secret_name}: {e}"
                        ))
                    })?;
                let text = |k: &str| parsed.get(k).and_then(|v| v.as_str()).map(str::to_string);
                // Without a `type` the error below is "unable to determine storage type".
                if let Some(t) = parsed.get("type") {
                    let t = t.as_str().unwrap_or_default();
                    if !STORAGE_TYPES.contains(&t) {
                        return Err(error(format!(
                            "storage type must be one of [{}]. storage type [{t}] is not supported",
                            STORAGE_TYPES.join(", ")
                        )));
                    }
                    storage_type = Some(t.to_string());
                }
                if bucket.is_none() {
                    bucket = text("bucket");
                }
                if let Some(cm) = text("cabundle_configmap") {
                    vars.push(env_var(AWS_CA_BUNDLE_CONFIGMAP_ENV, &cm));
                }
            }
            vars.push(EnvVar {
                name: STORAGE_CONFIG_ENV.to_string(),
                value: None,
                value_from: Some(EnvVarSource {
                    secret_key_ref: Some(SecretKeySelector {
                        name: secret_name.clone(),
                        key: key.clone(),
                        optional: None,
                    }),
                    ..Default::default()
                }),
            });
        }
        let storage_type = storage_type.ok_or_else(|| error("unable to determine storage type"))?;
        resolve_placeholders(args, &storage_type, bucket.as_deref())?;
        if !self.params.is_empty() {
            vars.push(env_var(
                STORAGE_OVERRIDE_CONFIG_ENV,
                &crate::probe_json::go_string_map(&self.params),
            ));
        }
        Ok(())
    }
}

/// Every URI argument (even index) with the placeholder scheme gets the real one.
fn resolve_placeholders(
    args: &mut [String],
    storage_type: &str,
    bucket: Option<&str>,
) -> Result<(), InjectError> {
    let prefix = format!("{STORAGE_URI_PLACEHOLDER_SCHEME}://");
    if !args.first().is_some_and(|a| a.starts_with(&prefix)) {
        return Ok(());
    }
    for arg in args.iter_mut().step_by(2) {
        let path = arg.strip_prefix(&prefix).unwrap_or(arg).to_string();
        *arg = if storage_type == "s3" {
            let bucket = bucket.filter(|b| !b.is_empty()).ok_or_else(|| {
                error("format [s3] requires a bucket but one wasn't found in storage data or parameters")
            })?;
            format!("s3://{bucket}/{path}")
        } else {
            format!("{storage_type}://{path}")
        };
    }
    Ok(())
}

#[cfg(test)]
mod tests;
