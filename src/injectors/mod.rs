//! KServe's injectors, one file each, run in KServe's order. Each is a pure
//! function of the pod and the [`Env`]; each is idempotent on its own.

pub mod accelerator;
pub mod agent;
pub mod ca_bundle;
pub mod istio_cni;
pub mod metrics_aggregator;
pub mod modelcar;
pub mod storage_initializer;
pub mod storage_uri;

use crate::constants::{KSERVE_CONTAINER, TRANSFORMER_CONTAINER, WORKER_CONTAINER};
use crate::env::Env;
use crate::pod::{List, PodDoc};

/// An injector refused the pod; the message is KServe's wording.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[error("{message}")]
pub struct InjectError {
    pub injector: &'static str,
    pub message: String,
}

impl InjectError {
    pub fn new(injector: &'static str, message: impl Into<String>) -> Self {
        Self {
            injector,
            message: message.into(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InjectorOutcome {
    /// The injector changed the pod.
    Injected,
    /// Nothing to do: not triggered, or already injected.
    Unchanged,
}

impl InjectorOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            InjectorOutcome::Injected => "injected",
            InjectorOutcome::Unchanged => "unchanged",
        }
    }
}

type Injector = fn(&mut PodDoc, &Env) -> Result<(), InjectError>;

/// An emptyDir volume: scratch space the injectors share between containers.
pub(crate) fn empty_dir_volume(name: &str) -> k8s_openapi::api::core::v1::Volume {
    k8s_openapi::api::core::v1::Volume {
        name: name.to_string(),
        empty_dir: Some(Default::default()),
        ..Default::default()
    }
}

/// The containers that read the model: the server (`kserve-container`, else
/// `worker-container`) first, then `transformer-container` when present.
/// `None` when the pod has no server container.
pub(crate) fn model_containers(pod: &PodDoc) -> Option<Vec<&'static str>> {
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

/// Names and functions in KServe's order. Modelcar is registered only when an
/// OCI mode is configured, as in KServe.
fn pipeline(env: &Env) -> Vec<(&'static str, Injector)> {
    let mut steps: Vec<(&'static str, Injector)> = vec![
        (accelerator::NAME, accelerator::inject),
        (storage_initializer::NAME, storage_initializer::inject),
        (istio_cni::NAME, istio_cni::inject),
        (agent::NAME, agent::inject),
        (metrics_aggregator::NAME, metrics_aggregator::inject),
    ];
    if !env.config.storage_initializer.oci_mode().is_empty() {
        steps.push((modelcar::NAME, modelcar::inject));
    }
    steps
}

pub fn run_all(
    pod: &mut PodDoc,
    env: &Env,
) -> Result<Vec<(&'static str, InjectorOutcome)>, InjectError> {
    let mut outcomes = Vec::new();
    for (name, inject) in pipeline(env) {
        let before = pod.changes();
        inject(pod, env)?;
        let outcome = if pod.changes() > before {
            InjectorOutcome::Injected
        } else {
            InjectorOutcome::Unchanged
        };
        outcomes.push((name, outcome));
    }
    Ok(outcomes)
}

/// All names the pipeline may report, for pre-registering metric labels.
pub const INJECTOR_NAMES: [&str; 6] = [
    accelerator::NAME,
    storage_initializer::NAME,
    istio_cni::NAME,
    agent::NAME,
    metrics_aggregator::NAME,
    modelcar::NAME,
];

#[cfg(test)]
pub(crate) mod test_support;
