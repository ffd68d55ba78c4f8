//! Which shape a pod's modelcar takes, and why. The choice is made once, at
//! the first injection: from then on the modelcar (or KServe's
//! `modelcar-init`) already in the pod decides, whatever the flag or the
//! annotation say, so a pod never carries the modelcar twice.

use super::NAME;
use crate::constants::{MODELCAR_CONTAINER, MODELCAR_INIT_CONTAINER, MODELCAR_MODE_ANNOTATION};
use crate::injectors::InjectError;
use crate::inputs::{Inputs, ModelcarMode};
use crate::pod::{List, WorkingSet};

/// Why a pod's modelcar has its shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShapeReason {
    /// `--modelcar-mode` (the pod names no mode and has no modelcar yet).
    Flag,
    /// The pod's `kserve-injector.io/modelcar-mode` annotation.
    Annotation,
    /// A modelcar of this shape is already in the pod: an earlier pass, or
    /// whoever wrote the pod, put it there.
    Present,
}

/// A pod's modelcar shape and the reason, for the adapters' debug logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShapeChoice {
    pub mode: ModelcarMode,
    pub reason: ShapeReason,
}

impl std::fmt::Display for ShapeChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let why = match (self.reason, self.mode) {
            (ShapeReason::Flag, _) => "from --modelcar-mode",
            (ShapeReason::Annotation, _) => "from the pod's kserve-injector.io/modelcar-mode",
            (ShapeReason::Present, ModelcarMode::Classic) => {
                "a modelcar container or modelcar-init is already in the pod"
            }
            (ShapeReason::Present, ModelcarMode::NativeSidecar) => {
                "a modelcar init container is already in the pod"
            }
        };
        write!(f, "{} ({why})", self.mode)
    }
}

/// The shape: one already present wins; else the annotation, else the flag.
/// An annotation naming no mode is refused, but only when it would decide.
pub(crate) fn choose(pod: &WorkingSet<'_>, inputs: &Inputs) -> Result<ShapeChoice, InjectError> {
    let present = |mode| ShapeChoice {
        mode,
        reason: ShapeReason::Present,
    };
    if pod
        .position(List::InitContainers, MODELCAR_CONTAINER)
        .is_some()
    {
        return Ok(present(ModelcarMode::NativeSidecar));
    }
    // KServe adds `modelcar-init` only with its regular modelcar: either one
    // marks the classic shape (another webhook may have dropped the other).
    if pod.position(List::Containers, MODELCAR_CONTAINER).is_some()
        || pod
            .position(List::InitContainers, MODELCAR_INIT_CONTAINER)
            .is_some()
    {
        return Ok(present(ModelcarMode::Classic));
    }
    let Some(text) = pod.annotation(MODELCAR_MODE_ANNOTATION) else {
        return Ok(ShapeChoice {
            mode: inputs.modelcar_mode,
            reason: ShapeReason::Flag,
        });
    };
    let mode = text
        .parse::<ModelcarMode>()
        .map_err(|e| InjectError::caused_by(NAME, format!("{MODELCAR_MODE_ANNOTATION}: {e}"), e))?;
    Ok(ShapeChoice {
        mode,
        reason: ShapeReason::Annotation,
    })
}
