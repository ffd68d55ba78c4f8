//! OCI models: the model image runs as a `modelcar` sidecar sharing the pod's
//! process namespace (modelcar mode), is mounted as an ImageVolume (native
//! mode), or is pulled by the storage initializer (fetch mode). In modelcar
//! mode the sidecar is KServe's regular container or, opted into with
//! `--modelcar-mode` or the pod's annotation, a native sidecar ([`shape`]).

use super::ca_bundle;
use super::storage_initializer::overrides::InitResources;
use super::{security_profile, InjectError};
use crate::constants::*;
use crate::inputs::modelcar_pair::{self, modelcar_mount, PairKey};
use crate::inputs::{Inputs, ModelcarMode, SecurityProfile, IMAGE_VOLUMES_DROPPED};
use crate::pod::build::{
    empty_dir_volume, env_var, initializer_image, model_containers, resources as init_resources,
};
use crate::pod::{List, WorkingSet};
use crate::storage_uri::{oci_effective_mode, parse_oci_in, OCI_PREFIX};
use crate::view::{MountView, Str};
use k8s_openapi::api::core::v1::{
    Container, ExecAction, ImageVolumeSource, KeyToPath, Probe, SecretVolumeSource, Volume,
    VolumeMount,
};

pub(crate) mod shape;
pub(crate) use shape::ShapeChoice;

pub(crate) const NAME: &str = "modelcar";

/// What the modelcar step does with one pod, decided once before the
/// pipeline runs (no injector before it touches what it reads: the storage
/// URI, the modelcar-mode annotation, containers named `modelcar` or
/// `modelcar-init`) and handed to the step and to the adapters' logs.
/// KServe's `Mutator.mutate` registers `InjectModelcar` only when an OCI
/// mode is configured (`ResolveOciModelMode(config) != ""` in
/// pkg/webhook/admission/pod/mutator.go, v0.20.0; `EnableOciImageSource`
/// in v0.15.0), and `InjectModelcar` takes the URI's own mode before the
/// configured one (pkg/webhook/admission/pod/storage_initializer_injector.go,
/// v0.20.0).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Plan {
    /// The OCI gate: whether the modelcar step runs at all.
    registered: bool,
    /// The pod's OCI model; `None` without one (no storage URI, or one
    /// this release does not read as OCI).
    model: Option<Model>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Model {
    /// The image reference, without any scheme.
    image: String,
    serving: Serving,
}

/// How the model is served: the URI's mode, else the configured one.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Serving {
    /// An ImageVolume.
    Native,
    /// Pulled by the storage initializer.
    Fetch,
    /// A modelcar sidecar, in the shape [`shape::choose`] gave (or its refusal).
    Modelcar(Result<ShapeChoice, InjectError>),
}

impl Plan {
    /// The one place the gate, the OCI mode and the modelcar's shape are decided.
    pub(crate) fn of(pod: &WorkingSet<'_>, inputs: &Inputs) -> Plan {
        let configured = inputs.config.storage_initializer.oci_mode();
        let model = (pod.annotation(SOURCE_URI_ANNOTATION))
            .and_then(|src| parse_oci_in(src, inputs.config.release))
            .map(|oci| Model {
                image: oci.image.to_string(),
                serving: match oci_effective_mode(&oci, configured) {
                    "native" => Serving::Native,
                    // v0.20 parses `fetch` but has no branch for it: a modelcar.
                    "fetch" if inputs.config.release.oci_fetch() => Serving::Fetch,
                    // KServe treats every other mode, known or not, as modelcar.
                    _ => Serving::Modelcar(shape::choose(pod, inputs)),
                },
            });
        Plan {
            registered: !configured.is_empty(),
            model,
        }
    }

    /// Whether the modelcar step is registered (KServe's OCI gate).
    pub(crate) fn registered(&self) -> bool {
        self.registered
    }

    /// The shape the step gives this pod's modelcar and why, for the
    /// adapters' logs; `None` when it adds no modelcar (not an OCI URI,
    /// another OCI mode, OCI support off) or would refuse the pod.
    pub(crate) fn shape(&self) -> Option<ShapeChoice> {
        match &self.model {
            Some(Model {
                serving: Serving::Modelcar(Ok(shape)),
                ..
            }) if self.registered => Some(*shape),
            _ => None,
        }
    }
}

/// The step on `pod` as `plan` decided it ([`Plan::of`] on this pod).
pub(crate) fn inject(
    pod: &mut WorkingSet<'_>,
    inputs: &Inputs,
    plan: &Plan,
) -> Result<(), InjectError> {
    let Some(model) = &plan.model else {
        return Ok(());
    };
    if !inputs.config.release.modelcar_worker_fallback()
        && pod.position(List::Containers, KSERVE_CONTAINER).is_none()
    {
        return Err(InjectError::new(
            NAME,
            format!("no container found with name {KSERVE_CONTAINER}"),
        ));
    }
    let containers = model_containers(pod).ok_or_else(|| {
        InjectError::new(
            NAME,
            format!("Invalid configuration: cannot find container: {KSERVE_CONTAINER}"),
        )
    })?;
    let image = model.image.as_str();
    match &model.serving {
        Serving::Native => inject_image_volume(pod, inputs, image, &containers),
        Serving::Fetch => inject_fetch(pod, inputs, image, &containers),
        Serving::Modelcar(shape) => {
            let shape = shape.as_ref().map_err(InjectError::clone)?;
            inject_modelcar(pod, inputs, image, &containers, shape.mode)
        }
    }
}

fn inject_modelcar(
    pod: &mut WorkingSet<'_>,
    inputs: &Inputs,
    image: &str,
    containers: &[&str],
    mode: ModelcarMode,
) -> Result<(), InjectError> {
    let config = &inputs.config.storage_initializer;
    let profile = security_profile::choose(pod, inputs, NAME)?;
    let volume = empty_dir_volume(PROVISION_LOCATION_VOLUME);
    let mount = modelcar_mount();
    for (i, name) in containers.iter().enumerate() {
        pod.ensure_volume(&volume);
        // v0.15 gives the transformer the mount only.
        let env_and_uid = i == 0 || inputs.config.release.modelcar_transformer_env();
        if let Some(mut c) = pod.container_mut(List::Containers, name) {
            if env_and_uid {
                c.set_env(MODEL_INIT_MODE_ENV, "async");
            }
            c.ensure_mount(&mount);
            if let Some(uid) = config.uid_modelcar.filter(|_| env_and_uid) {
                c.set_run_as_user(uid);
            }
        }
    }
    if !pod.has_container_named(MODELCAR_CONTAINER) {
        add_modelcar(pod, inputs, image, profile, mode)?;
    }
    // The model server reaches the model through /proc/<modelcar pid>/root,
    // so both shapes need the shared process namespace.
    pod.set_share_process_namespace(true);
    Ok(())
}

/// The modelcar (with `modelcar-init` in the classic shape) in `mode`'s
/// shape, hardened as `profile` says.
fn add_modelcar(
    pod: &mut WorkingSet<'_>,
    inputs: &Inputs,
    image: &str,
    profile: SecurityProfile,
    mode: ModelcarMode,
) -> Result<(), InjectError> {
    let key = PairKey::of(&inputs.config.storage_initializer);
    let classic = profile == SecurityProfile::Baseline && mode == ModelcarMode::Classic;
    if let Some(text) = inputs.modelcar_pair().filter(|_| classic) {
        let (list, name) = (List::Containers, MODELCAR_CONTAINER);
        pod.ensure_prewritten_container(list, name, text.sidecar(image));
        let (list, name) = (List::InitContainers, MODELCAR_INIT_CONTAINER);
        pod.ensure_prewritten_container(list, name, text.init(image));
        return Ok(());
    }
    let (mut sidecar, mut init) = modelcar_pair::containers(&key, image);
    if profile == SecurityProfile::Restricted {
        let (uid, group) = security_profile::modelcar_identity(pod, inputs, NAME)?;
        security_profile::harden(&mut sidecar, profile, Some(uid), NAME)?;
        security_profile::harden(&mut init, profile, Some(uid), NAME)?;
        security_profile::share_group(&mut sidecar, group);
        security_profile::share_group(&mut init, group);
    }
    match mode {
        // The pair is added together, as in KServe; each is still keyed by name.
        ModelcarMode::Classic => {
            pod.ensure_container(List::Containers, sidecar);
            pod.ensure_container(List::InitContainers, init);
        }
        // Appended: every init container already there runs first. In
        // modelcar mode none of ours is (the storage initializer, and the
        // CA bundle that goes only to it, are for other URIs and OCI
        // modes), and a user's init container never saw the model in the
        // classic shape either, which starts the modelcar after them all.
        // `modelcar-init` is left out: the kubelet pulls the image before
        // starting this init container, and the containers wait for its
        // startup probe, which is what the pre-pull was for.
        ModelcarMode::NativeSidecar => {
            pod.ensure_container(List::InitContainers, native_sidecar(sidecar, image));
        }
    }
    Ok(())
}

/// The classic modelcar (same image, volume, resources and security
/// context) as a native sidecar: restarted if it exits, and started (its
/// probe passing) before the containers, so the model is at
/// `/mnt/models` when they start. An image without a non-empty `/models`
/// fails here with a message, as KServe's `modelcar-init` makes it fail.
fn native_sidecar(classic: Container, image: &str) -> Container {
    let sh = |script: String| Some(vec!["sh".to_string(), "-c".to_string(), script]);
    Container {
        restart_policy: Some("Always".to_string()),
        // `$$` is Kubernetes' escape for `$`, as in the classic modelcar.
        args: sh(format!(
            "if [ ! -d /models ] || [ -z \"$$(ls -A /models)\" ]; then echo 'modelcar {image}: /models is missing or empty in the image' >&2; exit 1; fi; ln -sf /proc/$$$$/root/models {DEFAULT_MODEL_LOCAL_MOUNT_PATH} && sleep infinity"
        )),
        // The link resolves only while the shell that made it runs, so a
        // modelcar that died fails the probe too.
        startup_probe: Some(Probe {
            exec: Some(ExecAction {
                command: sh(format!("test -e {DEFAULT_MODEL_LOCAL_MOUNT_PATH}")),
            }),
            period_seconds: Some(1),
            failure_threshold: Some(60),
            ..Default::default()
        }),
        ..classic
    }
}

/// `/mnt/models` → `mnt-models`.
fn path_volume_name(path: &str) -> String {
    let name = path.trim_start_matches('/').replace('/', "-");
    if name.is_empty() {
        "oci-model".to_string()
    } else {
        name
    }
}

fn inject_image_volume(
    pod: &mut WorkingSet<'_>,
    inputs: &Inputs,
    image: &str,
    containers: &[&str],
) -> Result<(), InjectError> {
    let name = path_volume_name(DEFAULT_MODEL_LOCAL_MOUNT_PATH);
    if inputs.drops_image_volumes && !pod.has_volume(&name) {
        return Err(InjectError::new(
            NAME,
            format!("the OCI model {image:?} is served natively, as an image volume (oci+native:// or ociModelMode native), but {IMAGE_VOLUMES_DROPPED}: turn the ImageVolume feature gate on (API server and kubelets), or serve the model as a modelcar"),
        ));
    }
    for container in containers {
        let clash = pod.container(List::Containers, container).and_then(|c| {
            let mounts = c.volume_mounts.iter().flat_map(|m| m.0.iter());
            let name_of = |m: &MountView| m.name.as_ref().map(|n| n.as_str().to_string());
            mounts
                .filter(|m| {
                    m.mount_path.as_ref().map(Str::as_str) == Some(DEFAULT_MODEL_LOCAL_MOUNT_PATH)
                        && name_of(m).as_deref() != Some(name.as_str())
                })
                .find_map(name_of)
        });
        if let Some(other) = clash {
            return Err(InjectError::new(
                NAME,
                format!(
                    "mountPath {DEFAULT_MODEL_LOCAL_MOUNT_PATH:?} already used by volume {other:?}"
                ),
            ));
        }
    }
    pod.ensure_volume(&Volume {
        name: name.clone(),
        image: Some(ImageVolumeSource {
            reference: Some(image.to_string()),
            pull_policy: Some("IfNotPresent".to_string()),
        }),
        ..Default::default()
    });
    let mount = VolumeMount {
        name,
        mount_path: DEFAULT_MODEL_LOCAL_MOUNT_PATH.to_string(),
        sub_path: Some("models".to_string()),
        read_only: Some(true),
        ..Default::default()
    };
    for container in containers {
        if let Some(mut c) = pod.container_mut(List::Containers, container) {
            c.ensure_mount(&mount);
        }
    }
    Ok(())
}

fn inject_fetch(
    pod: &mut WorkingSet<'_>,
    inputs: &Inputs,
    image: &str,
    containers: &[&str],
) -> Result<(), InjectError> {
    let uri = format!("{OCI_PREFIX}{image}");
    match pod.position(List::InitContainers, STORAGE_INITIALIZER_CONTAINER) {
        Some(position) => add_fetch_pair(pod, position, &uri),
        None => add_fetch_init_container(pod, inputs, &uri)?,
    }
    // One emptyDir at the model path: the initializer writes it, the
    // configured containers read it.
    let volume_name = path_volume_name(DEFAULT_MODEL_LOCAL_MOUNT_PATH);
    let model_mount = VolumeMount {
        name: volume_name.clone(),
        mount_path: DEFAULT_MODEL_LOCAL_MOUNT_PATH.to_string(),
        ..Default::default()
    };
    if let Some(mut init) = pod.container_mut(List::InitContainers, STORAGE_INITIALIZER_CONTAINER) {
        init.ensure_mount(&model_mount);
    }
    pod.ensure_volume(&empty_dir_volume(&volume_name));
    for name in containers {
        if let Some(mut c) = pod.container_mut(List::Containers, name) {
            c.ensure_mount(&model_mount);
        }
    }
    Ok(())
}

/// An existing initializer also downloads this model, unless it already does.
fn add_fetch_pair(pod: &mut WorkingSet<'_>, position: usize, uri: &str) {
    let Some(mut init) = pod.container_at(List::InitContainers, position) else {
        return;
    };
    let present = (init.args().chunks(2)).any(|pair| pair == [uri, DEFAULT_MODEL_LOCAL_MOUNT_PATH]);
    if !present {
        init.push_args(&[uri, DEFAULT_MODEL_LOCAL_MOUNT_PATH]);
    }
}

/// The initializer with registry credentials (first pull secret), the
/// configured CA bundle and the insecure-registry switch. Like KServe, a
/// credential whose volume name is already taken is left out.
fn add_fetch_init_container(
    pod: &mut WorkingSet<'_>,
    inputs: &Inputs,
    uri: &str,
) -> Result<(), InjectError> {
    let mut vars = Vec::new();
    let mut mounts = Vec::new();
    let mut volumes = Vec::new();
    let first_pull_secret = pod.first_image_pull_secret();
    if let Some(secret) = first_pull_secret {
        volumes.push(Volume {
            name: OCI_FETCH_DOCKER_CONFIG_VOLUME.to_string(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(secret.to_string()),
                default_mode: Some(0o400),
                items: Some(vec![KeyToPath {
                    key: ".dockerconfigjson".to_string(),
                    path: "config.json".to_string(),
                    mode: None,
                }]),
                optional: None,
            }),
            ..Default::default()
        });
        mounts.push(VolumeMount {
            name: OCI_FETCH_DOCKER_CONFIG_VOLUME.to_string(),
            mount_path: OCI_FETCH_AUTH_MOUNT_PATH.to_string(),
            read_only: Some(true),
            ..Default::default()
        });
        vars.push(env_var(
            OCI_FETCH_DOCKER_CONFIG_ENV,
            &format!("{OCI_FETCH_AUTH_MOUNT_PATH}/config.json"),
        ));
    }
    // A volume of these names already present is ours from an earlier pass
    // (another webhook removed the initializer): wire it up again.
    if let Some((volume, mount, ca_vars)) = ca_bundle::plan(inputs, pod.namespace(), &vars, false) {
        vars.extend(ca_vars);
        volumes.push(volume);
        mounts.push(mount);
    }
    if inputs.config.storage_initializer.oci_insecure_registry {
        vars.push(env_var(OCI_INSECURE_REGISTRY_ENV, "true"));
    }
    let mut container = Container {
        name: STORAGE_INITIALIZER_CONTAINER.to_string(),
        image: Some(initializer_image(inputs)),
        args: Some(vec![
            uri.to_string(),
            DEFAULT_MODEL_LOCAL_MOUNT_PATH.to_string(),
        ]),
        resources: Some(init_resources(&inputs.config.storage_initializer.resources)),
        termination_message_policy: Some(FALLBACK_TO_LOGS_ON_ERROR.to_string()),
        volume_mounts: (!mounts.is_empty()).then_some(mounts),
        env: (!vars.is_empty()).then_some(vars),
        ..Default::default()
    };
    InitResources::from_pod(pod, NAME)?.apply(&mut container, NAME)?;
    let profile = security_profile::choose(pod, inputs, NAME)?;
    security_profile::harden(&mut container, profile, None, NAME)?;
    pod.ensure_container(List::InitContainers, container);
    for volume in &volumes {
        pod.ensure_volume(volume);
    }
    Ok(())
}

#[cfg(test)]
mod tests;
