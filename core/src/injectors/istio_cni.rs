//! Istio CNI: with no `istio-init` container to set up redirection, the
//! storage initializer must run as the sidecar's user to reach the network.

use super::InjectError;
use crate::constants::{
    ISTIO_DEFAULT_UID, ISTIO_INIT_CONTAINER, ISTIO_INTERCEPTION_MODE_ANNOTATION,
    ISTIO_STATUS_ANNOTATION, STORAGE_INITIALIZER_CONTAINER, STORAGE_INITIALIZER_UID_ANNOTATION,
};
use crate::inputs::Inputs;
use crate::pod::{List, WorkingSet};
use serde_json::Value;

pub(crate) const NAME: &str = "istio-cni";

pub(crate) fn inject(pod: &mut WorkingSet<'_>, _env: &Inputs) -> Result<(), InjectError> {
    if pod
        .position(List::InitContainers, STORAGE_INITIALIZER_CONTAINER)
        .is_none()
    {
        return Ok(());
    }
    let Some(uid) = run_as_user(pod)? else {
        return Ok(());
    };
    if let Some(mut init) = pod.container_mut(List::InitContainers, STORAGE_INITIALIZER_CONTAINER) {
        init.set_run_as_user(uid);
    }
    Ok(())
}

fn run_as_user(pod: &mut WorkingSet<'_>) -> Result<Option<i64>, InjectError> {
    if let Some(uid) = pod.annotation(STORAGE_INITIALIZER_UID_ANNOTATION) {
        // KServe ignores an unparsable override rather than failing the pod.
        return Ok(uid.parse::<i64>().ok());
    }
    if pod
        .position(List::InitContainers, ISTIO_INIT_CONTAINER)
        .is_some()
    {
        return Ok(None);
    }
    if pod.annotation(ISTIO_INTERCEPTION_MODE_ANNOTATION) != Some("REDIRECT") {
        return Ok(None);
    }
    let Some(status) = pod.annotation(ISTIO_STATUS_ANNOTATION) else {
        return Ok(None);
    };
    let Some(sidecar) = sidecar_name(status)? else {
        return Ok(None);
    };
    let Some(container) = pod.container(List::Containers, &sidecar) else {
        return Ok(None);
    };
    let uid = (container.security_context.as_ref())
        .and_then(|sc| sc.run_as_user)
        .unwrap_or(ISTIO_DEFAULT_UID);
    Ok(Some(uid))
}

/// The first container Istio lists in its status annotation. A `containers`
/// that is not a list counts as absent, as in KServe; Go panics on a
/// non-object status or a non-string entry, here they are clear errors.
fn sidecar_name(status: &str) -> Result<Option<String>, InjectError> {
    let bad = |why: String| {
        InjectError::new(
            NAME,
            format!("invalid {ISTIO_STATUS_ANNOTATION} annotation: {why}"),
        )
    };
    let parsed: serde_json::Map<String, Value> = serde_json::from_str(status).map_err(|e| {
        InjectError::caused_by(
            NAME,
            format!("invalid {ISTIO_STATUS_ANNOTATION} annotation: {e}"),
            e,
        )
    })?;
    let Some(Value::Array(items)) = parsed.get("containers") else {
        return Ok(None);
    };
    let first = items.first();
    match first {
        None => Ok(None),
        Some(Value::String(name)) if name.is_empty() => Ok(None),
        Some(Value::String(name)) => Ok(Some(name.clone())),
        Some(_) => Err(bad("containers[0] must be a string".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::injectors::test_support::run;
    use serde_json::{json, Value};

    fn pod(annotations: Value, sidecar: Value, init: Value) -> Value {
        json!({
            "metadata": {"annotations": annotations},
            "spec": {
                "containers": [{"name": "kserve-container"}, sidecar],
                "initContainers": init
            }
        })
    }

    fn istio_annotations() -> Value {
        json!({
            ISTIO_STATUS_ANNOTATION: "{\"containers\": [\"istio-sidecar\"]}",
            ISTIO_INTERCEPTION_MODE_ANNOTATION: "REDIRECT"
        })
    }

    fn uid_of(out: &Value) -> Option<i64> {
        out["spec"]["initContainers"]
            .as_array()
            .and_then(|a| a.iter().find(|c| c["name"] == "storage-initializer"))
            .and_then(|c| c.pointer("/securityContext/runAsUser"))
            .and_then(Value::as_i64)
    }

    const SI: &str = "storage-initializer";

    #[test]
    fn s29_sidecar_uid_is_copied() {
        let p = pod(
            istio_annotations(),
            json!({"name": "istio-sidecar", "securityContext": {"runAsUser": 501}}),
            json!([{"name": SI}]),
        );
        let out = run(inject, &p).unwrap();
        assert_eq!(uid_of(&out), Some(501));
        assert_eq!(run(inject, &out).unwrap(), out);
    }

    #[test]
    fn s29_sidecar_without_security_context_gives_1337() {
        let p = pod(
            istio_annotations(),
            json!({"name": "istio-sidecar"}),
            json!([{"name": SI}]),
        );
        assert_eq!(uid_of(&run(inject, &p).unwrap()), Some(1337));
    }

    #[test]
    fn s29_cases_without_a_uid() {
        let sidecar = json!({"name": "istio-sidecar"});
        let with_init = json!([{"name": "istio-init"}, {"name": SI}]);
        let cases = [
            pod(istio_annotations(), sidecar.clone(), with_init),
            pod(
                istio_annotations(),
                json!({"name": "other"}),
                json!([{"name": SI}]),
            ),
            pod(
                json!({ISTIO_STATUS_ANNOTATION: "{\"containers\": []}", ISTIO_INTERCEPTION_MODE_ANNOTATION: "REDIRECT"}),
                sidecar.clone(),
                json!([{"name": SI}]),
            ),
            pod(
                json!({ISTIO_STATUS_ANNOTATION: "{}", ISTIO_INTERCEPTION_MODE_ANNOTATION: "REDIRECT"}),
                sidecar.clone(),
                json!([{"name": SI}]),
            ),
            pod(
                json!({ISTIO_INTERCEPTION_MODE_ANNOTATION: "REDIRECT"}),
                sidecar.clone(),
                json!([{"name": SI}]),
            ),
            pod(
                json!({ISTIO_STATUS_ANNOTATION: "{\"containers\": [\"istio-sidecar\"]}", ISTIO_INTERCEPTION_MODE_ANNOTATION: "OTHER_REDIRECT"}),
                sidecar.clone(),
                json!([{"name": SI}]),
            ),
            pod(
                json!({ISTIO_STATUS_ANNOTATION: "{\"containers\": [\"istio-sidecar\"]}"}),
                sidecar.clone(),
                json!([{"name": SI}]),
            ),
        ];
        for p in cases {
            assert_eq!(run(inject, &p).unwrap(), p);
        }
    }

    #[test]
    fn containers_that_is_not_a_list_counts_as_absent() {
        for status in ["{\"containers\": 3}", "{\"containers\": null}"] {
            let p = pod(
                json!({ISTIO_STATUS_ANNOTATION: status, ISTIO_INTERCEPTION_MODE_ANNOTATION: "REDIRECT"}),
                json!({"name": "istio-sidecar"}),
                json!([{"name": SI}]),
            );
            assert_eq!(run(inject, &p).unwrap(), p, "{status}");
        }
    }

    #[test]
    fn uid_annotation_wins_and_bad_values_are_ignored() {
        let mut annotations = istio_annotations();
        annotations[STORAGE_INITIALIZER_UID_ANNOTATION] = json!("2000");
        let p = pod(
            annotations.clone(),
            json!({"name": "istio-sidecar"}),
            json!([{"name": SI}]),
        );
        assert_eq!(uid_of(&run(inject, &p).unwrap()), Some(2000));
        annotations[STORAGE_INITIALIZER_UID_ANNOTATION] = json!("abc");
        let p = pod(
            annotations,
            json!({"name": "istio-sidecar"}),
            json!([{"name": SI}]),
        );
        assert_eq!(run(inject, &p).unwrap(), p);
    }

    #[test]
    fn malformed_status_is_an_error_not_a_panic() {
        for status in ["[1]", "null", "{\"containers\": [1]}", "not json"] {
            let p = pod(
                json!({ISTIO_STATUS_ANNOTATION: status, ISTIO_INTERCEPTION_MODE_ANNOTATION: "REDIRECT"}),
                json!({"name": "istio-sidecar"}),
                json!([{"name": SI}]),
            );
            assert!(run(inject, &p).is_err(), "{status}");
        }
    }
}
