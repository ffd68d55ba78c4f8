//! `review_agrees_with_mutate`: (f) `admission::prepare` and `answer` never panic and
//! answers exactly what `mutate` says.

use super::*;

/// Ways to break the Pod schema in a field the core type-checks.
#[derive(Debug, Clone, Copy)]
pub(super) enum Corruption {
    ContainersObject,
    PortString,
    AnnotationNumber,
    LabelsArray,
    VolumesString,
    EnvValueNumber,
    ProbePortBool,
    ShareProcessString,
    NameNumber,
    PodArray,
    PodString,
}

pub(super) fn corrupt(pod: &mut Value, how: Corruption) {
    // A container whose lists the view reads (`view::LIST_READ_CONTAINERS`):
    // other containers' lists are not the core's to check.
    let first = |pod: &mut Value| -> Value {
        let mut c = pod["spec"]["containers"]
            .as_array()
            .and_then(|c| c.first())
            .cloned()
            .unwrap_or_else(|| json!({}));
        c["name"] = json!(KSERVE_CONTAINER);
        c
    };
    match how {
        Corruption::ContainersObject => {
            pod["spec"]["containers"] = json!({"name": "kserve-container"})
        }
        Corruption::PortString => {
            let mut c = first(pod);
            c["ports"] = json!([{"containerPort": "http"}]);
            pod["spec"]["containers"] = json!([c]);
        }
        Corruption::AnnotationNumber => {
            object_slot(&mut pod["metadata"], "annotations").insert("x/y~z".into(), json!(5));
        }
        Corruption::LabelsArray => pod["metadata"]["labels"] = json!(["a"]),
        Corruption::VolumesString => pod["spec"]["volumes"] = json!("data"),
        Corruption::EnvValueNumber => {
            let mut c = first(pod);
            c["env"] = json!([{"name": "N", "value": 1}]);
            pod["spec"]["containers"] = json!([c]);
        }
        Corruption::ProbePortBool => {
            let mut c = first(pod);
            c["readinessProbe"] = json!({"httpGet": {"port": true}});
            pod["spec"]["containers"] = json!([c]);
        }
        Corruption::ShareProcessString => pod["spec"]["shareProcessNamespace"] = json!("yes"),
        Corruption::NameNumber => pod["metadata"]["name"] = json!(7),
        Corruption::PodArray => *pod = json!([pod.clone()]),
        Corruption::PodString => *pod = json!("pod"),
    }
}

#[derive(Clone, Debug)]
pub(super) struct ReviewCase {
    pub(super) case: Case,
    pub(super) corruption: Option<Corruption>,
    pub(super) api_version: &'static str,
    pub(super) operation: &'static str,
    pub(super) kind: &'static str,
}

pub(super) fn review_case(profile: Profile) -> impl Strategy<Value = ReviewCase> {
    (
        case(profile),
        prop::option::weighted(
            0.25,
            prop::sample::select(vec![
                Corruption::ContainersObject,
                Corruption::PortString,
                Corruption::AnnotationNumber,
                Corruption::LabelsArray,
                Corruption::VolumesString,
                Corruption::EnvValueNumber,
                Corruption::ProbePortBool,
                Corruption::ShareProcessString,
                Corruption::NameNumber,
                Corruption::PodArray,
                Corruption::PodString,
            ]),
        ),
        prop::sample::select(vec!["admission.k8s.io/v1", "admission.k8s.io/v1beta1"]),
        prop_oneof![8 => Just("CREATE"), 1 => Just("UPDATE")],
        prop_oneof![8 => Just("Pod"), 1 => Just("Deployment")],
    )
        .prop_map(
            |(case, corruption, api_version, operation, kind)| ReviewCase {
                case,
                corruption,
                api_version,
                operation,
                kind,
            },
        )
}

pub(super) const UID: &str = "0b0b0b0b-0000-4000-8000-00000000abcd";

pub(super) fn review_body(
    pod: &Value,
    namespace: &str,
    api_version: &str,
    operation: &str,
    kind: &str,
) -> Vec<u8> {
    let (group, resource) = if kind == "Pod" {
        ("", "pods")
    } else {
        ("apps", "deployments")
    };
    serde_json::to_vec(&json!({
        "apiVersion": api_version,
        "kind": "AdmissionReview",
        "request": {
            "uid": UID,
            "kind": {"group": group, "version": "v1", "kind": kind},
            "resource": {"group": group, "version": "v1", "resource": resource},
            "namespace": namespace,
            "operation": operation,
            "userInfo": {"username": "system:serviceaccount:kube-system:replicaset-controller"},
            "object": pod,
            "oldObject": null,
            "dryRun": false
        }
    }))
    .unwrap_or_default()
}

pub(super) fn review_agrees(rc: &ReviewCase, stats: &Stats) -> Result<(), String> {
    Stats::bump(&stats.cases);
    let mut pod = rc.case.parts.render();
    if let Some(how) = rc.corruption {
        corrupt(&mut pod, how);
    }
    let env = &envs()[rc.case.env];
    let namespace = rc.case.namespace;
    let body = review_body(&pod, namespace, rc.api_version, rc.operation, rc.kind);
    let reviewed = admission::prepare(&body, admission::Mode::Mutate)
        .and_then(|prepared| prepared.answer(env))
        .map_err(|e| format!("(f) review refused a valid envelope: {e}"))?;
    let response: Value = serde_json::from_slice(&reviewed.body)
        .map_err(|e| format!("(f) response is not JSON: {e}"))?;
    check!(
        response["apiVersion"] == rc.api_version,
        "(f) apiVersion {} in the answer",
        response["apiVersion"]
    );
    check!(
        response["kind"] == "AdmissionReview",
        "(f) kind {} in the answer",
        response["kind"]
    );
    let answer = &response["response"];
    check!(
        answer["uid"] == UID,
        "(f) uid {} in the answer",
        answer["uid"]
    );
    check!(
        reviewed.uid == UID && reviewed.namespace == namespace,
        "(f) Reviewed carries uid {:?} namespace {:?}",
        reviewed.uid,
        reviewed.namespace
    );
    check!(
        answer["allowed"] == json!(reviewed.allowed),
        "(f) body says allowed={} but Reviewed says {}",
        answer["allowed"],
        reviewed.allowed
    );
    if rc.operation != "CREATE" || rc.kind != "Pod" {
        check!(
            reviewed.allowed && answer.get("patch").is_none() && reviewed.patch_ops == 0,
            "(f) {} of a {} was not passed through untouched: {answer}",
            rc.operation,
            rc.kind
        );
        return Ok(());
    }
    let expected = mutate(&pod, namespace, env);
    if rc.corruption.is_some() {
        check!(
            matches!(expected, Err(MutationError::Decode { .. })),
            "(f) a schema-invalid pod ({:?}) was not refused as undecodable: {:?}",
            rc.corruption,
            expected.as_ref().map(|m| compact(&m.patch))
        );
        Stats::bump(&stats.refused);
    }
    match expected {
        Ok(m) => {
            check!(
                reviewed.allowed,
                "(f) mutate succeeded but review denied: {:?}",
                reviewed.denial
            );
            check!(
                reviewed.outcomes == m.outcomes,
                "(f) outcomes differ: review {:?}, mutate {:?}",
                reviewed.outcomes,
                m.outcomes
            );
            check!(
                reviewed.patch_ops == m.patch.len(),
                "(f) patch_ops {} but mutate has {} operations",
                reviewed.patch_ops,
                m.patch.len()
            );
            if m.patch.is_empty() {
                check!(
                    answer.get("patch").is_none() && answer.get("patchType").is_none(),
                    "(f) empty mutation but the answer carries a patch: {answer}"
                );
            } else {
                Stats::bump(&stats.injected);
                check!(
                    answer["patchType"] == "JSONPatch",
                    "(f) patchType {}",
                    answer["patchType"]
                );
                let encoded = answer["patch"]
                    .as_str()
                    .ok_or("(f) patch is not a string")?;
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(encoded)
                    .map_err(|e| format!("(f) patch is not base64: {e}"))?;
                let sent: Value = serde_json::from_slice(&bytes)
                    .map_err(|e| format!("(f) patch is not JSON: {e}"))?;
                let want = serde_json::to_value(&m.patch).map_err(|e| e.to_string())?;
                check!(
                    sent == want,
                    "(f) review sent patch {sent} but mutate computed {want}"
                );
            }
        }
        Err(e) => {
            let code = match e {
                MutationError::Decode { .. } => 400,
                MutationError::Inject(_) => 500,
            };
            check!(
                !reviewed.allowed,
                "(f) mutate failed ({e}) but review allowed the pod"
            );
            check!(
                reviewed.denial.as_deref() == Some(e.to_string().as_str()),
                "(f) denial {:?}, mutate says {e}",
                reviewed.denial
            );
            check!(
                answer["status"]["code"] == code,
                "(f) status code {} for {e}",
                answer["status"]["code"]
            );
            check!(
                answer["status"]["message"] == e.to_string(),
                "(f) status message {} for {e}",
                answer["status"]["message"]
            );
            check!(
                answer.get("patch").is_none(),
                "(f) a denial carries a patch"
            );
        }
    }
    Ok(())
}

#[test]
pub(super) fn review_agrees_with_mutate() {
    let stats = Stats::default();
    run_per_mode(
        "review_agrees_with_mutate",
        3,
        REVIEW_CASES,
        review_case,
        |_, rc| review_agrees(&rc, &stats).map_err(fail),
    );
    report(
        "review_agrees_with_mutate",
        &stats,
        &[("answered with a patch", &stats.injected)],
    );
}
