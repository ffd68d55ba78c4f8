//! Helpers for the injectors' unit tests. Each run goes the webhook's way:
//! the pod's view, the injector on its working set, and the recorded patch
//! applied to the input; the result must equal what the same injector makes
//! of the whole pod, so every unit test also checks the recorded operations.

use super::InjectError;
use crate::config::Config;
use crate::inputs::Inputs;
use crate::oracle::{EitherDoc, TreeDoc};
use crate::pod::{apply_all, WorkingSet};
use serde_json::Value;

/// Declares, in an injector's test module, `inject` as that injector on
/// [`EitherDoc`]: a generic function's lifetimes are fixed where it is
/// named, so `super::inject` itself cannot be the higher-ranked [`Inject`].
macro_rules! inject_on_either {
    ($injector:path) => {
        fn inject(
            pod: &mut $crate::oracle::EitherDoc<'_, '_>,
            env: &$crate::inputs::Inputs,
        ) -> Result<(), $crate::injectors::InjectError> {
            $injector(pod, env)
        }
    };
}
pub(crate) use inject_on_either;

pub(crate) type Inject = fn(&mut EitherDoc<'_, '_>, &Inputs) -> Result<(), InjectError>;

pub(crate) fn run(inject: Inject, pod: &Value) -> Result<Value, InjectError> {
    run_with(inject, pod, &Inputs::default())
}

pub(crate) fn run_with(inject: Inject, pod: &Value, inputs: &Inputs) -> Result<Value, InjectError> {
    let mut whole = pod.clone();
    let on_whole = inject(&mut EitherDoc::Tree(&mut TreeDoc::new(&mut whole)), inputs);
    let view = crate::view::pod_from_value(pod).expect("a pod the view can read");
    let mut doc = WorkingSet::new(view);
    let on_view = inject(&mut EitherDoc::Working(&mut doc), inputs);
    assert_eq!(on_whole, on_view, "the working set decided otherwise");
    on_view?;
    let mut patched = pod.clone();
    apply_all(&doc.into_patch(), &mut patched).expect("recorded ops apply");
    assert_eq!(patched, whole, "recorded ops differ from the edits");
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
