//! Helpers for the injectors' unit tests.

use super::InjectError;
use crate::config::Config;
use crate::mutation::Env;
use crate::pod::PodDoc;
use serde_json::Value;

pub(crate) type Inject = fn(&mut PodDoc, &Env) -> Result<(), InjectError>;

pub(crate) fn run(inject: Inject, pod: &Value) -> Result<Value, InjectError> {
    run_with(inject, pod, &Env::default())
}

pub(crate) fn run_with(inject: Inject, pod: &Value, env: &Env) -> Result<Value, InjectError> {
    let mut out = pod.clone();
    inject(&mut PodDoc::new(&mut out), env)?;
    Ok(out)
}

/// An env whose config is KServe's default with `edit` applied.
pub(crate) fn env_with(edit: impl FnOnce(&mut Config)) -> Env {
    let mut config = Config::default();
    edit(&mut config);
    Env::new(config)
}

/// Runs twice and checks the second pass changes nothing.
pub(crate) fn run_idempotent(inject: Inject, pod: &Value, env: &Env) -> Value {
    let once = run_with(inject, pod, env).expect("first pass");
    let twice = run_with(inject, &once, env).expect("second pass");
    assert_eq!(once, twice, "second pass changed the pod");
    once
}
