//! KServe's injectors, one file each, run in KServe's order. Each is a pure
//! function of the pod and the [`Inputs`]; each is idempotent on its own.

pub mod accelerator;
pub mod agent;
pub mod ca_bundle;
pub mod istio_cni;
pub mod metrics_aggregator;
pub mod modelcar;
pub mod storage_initializer;
pub mod storage_uri;

use crate::inputs::Inputs;
use crate::pod::PodEdit;

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

type Injector = fn(&mut dyn PodEdit, &Inputs) -> Result<(), InjectError>;

/// One named step of the pipeline: its injectors run in order and their
/// changes are reported under the step's name.
pub struct Step {
    pub name: &'static str,
    injectors: &'static [Injector],
    /// Whether the step is registered for this config.
    enabled: fn(&Inputs) -> bool,
}

fn always(_: &Inputs) -> bool {
    true
}

/// Modelcar is registered only when an OCI mode is configured, as in KServe.
fn oci_mode_configured(env: &Inputs) -> bool {
    !env.config.storage_initializer.oci_mode().is_empty()
}

/// KServe's injectors in KServe's order: the one list of the pipeline.
pub const PIPELINE: [Step; 6] = [
    Step {
        name: accelerator::NAME,
        injectors: &[accelerator::inject],
        enabled: always,
    },
    Step {
        name: storage_initializer::NAME,
        injectors: &[storage_initializer::inject],
        enabled: always,
    },
    Step {
        name: istio_cni::NAME,
        injectors: &[istio_cni::inject],
        enabled: always,
    },
    Step {
        name: agent::NAME,
        injectors: &[agent::inject],
        enabled: always,
    },
    Step {
        name: metrics_aggregator::NAME,
        injectors: &[metrics_aggregator::inject],
        enabled: always,
    },
    // The Istio CNI step runs before a fetch-mode initializer exists, so
    // KServe sets its UID only on a reinvocation; running the Istio CNI
    // injector again here reaches that state in one pass (it is idempotent,
    // and a no-op unless a storage initializer is present).
    Step {
        name: modelcar::NAME,
        injectors: &[modelcar::inject, istio_cni::inject],
        enabled: oci_mode_configured,
    },
];

pub fn run_all(
    pod: &mut dyn PodEdit,
    env: &Inputs,
) -> Result<Vec<(&'static str, InjectorOutcome)>, InjectError> {
    let mut outcomes = Vec::with_capacity(PIPELINE.len());
    for step in PIPELINE.iter().filter(|s| (s.enabled)(env)) {
        let before = pod.changes();
        for inject in step.injectors {
            inject(pod, env)?;
        }
        let outcome = if pod.changes() > before {
            InjectorOutcome::Injected
        } else {
            InjectorOutcome::Unchanged
        };
        outcomes.push((step.name, outcome));
    }
    Ok(outcomes)
}

/// All names the pipeline may report, for pre-registering metric labels.
pub const INJECTOR_NAMES: [&str; PIPELINE.len()] = {
    let mut names = [""; PIPELINE.len()];
    let mut i = 0;
    while i < PIPELINE.len() {
        names[i] = PIPELINE[i].name;
        i += 1;
    }
    names
};

#[cfg(test)]
pub(crate) mod test_support;
