use super::*;
use kserve_injector_core::cluster::ClusterSnapshot;
use serde_json::json;

const POD: &str = r#"
apiVersion: v1
kind: Pod
metadata:
  name: sklearn-predictor
  labels:
    serving.kserve.io/inferenceservice: sklearn
  annotations:
    internal.serving.kserve.io/storage-initializer-sourceuri: oci://myrepo/mymodelimage
spec:
  containers:
  - name: kserve-container
    image: kserve/sklearnserver:latest
"#;

const LOGGER_POD: &str = r#"
apiVersion: v1
kind: Pod
metadata:
  name: logged
  namespace: models
  labels:
    serving.kserve.io/inferenceservice: sklearn
  annotations:
    internal.serving.kserve.io/logger: "true"
spec:
  containers:
  - name: kserve-container
"#;

/// The first document of a YAML (or JSON) text, read by the core's reader.
fn yaml(text: &str) -> Value {
    kserve_injector_core::reader::documents(&mut text.as_bytes())
        .and_then(|mut docs| docs.next().expect("a document"))
        .expect("YAML")
}

fn inputs() -> Inputs {
    Inputs::default()
}

fn run(text: &str, format: OutputFormat) -> Result<String, CliError> {
    run_mutate(text, format, None, &inputs())
}

fn json_out(text: &str) -> Value {
    let out = run(text, OutputFormat::Json).expect("mutated");
    serde_json::from_str(&out).expect("one JSON document")
}

fn patch_out(text: &str) -> Value {
    let out = run(text, OutputFormat::Patch).expect("patch");
    serde_json::from_str(&out).expect("one JSON patch")
}

fn names(list: &Value) -> Vec<&str> {
    list.as_array()
        .map(|items| items.iter().filter_map(|c| c["name"].as_str()).collect())
        .unwrap_or_default()
}

fn op_paths(patch: &Value) -> Vec<&str> {
    patch
        .as_array()
        .expect("ops")
        .iter()
        .filter_map(|op| op["path"].as_str())
        .collect()
}

fn workload(kind: &str, template_at: &str) -> String {
    let template = r#"{"metadata": {"labels": {"serving.kserve.io/inferenceservice": "sklearn"},
        "annotations": {"internal.serving.kserve.io/storage-initializer-sourceuri": "oci://myrepo/mymodelimage"}},
        "spec": {"containers": [{"name": "kserve-container", "image": "x"}]}}"#;
    let template: Value = serde_json::from_str(template).unwrap();
    let mut doc = json!({"apiVersion": "apps/v1", "kind": kind,
                         "metadata": {"name": "sklearn", "namespace": "models"}, "spec": {}});
    let mut tokens: Vec<&str> = template_at.trim_start_matches('/').split('/').collect();
    let last = tokens.pop().unwrap();
    let mut node = &mut doc;
    for token in tokens {
        node = node
            .as_object_mut()
            .unwrap()
            .entry(token)
            .or_insert_with(|| json!({}));
    }
    node[last] = template;
    serde_json::to_string(&doc).unwrap()
}

#[test]
fn a_pod_comes_out_mutated_as_yaml_json_and_patch() {
    let printed = yaml(&run(POD, OutputFormat::Yaml).unwrap());
    let json = json_out(POD);
    assert_eq!(printed, json);
    assert_eq!(json["metadata"]["namespace"], "default");
    assert_eq!(
        names(&json["spec"]["containers"]),
        ["kserve-container", "modelcar"]
    );
    assert_eq!(names(&json["spec"]["initContainers"]), ["modelcar-init"]);
    assert_eq!(json["spec"]["shareProcessNamespace"], true);

    let patch: json_patch::Patch = serde_json::from_value(patch_out(POD)).unwrap();
    let mut input: Value = yaml(POD);
    json_patch::patch(&mut input, &patch).unwrap();
    assert_eq!(input, json);
}

#[test]
fn already_mutated_input_gives_an_empty_patch() {
    let once = run(POD, OutputFormat::Yaml).unwrap();
    assert_eq!(run(&once, OutputFormat::Patch).unwrap(), "[]\n");
    let not_isvc = "kind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c}]}\n";
    assert_eq!(run(not_isvc, OutputFormat::Patch).unwrap(), "[]\n");
}

#[test]
fn multi_document_yaml_is_mutated_document_by_document() {
    let text = format!("{POD}---\n{LOGGER_POD}\n---\n");
    let out = run(&text, OutputFormat::Yaml).unwrap();
    let docs: Vec<Value> = reader::documents(&mut out.as_bytes())
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(docs.len(), 2);
    assert_eq!(docs[0]["metadata"]["name"], "sklearn-predictor");
    assert_eq!(docs[1]["metadata"]["namespace"], "models");
    assert!(names(&docs[1]["spec"]["containers"]).contains(&"agent"));

    let patches = run(&text, OutputFormat::Patch).unwrap();
    let parsed: Vec<Value> = serde_json::Deserializer::from_str(&patches)
        .into_iter::<Value>()
        .map(Result::unwrap)
        .collect();
    assert_eq!(parsed.len(), 2);
}

#[test]
fn the_namespace_flag_wins_over_the_object() {
    let out = run_mutate(LOGGER_POD, OutputFormat::Json, Some("team-a"), &inputs()).unwrap();
    let pod: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(pod["metadata"]["namespace"], "team-a");
}

#[test]
fn a_v1_list_is_mutated_item_by_item_with_prefixed_patch_paths() {
    let pod: Value = yaml(POD);
    let logged: Value = yaml(LOGGER_POD);
    let list = json!({"apiVersion": "v1", "kind": "List", "items": [pod, logged]}).to_string();
    let out = json_out(&list);
    assert_eq!(out["kind"], "List");
    assert!(names(&out["items"][0]["spec"]["containers"]).contains(&"modelcar"));
    assert!(names(&out["items"][1]["spec"]["containers"]).contains(&"agent"));

    let patch_value = patch_out(&list);
    let paths = op_paths(&patch_value);
    assert!(paths.iter().any(|p| p.starts_with("/items/0/")));
    assert!(paths.iter().any(|p| p.starts_with("/items/1/")));
    assert!(paths.iter().all(|p| p.starts_with("/items/")));
    assert!(paths
        .contains(&"/items/0/metadata/annotations/serving.kserve.io~1enable-metric-aggregation"));
    let patch: json_patch::Patch = serde_json::from_value(patch_value).unwrap();
    let mut input: Value = serde_json::from_str(&list).unwrap();
    json_patch::patch(&mut input, &patch).unwrap();
    assert_eq!(input, out);

    let typed_list = json!({"apiVersion": "v1", "kind": "PodList", "items": []}).to_string();
    assert_eq!(json_out(&typed_list)["items"], json!([]));
}

#[test]
fn workload_templates_are_mutated_in_place_without_a_namespace() {
    for (kind, at) in [
        ("Deployment", "/spec/template"),
        ("StatefulSet", "/spec/template"),
        ("DaemonSet", "/spec/template"),
        ("ReplicaSet", "/spec/template"),
        ("Job", "/spec/template"),
        ("CronJob", "/spec/jobTemplate/spec/template"),
    ] {
        let text = workload(kind, at);
        let out = json_out(&text);
        let template = out.pointer(at).expect("template");
        assert!(
            template["metadata"].get("namespace").is_none(),
            "{kind}: {template:#}"
        );
        assert_eq!(
            names(&template["spec"]["containers"]),
            ["kserve-container", "modelcar"],
            "{kind}"
        );
        assert_eq!(
            out["metadata"],
            json!({"name": "sklearn", "namespace": "models"})
        );

        let patch_value = patch_out(&text);
        for path in op_paths(&patch_value) {
            assert!(path.starts_with(&format!("{at}/")), "{kind}: {path}");
            assert!(!path.ends_with("/metadata/namespace"), "{kind}: {path}");
        }
        let patch: json_patch::Patch = serde_json::from_value(patch_value).unwrap();
        let mut input: Value = serde_json::from_str(&text).unwrap();
        json_patch::patch(&mut input, &patch).unwrap();
        assert_eq!(input, out, "{kind}");
        assert_eq!(
            run(&serde_json::to_string(&out).unwrap(), OutputFormat::Patch).unwrap(),
            "[]\n"
        );
    }
}

#[test]
fn a_workload_template_uses_the_workload_namespace() {
    let text = workload("Deployment", "/spec/template").replace(
        "internal.serving.kserve.io/storage-initializer-sourceuri\":\"oci://myrepo/mymodelimage",
        "internal.serving.kserve.io/logger\":\"true",
    );
    let out = json_out(&text);
    let args = out
        .pointer("/spec/template/spec/containers/1/args")
        .unwrap();
    let args: Vec<&str> = args
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let at = args.iter().position(|a| *a == "--namespace").unwrap();
    assert_eq!(args[at + 1], "models");
}

#[test]
fn an_admission_review_prints_the_response() {
    let pod: Value = yaml(POD);
    let review = json!({
        "apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview",
        "request": {"uid": "u-1", "kind": {"group": "", "version": "v1", "kind": "Pod"},
                    "resource": {"group": "", "version": "v1", "resource": "pods"},
                    "namespace": "default", "operation": "CREATE", "userInfo": {}, "object": pod}
    })
    .to_string();
    for format in [OutputFormat::Yaml, OutputFormat::Json, OutputFormat::Patch] {
        let out: Value = serde_json::from_str(&run(&review, format).unwrap()).unwrap();
        assert_eq!(out["apiVersion"], "admission.k8s.io/v1beta1");
        assert_eq!(out["response"]["uid"], "u-1");
        assert_eq!(out["response"]["allowed"], true);
        assert_eq!(out["response"]["patchType"], "JSONPatch");
        assert!(out["response"]["patch"].is_string());
    }
}

#[test]
fn a_denied_admission_review_is_printed_and_is_exit_code_1() {
    let review = json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "u-2", "kind": {"group": "", "version": "v1", "kind": "Pod"},
                    "resource": {"group": "", "version": "v1", "resource": "pods"},
                    "namespace": "default", "operation": "CREATE", "userInfo": {},
                    "object": {"metadata": {"labels": {"serving.kserve.io/inferenceservice": "x"},
                                            "annotations": {"internal.serving.kserve.io/agent": "true"}},
                               "spec": {"containers": [{"name": "kserve-container"}]}}}
    })
    .to_string();
    let mut out = Vec::new();
    let err = mutate_stream(
        &mut review.as_bytes(),
        &mut out,
        OutputFormat::Yaml,
        None,
        &inputs(),
        &mut ClusterSnapshot::default(),
    )
    .unwrap_err();
    assert!(matches!(err, CliError::Denied(_)), "{err:?}");
    assert!(
        err.to_string()
            .starts_with("document 1 (AdmissionReview): denied: "),
        "{err}"
    );
    assert_eq!(err.exit_code(), 1);
    let out: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(out["response"]["allowed"], false);
    assert_eq!(out["response"]["status"]["code"], 500);
}

#[test]
fn documents_before_a_failing_one_are_written_and_the_run_stops() {
    let text = format!("{POD}---\nkind: Service\n---\n{POD}");
    let mut out = Vec::new();
    let err = mutate_stream(
        &mut text.as_bytes(),
        &mut out,
        OutputFormat::Json,
        None,
        &inputs(),
        &mut ClusterSnapshot::default(),
    )
    .unwrap_err();
    assert!(err.to_string().starts_with("document 2 (Service)"), "{err}");
    let written: Vec<Value> = serde_json::Deserializer::from_slice(&out)
        .into_iter()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(written.len(), 1);
}

#[test]
fn write_errors_are_exit_code_2_except_a_closed_pipe() {
    struct Failing(std::io::ErrorKind);
    impl Write for Failing {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(self.0.into())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    for format in [OutputFormat::Yaml, OutputFormat::Json, OutputFormat::Patch] {
        let full = mutate_stream(
            &mut POD.as_bytes(),
            &mut Failing(std::io::ErrorKind::StorageFull),
            format,
            None,
            &inputs(),
            &mut ClusterSnapshot::default(),
        )
        .unwrap_err();
        assert!(matches!(full, CliError::Output(_)), "{full:?}");
        assert_eq!(full.exit_code(), 2);
        let gone = mutate_stream(
            &mut POD.as_bytes(),
            &mut Failing(std::io::ErrorKind::BrokenPipe),
            format,
            None,
            &inputs(),
            &mut ClusterSnapshot::default(),
        )
        .unwrap_err();
        assert!(matches!(gone, CliError::ReaderGone), "{gone:?}");
        assert_eq!(gone.exit_code(), 0);
    }
}

#[test]
fn a_denial_is_cli_error_denied_with_exit_code_1() {
    let pod = POD.replace("name: kserve-container", "name: some-other-container");
    let err = run(&pod, OutputFormat::Yaml).unwrap_err();
    assert!(matches!(err, CliError::Denied(_)), "{err:?}");
    assert_eq!(
        err.to_string(),
        "Invalid configuration: cannot find container: kserve-container"
    );
    assert_eq!(err.exit_code(), 1);
}

#[test]
fn bad_input_is_cli_error_input_naming_the_document_with_exit_code_2() {
    let cases = [
        ("", "input holds no document"),
        ("---\n---\n", "input holds no document"),
        ("kind: Pod\nspec: [\n", "document 1: not valid YAML or JSON"),
        (
            "kind: Pod\nmetadata: {name: ok}\n---\nkind: Pod\nmetadata: {name: bad}\nspec:\n  containers:\n  - name: c\n    ports: [{containerPort: abc}]\n",
            "document 2 (Pod bad): cannot decode pod: spec.containers[0].ports[0].containerPort",
        ),
        ("kind: Service\nmetadata: {name: svc}\n", "document 1 (Service svc): kind \"Service\" is not a Pod"),
        ("just a string\n", "document 1 (object): kind \"\" is not a Pod"),
        ("kind: Deployment\nmetadata: {name: d}\nspec: {}\n", "document 1 (Deployment d): no pod template at /spec/template"),
        ("kind: List\nitems: 3\n", "document 1 (List): a List needs an items array"),
        (
            "kind: List\nitems:\n- kind: Pod\n  spec: {containers: 1}\n",
            "document 1 (List) item 1: cannot decode pod: spec.containers",
        ),
        ("kind: AdmissionReview\napiVersion: admission.k8s.io/v1\n", "document 1 (AdmissionReview): request body is not an AdmissionReview"),
    ];
    for (text, want) in cases {
        let err = run(text, OutputFormat::Yaml).unwrap_err();
        assert!(matches!(err, CliError::Input(_)), "{text:?}: {err:?}");
        assert!(err.to_string().starts_with(want), "{text:?}: {err}");
        assert_eq!(err.exit_code(), 2);
    }
}

#[test]
fn an_admission_review_inside_a_list_is_refused() {
    let text = json!({"kind": "List", "items": [{"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1"}]})
        .to_string();
    let err = run(&text, OutputFormat::Json).unwrap_err();
    assert!(matches!(err, CliError::Input(_)), "{err:?}");
}

#[test]
fn json_input_is_accepted() {
    let pod: Value = yaml(POD);
    let out = json_out(&pod.to_string());
    assert_eq!(
        names(&out["spec"]["containers"]),
        ["kserve-container", "modelcar"]
    );
}

#[test]
fn documents_are_named_by_generate_name_when_unnamed() {
    let pod: Value =
        json!({"kind": "Pod", "metadata": {"generateName": "gen-"}, "spec": {"containers": 1}});
    assert_eq!(describe(&pod, 0), "document 1 (Pod gen-)");
    assert_eq!(describe(&json!({}), 4), "document 5 (object)");
}

#[test]
fn an_unreadable_document_keeps_the_readers_error_as_its_source() {
    let err = run("kind: Pod\nspec: [\n", OutputFormat::Yaml).unwrap_err();
    let source = std::error::Error::source(&err).map(ToString::to_string);
    let text = err.to_string();
    assert!(
        source.as_ref().is_some_and(|s| text.ends_with(s.as_str())),
        "{text} (source {source:?})"
    );
}
