//! `audit --objects`: the table golden, the exit codes, JSON output and the
//! errors for a missing config or an unreadable dump.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/audit-table")
        .join(name)
}

fn audit(args: &[&str], stdin: Option<&[u8]>) -> Output {
    crate::run_bin(&[&["audit"], args].concat(), stdin.unwrap_or_default())
}

fn objects() -> String {
    fixture("objects.yaml").display().to_string()
}

#[test]
fn the_table_matches_its_golden_and_a_planted_difference_exits_1() {
    let out = audit(&["--objects", &objects()], None);
    let table = String::from_utf8_lossy(&out.stdout);
    let golden = fixture("expected.txt");
    if std::env::var_os("REGENERATE_GOLDENS").is_some_and(|v| v != "0") {
        std::fs::write(&golden, table.as_bytes()).expect("golden written");
    }
    let want = std::fs::read_to_string(&golden).expect("golden readable");
    assert_eq!(table, want);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(table.contains("env[PORT].value"), "{table}");
}

#[test]
fn a_namespace_where_every_pod_is_the_same_exits_0_and_stdin_reads_the_dump() {
    let dump = std::fs::read(fixture("objects.yaml")).expect("fixture");
    let out = audit(
        &["--objects", "-", "-n", "models-1", "-o", "json"],
        Some(&dump),
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).expect("JSON report");
    assert_eq!(report["totals"]["pods"], 2);
    assert_eq!(report["totals"]["same"], 2);
    assert_eq!(report["differences"], serde_json::json!([]));
}

#[test]
fn a_missing_config_or_an_unreadable_dump_exits_2_with_the_reason() {
    let out = audit(
        &[
            "--objects",
            &objects(),
            "--controller-namespace",
            "elsewhere",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no inferenceservice-config ConfigMap in namespace \"elsewhere\""),
        "{err}"
    );
    let out = audit(&["--objects", "-"], Some(b"{\"items\": [{\"a\": }"));
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not valid JSON"));
    let out = audit(
        &["--objects", "-"],
        Some(b"{\"items\": [{\"apiVersion\": \"v1\", \"kind\": \"Secret\"}]}"),
    );
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("document 1, item 1"), "{err}");
}

#[test]
fn a_given_config_replaces_the_dumps_and_every_pod_then_differs() {
    let dir = std::env::temp_dir().join(format!("kserve-audit-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let default = Command::new(env!("CARGO_BIN_EXE_kserve-injector"))
        .arg("default-config")
        .output()
        .expect("default-config");
    let text = String::from_utf8_lossy(&default.stdout).replace(
        "kserve/storage-initializer",
        "registry.example.com/storage-initializer",
    );
    let config = dir.join("config.yaml");
    std::fs::write(&config, text).expect("config written");
    let out = audit(
        &[
            "--objects",
            &objects(),
            "--config",
            &config.display().to_string(),
            "-o",
            "json",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&out.stdout).expect("JSON report");
    assert_eq!(report["totals"]["differs"], 4);
    let image = "spec.initContainers[storage-initializer].image";
    let by_path = report["differences"].as_array().expect("differences");
    assert!(
        by_path.iter().any(|d| d["path"] == image && d["pods"] == 4),
        "{by_path:?}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// The documents of a YAML (or JSON) text, read by the core's reader.
fn yaml_docs(text: &str) -> Vec<Value> {
    kserve_injector_core::reader::documents(&mut text.as_bytes())
        .and_then(|docs| docs.collect())
        .expect("YAML")
}

/// The `inferenceservice-config` of the audit fixture's dump, as a file.
fn fixture_config(dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string(fixture("objects.yaml")).expect("fixture");
    let config = (yaml_docs(&text).into_iter())
        .find(|doc| doc["kind"] == "ConfigMap")
        .expect("the dump holds the ConfigMap");
    let path = dir.join("config.json");
    std::fs::write(&path, config.to_string()).expect("config written");
    path
}

/// A ReplicaSet whose template is the modelcar fixture's pod, and the pod
/// `mutate` makes of it in `mode`, owned by that ReplicaSet: one dump.
fn modelcar_dump(mode: &str, config: &Path) -> String {
    let input = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/m3-modelcar-oci/input.yaml");
    let template = yaml_docs(&std::fs::read_to_string(&input).expect("fixture")).remove(0);
    let out = Command::new(env!("CARGO_BIN_EXE_kserve-injector"))
        .args([
            "mutate",
            "-n",
            "models",
            "-o",
            "json",
            "--modelcar-mode",
            mode,
        ])
        .arg("--config")
        .arg(config)
        .arg(&input)
        .output()
        .expect("mutate runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut pod: Value = serde_json::from_slice(&out.stdout).expect("a pod");
    pod["metadata"]["name"] = "sklearn-predictor-abc".into();
    pod["metadata"]["ownerReferences"] = serde_json::json!([{
        "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "sklearn-predictor",
        "uid": "00000000-0000-4000-8000-000000000001", "controller": true
    }]);
    let replica_set = serde_json::json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": "sklearn-predictor", "namespace": "models",
                     "uid": "00000000-0000-4000-8000-000000000001"},
        "spec": {"template": {"metadata": {"labels": template["metadata"]["labels"],
                                            "annotations": template["metadata"]["annotations"]},
                              "spec": template["spec"]}}
    });
    serde_json::json!({"apiVersion": "v1", "kind": "List", "items": [replica_set, pod]}).to_string()
}

#[test]
fn the_audit_runs_the_core_in_the_modelcar_mode_it_is_given() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let config = fixture_config(dir.path());
    let config = config.to_str().expect("a UTF-8 path");
    for (pod_mode, audit_mode, code) in [
        ("native-sidecar", "native-sidecar", 0),
        ("native-sidecar", "classic", 1),
        ("classic", "classic", 0),
        ("classic", "native-sidecar", 1),
    ] {
        let dump = modelcar_dump(pod_mode, Path::new(config));
        let args = [
            "--objects",
            "-",
            "--modelcar-mode",
            audit_mode,
            "--config",
            config,
        ];
        let out = audit(&args, Some(dump.as_bytes()));
        assert_eq!(
            out.status.code(),
            Some(code),
            "pod {pod_mode}, audit {audit_mode}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

const PLANTED: &str = "PLANTED-SECRET-VALUE-7c41";

fn credentials_fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/audit-credentials")
        .join(name)
}

/// `audit --credentials` against its goldens (table and JSON); the value
/// planted in every literal credential of the dump appears nowhere.
#[test]
fn credentials_match_their_goldens_exit_1_and_never_print_a_value() {
    let dump = credentials_fixture("objects.yaml").display().to_string();
    for (format, golden) in [("table", "expected.txt"), ("json", "expected.json")] {
        let out = audit(&["--credentials", "--objects", &dump, "-o", format], None);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let golden = credentials_fixture(golden);
        if std::env::var_os("REGENERATE_GOLDENS").is_some_and(|v| v != "0") {
            std::fs::write(&golden, &out.stdout).expect("golden written");
        }
        let want = std::fs::read(&golden).expect("golden readable");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&want)
        );
        for stream in [&out.stdout, &out.stderr] {
            assert!(
                !String::from_utf8_lossy(stream).contains(PLANTED),
                "{format}: the value leaked"
            );
        }
    }
    let source = std::fs::read_to_string(credentials_fixture("objects.yaml")).expect("dump");
    assert!(
        source.matches(PLANTED).count() >= 4,
        "the dump must carry the planted value"
    );
}

#[test]
fn credentials_in_a_clean_namespace_exit_0_and_bad_input_exits_2() {
    let dump = credentials_fixture("objects.yaml").display().to_string();
    let out = audit(
        &[
            "--credentials",
            "--objects",
            &dump,
            "-n",
            "nowhere",
            "-o",
            "json",
        ],
        None,
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).expect("JSON report");
    assert_eq!(
        report,
        serde_json::json!({"podsScanned": 0, "findings": []})
    );
    let out = audit(
        &["--credentials", "--objects", "-"],
        Some(b"{\"items\": [{\"a\": }"),
    );
    assert_eq!(out.status.code(), Some(2));
}
