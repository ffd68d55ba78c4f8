use super::encode::write_ops;
use super::*;
use crate::config::Config;
use base64::Engine;
use serde_json::{json, Value};

const UID: &str = "705ab4f5-6393-11e8-b7cc-42010a800002";

/// A body answered in mutate mode, as the webhook answers it.
fn review(body: &[u8], inputs: &Inputs) -> Result<Reviewed, ReviewError> {
    prepare(body, Mode::Mutate)?.answer(inputs)
}

fn review_body(api_version: &str, request: Value) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": api_version,
        "kind": "AdmissionReview",
        "request": request
    }))
    .unwrap()
}

fn request(kind: &str, operation: &str, object: Value) -> Value {
    json!({
        "uid": UID,
        "kind": {"group": "", "version": "v1", "kind": kind},
        "resource": {"group": "", "version": "v1", "resource": format!("{}s", kind.to_lowercase())},
        "namespace": "default",
        "operation": operation,
        "userInfo": {"username": "system:serviceaccount:kube-system:replicaset-controller"},
        "object": object,
        "dryRun": false
    })
}

fn isvc_pod() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"generateName": "sklearn-predictor-", "labels": {"serving.kserve.io/inferenceservice": "sklearn"}},
        "spec": {"containers": [{"name": "kserve-container", "image": "kserve/sklearnserver:latest"}]}
    })
}

fn answer(body: &[u8], inputs: &Inputs) -> (Reviewed, Value) {
    let reviewed = review(body, inputs).expect("a review");
    let response: Value = serde_json::from_slice(&reviewed.body).expect("JSON body");
    (reviewed, response)
}

fn decoded_patch(response: &Value) -> Value {
    let encoded = response["response"]["patch"]
        .as_str()
        .expect("patch is a base64 string");
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .expect("valid base64");
    serde_json::from_slice(&bytes).expect("patch is JSON")
}

fn sorted_ops(patch: &Value) -> Vec<Value> {
    let mut ops = patch.as_array().expect("array of ops").clone();
    ops.sort_by(|a, b| a["path"].as_str().cmp(&b["path"].as_str()));
    ops
}

#[test]
fn v1_and_v1beta1_echo_api_version_and_uid() {
    for api_version in ["admission.k8s.io/v1", "admission.k8s.io/v1beta1"] {
        let body = review_body(api_version, request("Pod", "CREATE", isvc_pod()));
        let (reviewed, response) = answer(&body, &Inputs::default());
        assert_eq!(response["apiVersion"], api_version);
        assert_eq!(response["kind"], "AdmissionReview");
        assert_eq!(response["response"]["uid"], UID);
        assert_eq!(response["response"]["allowed"], true);
        assert!(response.get("request").is_none());
        assert_eq!(reviewed.uid, UID);
        assert_eq!(reviewed.name, "sklearn-predictor-");
        assert_eq!(reviewed.operation, "CREATE");
        assert!(reviewed.allowed);
    }
}

#[test]
fn the_patch_is_a_base64_json_patch_that_produces_the_mutated_pod() {
    let pod = isvc_pod();
    let body = review_body("admission.k8s.io/v1", request("Pod", "CREATE", pod.clone()));
    let (reviewed, response) = answer(&body, &Inputs::default());
    assert_eq!(response["response"]["patchType"], "JSONPatch");
    let patch: json_patch::Patch = serde_json::from_value(decoded_patch(&response)).unwrap();
    assert_eq!(reviewed.patch_ops, patch.0.len());
    let mut patched = pod.clone();
    json_patch::patch(&mut patched, &patch).unwrap();
    let expected = crate::mutation::mutate(&pod, "default", &Inputs::default())
        .unwrap()
        .pod;
    assert_eq!(patched, expected);
    assert_eq!(patched["metadata"]["namespace"], "default");
}

#[test]
fn f1_pod_without_the_isvc_label_is_allowed_with_code_200_and_no_patch() {
    let pod = json!({"metadata": {"name": "plain", "labels": {"app": "x"},
                     "annotations": {"internal.serving.kserve.io/logger": "true"}},
                     "spec": {"containers": [{"name": "kserve-container"}]}});
    let body = review_body("admission.k8s.io/v1beta1", request("Pod", "CREATE", pod));
    let (reviewed, response) = answer(&body, &Inputs::default());
    assert_eq!(
        response["response"],
        json!({"uid": UID, "allowed": true, "status": {"code": 200}})
    );
    assert!(reviewed.outcomes.is_empty());
}

#[test]
fn f2_config_without_metrics_aggregator_adds_empty_annotations_and_namespace() {
    let mut data: std::collections::BTreeMap<String, String> =
        crate::reader::documents(&mut Config::default_manifest().as_bytes())
            .ok()
            .and_then(|mut docs| docs.next()?.ok())
            .and_then(|m| serde_json::from_value(m["data"].clone()).ok())
            .expect("default data");
    data.remove("metricsAggregator");
    let inputs = Inputs::new(Config::from_data(&data).unwrap());
    let pod = json!({"metadata": {"labels": {"serving.kserve.io/inferenceservice": ""}},
                     "spec": {"containers": [{"name": "kserve-container"}]}});
    let body = review_body("admission.k8s.io/v1beta1", request("Pod", "CREATE", pod));
    let (_, response) = answer(&body, &inputs);
    assert_eq!(response["response"]["allowed"], true);
    assert_eq!(response["response"]["patchType"], "JSONPatch");
    assert_eq!(
        sorted_ops(&decoded_patch(&response)),
        vec![
            json!({"op": "add", "path": "/metadata/annotations", "value": {
                "serving.kserve.io/enable-metric-aggregation": "",
                "serving.kserve.io/enable-prometheus-scraping": ""}}),
            json!({"op": "add", "path": "/metadata/namespace", "value": "default"}),
        ]
    );
}

#[test]
fn an_already_mutated_pod_gets_no_patch_and_no_patch_type() {
    let first = crate::mutation::mutate(&isvc_pod(), "default", &Inputs::default())
        .unwrap()
        .pod;
    let body = review_body("admission.k8s.io/v1", request("Pod", "CREATE", first));
    let (reviewed, response) = answer(&body, &Inputs::default());
    assert_eq!(response["response"]["allowed"], true);
    assert!(response["response"].get("patch").is_none());
    assert!(response["response"].get("patchType").is_none());
    assert_eq!(reviewed.patch_ops, 0);
    assert!(reviewed
        .outcomes
        .iter()
        .all(|(_, outcome)| *outcome == InjectorOutcome::Unchanged));
}

#[test]
fn non_pod_kinds_updates_and_other_operations_are_allowed_untouched() {
    let cases = [
        request("Pod", "UPDATE", isvc_pod()),
        request("Pod", "DELETE", Value::Null),
        request(
            "ConfigMap",
            "CREATE",
            json!({"metadata": {"labels": {"serving.kserve.io/inferenceservice": "x"}}}),
        ),
        {
            let mut r = request("Pod", "CREATE", isvc_pod());
            r["kind"]["group"] = json!("example.com");
            r
        },
    ];
    for req in cases {
        let body = review_body("admission.k8s.io/v1", req.clone());
        let (reviewed, response) = answer(&body, &Inputs::default());
        assert_eq!(response["response"]["allowed"], true, "{req}");
        assert!(response["response"].get("patch").is_none(), "{req}");
        assert!(response["response"].get("patchType").is_none(), "{req}");
        assert!(reviewed.outcomes.is_empty());
    }
}

#[test]
fn update_with_a_malformed_old_object_is_still_answered() {
    let mut req = request("Pod", "UPDATE", isvc_pod());
    req["oldObject"] = json!({"metadata": {"labels": "not-a-map"}});
    let (_, response) = answer(&review_body("admission.k8s.io/v1", req), &Inputs::default());
    assert_eq!(response["response"]["allowed"], true);
}

#[test]
fn an_undecodable_pod_is_denied_with_400_and_the_field_path() {
    let mut pod = isvc_pod();
    pod["spec"]["containers"][0]["ports"] = json!([{"containerPort": "abc"}]);
    let body = review_body("admission.k8s.io/v1beta1", request("Pod", "CREATE", pod));
    let (reviewed, response) = answer(&body, &Inputs::default());
    assert_eq!(response["response"]["allowed"], false);
    assert_eq!(response["response"]["status"]["code"], 400);
    let message = response["response"]["status"]["message"].as_str().unwrap();
    assert!(
        message.contains("spec.containers[0].ports[0].containerPort"),
        "{message}"
    );
    assert!(response["response"].get("patch").is_none());
    assert!(!reviewed.allowed);
    assert_eq!(reviewed.denial.as_deref(), Some(message));
}

#[test]
fn an_undecodable_pod_without_the_label_is_denied_too_like_kserve() {
    let pod = json!({"metadata": {"labels": {"app": 3}}, "spec": {"containers": []}});
    let body = review_body("admission.k8s.io/v1", request("Pod", "CREATE", pod));
    let (_, response) = answer(&body, &Inputs::default());
    assert_eq!(response["response"]["allowed"], false);
    assert_eq!(response["response"]["status"]["code"], 400);
    assert!(response["response"]["status"]["message"]
        .as_str()
        .unwrap()
        .contains("metadata.labels.app"));
}

#[test]
fn non_object_pods_and_missing_objects_are_denied_with_400() {
    for object in [json!("abc"), json!([1, 2]), json!(7), json!([isvc_pod()])] {
        let body = review_body(
            "admission.k8s.io/v1",
            request("Pod", "CREATE", object.clone()),
        );
        let (_, response) = answer(&body, &Inputs::default());
        assert_eq!(response["response"]["allowed"], false, "{object}");
        assert_eq!(response["response"]["status"]["code"], 400, "{object}");
    }
    let mut req = request("Pod", "CREATE", Value::Null);
    req.as_object_mut().unwrap().remove("object");
    let (_, response) = answer(&review_body("admission.k8s.io/v1", req), &Inputs::default());
    assert_eq!(response["response"]["allowed"], false);
    assert_eq!(response["response"]["status"]["code"], 400);
}

#[test]
fn an_injector_error_is_denied_with_kserve_message_and_500() {
    let mut pod = isvc_pod();
    pod["metadata"]["annotations"] = json!({
        "internal.serving.kserve.io/storage-initializer-sourceuri": "oci://registry/model:v1"
    });
    pod["spec"]["containers"][0]["name"] = json!("some-other-container");
    let body = review_body("admission.k8s.io/v1beta1", request("Pod", "CREATE", pod));
    let (reviewed, response) = answer(&body, &Inputs::default());
    assert_eq!(response["apiVersion"], "admission.k8s.io/v1beta1");
    assert_eq!(response["response"]["uid"], UID);
    assert_eq!(response["response"]["allowed"], false);
    assert_eq!(response["response"]["status"]["code"], 500);
    assert_eq!(
        response["response"]["status"]["message"],
        "Invalid configuration: cannot find container: kserve-container"
    );
    assert!(response["response"].get("patch").is_none());
    assert!(!reviewed.allowed);

    let mut puller = isvc_pod();
    puller["metadata"]["annotations"] = json!({"internal.serving.kserve.io/agent": "true"});
    let body = review_body("admission.k8s.io/v1", request("Pod", "CREATE", puller));
    let (_, response) = answer(&body, &Inputs::default());
    assert_eq!(
        response["response"]["status"]["message"],
        "can not find internal.serving.kserve.io/configVolumeName label"
    );
}

#[test]
fn the_request_namespace_is_written_and_used() {
    let mut req = request("Pod", "CREATE", isvc_pod());
    req["namespace"] = json!("models");
    let (reviewed, response) = answer(&review_body("admission.k8s.io/v1", req), &Inputs::default());
    assert_eq!(reviewed.namespace, "models");
    let ops = decoded_patch(&response);
    assert!(ops
        .as_array()
        .unwrap()
        .contains(&json!({"op": "add", "path": "/metadata/namespace", "value": "models"})));
}

#[test]
fn malformed_bodies_are_review_errors_not_panics() {
    let bodies: Vec<&[u8]> = vec![
        b"",
        b"{",
        b"not json",
        b"\xff\xfe",
        b"null",
        b"[]",
        b"42",
        b"\"AdmissionReview\"",
        b"{}",
        b"{\"kind\":\"AdmissionReview\"}",
        b"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\"}",
        b"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":null}",
        b"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":[]}",
        b"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{}}",
        b"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{\"uid\":7}}",
    ];
    for body in bodies {
        let result = review(body, &Inputs::default());
        assert!(
            result.is_err(),
            "{:?} gave {result:?}",
            String::from_utf8_lossy(body)
        );
    }
    assert!(matches!(
        review(b"{", &Inputs::default()),
        Err(ReviewError::Json(_))
    ));
}

#[test]
fn other_kinds_and_api_versions_are_not_a_review() {
    for (api_version, kind) in [
        ("admission.k8s.io/v2", "AdmissionReview"),
        ("v1", "AdmissionReview"),
        ("admission.k8s.io/v1", "Pod"),
    ] {
        let body = serde_json::to_vec(&json!({
            "apiVersion": api_version, "kind": kind,
            "request": request("Pod", "CREATE", isvc_pod())
        }))
        .unwrap();
        let err = review(&body, &Inputs::default()).unwrap_err();
        assert!(matches!(err, ReviewError::NotAReview(_)), "{err}");
    }
}

#[test]
fn unknown_operation_is_not_a_review() {
    let body = review_body("admission.k8s.io/v1", request("Pod", "PATCH", isvc_pod()));
    assert!(matches!(
        review(&body, &Inputs::default()),
        Err(ReviewError::NotAReview(_))
    ));
}

#[test]
fn deeply_nested_objects_are_refused_cleanly() {
    // The body is scanned without recursion (serde_json skips unread values
    // with an explicit stack), so depth costs one byte per level, not a frame.
    let depth = 5_000;
    let nested = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
    let body = format!(
        r#"{{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{{"object":{nested}}}}}"#
    );
    assert!(matches!(
        review(body.as_bytes(), &Inputs::default()),
        Err(ReviewError::NotAReview(_))
    ));
    let unclosed = format!(
        r#"{{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{{"object":{}}}}}"#,
        "[".repeat(depth)
    );
    assert!(matches!(
        review(unclosed.as_bytes(), &Inputs::default()),
        Err(ReviewError::Json(_))
    ));
    // In a complete review the nested value is a pod that is not an object,
    // or an unread field: a clear denial, or no work at all.
    let mut req = request("Pod", "CREATE", Value::Null);
    let body = review_body("admission.k8s.io/v1", req.clone())
        .into_iter()
        .collect::<Vec<u8>>();
    let text = String::from_utf8(body)
        .unwrap()
        .replace("\"object\":null", &format!("\"object\":{nested}"));
    let (_, response) = answer(text.as_bytes(), &Inputs::default());
    assert_eq!(response["response"]["allowed"], false);
    assert_eq!(response["response"]["status"]["code"], 400);
    req["object"] = isvc_pod();
    req["object"]["spec"]["x-deep"] = json!("marker");
    let text = String::from_utf8(review_body("admission.k8s.io/v1", req))
        .unwrap()
        .replace("\"marker\"", &nested);
    let (reviewed, response) = answer(text.as_bytes(), &Inputs::default());
    assert_eq!(response["response"]["allowed"], true);
    assert!(reviewed.patch_ops > 0);
}

#[test]
fn dry_run_and_object_names_are_reported() {
    let mut req = request("Pod", "CREATE", isvc_pod());
    req["dryRun"] = json!(true);
    req["object"]["metadata"]["name"] = json!("explicit");
    let (reviewed, _) = answer(&review_body("admission.k8s.io/v1", req), &Inputs::default());
    assert!(reviewed.dry_run);
    assert_eq!(reviewed.name, "explicit");
    assert_eq!(reviewed.kind, "Pod");
}

/// A review whose pod has `n` empty containers (`{}`): 3 bytes each.
fn hostile_body(n: usize, labelled: bool) -> Vec<u8> {
    let labels = if labelled {
        r#"{"serving.kserve.io/inferenceservice":"x"}"#
    } else {
        r#"{"app":"x"}"#
    };
    let mut body = format!(
        r#"{{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{{"uid":"{UID}","kind":{{"group":"","version":"v1","kind":"Pod"}},"resource":{{"group":"","version":"v1","resource":"pods"}},"namespace":"default","operation":"CREATE","userInfo":{{}},"object":{{"metadata":{{"name":"h","labels":{labels}}},"spec":{{"containers":["#
    );
    body.reserve(3 * n + 16);
    for i in 0..n {
        body.push_str(if i == 0 { "{}" } else { ",{}" });
    }
    body.push_str("]}}}}");
    body.into_bytes()
}

#[test]
fn hostile_container_counts_are_denied_with_400_naming_the_cap() {
    // The issue's bodies: 900 KB / 300,000 and 3 MB / 1,000,000 containers.
    // Their time and memory are measured by `cargo bench --bench hostile`.
    for (n, size) in [(300_000, 900_000), (1_000_000, 3_000_000)] {
        for labelled in [true, false] {
            let body = hostile_body(n, labelled);
            assert!(body.len() > size, "{}", body.len());
            let (reviewed, response) = answer(&body, &Inputs::default());
            assert_eq!(response["response"]["allowed"], false);
            assert_eq!(response["response"]["status"]["code"], 400);
            let message = response["response"]["status"]["message"].as_str().unwrap();
            assert!(
                message.starts_with("cannot decode pod: spec.containers: more than 4096 entries"),
                "{message}"
            );
            assert_eq!(reviewed.name, "h");
            assert_eq!(reviewed.uid, UID);
        }
    }
}

#[test]
fn a_pod_at_the_caps_is_still_mutated() {
    let mut pod = isvc_pod();
    let mut containers = vec![json!({"name": "kserve-container"})];
    containers.extend((1..crate::view::MAX_ENTRIES).map(|i| json!({"name": format!("c{i}")})));
    pod["spec"]["containers"] = json!(containers);
    let body = review_body("admission.k8s.io/v1", request("Pod", "CREATE", pod));
    let (reviewed, response) = answer(&body, &Inputs::default());
    assert_eq!(
        response["response"]["allowed"], true,
        "{:?}",
        reviewed.denial
    );
    assert!(reviewed.patch_ops > 0);
}

#[test]
fn bench_inputs_take_the_one_pass_path_and_answer_like_the_plain_one() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../benches/inputs");
    for name in ["minimal-oci", "typical", "containers-50"] {
        let body = std::fs::read(dir.join(format!("{name}.json"))).unwrap();
        let inline = inline::parse(std::str::from_utf8(&body).unwrap()).expect("one pass");
        assert!(inline.request.as_ref().unwrap().pod.is_some(), "{name}");
        let (reviewed, _) = answer(&body, &Inputs::default());
        assert!(reviewed.allowed && reviewed.patch_ops > 0, "{name}");
        // The same review with `object` before `kind` goes the plain way.
        let mut tree: Value = serde_json::from_slice(&body).unwrap();
        let request = tree["request"].as_object_mut().unwrap();
        let object = request.remove("object").unwrap();
        let rest = serde_json::to_string(request).unwrap();
        let plain = format!(
            r#"{{"apiVersion":{},"kind":"AdmissionReview","request":{{"object":{object},{}"#,
            tree["apiVersion"],
            &rest[1..]
        )
        .into_bytes();
        let plain = [plain, b"}".to_vec()].concat();
        assert!(inline::parse(std::str::from_utf8(&plain).unwrap())
            .unwrap()
            .request
            .unwrap()
            .pod
            .is_none());
        assert_eq!(
            review(&plain, &Inputs::default()).unwrap(),
            reviewed,
            "{name}"
        );
    }
}

/// Found by the review fuzz target: serde_json skips unread strings without
/// checking their UTF-8, so a body that is not UTF-8 must be refused first.
#[test]
fn invalid_utf8_in_a_field_nobody_reads_is_not_json() {
    let mut req = request("Pod", "CREATE", isvc_pod());
    req["userInfo"] = json!({"username": "system:unread"});
    let mut body = review_body("admission.k8s.io/v1", req);
    let text = String::from_utf8(body.clone()).expect("built as UTF-8");
    let at = text
        .find("system:unread")
        .expect("the field is in the body");
    body[at] = 0xff;
    assert!(matches!(
        review(&body, &Inputs::default()),
        Err(ReviewError::Json(_))
    ));
    body[at] = b'x';
    assert!(review(&body, &Inputs::default()).is_ok());
}

/// The UTF-8 check runs on SIMD; the message still says where, as std does.
#[test]
fn invalid_utf8_is_explained_at_its_byte() {
    let mut body = review_body("admission.k8s.io/v1", request("Pod", "CREATE", isvc_pod()));
    let at = body.len() - 40;
    body[at] = 0xc3;
    let expected = std::str::from_utf8(&body).unwrap_err();
    match review(&body, &Inputs::default()) {
        Err(ReviewError::Json(why)) => {
            assert_eq!(why.to_string(), format!("invalid UTF-8: {expected}"))
        }
        other => panic!("{other:?}"),
    }
    assert!(expected.to_string().contains(&at.to_string()));
}

#[test]
fn hand_written_ops_are_json_patch_operations() {
    use crate::pod::{Op, OpKind};
    let op = |kind, path: &str, value: Value| Op {
        kind,
        path: path.to_string(),
        value: value.to_string(),
    };
    let ops = [
        op(
            OpKind::Add,
            "/spec/containers/1",
            json!({"name": "a\"b", "args": ["~/x"]}),
        ),
        op(OpKind::Replace, "/metadata/annotations/a~1b", json!("v")),
        op(OpKind::Add, "/metadata/labels/x\"y", json!(1)),
    ];
    let mut out = String::new();
    write_ops(&mut out, &ops);
    let written: Value = serde_json::from_str(&out).unwrap();
    let parsed: json_patch::Patch = serde_json::from_value(written.clone()).unwrap();
    assert_eq!(written, serde_json::to_value(&parsed).unwrap());
    assert_eq!(written, serde_json::to_value(ops).unwrap());
}

fn storage_pod() -> Value {
    let mut pod = isvc_pod();
    pod["metadata"]["annotations"] =
        json!({ crate::constants::SOURCE_URI_ANNOTATION: "gs://bucket/model" });
    pod
}

fn shadow_answer(pod: Value, warnings: bool) -> (Reviewed, Value) {
    let body = review_body("admission.k8s.io/v1", request("Pod", "CREATE", pod));
    let prepared = prepare(&body, Mode::Shadow { warnings }).expect("a review");
    let reviewed = prepared.answer(&Inputs::default()).expect("an answer");
    let response = serde_json::from_slice(&reviewed.body).expect("JSON body");
    (reviewed, response)
}

#[test]
fn shadow_mode_allows_without_a_patch_and_names_each_withheld_op_with_its_injector() {
    let pod = storage_pod();
    let (reviewed, response) = shadow_answer(pod.clone(), false);
    assert_eq!(response["response"]["allowed"], true);
    assert!(response["response"].get("patch").is_none());
    assert!(response["response"].get("warnings").is_none());
    assert_eq!(reviewed.patch_ops, 0);
    let normal = crate::mutation::mutate(&pod, "default", &Inputs::default()).unwrap();
    let paths: Vec<&str> = reviewed.withheld.iter().map(|w| w.path.as_str()).collect();
    let expected: Vec<&str> = normal.patch.iter().map(|op| op.path.as_str()).collect();
    assert_eq!(paths, expected);
    let injector_of = |path: &str| {
        reviewed
            .withheld
            .iter()
            .find(|w| w.path == path)
            .unwrap()
            .injector
    };
    assert_eq!(
        injector_of("/metadata/namespace"),
        crate::injectors::MUTATOR
    );
    assert_eq!(
        injector_of("/spec/initContainers"),
        crate::injectors::storage_initializer::NAME
    );
}

#[test]
fn shadow_warnings_name_the_paths_and_stay_short() {
    let (reviewed, response) = shadow_answer(storage_pod(), true);
    let warnings = response["response"]["warnings"]
        .as_array()
        .expect("warnings");
    assert_eq!(warnings.len(), 1);
    let text = warnings[0].as_str().unwrap();
    assert!(text.len() <= MAX_WARNING_CHARS, "{text}");
    let count = format!(
        "would make {} change(s) by mutator, storage-initializer, metrics-aggregator:",
        reviewed.withheld.len()
    );
    assert!(text.contains(&count), "{text}");
    assert!(
        text.contains("/spec/initContainers (storage-initializer)"),
        "{text}"
    );
}

#[test]
fn shadow_mode_on_a_pod_already_mutated_withholds_nothing_and_warns_nothing() {
    let mutated = crate::mutation::mutate(&storage_pod(), "default", &Inputs::default())
        .unwrap()
        .pod;
    let (reviewed, response) = shadow_answer(mutated, true);
    assert!(reviewed.withheld.is_empty());
    assert!(response["response"].get("warnings").is_none());
}

#[test]
fn a_long_shadow_warning_ends_with_the_count_left_out() {
    let many: Vec<Withheld> = (0..40)
        .map(|i| Withheld {
            op: "add",
            path: format!("/spec/containers/0/env/{i}"),
            injector: "agent",
        })
        .collect();
    let text = shadow_warning(&many);
    assert!(text.len() <= MAX_WARNING_CHARS, "{text}");
    assert!(text.starts_with("kserve-injector (shadow mode) would make 40 change(s) by agent:"));
    assert!(text.ends_with("more"), "{text}");
}

#[test]
fn the_modelcar_shape_and_its_reason_reach_the_review_record() {
    use crate::injectors::modelcar::shape::ShapeReason;
    use crate::injectors::modelcar::ShapeChoice;
    use crate::inputs::ModelcarMode;
    let mut pod = isvc_pod();
    pod["metadata"]["annotations"] = json!({
        crate::constants::SOURCE_URI_ANNOTATION: "oci://registry.example.com/model:1"
    });
    let mut inputs = Inputs::default();
    inputs.modelcar_mode = ModelcarMode::NativeSidecar;
    let body = review_body("admission.k8s.io/v1", request("Pod", "CREATE", pod.clone()));
    let (reviewed, _) = answer(&body, &inputs);
    let native = ShapeChoice {
        mode: ModelcarMode::NativeSidecar,
        reason: ShapeReason::Flag,
    };
    assert_eq!(reviewed.modelcar_shape, Some(native));
    // Once there, the modelcar's shape is the reason.
    let first = crate::mutation::mutate(&pod, "default", &inputs)
        .unwrap()
        .pod;
    let body = review_body("admission.k8s.io/v1", request("Pod", "CREATE", first));
    let (reviewed, _) = answer(&body, &Inputs::default());
    let present = reviewed.modelcar_shape.map(|s| (s.mode, s.reason));
    assert_eq!(
        present,
        Some((ModelcarMode::NativeSidecar, ShapeReason::Present))
    );
    let body = review_body("admission.k8s.io/v1", request("Pod", "CREATE", isvc_pod()));
    assert_eq!(answer(&body, &inputs).0.modelcar_shape, None);
}

#[test]
fn in_shadow_mode_a_refusal_or_lookup_denial_is_an_allowance_with_the_reason_withheld() {
    let shadow = Mode::Shadow { warnings: true };
    let body = review_body("admission.k8s.io/v1", request("Pod", "CREATE", isvc_pod()));
    let refused = prepare(&body, shadow)
        .unwrap()
        .refuse(403, "outside --namespaces");
    let denied = prepare(&body, shadow).unwrap().deny("lookup timed out");
    for (reviewed, code, reason) in [
        (refused.unwrap(), 403, "outside --namespaces"),
        (denied.unwrap(), 500, "lookup timed out"),
    ] {
        let response: Value = serde_json::from_slice(&reviewed.body).unwrap();
        assert_eq!(response["response"]["allowed"], true, "{response}");
        assert_eq!(response["response"]["status"]["code"], 200, "{response}");
        assert!(response["response"].get("patch").is_none());
        let warning = response["response"]["warnings"][0].as_str().unwrap();
        let expected = format!("would deny the pod (code {code}): {reason}");
        assert!(warning.ends_with(&expected), "{warning}");
        assert!(reviewed.allowed && reviewed.denial.is_none());
        assert_eq!(reviewed.withheld_denial.as_deref(), Some(reason));
    }
    let plain = prepare(&body, Mode::Mutate)
        .unwrap()
        .refuse(403, "outside --namespaces")
        .unwrap();
    assert!(!plain.allowed && plain.withheld_denial.is_none());
    assert_eq!(plain.denial.as_deref(), Some("outside --namespaces"));
}

#[test]
fn a_long_shadow_denial_warning_is_cut_on_a_character_boundary() {
    let reason = "é".repeat(400);
    let text = shadow_denial_warning(400, &reason);
    assert!(text.len() <= MAX_WARNING_CHARS, "{}", text.len());
    assert!(text.ends_with("é..."), "{text}");
    let short = shadow_denial_warning(500, "cannot find container: kserve-container");
    assert_eq!(
        short,
        "kserve-injector (shadow mode) would deny the pod (code 500): cannot find container: kserve-container"
    );
}

#[test]
fn object_before_operation_decodes_a_created_pod_in_one_pass_and_answers_alike() {
    // serde_json's map writes keys sorted: `object` before `operation`.
    let sorted = review_body("admission.k8s.io/v1", request("Pod", "CREATE", isvc_pod()));
    let text = std::str::from_utf8(&sorted).unwrap();
    assert!(text.find("\"object\"").unwrap() < text.find("\"operation\"").unwrap());
    let inline = inline::parse(text).expect("one pass");
    assert!(inline.request.unwrap().pod.is_some());
    // The same review with `operation` first, as the API server writes it.
    let first = text.replacen("\"operation\":\"CREATE\",", "", 1).replacen(
        "\"object\":",
        "\"operation\":\"CREATE\",\"object\":",
        1,
    );
    assert!(first.find("\"operation\"").unwrap() < first.find("\"object\"").unwrap());
    let (reviewed, response) = answer(&sorted, &Inputs::default());
    assert_eq!(answer(first.as_bytes(), &Inputs::default()).0, reviewed);
    assert!(reviewed.patch_ops > 0, "{response}");
}

#[test]
fn object_before_operation_of_another_operation_goes_the_plain_way() {
    for operation in ["UPDATE", "DELETE", "CONNECT"] {
        let mut pod = isvc_pod();
        // Not a pod the view reads: only a CREATE may be refused for it.
        pod["spec"]["containers"] = json!("not-a-list");
        let body = review_body("admission.k8s.io/v1", request("Pod", operation, pod));
        assert!(inline::parse(std::str::from_utf8(&body).unwrap()).is_none());
        let (reviewed, response) = answer(&body, &Inputs::default());
        assert_eq!(response["response"]["allowed"], true, "{operation}");
        assert_eq!(reviewed.operation, operation);
    }
    let body = review_body("admission.k8s.io/v1", request("Pod", "UPDATE", isvc_pod()));
    assert!(inline::parse(std::str::from_utf8(&body).unwrap()).is_none());
}

/// Fields nobody reads are skipped, never trusted: a fault anywhere inside
/// `managedFields` of a real pod is the 400 serde_json gives for the whole
/// body, word for word.
#[test]
fn json_faults_inside_managed_fields_are_not_json() {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../benches/inputs/typical.json");
    let body = String::from_utf8(std::fs::read(path).unwrap()).unwrap();
    let at = body
        .find("\"managedFields\"")
        .expect("typical has managedFields");
    let end = at + body[at..].find("\"spec\"").expect("spec after metadata");
    let faults = [
        ("a comma dropped", "{},\"f:image\"", "{}\"f:image\""),
        ("a key not quoted", "\"f:name\"", "f:name"),
        ("a bad escape", "\"f:name\"", "\"f:\\xname\""),
        ("a raw control character", "\"f:value\"", "\"f:\u{1}value\""),
        ("a number with a bare dot", "\"2025-03-14T09:26:53Z\"", "1."),
        ("a misspelt literal", "\"FieldsV1\"", "tru"),
        ("a lone colon", "{}},", "{}:},"),
    ];
    for (what, from, to) in faults {
        let offset = at + body[at..end].find(from).expect(what);
        let bad = format!("{}{to}{}", &body[..offset], &body[offset + from.len()..]);
        let expected = serde_json::from_str::<IgnoredAny>(&bad)
            .expect_err(what)
            .to_string();
        match review(bad.as_bytes(), &Inputs::default()) {
            Err(ReviewError::Json(message)) => assert_eq!(message.to_string(), expected, "{what}"),
            other => panic!("{what}: {other:?}"),
        }
    }
    // Cut short inside managedFields: the end of input is reached unclosed.
    let cut = &body[..at + 2000];
    assert!(matches!(
        review(cut.as_bytes(), &Inputs::default()),
        Err(ReviewError::Json(_))
    ));
    assert!(review(body.as_bytes(), &Inputs::default()).is_ok());
}

#[test]
fn a_patch_over_the_answer_bound_is_denied_before_it_is_written() {
    let mut pod = isvc_pod();
    pod["metadata"]["annotations"]["internal.serving.kserve.io/storage-initializer-sourceuri"] =
        json!("oci://registry.example.com/model\"with\\escapes");
    let body = review_body("admission.k8s.io/v1", request("Pod", "CREATE", pod));
    let (whole, response) = answer(&body, &Inputs::default());
    assert!(whole.allowed);
    let encoded = response["response"]["patch"].as_str().unwrap().len();

    // The exact bound: a patch of exactly that many bytes fits.
    let fits = prepare(&body, Mode::Mutate)
        .unwrap()
        .answer_at_most(encoded);
    let fits = fits.answer(&Inputs::default()).unwrap();
    assert!(fits.allowed);
    assert_eq!(fits.body, whole.body);

    let over = prepare(&body, Mode::Mutate)
        .unwrap()
        .answer_at_most(encoded - 1);
    let over = over.answer(&Inputs::default()).unwrap();
    assert!(!over.allowed);
    let response: Value = serde_json::from_slice(&over.body).unwrap();
    assert_eq!(response["response"]["status"]["code"], 413);
    let message = response["response"]["status"]["message"].as_str().unwrap();
    assert!(
        message.starts_with(&format!(
            "the JSON Patch for this pod would be {encoded} bytes"
        )),
        "{message}"
    );
    assert!(response["response"].get("patch").is_none());
}

#[test]
fn annotations_over_the_api_servers_limit_are_denied_before_injection() {
    let uri_key = "internal.serving.kserve.io/storage-initializer-sourceuri";
    let with_uri = |len: usize| {
        let mut pod = isvc_pod();
        pod["metadata"]["annotations"] = json!({"serving.kserve.io/deploymentMode": "Serverless"});
        let others = "serving.kserve.io/deploymentMode".len() + "Serverless".len();
        let uri = "oci://registry.example.com/m";
        let fill = len - others - uri_key.len() - uri.len();
        pod["metadata"]["annotations"][uri_key] = json!(format!("{uri}{}", "m".repeat(fill)));
        review_body("admission.k8s.io/v1", request("Pod", "CREATE", pod))
    };
    // The metrics injector adds two annotations of 97 bytes together
    // (`serving.kserve.io/enable-metric-aggregation` and
    // `…/enable-prometheus-scraping`, each "false"): a pod that ends at the
    // limit once injected is admitted, and its reinvocation changes nothing.
    let fits = 256 * 1024 - 97;
    let (at_limit, response) = answer(&with_uri(fits), &Inputs::default());
    assert!(at_limit.allowed, "{:?}", at_limit.denial);
    let mut again: Value = serde_json::from_slice(&with_uri(fits)).unwrap();
    let patch: json_patch::Patch = serde_json::from_value(decoded_patch(&response)).unwrap();
    json_patch::patch(&mut again["request"]["object"], &patch).unwrap();
    let (reinvoked, _) = answer(&serde_json::to_vec(&again).unwrap(), &Inputs::default());
    assert!(reinvoked.allowed, "{:?}", reinvoked.denial);
    assert_eq!(reinvoked.patch_ops, 0);
    // One byte more: the injected pod would be over the limit, so the first
    // review denies it (before, it was admitted, the API server refused the
    // injected pod, and a reinvocation denied it: found by the review fuzzer).
    let (over_once_injected, response) = answer(&with_uri(fits + 1), &Inputs::default());
    assert!(!over_once_injected.allowed);
    assert_eq!(
        response["response"]["status"]["message"].as_str().unwrap(),
        "metadata.annotations: 262145 bytes in all once injected (262048 in the pod), more than \
         the 262144 the API server accepts on an object (it would refuse the injected pod after \
         admission)"
    );
    let (over, response) = answer(&with_uri(256 * 1024 + 1), &Inputs::default());
    assert!(!over.allowed);
    assert_eq!(response["response"]["status"]["code"], 500);
    let message = response["response"]["status"]["message"].as_str().unwrap();
    assert_eq!(
        message,
        "metadata.annotations: 262145 bytes in all, more than the 262144 the API server accepts \
         on an object (it would refuse this pod after admission)"
    );

    // A pod the injectors leave alone is left alone whatever its size.
    let mut other: Value = serde_json::from_slice(&with_uri(300 * 1024)).unwrap();
    other["request"]["object"]["metadata"]["labels"] = json!({});
    let (untouched, _) = answer(&serde_json::to_vec(&other).unwrap(), &Inputs::default());
    assert!(untouched.allowed);
    assert_eq!(untouched.patch_ops, 0);
}

#[test]
fn a_body_that_is_not_json_keeps_serde_jsons_error_as_its_source() {
    let err = review(b"{\"kind\": ", &Inputs::default()).unwrap_err();
    let expected = serde_json::from_slice::<Value>(b"{\"kind\": ")
        .unwrap_err()
        .to_string();
    let source = std::error::Error::source(&err).map(ToString::to_string);
    assert_eq!(source, Some(expected), "{err}");
}
