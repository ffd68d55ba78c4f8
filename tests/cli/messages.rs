//! What a person reads when `mutate` cannot do what was asked: each path
//! named once, one `error:` (a denial says `denied:`), the cause of a
//! client error with the server's URL, and hints where the command would
//! otherwise look hung or right.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

const LABELLED_POD: &str = "apiVersion: v1
kind: Pod
metadata:
  name: p
  labels: {serving.kserve.io/inferenceservice: sklearn}
spec:
  containers: [{name: kserve-container, image: x}]
";

fn run(args: &[&str], stdin: &str) -> Output {
    crate::run_bin(args, stdin.as_bytes())
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn fixture(case: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(case)
        .display()
        .to_string()
}

#[test]
fn an_unreadable_config_names_its_path_once() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.yaml");
    let missing = missing.to_str().unwrap();
    let out = run(&["mutate", "--config", missing, "-"], LABELLED_POD);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.starts_with(&format!("error: cannot read config {missing}: ")),
        "{err}"
    );
    assert_eq!(err.matches(missing).count(), 1, "{err}");
}

#[test]
fn an_unreadable_objects_file_names_its_path_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_str().unwrap();
    let out = run(&["mutate", "--objects", path, "-"], LABELLED_POD);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.starts_with(&format!("error: cannot read --objects {path}: ")),
        "{err}"
    );
    assert_eq!(err.matches(path).count(), 1, "{err}");
}

#[test]
fn a_denied_pod_says_denied_once_not_error() {
    let case = fixture("a21-puller-missing-config-volume");
    let out = run(&["mutate", &format!("{case}/input.yaml")], "");
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out),
        "denied: can not find internal.serving.kserve.io/configVolumeName label\n"
    );
    // KServe's own text begins with "error": one `error` word, no `error:` prefix.
    let case = fixture("k08-csc-bad-regex-denied");
    let objects = format!("{case}/cluster.yaml");
    let out = run(
        &[
            "mutate",
            "--objects",
            &objects,
            &format!("{case}/input.yaml"),
        ],
        "",
    );
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.starts_with("denied: error checking storage container broken: regex parse error"),
        "{err}"
    );
    assert!(!err.contains("error: error"), "{err}");
}

#[test]
fn a_directory_as_input_names_the_directory() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_str().unwrap();
    let out = run(&["mutate", path], "");
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.starts_with(&format!("error: cannot read {path}: ")),
        "{err}"
    );
    assert!(err.contains("Is a directory"), "{err}");
}

#[test]
fn an_unreachable_kubeconfig_server_is_named_with_the_cause() {
    // A port nothing listens on any more.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {{server: \"https://127.0.0.1:{port}\"}}\nusers:\n- name: u\n  user: {{token: t}}\ncontexts:\n- name: c\n  context: {{cluster: c, user: u}}\ncurrent-context: c\n"),
    )
    .unwrap();
    let out = run(
        &["mutate", "--kubeconfig", kubeconfig.to_str().unwrap(), "-"],
        LABELLED_POD,
    );
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains(&format!("https://127.0.0.1:{port}")), "{err}");
    assert!(err.contains("Connection refused"), "{err}");
}

#[test]
fn a_pod_without_kserves_label_gets_a_hint_and_the_same_output() {
    let unlabelled = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers: [{name: c, image: x}]\n";
    let out = run(&["mutate", "-o", "patch", "-"], unlabelled);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "[]");
    let err = stderr(&out);
    assert!(
        err.contains("document 1 (Pod p): no serving.kserve.io/inferenceservice label"),
        "{err}"
    );
    assert!(err.contains("objectSelector"), "{err}");
    // A workload's template is what the webhook would see.
    let deployment = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  template:\n    metadata: {labels: {app: d}}\n    spec:\n      containers: [{name: c, image: x}]\n";
    let out = run(&["mutate", "-o", "patch", "-"], deployment);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stderr(&out).contains("(Deployment d): no serving.kserve.io/inferenceservice label"));
    // A pod the webhook would see: no hint.
    let out = run(&["mutate", "-o", "patch", "-"], LABELLED_POD);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(stderr(&out), "");
}

#[test]
fn kserves_configmap_as_the_settings_file_points_at_config() {
    let dir = tempfile::tempdir().unwrap();
    let shipped = run(&["default-config"], "");
    let configmap = dir.path().join("inferenceservice-config.yaml");
    std::fs::write(&configmap, &shipped.stdout).unwrap();
    let out = run(
        &["mutate", "--config-file", configmap.to_str().unwrap(), "-"],
        LABELLED_POD,
    );
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains("unknown key \"apiVersion\""), "{err}");
    assert!(
        err.contains("KServe's inferenceservice-config ConfigMap is read with --config"),
        "{err}"
    );
    // The same key in a settings file of ours is an unknown key, no more.
    let settings = dir.path().join("settings.yaml");
    std::fs::write(&settings, "kserveVersion: v0.17\nstorageInitialiser: {}\n").unwrap();
    let out = run(
        &["mutate", "--config-file", settings.to_str().unwrap(), "-"],
        LABELLED_POD,
    );
    assert!(!stderr(&out).contains("--config "), "{}", stderr(&out));
}

/// `mutate` with no file on a terminal says it is reading standard input.
/// `script` (util-linux) runs the binary on a pseudo-terminal and copies
/// what the binary writes there to its own stdout.
#[test]
fn no_file_on_a_terminal_gets_a_hint_on_stderr() {
    let bin = env!("CARGO_BIN_EXE_kserve-injector");
    let mut child = Command::new("script")
        .args(["-q", "-e", "-c", &format!("'{bin}' mutate"), "/dev/null"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("script (util-linux) runs");
    let mut out = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut seen = Vec::new();
        let mut buf = [0u8; 512];
        while let Ok(n @ 1..) = out.read(&mut buf) {
            seen.extend_from_slice(&buf[..n]);
            if String::from_utf8_lossy(&seen).contains("Ctrl-D") {
                break;
            }
        }
        let _ = tx.send(String::from_utf8_lossy(&seen).into_owned());
    });
    // The binary waits for input either way: end it once it has spoken, or
    // after 30 s of silence (which ends the reader with what it saw).
    let seen = rx.recv_timeout(Duration::from_secs(30));
    let _ = child.kill();
    let _ = child.wait();
    let seen = seen.or_else(|_| rx.recv_timeout(Duration::from_secs(5)));
    let seen = seen.unwrap_or_default();
    assert!(
        seen.contains("reading a document from standard input (end it with Ctrl-D)"),
        "{seen:?}"
    );
    // Piped input (not a terminal) gets no hint.
    let out = run(&["mutate", "-o", "patch", "-"], LABELLED_POD);
    assert!(!stderr(&out).contains("Ctrl-D"));
}
