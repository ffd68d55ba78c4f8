//! Storage initializer: downloads the model into an emptyDir before the
//! server starts, or mounts a PVC directly (KServe's legacy single-URI path;
//! under v0.15 without `enableDirectPvcVolumeMount` it copies the PVC).
//! Its credentials, CA bundle and ClusterStorageContainer come from the
//! cluster snapshot (`env.cluster`), through the pure functions of
//! [`crate::cluster`].

use super::ca_bundle;
use super::{security_profile, InjectError};
use crate::cluster::container_merge::{merge_storage_container, MergeError};
use crate::cluster::credentials::{
    add_service_account_credentials, CredentialRequest, CredentialTarget,
};
use crate::cluster::storage_container::{
    select, storage_initializer_injected, STORAGE_CONTAINER_NAME_ANNOTATION,
};
use crate::cluster::storage_spec::{add_storage_spec_credentials, StorageSpec};
use crate::cluster::ClusterStorageContainer;
use crate::constants::*;
use crate::inputs::Inputs;
use crate::inputs::{SecurityProfile, IMAGE_VOLUMES_DROPPED};
use crate::pod::build::{
    empty_dir_volume, env_var, initializer_image, model_containers, push_env_if_absent, resources,
};
use crate::pod::{List, WorkingSet};
use crate::release::Behaviour;
use crate::storage_uri::{
    local_model_uri, local_model_uri_in, oci_effective_mode, parse_oci_in, parse_pvc,
};
use k8s_openapi::api::core::v1::{
    Container, EnvVar, PersistentVolumeClaimVolumeSource, Volume, VolumeMount,
};
use overrides::InitResources;

pub(crate) const NAME: &str = "storage-initializer";

fn error(message: impl Into<String>) -> InjectError {
    InjectError::new(NAME, message)
}

fn refused(source: impl std::error::Error + Send + Sync + 'static) -> InjectError {
    InjectError::from_source(NAME, source)
}

pub(crate) fn inject(pod: &mut WorkingSet<'_>, inputs: &Inputs) -> Result<(), InjectError> {
    let Some(mut src) = pod.annotation(SOURCE_URI_ANNOTATION).map(str::to_string) else {
        return Ok(());
    };
    let release = inputs.config.release;
    // v0.15 checks these before anything else, so a skipped pod is never
    // denied for its LocalModel, storage spec or ClusterStorageContainer.
    if !release.storage_container_lookup_first() && skipped(pod, inputs, &src) {
        return Ok(());
    }
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
        src = if release.local_model_by_hash() {
            local_model_uri(&src, local_source, pvc)
        } else {
            let cache = pod.label(LOCAL_MODEL_LABEL).unwrap_or_default();
            local_model_uri_in(&src, local_source, pvc, cache)
        };
    }
    let storage_spec = StorageSpec::from_annotations(pod).map_err(refused)?;
    let overrides = InitResources::from_pod(pod, NAME)?;
    let profile = security_profile::choose(pod, inputs, NAME)?;
    let read_only = pod.annotation(READONLY_ANNOTATION) != Some("false");
    let copy = parse_pvc(&src)
        .filter(|_| inputs.config.storage_initializer.pvc_copy_mode)
        .map(|(claim, sub_path)| {
            (
                claim.to_string(),
                format!("{PVC_COPY_MOUNT_PATH}/{sub_path}"),
            )
        });
    let selected = if release.storage_container_lookup_first() {
        // KServe looks the ClusterStorageContainer up before any skip, so its
        // errors deny even a pod that then gets no storage-initializer.
        let explicit = (pod.annotation(STORAGE_CONTAINER_NAME_ANNOTATION))
            .filter(|_| release.explicit_storage_container());
        let csc = select(&inputs.cluster, &src, explicit).map_err(refused)?;
        if skipped(pod, inputs, &src) {
            return Ok(());
        }
        Ok(csc)
    } else if parse_pvc(&src).is_some() && copy.is_none() {
        Ok(None)
    } else {
        // v0.15 matches the URI the init container is given.
        let given = copy
            .as_ref()
            .map_or(src.as_str(), |(_, path)| path.as_str());
        let uri = init_uri(pod, inputs, given, storage_spec.as_ref());
        select(&inputs.cluster, &uri, None)
    };
    let csc_name = (selected.as_ref().ok().copied().flatten()).map(|c| c.container_name());
    if storage_initializer_injected(pod.containers(List::InitContainers), csc_name) {
        return Ok(());
    }
    let csc = selected.map_err(refused)?;
    let user_containers = model_containers(pod).ok_or_else(|| {
        let message = "Invalid configuration: cannot find container";
        match release.storage_container_lookup_first() {
            true => error(message),
            false => error(format!("{message}: {KSERVE_CONTAINER}")),
        }
    })?;
    let target = user_containers[0];

    let mut user_mounts = Vec::new();
    let mut volumes = Vec::new();
    let mut unchecked_mounts = false;
    match (parse_pvc(&src), &copy) {
        (Some((claim, sub_path)), None) => {
            let (volume, mount) = pvc_volume(claim, sub_path, read_only);
            if let Some(at) = v0_15_direct_mount_stop(pod, release, &user_containers) {
                for name in &user_containers[..at] {
                    if let Some(mut c) = pod.container_mut(List::Containers, name) {
                        c.ensure_mount(&mount);
                    }
                }
                return Ok(());
            }
            volumes.push(volume);
            user_mounts.push(mount);
        }
        (_, plan_copy) => {
            // A PVC copy (v0.15): the claim is mounted at /mnt/pvc in the
            // init container and the model servers, and the init container
            // copies from there into the emptyDir.
            let mut init_mounts = Vec::new();
            let mut init_src = src.as_str();
            if let Some((claim, path)) = plan_copy {
                let (volume, _) = pvc_volume(claim, "", read_only);
                let pvc_mount = VolumeMount {
                    name: PVC_SOURCE_VOLUME.to_string(),
                    mount_path: PVC_COPY_MOUNT_PATH.to_string(),
                    read_only: read_only.then_some(true),
                    ..Default::default()
                };
                volumes.push(volume);
                init_mounts.push(pvc_mount.clone());
                user_mounts.push(pvc_mount);
                init_src = path.as_str();
            }
            let plan = InitPlan {
                src: init_src,
                mounts: init_mounts,
                storage_spec: storage_spec.as_ref(),
                csc,
                overrides: &overrides,
                profile,
            };
            let (init, credential_volumes) = plan.build(pod, inputs)?;
            pod.ensure_container(List::InitContainers, init);
            // The configured source, else KServe's emptyDir; a pod that
            // already has a volume of this name keeps its own.
            let model_volume = (inputs.model_volume.clone())
                .unwrap_or_else(|| empty_dir_volume(PROVISION_LOCATION_VOLUME));
            if model_volume.image.is_some()
                && inputs.drops_image_volumes
                && !pod.has_volume(&model_volume.name)
            {
                return Err(error(format!("the model volume {PROVISION_LOCATION_VOLUME} is an image volume (modelVolume in --config-file), but {IMAGE_VOLUMES_DROPPED}: turn the ImageVolume feature gate on (API server and kubelets), or give modelVolume another source")));
            }
            volumes.push(model_volume);
            // v0.15 appends these volumes and the model servers' mounts
            // without looking: reproduced unless the pod already has one of
            // the volumes, which it would then hold twice (rejected).
            unchecked_mounts =
                !release.model_mounts_by_name() && !volumes.iter().any(|v| pod.has_volume(&v.name));
            volumes.extend(credential_volumes);
            user_mounts.push(VolumeMount {
                read_only: read_only.then_some(true),
                ..model_mount(PROVISION_LOCATION_VOLUME)
            });
        }
    }
    for volume in &volumes {
        pod.ensure_volume(volume);
    }
    for name in &user_containers {
        if let Some(mut c) = pod.container_mut(List::Containers, name) {
            for mount in &user_mounts {
                match unchecked_mounts {
                    true => c.ensure_mount_at(mount),
                    false => c.ensure_mount(mount),
                };
            }
        }
    }
    rewrite_storage_uri(pod, target);
    Ok(())
}

/// Where v0.15's direct PVC mount returns: the index of the first model
/// container that already mounts the claim, whose predecessors get the
/// mount and nothing else happens (no volume, no `STORAGE_URI`). Only when
/// the pod has the claim's volume: without it that pod mounts a volume it
/// lacks (rejected), and HEAD's mounts and volume are given instead.
fn v0_15_direct_mount_stop(
    pod: &mut WorkingSet<'_>,
    release: Behaviour,
    user_containers: &[&str],
) -> Option<usize> {
    if release.direct_pvc_mount_completes() || !pod.has_volume(PVC_SOURCE_VOLUME) {
        return None;
    }
    (user_containers.iter()).position(|name| {
        (pod.container_mut(List::Containers, name)).is_some_and(|c| c.has_mount(PVC_SOURCE_VOLUME))
    })
}

/// Where v0.15 mounts a PVC it copies the model from.
const PVC_COPY_MOUNT_PATH: &str = "/mnt/pvc";

/// The model puller (agent) downloads models itself, and an OCI URI with
/// a mode is the modelcar step's.
fn skipped(pod: &WorkingSet<'_>, inputs: &Inputs, src: &str) -> bool {
    if pod.annotation(AGENT_ANNOTATION).is_some() {
        return true;
    }
    parse_oci_in(src, inputs.config.release).is_some_and(|oci| {
        !oci_effective_mode(&oci, inputs.config.storage_initializer.oci_mode()).is_empty()
    })
}

/// The URI the init container is given: `src` with a storage-spec
/// placeholder resolved. Errors are left to the real build, which reports
/// them.
fn init_uri(
    pod: &WorkingSet<'_>,
    inputs: &Inputs,
    src: &str,
    spec: Option<&StorageSpec>,
) -> String {
    let mut args = vec![src.to_string(), DEFAULT_MODEL_LOCAL_MOUNT_PATH.to_string()];
    if let Some(spec) = spec {
        let config = &inputs.config.credentials;
        let mut ignored = Vec::new();
        let ns = pod.namespace();
        let _ = add_storage_spec_credentials(
            &inputs.cluster,
            config,
            ns,
            pod,
            spec,
            &mut ignored,
            &mut args,
        );
    }
    args.swap_remove(0)
}

fn model_mount(volume: &str) -> VolumeMount {
    VolumeMount {
        name: volume.to_string(),
        mount_path: DEFAULT_MODEL_LOCAL_MOUNT_PATH.to_string(),
        ..Default::default()
    }
}

fn pvc_volume(claim: &str, sub_path: &str, read_only: bool) -> (Volume, VolumeMount) {
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
    (volume, mount)
}

/// The server reads the model from the mount, not from the remote URI.
fn rewrite_storage_uri(pod: &mut WorkingSet<'_>, target: &str) {
    let Some(mut c) = pod.container_mut(List::Containers, target) else {
        return;
    };
    let has_uri = c.env_value(STORAGE_URI_ENV).is_some_and(|v| !v.is_empty());
    if has_uri {
        c.set_env(STORAGE_URI_ENV, DEFAULT_MODEL_LOCAL_MOUNT_PATH);
    }
}

/// What the init container is built from.
struct InitPlan<'a> {
    src: &'a str,
    /// Mounts before the model volume's (a PVC copy's source).
    mounts: Vec<VolumeMount>,
    storage_spec: Option<&'a StorageSpec>,
    csc: Option<&'a ClusterStorageContainer>,
    overrides: &'a InitResources,
    profile: SecurityProfile,
}

impl InitPlan<'_> {
    /// The init container and the pod volumes it needs, in KServe's order:
    /// credentials (storage-spec or ServiceAccount), the CA bundle decided
    /// from them, the ClusterStorageContainer merged in, then the CA bundle
    /// and the default env added where the merge left them absent.
    fn build(
        &self,
        pod: &WorkingSet<'_>,
        inputs: &Inputs,
    ) -> Result<(Container, Vec<Volume>), InjectError> {
        let mut args = vec![
            self.src.to_string(),
            DEFAULT_MODEL_LOCAL_MOUNT_PATH.to_string(),
        ];
        let mut volume_mounts = self.mounts.clone();
        volume_mounts.push(model_mount(PROVISION_LOCATION_VOLUME));
        let mut credentials = CredentialTarget {
            volume_mounts,
            ..CredentialTarget::default()
        };
        let config = &inputs.config.credentials;
        match self.storage_spec {
            Some(spec) => add_storage_spec_credentials(
                &inputs.cluster,
                config,
                pod.namespace(),
                pod,
                spec,
                &mut credentials.env,
                &mut args,
            )
            .map_err(refused)?,
            None => {
                let request = CredentialRequest {
                    namespace: pod.namespace(),
                    service_account_name: pod.service_account_name(),
                    pod_annotations: pod,
                    release: inputs.config.release,
                };
                add_service_account_credentials(
                    &inputs.cluster,
                    config,
                    &request,
                    &mut credentials,
                )
                .map_err(refused)?;
            }
        }
        let mut ca_bundle = ca_bundle::plan(inputs, pod.namespace(), &credentials.env, true);
        let mut volumes = credentials.volumes;
        if !inputs.config.release.ca_bundle_after_merge() {
            // v0.15 appends them before the merge, whatever is there.
            if let Some((volume, mount, ca_vars)) = ca_bundle.take() {
                credentials.env.extend(ca_vars);
                volumes.push(volume);
                credentials.volume_mounts.push(mount);
            }
        }
        let built = Container {
            name: STORAGE_INITIALIZER_CONTAINER.to_string(),
            image: Some(initializer_image(inputs)),
            args: Some(args),
            resources: Some(resources(&inputs.config.storage_initializer.resources)),
            termination_message_policy: Some(FALLBACK_TO_LOGS_ON_ERROR.to_string()),
            volume_mounts: Some(credentials.volume_mounts),
            env: (!credentials.env.is_empty()).then_some(credentials.env),
            ..Default::default()
        };
        let mut container = match self.csc {
            Some(csc) => {
                let overlay = (csc.container()).map_err(|e| refused(MergeError::Json(e.into())))?;
                merge_storage_container(&built, &overlay).map_err(refused)?
            }
            None => built,
        };
        self.overrides.apply(&mut container, NAME)?;
        security_profile::harden(&mut container, self.profile, None, NAME)?;
        let mut vars = container.env.take().unwrap_or_default();
        if let Some((volume, mount, ca_vars)) = ca_bundle {
            for var in ca_vars {
                push_env_if_absent(&mut vars, var);
            }
            volumes.push(volume);
            container
                .volume_mounts
                .get_or_insert_with(Vec::new)
                .push(mount);
        }
        if inputs.config.release.hf_default_env() {
            for (name, value) in HF_DEFAULT_ENV {
                push_env_if_absent(&mut vars, env_var(name, value));
            }
        }
        if inputs.config.release.confidential_env() {
            apply_confidential(pod, &mut vars);
        }
        container.env = (!vars.is_empty()).then_some(vars);
        Ok((container, volumes))
    }
}

fn set_var(vars: &mut Vec<EnvVar>, name: &str, value: &str) {
    match vars.iter_mut().find(|v| v.name == name) {
        Some(existing) => existing.value = Some(value.to_string()),
        None => vars.push(env_var(name, value)),
    }
}

fn apply_confidential(pod: &WorkingSet<'_>, vars: &mut Vec<EnvVar>) {
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

pub(crate) mod overrides;

#[cfg(test)]
mod tests;
