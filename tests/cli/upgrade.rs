//! `audit --upgrade-to` and `mutate --compare-to`: the goldens of each
//! adjacent pair of releases over `fixtures/upgrade/objects.yaml` (a pod of
//! each kind docs/compatibility.md names), every change there attributed
//! to a row the document has; the current release from the image tags or
//! the flag; a target ConfigMap's keys; one manifest compared offline.
//! `REGENERATE_GOLDENS=1 cargo test --test cli upgrade::` rewrites the
//! dump's pods and the goldens.

use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Output;

/// Every release tag and the next, and the patch upgrade within v0.15 a
/// cluster installed by our docs makes (v0.15.0 to v0.15.2).
const PAIRS: [(&str, &str); 11] = [
    ("v0.15.0", "v0.15.1"),
    ("v0.15.1", "v0.15.2"),
    ("v0.15.0", "v0.15.2"),
    ("v0.15.2", "v0.16.0"),
    ("v0.16.0", "v0.17.0"),
    ("v0.17.0", "v0.17.1"),
    ("v0.17.1", "v0.18.0"),
    ("v0.18.0", "v0.18.1"),
    ("v0.18.1", "v0.19.0"),
    ("v0.19.0", "v0.20.0"),
    ("v0.20.0", "head"),
];

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/upgrade")
}

fn path(name: &str) -> String {
    dir().join(name).display().to_string()
}

fn regenerate() -> bool {
    std::env::var_os("REGENERATE_GOLDENS").is_some_and(|v| v != "0")
}

fn run(args: &[&str]) -> Output {
    crate::run_bin(args, b"")
}

fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// Every row id of docs/compatibility.md's tables (`| 15.4 | …`,
/// `| 15.0.1 | …`).
pub(crate) fn compatibility_rows() -> BTreeSet<String> {
    let doc = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/compatibility.md"),
    )
    .expect("docs/compatibility.md");
    (doc.lines())
        .filter_map(|line| line.strip_prefix("| ")?.split_once(" |"))
        .map(|(id, _)| id.trim().to_string())
        .filter(|id| {
            let parts: Vec<&str> = id.split('.').collect();
            (2..=3).contains(&parts.len())
                && (parts.iter()).all(|p| !p.is_empty() && p.bytes().all(|c| c.is_ascii_digit()))
        })
        .collect()
}

/// Every row a report's changes and denials cite, and how many causes
/// are unexplained.
fn cited(report: &Value) -> (BTreeSet<String>, usize) {
    let mut rows = BTreeSet::new();
    let mut unexplained = 0;
    for pod in report["pods"].as_array().expect("pods") {
        let changes = pod["changes"].as_array().cloned().unwrap_or_default();
        let causes = (changes.iter().map(|c| c["causes"].clone()))
            .chain(pod.get("admission").map(|a| a["causes"].clone()));
        for c in causes {
            let listed = c["rows"].as_array().expect("rows");
            rows.extend(
                listed
                    .iter()
                    .map(|r| r.as_str().expect("a row").to_string()),
            );
            unexplained += usize::from(c["unexplained"] == Value::Bool(true));
        }
    }
    (rows, unexplained)
}

/// The dump: `workloads.yaml`, then a pod per ReplicaSet, the template as
/// this webhook admits it under HEAD with the owner reference the
/// ReplicaSet controller writes.
fn dump() -> String {
    let workloads = std::fs::read_to_string(dir().join("workloads.yaml")).expect("workloads");
    let (objects, config) = (path("workloads.yaml"), path("workloads.yaml"));
    let args = [
        "mutate",
        "-o",
        "json",
        "--config",
        &config,
        "--objects",
        &objects,
        "-",
    ];
    let sets: Vec<&str> = workloads
        .split("\n---\n")
        .filter(|d| d.contains("kind: ReplicaSet"))
        .collect();
    let out = crate::run_bin(&args, sets.join("\n---\n").as_bytes());
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut text = workloads.clone();
    for rs in serde_json::Deserializer::from_slice(&out.stdout).into_iter::<Value>() {
        let rs = rs.expect("a mutated ReplicaSet");
        let template = &rs["spec"]["template"];
        let name = rs["metadata"]["name"].as_str().expect("a name");
        let pod = serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {
                "name": format!("{name}-x7k2p"),
                "namespace": rs["metadata"]["namespace"],
                "labels": template["metadata"]["labels"],
                "annotations": template["metadata"]["annotations"],
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                    "name": name, "controller": true}],
            },
            "spec": template["spec"],
        });
        let mut yaml = Vec::new();
        kserve_injector_core::reader::write_yaml(&mut yaml, &pod).expect("YAML");
        text.push_str("---\n");
        text.push_str(std::str::from_utf8(&yaml).expect("UTF-8"));
    }
    text
}

#[test]
fn the_dump_holds_each_replica_sets_pod_as_head_admits_it() {
    let want = dump();
    let file = dir().join("objects.yaml");
    if regenerate() {
        std::fs::write(&file, &want).expect("dump written");
    }
    let got =
        std::fs::read_to_string(&file).expect("objects.yaml (REGENERATE_GOLDENS=1 writes it)");
    assert!(
        got == want,
        "objects.yaml is stale: REGENERATE_GOLDENS=1 rewrites it"
    );
}

#[test]
fn each_adjacent_pair_matches_its_golden_and_every_change_has_a_row() {
    let rows = compatibility_rows();
    assert!(rows.contains("15.4") && rows.contains("20.3"), "{rows:?}");
    let objects = path("objects.yaml");
    for (from, to) in PAIRS {
        let args = [
            "audit",
            "--objects",
            &objects,
            "--kserve-version",
            from,
            "--upgrade-to",
            to,
        ];
        let out = run(&args);
        let table = String::from_utf8_lossy(&out.stdout).into_owned();
        let golden = dir().join(format!("expected/{from}-{to}.txt"));
        if regenerate() {
            std::fs::create_dir_all(dir().join("expected")).expect("dir");
            std::fs::write(&golden, &table).expect("golden written");
        }
        let want = std::fs::read_to_string(&golden).expect("golden readable");
        assert_eq!(table, want, "{from} → {to}");
        let report = json(&run(&[&args[..], &["-o", "json"]].concat()));
        let totals = &report["totals"];
        let flagged = ["changes", "denied", "admitted"]
            .iter()
            .any(|k| totals[k] != 0);
        assert_eq!(
            out.status.code(),
            Some(if flagged { 1 } else { 0 }),
            "{from} → {to}"
        );
        assert_eq!(totals["pods"], 22, "{from} → {to}");
        assert_eq!(totals["skipped"], 0, "{from} → {to}");
        let (cited, unexplained) = cited(&report);
        assert_eq!(unexplained, 0, "{from} → {to}: {report}");
        assert_eq!(totals["unexplained"], 0);
        let missing: Vec<&String> = cited.difference(&rows).collect();
        assert!(
            missing.is_empty(),
            "{from} → {to}: rows not in the document: {missing:?}"
        );
        // The summed rows are those the pods cite.
        let summed: BTreeSet<String> = (report["rows"].as_array().expect("rows").iter())
            .map(|r| r["row"].as_str().expect("row").to_string())
            .collect();
        assert_eq!(summed, cited, "{from} → {to}");
    }
}

#[test]
fn the_migration_guide_shows_a_golden_as_it_is() {
    let guide =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/migration.md"))
            .expect("docs/migration.md");
    let golden =
        std::fs::read_to_string(dir().join("expected/v0.16.0-v0.17.0.txt")).expect("golden");
    let shown = format!("```\n{golden}```\n");
    assert!(
        guide.contains(&shown),
        "docs/migration.md's example is not expected/v0.16.0-v0.17.0.txt"
    );
    let command = "audit --objects fixtures/upgrade/objects.yaml --kserve-version v0.16.0 --upgrade-to v0.17.0";
    assert!(guide.contains(command), "the example's command");
}

#[test]
fn the_running_release_comes_from_the_image_tags_else_the_flag_is_asked_for() {
    let objects = path("objects.yaml");
    let out = run(&["audit", "--objects", &objects, "--upgrade-to", "v0.17"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("which KServe release does the cluster run?"),
        "{err}"
    );
    assert!(err.contains("pass --kserve-version"), "{err}");
    // The tags name the release exactly: v0.15.2 is v0.15.2, not v0.15.0.
    let tagged = |tag: &str| {
        std::fs::read_to_string(&objects)
            .expect("dump")
            .replace("kserve/agent:latest", &format!("kserve/agent:{tag}"))
            .replace(
                "kserve/storage-initializer:latest",
                &format!("kserve/storage-initializer:{tag}"),
            )
    };
    for (tag, to, from) in [
        ("v0.16.0", "v0.17", "v0.16.0"),
        ("v0.15.0", "v0.15.2", "v0.15.0"),
        ("v0.15.2", "v0.16.0", "v0.15.2"),
        ("v0.17.1", "v0.18.0", "v0.17.1"),
    ] {
        let out = crate::run_bin(
            &["audit", "--objects", "-", "--upgrade-to", to, "-o", "json"],
            tagged(tag).as_bytes(),
        );
        let report = json(&out);
        assert_eq!(report["from"], from, "{tag}");
    }
    // A patch release this build does not model is no release: the audit
    // stops, names the tag and the releases of its line, and asks.
    for (tag, line) in [
        ("v0.15.3", "of that line: v0.15.0, v0.15.1, v0.15.2"),
        ("v0.20.1", "of that line: v0.20.0"),
        ("v0.14.0", "no release of that line"),
    ] {
        let out = crate::run_bin(
            &["audit", "--objects", "-", "--upgrade-to", "v0.16.0"],
            tagged(tag).as_bytes(),
        );
        assert_eq!(out.status.code(), Some(2), "{tag}");
        let err = String::from_utf8_lossy(&out.stderr);
        let says = format!(
            "which KServe release does the cluster run? the agent and storage-initializer images name KServe {tag}, which this build does not model ({line}): pass --kserve-version"
        );
        assert!(err.contains(&says), "{tag}: {err}");
        assert!(out.stdout.is_empty(), "{tag}: no report");
    }
    // A settings file's kserveVersion names it too.
    let settings = std::env::temp_dir().join(format!(
        "kserve-upgrade-settings-{}.yaml",
        std::process::id()
    ));
    std::fs::write(&settings, "kserveVersion: v0.19\n").expect("settings written");
    let settings_path = settings.display().to_string();
    let args = [
        "audit",
        "--objects",
        &objects,
        "--config-file",
        &settings_path,
        "--upgrade-to",
        "v0.20",
        "-o",
        "json",
    ];
    assert_eq!(json(&run(&args))["from"], "v0.19.0");
    let _ = std::fs::remove_file(settings);
    let out = run(&["audit", "--objects", &objects, "--upgrade-config", &objects]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "--upgrade-config needs --upgrade-to"
    );
    let out = run(&[
        "audit",
        "--objects",
        &objects,
        "--credentials",
        "--upgrade-to",
        "v0.17",
    ]);
    assert_eq!(out.status.code(), Some(2), "--credentials is another audit");
}

#[test]
fn a_target_configmap_is_compared_key_by_key() {
    let dir = tempfile::tempdir().expect("temp dir");
    let workloads = std::fs::read_to_string(path("workloads.yaml")).expect("workloads");
    let config = workloads
        .split("\n---\n")
        .next()
        .expect("the ConfigMap comes first");
    let upgraded = config
        .replace(
            "kserve/storage-initializer:latest",
            "kserve/storage-initializer:v0.17.0",
        )
        .replace(
            "\"ociModelMode\": \"modelcar\"",
            "\"ociModelMode\": \"sideways\"",
        );
    let file = dir.path().join("config.yaml");
    std::fs::write(&file, upgraded).expect("config written");
    let (objects, file) = (path("objects.yaml"), file.display().to_string());
    let base = [
        "audit",
        "--objects",
        &objects,
        "--kserve-version",
        "v0.18",
        "-o",
        "json",
    ];
    let to = |release: &str| -> Value {
        json(&run(&[
            &base[..],
            &["--upgrade-to", release, "--upgrade-config", &file],
        ]
        .concat()))
    };
    // v0.19 does not read ociModelMode: the image is the only change, the key's.
    let report = to("v0.19");
    let gcs = (report["pods"].as_array().expect("pods").iter())
        .find(|p| p["namespace"] == "gcs")
        .expect("the gcs pod");
    let changes = gcs["changes"].as_array().expect("changes");
    assert_eq!(changes.len(), 1, "{gcs}");
    assert_eq!(changes[0]["field"], "image");
    assert_eq!(
        changes[0]["causes"]["keys"],
        serde_json::json!(["storageInitializer.image"])
    );
    assert_eq!(changes[0]["causes"]["rows"], serde_json::json!([]));
    // v0.20 refuses the mode: every pod is denied, with the release's rows.
    let report = to("v0.20");
    assert_eq!(report["totals"]["denied"], 22, "{}", report["totals"]);
    let denial = &report["pods"][0]["admission"];
    assert!(
        denial["target"]
            .as_str()
            .expect("a message")
            .contains("ociModelMode \"sideways\""),
        "{denial}"
    );
    assert!(denial["causes"]["rows"]
        .as_array()
        .expect("rows")
        .contains(&serde_json::json!("19.4")));
    let keys = report["config"].as_array().expect("keys");
    let mode = keys
        .iter()
        .find(|k| k["key"] == "storageInitializer.ociModelMode")
        .expect("ociModelMode");
    assert_eq!(mode["currentValue"], "modelcar");
    assert_eq!(mode["targetValue"], "sideways");
}

#[test]
fn mutate_compare_to_prints_one_manifests_difference_or_its_summary() {
    let input =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/m04-modelcar-transformer/input.yaml");
    let input = input.display().to_string();
    let args = [
        "mutate",
        "--kserve-version",
        "v0.15.0",
        "--compare-to",
        "v0.16.0",
        &input,
    ];
    let out = run(&args);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("transformer-container        env[MODEL_INIT_MODE]"),
        "{table}"
    );
    assert!(table.starts_with("NAMESPACE   POD"), "{table}");
    let summary = run(&[&args[..], &["-o", "summary"]].concat());
    let summary = String::from_utf8_lossy(&summary.stdout);
    assert!(
        summary.starts_with("KServe v0.15.0 → v0.16.0\n"),
        "{summary}"
    );
    assert!(!summary.contains("NAMESPACE"), "{summary}");
    assert!(
        table.ends_with(&*summary),
        "the table ends with the summary"
    );
    let report = json(&run(&[&args[..], &["-o", "json"]].concat()));
    let env = (report["pods"][0]["changes"]
        .as_array()
        .expect("changes")
        .iter())
    .find(|c| c["path"] == "spec.containers[transformer-container].env[MODEL_INIT_MODE]")
    .expect("the transformer's env")
    .clone();
    // The v0.15.0 ConfigMap turns the modelcar off (15.1.1: v0.15.2 turned
    // it on); v0.16.0 gives the transformer the env (15.15).
    assert_eq!(
        env["causes"]["rows"],
        serde_json::json!(["15.1.1", "15.15"])
    );
    // The same release: nothing changes, exit 0.
    let same = run(&[
        "mutate",
        "--kserve-version",
        "v0.18",
        "--compare-to",
        "v0.19",
        &input,
    ]);
    assert_eq!(same.status.code(), Some(0));
    for (flags, says) in [
        (
            &["-o", "patch"][..],
            "with --compare-to, -o is table, json or summary",
        ),
        (
            &["-o", "yaml"][..],
            "with --compare-to, -o is table, json or summary",
        ),
    ] {
        let out = run(&[&args[..], flags].concat());
        assert_eq!(out.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&out.stderr).contains(says));
    }
    let out = run(&["mutate", "-o", "summary", &input]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("need --compare-to"));
}

/// The rows each change of a `mutate --compare-to` report names, by path.
fn rows_by_path(report: &Value) -> Vec<(String, Value)> {
    (report["pods"][0]["changes"]
        .as_array()
        .expect("changes")
        .iter())
    .map(|c| {
        let path = c["path"].as_str().expect("a path").to_string();
        (path, c["causes"]["rows"].clone())
    })
    .collect()
}

#[test]
fn a_v0_15_0_pod_compared_to_v0_15_2_names_each_patch_releases_row() {
    let fixture = |case: &str| {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures")
            .join(case);
        path.join("input.yaml").display().to_string()
    };
    let compare = |input: &str, extra: &[&str]| {
        let mut args = vec!["mutate", "--kserve-version", "v0.15.0"];
        args.extend_from_slice(&["--compare-to", "v0.15.2", "-o", "json"]);
        args.extend_from_slice(extra);
        args.push(input);
        let out = run(&args);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let report = json(&out);
        assert_eq!(
            (report["from"].clone(), report["to"].clone()),
            ("v0.15.0".into(), "v0.15.2".into())
        );
        report
    };
    // The logger's metadata annotations arrived in v0.15.1 (15.0.1).
    let logger = compare(&fixture("a23-logger-metadata-annotations-one-absent"), &[]);
    assert_eq!(
        rows_by_path(&logger),
        [(
            "spec.containers[agent].args".to_string(),
            serde_json::json!(["15.0.1"])
        )]
    );
    let table = run(&[
        "mutate",
        "--kserve-version",
        "v0.15.0",
        "--compare-to",
        "v0.15.2",
        &fixture("a23-logger-metadata-annotations-one-absent"),
    ]);
    assert_eq!(table.status.code(), Some(1));
    let table = String::from_utf8_lossy(&table.stdout);
    assert!(table.contains("15.0.1"), "{table}");
    // Without --config each side reads its own shipped ConfigMap: v0.15.2's
    // turns the modelcar on (15.1.1), and with it the modelcar's UID.
    let oci = compare(&fixture("m3-modelcar-oci"), &[]);
    let changes = rows_by_path(&oci);
    assert!(!changes.is_empty());
    for (path, rows) in &changes {
        assert_eq!(rows, &serde_json::json!(["15.1.1"]), "{path}");
    }
    assert!(
        changes
            .iter()
            .any(|(p, _)| p == "spec.containers[modelcar]"),
        "{changes:?}"
    );
    // One ConfigMap for both sides: the mutator alone, no change for OCI.
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/m3-modelcar-oci");
    let printed = run(&["default-config", "--kserve-version", "v0.15.2"]);
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("config.yaml");
    std::fs::write(&file, &printed.stdout).expect("written");
    let same = run(&[
        "mutate",
        "--kserve-version",
        "v0.15.0",
        "--compare-to",
        "v0.15.2",
        "--config",
        &file.display().to_string(),
        &config.join("input.yaml").display().to_string(),
    ]);
    assert_eq!(same.status.code(), Some(0));
}

#[test]
fn a_v0_15_0_cluster_upgrading_to_v0_15_2_changes_the_logger_pod_only() {
    // The dump with KServe v0.15.0's image tags: the release is read from
    // them; the cluster's ConfigMap is kept, so only the mutator moves.
    let dump = std::fs::read_to_string(path("objects.yaml"))
        .expect("dump")
        .replace("kserve/agent:latest", "kserve/agent:v0.15.0")
        .replace(
            "kserve/storage-initializer:latest",
            "kserve/storage-initializer:v0.15.0",
        );
    let out = crate::run_bin(
        &[
            "audit",
            "--objects",
            "-",
            "--upgrade-to",
            "v0.15.2",
            "-o",
            "json",
        ],
        dump.as_bytes(),
    );
    assert_eq!(out.status.code(), Some(1));
    let report = json(&out);
    assert_eq!(report["from"], "v0.15.0");
    assert_eq!(report["totals"]["unexplained"], 0);
    let changed: Vec<&Value> = (report["pods"].as_array().expect("pods").iter())
        .filter(|p| p["changes"].as_array().is_some_and(|c| !c.is_empty()))
        .collect();
    assert_eq!(changed.len(), 1, "{report}");
    assert_eq!(changed[0]["namespace"], "logger");
    let (rows, _) = cited(&report);
    assert_eq!(rows, BTreeSet::from(["15.0.1".to_string()]));
}
