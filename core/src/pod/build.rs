//! Builders for what the injectors add, shared between them: typed
//! k8s-openapi values, serialised into the pod by the ensure helpers.

use super::{List, WorkingSet};
use crate::config::Resources;
use crate::constants::{
    DEFAULT_STORAGE_INITIALIZER_IMAGE, KSERVE_CONTAINER, TRANSFORMER_CONTAINER, WORKER_CONTAINER,
};
use crate::inputs::Inputs;
use k8s_openapi::api::core::v1::{EnvVar, ResourceRequirements, Volume, VolumeMount};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use std::collections::BTreeMap;

/// A literal variable; an empty value is left out, as Go's `omitempty` does.
pub(crate) fn env_var(name: &str, value: &str) -> EnvVar {
    EnvVar {
        name: name.to_string(),
        value: (!value.is_empty()).then(|| value.to_string()),
        value_from: None,
    }
}

/// Appends `var` unless the list already has one of that name.
pub(crate) fn push_env_if_absent(env: &mut Vec<EnvVar>, var: EnvVar) {
    if !env.iter().any(|e| e.name == var.name) {
        env.push(var);
    }
}

/// A mount of `name` at `path`; `readOnly` is written only when true.
pub(crate) fn mount(name: &str, path: &str, read_only: bool) -> VolumeMount {
    VolumeMount {
        name: name.to_string(),
        mount_path: path.to_string(),
        read_only: read_only.then_some(true),
        ..Default::default()
    }
}

/// Limits and requests of cpu and memory from a config block.
pub(crate) fn resources(r: &Resources) -> ResourceRequirements {
    let pair = |cpu: &str, memory: &str| {
        BTreeMap::from([
            ("cpu".to_string(), Quantity(cpu.to_string())),
            ("memory".to_string(), Quantity(memory.to_string())),
        ])
    };
    ResourceRequirements {
        limits: Some(pair(&r.cpu_limit, &r.memory_limit)),
        requests: Some(pair(&r.cpu_request, &r.memory_request)),
        ..Default::default()
    }
}

/// An emptyDir volume: scratch space the injectors share between containers.
pub(crate) fn empty_dir_volume(name: &str) -> Volume {
    Volume {
        name: name.to_string(),
        empty_dir: Some(Default::default()),
        ..Default::default()
    }
}

/// The storage-initializer image: configured, else KServe's default.
pub(crate) fn initializer_image(inputs: &Inputs) -> String {
    let image = &inputs.config.storage_initializer.image;
    if image.is_empty() {
        DEFAULT_STORAGE_INITIALIZER_IMAGE.to_string()
    } else {
        image.clone()
    }
}

/// The containers that read the model: the server (`kserve-container`, else
/// `worker-container`) first, then `transformer-container` when present.
/// `None` when the pod has no server container.
pub(crate) fn model_containers(pod: &WorkingSet<'_>) -> Option<Vec<&'static str>> {
    let present = |name: &str| pod.position(List::Containers, name).is_some();
    let server = [KSERVE_CONTAINER, WORKER_CONTAINER]
        .into_iter()
        .find(|name| present(name))?;
    let mut containers = vec![server];
    if present(TRANSFORMER_CONTAINER) {
        containers.push(TRANSFORMER_CONTAINER);
    }
    Some(containers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_env_value_is_omitted_like_go() {
        assert_eq!(env_var("A", "").value, None);
        assert_eq!(env_var("A", "b").value.as_deref(), Some("b"));
    }

    #[test]
    fn read_only_is_written_only_when_true() {
        assert_eq!(mount("v", "/p", false).read_only, None);
        assert_eq!(mount("v", "/p", true).read_only, Some(true));
    }
}
