//! Helpers for the injectors' unit tests. Each run goes the webhook's way:
//! the pod's view, the injector on its working set, and the recorded patch
//! applied to the input. (The recorded operations are held against an
//! independent editor of the whole pod by the `kserve-injector-oracle`
//! crate's tests, for every call an injector can make.)

use super::InjectError;
use crate::config::Config;
use crate::inputs::Inputs;
use crate::pod::{apply_all, WorkingSet};
use serde_json::Value;

pub(crate) type Inject = fn(&mut WorkingSet<'_>, &Inputs) -> Result<(), InjectError>;

pub(crate) fn run(inject: Inject, pod: &Value) -> Result<Value, InjectError> {
    run_with(inject, pod, &Inputs::default())
}

pub(crate) fn run_with(inject: Inject, pod: &Value, inputs: &Inputs) -> Result<Value, InjectError> {
    let view = crate::view::pod_from_value(pod).expect("a pod the view can read");
    let mut doc = WorkingSet::new(view);
    inject(&mut doc, inputs)?;
    let mut patched = pod.clone();
    apply_all(&doc.into_patch(), &mut patched).expect("recorded ops apply");
    Ok(patched)
}

/// An env whose config is KServe's default with `edit` applied.
pub(crate) fn env_with(edit: impl FnOnce(&mut Config)) -> Inputs {
    let mut config = Config::default();
    edit(&mut config);
    Inputs::new(config)
}

/// Runs twice and checks the second pass changes nothing.
pub(crate) fn run_idempotent(inject: Inject, pod: &Value, inputs: &Inputs) -> Value {
    let once = run_with(inject, pod, inputs).expect("first pass");
    let twice = run_with(inject, &once, inputs).expect("second pass");
    assert_eq!(once, twice, "second pass changed the pod");
    once
}
