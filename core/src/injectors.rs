//! KServe's injectors, one file each, run in KServe's order. Each is a pure
//! function of the pod and the [`Inputs`]; each is idempotent on its own.

pub(crate) mod accelerator;
pub(crate) mod agent;
pub(crate) mod ca_bundle;
pub(crate) mod istio_cni;
pub(crate) mod metrics_aggregator;
pub(crate) mod modelcar;
pub(crate) mod security_profile;
pub(crate) mod storage_initializer;

use crate::inputs::Inputs;
use crate::pod::WorkingSet;
use crate::shared_error::AnyError;

/// An injector refused the pod; the message is KServe's wording.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[error("{message}")]
pub struct InjectError {
    pub(crate) injector: &'static str,
    pub message: String,
    /// The error the message was worded from, when there is one.
    #[source]
    pub(crate) source: Option<AnyError>,
}

impl InjectError {
    pub(crate) fn new(injector: &'static str, message: impl Into<String>) -> Self {
        Self {
            injector,
            message: message.into(),
            source: None,
        }
    }

    /// `source`, worded as `message` (which may quote it).
    pub(crate) fn caused_by(
        injector: &'static str,
        message: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Self {
            injector,
            message: message.into(),
            source: Some(AnyError::any(source)),
        }
    }

    /// `source`, in its own words.
    pub(crate) fn from_source(
        injector: &'static str,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Self::caused_by(injector, source.to_string(), source)
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

/// An injector as the pipeline runs it: the pod, the inputs, and what the
/// modelcar step was decided to do with this pod ([`modelcar::Plan`]).
type Injector = fn(&mut WorkingSet<'_>, &Inputs, &modelcar::Plan) -> Result<(), InjectError>;

/// One named step of the pipeline: its changes are reported under its name.
pub(crate) struct Step {
    pub name: &'static str,
    run: Injector,
    /// Whether the step is registered for this pod's plan.
    enabled: fn(&modelcar::Plan) -> bool,
}

fn always(_: &modelcar::Plan) -> bool {
    true
}

/// The Istio CNI step runs before a fetch-mode initializer exists, so
/// KServe sets its UID only on a reinvocation; running the Istio CNI
/// injector again after the modelcar reaches that state in one pass (it is
/// idempotent, and a no-op unless a storage initializer is present).
fn modelcar_step(
    pod: &mut WorkingSet<'_>,
    inputs: &Inputs,
    plan: &modelcar::Plan,
) -> Result<(), InjectError> {
    modelcar::inject(pod, inputs, plan)?;
    istio_cni::inject(pod, inputs)
}

/// KServe's injectors in KServe's order (`Mutator.mutate`,
/// pkg/webhook/admission/pod/mutator.go, v0.15.0 to v0.20.0): the one list
/// of the pipeline, whose length every count of steps is taken from.
pub(crate) const PIPELINE: &[Step] = &[
    Step {
        name: accelerator::NAME,
        run: |pod, inputs, _| accelerator::inject(pod, inputs),
        enabled: always,
    },
    Step {
        name: storage_initializer::NAME,
        run: |pod, inputs, _| storage_initializer::inject(pod, inputs),
        enabled: always,
    },
    Step {
        name: istio_cni::NAME,
        run: |pod, inputs, _| istio_cni::inject(pod, inputs),
        enabled: always,
    },
    Step {
        name: agent::NAME,
        run: |pod, inputs, _| agent::inject(pod, inputs),
        enabled: always,
    },
    Step {
        name: metrics_aggregator::NAME,
        run: |pod, inputs, _| metrics_aggregator::inject(pod, inputs),
        enabled: always,
    },
    Step {
        name: modelcar::NAME,
        run: modelcar_step,
        enabled: modelcar::Plan::registered,
    },
];

/// One step that ran: its outcome, and how many changes the pod had
/// recorded once it was done, so each change can be traced to its step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StepRun {
    pub name: &'static str,
    pub outcome: InjectorOutcome,
    pub changes_after: usize,
}

/// The pipeline on `pod`, with the plan `pod` was given ([`modelcar::Plan::of`]
/// on it): what each step did, and where each step's changes end.
pub(crate) fn run_steps(
    pod: &mut WorkingSet<'_>,
    inputs: &Inputs,
    plan: &modelcar::Plan,
) -> Result<Vec<StepRun>, InjectError> {
    let mut runs = Vec::with_capacity(PIPELINE.len());
    for step in PIPELINE.iter().filter(|s| (s.enabled)(plan)) {
        let before = pod.changes();
        (step.run)(pod, inputs, plan)?;
        let changes_after = pod.changes();
        let outcome = if changes_after > before {
            InjectorOutcome::Injected
        } else {
            InjectorOutcome::Unchanged
        };
        runs.push(StepRun {
            name: step.name,
            outcome,
            changes_after,
        });
    }
    Ok(runs)
}

/// Names the changes made before any injector runs (the pod's namespace,
/// which KServe's mutator writes itself).
pub const MUTATOR: &str = "mutator";

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
