//! `audit --objects`: the table golden, the exit codes, JSON output and the
//! errors for a missing config or an unreadable dump.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/audit-table")
        .join(name)
}

fn audit(args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_kserve-injector"))
        .arg("audit")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary runs");
    if let (Some(bytes), Some(mut input)) = (stdin, child.stdin.take()) {
        std::io::Write::write_all(&mut input, bytes).expect("stdin written");
    }
    child.wait_with_output().expect("the binary ends")
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
