//! KServe's injectors, one file each, run in KServe's order. Each is a pure
//! function of the pod and the [`Inputs`]; each is idempotent on its own.

pub mod accelerator;
pub mod agent;
pub mod ca_bundle;
pub mod istio_cni;
pub mod metrics_aggregator;
pub mod modelcar;
pub mod security_profile;
pub mod storage_initializer;

use crate::inputs::Inputs;
use crate::pod::{PodEdit, WorkingSet};
use crate::shared_error::AnyError;

/// An injector refused the pod; the message is KServe's wording.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[error("{message}")]
pub struct InjectError {
    pub injector: &'static str,
    pub message: String,
    /// The error the message was worded from, when there is one.
    #[source]
    pub source: Option<AnyError>,
}

impl InjectError {
    pub fn new(injector: &'static str, message: impl Into<String>) -> Self {
        Self {
            injector,
            message: message.into(),
            source: None,
        }
    }

    /// `source`, worded as `message` (which may quote it).
    pub fn caused_by(
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
    pub fn from_source(
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

type Injector<P> = fn(&mut P, &Inputs) -> Result<(), InjectError>;

/// One named step of the pipeline: its changes are reported under its name.
pub(crate) struct Step<P> {
    pub name: &'static str,
    run: Injector<P>,
    /// Whether the step is registered for this config.
    enabled: fn(&Inputs) -> bool,
}

fn always(_: &Inputs) -> bool {
    true
}

/// Modelcar is registered only when an OCI mode is configured, as in KServe.
fn oci_mode_configured(inputs: &Inputs) -> bool {
    !inputs.config.storage_initializer.oci_mode().is_empty()
}

/// The Istio CNI step runs before a fetch-mode initializer exists, so
/// KServe sets its UID only on a reinvocation; running the Istio CNI
/// injector again after the modelcar reaches that state in one pass (it is
/// idempotent, and a no-op unless a storage initializer is present).
pub(crate) fn modelcar_step<P: PodEdit>(pod: &mut P, inputs: &Inputs) -> Result<(), InjectError> {
    modelcar::inject(pod, inputs)?;
    istio_cni::inject(pod, inputs)
}

/// The pipeline for one kind of pod document. Generic rather than a table of
/// `dyn` calls: the product instantiates it for the working set only, and the
/// test oracle (feature `oracle`) for its JSON tree. `'p` is as long as the
/// document type lives (a working set borrows the request body).
pub(crate) struct Pipeline<'p, P>(std::marker::PhantomData<&'p P>);

impl<'p, P: PodEdit + 'p> Pipeline<'p, P> {
    /// KServe's injectors in KServe's order: the one list of the pipeline,
    /// whose length every count of steps is taken from.
    pub(crate) const STEPS: &'p [Step<P>] = &[
        Step {
            name: accelerator::NAME,
            run: accelerator::inject::<P>,
            enabled: always,
        },
        Step {
            name: storage_initializer::NAME,
            run: storage_initializer::inject::<P>,
            enabled: always,
        },
        Step {
            name: istio_cni::NAME,
            run: istio_cni::inject::<P>,
            enabled: always,
        },
        Step {
            name: agent::NAME,
            run: agent::inject::<P>,
            enabled: always,
        },
        Step {
            name: metrics_aggregator::NAME,
            run: metrics_aggregator::inject::<P>,
            enabled: always,
        },
        Step {
            name: modelcar::NAME,
            run: modelcar_step::<P>,
            enabled: oci_mode_configured,
        },
    ];
}

/// The steps as the webhook and the CLI run them.
pub(crate) const PIPELINE: &[Step<WorkingSet<'static>>] = Pipeline::<WorkingSet<'static>>::STEPS;

pub fn run_all<P: PodEdit>(
    pod: &mut P,
    inputs: &Inputs,
) -> Result<Vec<(&'static str, InjectorOutcome)>, InjectError> {
    let runs = run_steps(pod, inputs)?;
    Ok(runs.into_iter().map(|r| (r.name, r.outcome)).collect())
}

/// One step that ran: its outcome, and how many changes the pod had
/// recorded once it was done, so each change can be traced to its step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StepRun {
    pub name: &'static str,
    pub outcome: InjectorOutcome,
    pub changes_after: usize,
}

/// [`run_all`], with where each step's changes end.
pub(crate) fn run_steps<P: PodEdit>(
    pod: &mut P,
    inputs: &Inputs,
) -> Result<Vec<StepRun>, InjectError> {
    let steps = Pipeline::<P>::STEPS;
    let mut runs = Vec::with_capacity(steps.len());
    for step in steps.iter().filter(|s| (s.enabled)(inputs)) {
        let before = pod.changes();
        (step.run)(pod, inputs)?;
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
