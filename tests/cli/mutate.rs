//! The real binary: the `mutate` acceptance line, stdin, exit codes and help.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const OCI_POD: &str = r#"apiVersion: v1
kind: Pod
metadata:
  name: sklearn-predictor-00001-deployment-abc
  labels:
    serving.kserve.io/inferenceservice: sklearn
  annotations:
    internal.serving.kserve.io/storage-initializer-sourceuri: oci://registry.example.com/models/sklearn:v1
spec:
  containers:
  - name: kserve-container
    image: kserve/sklearnserver:latest
"#;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_kserve-injector"))
}

fn run(args: &[&str], stdin: Option<&str>) -> Output {
    crate::run_bin(args, stdin.unwrap_or_default().as_bytes())
}

fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).expect("UTF-8 stdout")
}

fn stderr(out: &Output) -> String {
    String::from_utf8(out.stderr.clone()).expect("UTF-8 stderr")
}

fn write_temp(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("temp file written");
    path
}

fn count_named(list: &Value, name: &str) -> usize {
    list.as_array()
        .map(|items| items.iter().filter(|i| i["name"] == name).count())
        .unwrap_or(0)
}

#[test]
fn acceptance_oci_pod_gets_one_modelcar_and_a_second_pass_prints_an_empty_patch() {
    let dir = tempfile::tempdir().unwrap();
    let input = write_temp(dir.path(), "pod.yaml", OCI_POD);
    let out = run(&["mutate", input.to_str().unwrap()], None);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let mutated = stdout(&out);
    let pod = yaml(&mutated);
    assert_eq!(
        count_named(&pod["spec"]["volumes"], "kserve-provision-location"),
        1
    );
    assert_eq!(count_named(&pod["spec"]["containers"], "modelcar"), 1);
    assert_eq!(
        count_named(&pod["spec"]["initContainers"], "modelcar-init"),
        1
    );
    assert_eq!(pod["spec"]["shareProcessNamespace"], true);
    assert_eq!(
        pod["spec"]["containers"][1]["image"],
        "registry.example.com/models/sklearn:v1"
    );

    let again = run(&["mutate", "-o", "patch", "-"], Some(&mutated));
    assert_eq!(again.status.code(), Some(0), "{}", stderr(&again));
    assert_eq!(stdout(&again).trim(), "[]");
}

#[test]
fn stdin_is_read_with_dash_and_without_a_file() {
    for args in [
        &["mutate", "-o", "json", "-"][..],
        &["mutate", "-o", "json"][..],
    ] {
        let out = run(args, Some(OCI_POD));
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
        let pod: Value = serde_json::from_str(&stdout(&out)).expect("JSON pod");
        assert_eq!(pod["metadata"]["namespace"], "default");
        assert!(stderr(&out).is_empty());
    }
}

#[test]
fn config_and_namespace_flags_apply() {
    let dir = tempfile::tempdir().unwrap();
    let default = run(&["default-config"], None);
    assert_eq!(default.status.code(), Some(0));
    let config_text =
        stdout(&default).replace("\"enableModelcar\": true", "\"enableModelcar\": false");
    let config = write_temp(dir.path(), "cm.yaml", &config_text);
    let out = run(
        &[
            "mutate",
            "--config",
            config.to_str().unwrap(),
            "-n",
            "models",
            "-o",
            "json",
            "-",
        ],
        Some(OCI_POD),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let pod: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(pod["metadata"]["namespace"], "models");
    // No OCI mode configured: the storage-initializer downloads the oci:// URI.
    assert_eq!(
        count_named(&pod["spec"]["initContainers"], "storage-initializer"),
        1
    );
    assert_eq!(count_named(&pod["spec"]["containers"], "modelcar"), 0);
}

#[test]
fn exit_code_1_when_the_webhook_would_deny() {
    let pod = OCI_POD.replace("name: kserve-container", "name: other");
    let out = run(&["mutate", "-"], Some(&pod));
    assert_eq!(out.status.code(), Some(1));
    assert!(stdout(&out).is_empty());
    assert_eq!(
        stderr(&out).trim(),
        "denied: Invalid configuration: cannot find container: kserve-container"
    );
}

#[test]
fn exit_code_2_for_bad_input_files_and_config() {
    let dir = tempfile::tempdir().unwrap();
    let bad_config = write_temp(
        dir.path(),
        "bad.yaml",
        "kind: ConfigMap\ndata:\n  agent: '{}'\n",
    );
    let missing = dir.path().join("missing.yaml");
    let cases: Vec<(Vec<&str>, Option<&str>, &str)> = vec![
        (vec!["mutate", "-"], Some("kind: Pod\nspec: [\n"), "document 1: not valid YAML or JSON"),
        (vec!["mutate", "-"], Some(""), "input holds no document"),
        (
            vec!["mutate", "-"],
            Some("kind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: c\n    ports: [{containerPort: abc}]\n"),
            "document 1 (Pod p): cannot decode pod: spec.containers[0].ports[0].containerPort",
        ),
        (vec!["mutate", missing.to_str().unwrap()], None, "cannot read"),
        (
            vec!["mutate", "--config", bad_config.to_str().unwrap(), "-"],
            Some(OCI_POD),
            "failed to parse resource configuration for \"storageInitializer\"",
        ),
        (
            vec!["mutate", "--config", missing.to_str().unwrap(), "-"],
            Some(OCI_POD),
            "cannot read config",
        ),
    ];
    for (args, stdin, want) in cases {
        let out = run(&args, stdin);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stdout(&out).is_empty(), "{args:?}");
        let err = stderr(&out);
        assert!(err.starts_with("error: "), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

#[test]
fn admission_review_input_prints_the_response_json() {
    let pod = yaml(OCI_POD);
    let review = serde_json::json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "abc", "kind": {"group": "", "version": "v1", "kind": "Pod"},
                    "resource": {"group": "", "version": "v1", "resource": "pods"},
                    "namespace": "default", "operation": "CREATE", "userInfo": {}, "object": pod}
    });
    let out = run(&["mutate", "-"], Some(&review.to_string()));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let response: Value = serde_json::from_str(&stdout(&out)).expect("response JSON");
    assert_eq!(response["kind"], "AdmissionReview");
    assert_eq!(response["response"]["uid"], "abc");
    assert_eq!(response["response"]["patchType"], "JSONPatch");
}

#[test]
fn a_closed_stdout_is_not_a_panic() {
    let mut child = bin()
        .args(["default-config"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert!(!stderr(&out).contains("panicked"), "{}", stderr(&out));
}

#[test]
fn mutate_help_documents_every_flag_with_an_example() {
    let out = run(&["mutate", "--help"], None);
    assert_eq!(out.status.code(), Some(0));
    let help = stdout(&out);
    for needle in [
        "--config <PATH>",
        "Example: --config",
        "-o, --output",
        "Example: -o patch",
        "-n, --namespace",
        "Example: --namespace",
        "[FILE]",
        "Example: pod.yaml",
        "\"-\"",
        "Exit codes: 0",
        "kubectl get deploy my-predictor -o yaml | kserve-injector mutate -",
    ] {
        assert!(help.contains(needle), "missing {needle:?} in:\n{help}");
    }
}

#[test]
fn objects_flag_reads_cluster_objects_and_names_a_bad_document() {
    let dir = tempfile::tempdir().expect("temp dir");
    let pod = OCI_POD.replace(
        "oci://registry.example.com/models/sklearn:v1",
        "gs://models/sklearn",
    );
    let objects = write_temp(
        dir.path(),
        "cluster.yaml",
        "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: default, namespace: default}\nsecrets: [{name: gcs}]\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: gcs, namespace: default}\nstringData: {gcloud-application-credentials.json: '{}'}\n",
    );
    let out = run(
        &[
            "mutate",
            "-o",
            "json",
            "--objects",
            objects.to_str().unwrap(),
            "-",
        ],
        Some(&pod),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let mutated: Value = serde_json::from_str(&stdout(&out)).expect("JSON");
    assert_eq!(
        mutated["spec"]["volumes"][1],
        serde_json::json!({"name": "user-gcp-sa", "secret": {"secretName": "gcs"}})
    );

    let missing = write_temp(
        dir.path(),
        "missing.yaml",
        "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: default, namespace: default}\nsecrets: [{name: gone}]\n",
    );
    let out = run(
        &["mutate", "--objects", missing.to_str().unwrap(), "-"],
        Some(&pod),
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains(r#"secrets "gone" not found"#),
        "{}",
        stderr(&out)
    );

    let wrong = write_temp(
        dir.path(),
        "wrong.yaml",
        "---\n---\n{apiVersion: v1, metadata: {name: p}}\n",
    );
    let out = run(
        &["mutate", "--objects", wrong.to_str().unwrap(), "-"],
        Some(&pod),
    );
    assert_eq!(out.status.code(), Some(2));
    let message = stderr(&out);
    assert!(
        message.contains("--objects") && message.contains("document 1: no kind"),
        "{message}"
    );
}

#[test]
fn objects_flag_takes_a_namespace_dump_and_says_what_it_passed_over() {
    let dir = tempfile::tempdir().expect("temp dir");
    let pod = OCI_POD.replace(
        "oci://registry.example.com/models/sklearn:v1",
        "gs://models/sklearn",
    );
    let dump = write_temp(
        dir.path(),
        "dump.yaml",
        "apiVersion: v1\nkind: List\nitems:\n\
         - {apiVersion: v1, kind: ServiceAccount, metadata: {name: default, namespace: default}, secrets: [{name: gcs}]}\n\
         - {apiVersion: v1, kind: Secret, metadata: {name: gcs, namespace: default}, data: {gcloud-application-credentials.json: e30=}}\n\
         - {apiVersion: v1, kind: ConfigMap, metadata: {name: a, namespace: default}, data: {k: v}}\n\
         - {apiVersion: v1, kind: ConfigMap, metadata: {name: b, namespace: default}}\n\
         ---\n{apiVersion: apps/v1, kind: Deployment, metadata: {name: d, namespace: default}}\n",
    );
    let out = run(
        &[
            "mutate",
            "-o",
            "json",
            "--objects",
            dump.to_str().unwrap(),
            "-",
        ],
        Some(&pod),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let mutated: Value = serde_json::from_str(&stdout(&out)).expect("JSON");
    assert_eq!(
        mutated["spec"]["volumes"][1],
        serde_json::json!({"name": "user-gcp-sa", "secret": {"secretName": "gcs"}})
    );
    let lines: Vec<String> = stderr(&out).lines().map(str::to_string).collect();
    let prefix = format!("kserve-injector: --objects {}: ", dump.display());
    assert_eq!(
        lines,
        [
            format!("{prefix}ignored 2 ConfigMap documents (only ServiceAccount, Secret, ClusterStorageContainer, InferenceService or a List of them are read)"),
            format!("{prefix}ignored 1 Deployment document (only ServiceAccount, Secret, ClusterStorageContainer, InferenceService or a List of them are read)"),
        ]
    );
}

#[test]
fn a_settings_file_is_read_whole_or_refused() {
    // Each of these was read in part, or as something it does not say:
    // the later of two JSON keys won, a second document went unread, and
    // these values were taken as they came.
    let dir = tempfile::tempdir().unwrap();
    let input = write_temp(dir.path(), "pod.yaml", OCI_POD);
    for (text, want) in [
        (
            "{\"storageInitializer\": {\"cpuLimit\": \"1\"}, \"storageInitializer\": {}}",
            "mapping key \"storageInitializer\" already defined at line 1 column 63",
        ),
        (
            "{\"storageInitializer\": {\"cpuLimit\": \"1\", \"cpuLimit\": \"2\"}}",
            "mapping key \"cpuLimit\" already defined at line 1 column 52",
        ),
        (
            "kserveVersion: v0.17\n---\nstorageInitializer: {cpuLimit: 2}\n",
            "more than one document: the settings are one mapping, in one document",
        ),
        (
            "{\"kserveVersion\": \"v0.17\"}\n{\"kserveVersion\": \"v0.18\"}\n",
            "more than one document: the settings are one mapping, in one document",
        ),
        (
            "kserveVersion: v0.17\n---\n- [\n",
            "document 2: not valid YAML or JSON",
        ),
        (
            "storageInitializer:\n  cpuLimit: '-1'\n",
            "storageInitializer.cpuLimit: \"-1\" is negative, which the API server refuses",
        ),
        (
            "storageInitializer:\n  memoryLimit: 1e999999\n",
            "storageInitializer.memoryLimit: \"1e999999\" is more than Kubernetes counts (9223372036854775807 bytes)",
        ),
        (
            "kserveVersion: v0.17.9\n",
            "kserveVersion: \"v0.17.9\" is not a KServe version",
        ),
    ] {
        let settings = write_temp(dir.path(), "settings.yaml", text);
        let out = run(
            &[
                "mutate",
                "--config-file",
                settings.to_str().unwrap(),
                input.to_str().unwrap(),
            ],
            None,
        );
        assert_eq!(out.status.code(), Some(2), "{text:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(err.contains("--config-file") && err.contains(want), "{text:?}: {err}");
    }
}

#[test]
fn a_bad_config_file_is_exit_2_naming_the_file_and_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let input = write_temp(dir.path(), "pod.yaml", OCI_POD);
    for (text, want) in [
        (
            "storageInitializer:\n  memoryLimit: 16GB\n",
            "storageInitializer.memoryLimit: \"16GB\" is not a quantity",
        ),
        (
            "storageInitialiser: {}\n",
            "unknown key \"storageInitialiser\"",
        ),
    ] {
        let settings = write_temp(dir.path(), "settings.yaml", text);
        let out = run(
            &[
                "mutate",
                "--config-file",
                settings.to_str().unwrap(),
                input.to_str().unwrap(),
            ],
            None,
        );
        assert_eq!(out.status.code(), Some(2), "{text:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(
            err.contains("--config-file") && err.contains("settings.yaml"),
            "{err}"
        );
        assert!(err.contains(want), "{err}");
    }
    let missing = dir.path().join("absent.yaml");
    let out = run(
        &[
            "mutate",
            "--config-file",
            missing.to_str().unwrap(),
            input.to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("absent.yaml"), "{}", stderr(&out));
}

/// The first document of a YAML (or JSON) text, read by the core's reader.
fn yaml(text: &str) -> Value {
    kserve_injector_core::reader::documents(&mut text.as_bytes())
        .and_then(|mut docs| docs.next().expect("a document"))
        .expect("YAML")
}
