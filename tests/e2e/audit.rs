//! `kserve-injector audit` against a real API server, as a user bound only
//! to `manifests/audit`'s ClusterRole. No controller manager runs, so the
//! test creates the ReplicaSets and, for each, the pods the ReplicaSet
//! controller and our webhook would have made: the template's golden
//! (`mutate --kubeconfig`) with an owner reference. The audit finds them
//! the same, names the path of a planted difference (exit 1), and skips a
//! pod without an owner.

use crate::harness::*;
use crate::webhook::OBJECTS;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::{json, Value};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

const URI: &str = "internal.serving.kserve.io/storage-initializer-sourceuri";

pub(crate) fn binding() -> String {
    format!(
        "apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {{name: e2e-auditor}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: kserve-injector-audit}}
subjects: [{{apiGroup: rbac.authorization.k8s.io, kind: User, name: {AUDITOR}}}]
"
    )
}

fn replica_set(name: &str, sa: &str, annotations: Value) -> ReplicaSet {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name, "serving.kserve.io/inferenceservice": name,
                                        "component": "predictor"},
                             "annotations": annotations},
                "spec": {"serviceAccountName": sa, "containers": [
                    {"name": "kserve-container", "image": "kserve/sklearnserver:v0.15.2",
                     "env": [{"name": "PORT", "value": "8080"}]}]}
            }
        }
    }))
    .expect("a valid ReplicaSet")
}

fn run(args: &[&str], kubeconfig: &Path, stdin: Option<&str>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_kserve-injector"))
        .args(args)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kserve-injector runs");
    if let (Some(text), Some(mut input)) = (stdin, child.stdin.take()) {
        input.write_all(text.as_bytes()).expect("stdin written");
    }
    child.wait_with_output().expect("kserve-injector ends")
}

/// The pod the ReplicaSet controller would create and our webhook admit:
/// the stored ReplicaSet's template through `mutate --kubeconfig`.
fn golden_pod(stored: &ReplicaSet, name: &str, kubeconfig: &Path) -> Value {
    let mut rs = serde_json::to_value(stored).expect("JSON");
    rs["apiVersion"] = json!("apps/v1");
    rs["kind"] = json!("ReplicaSet");
    let out = run(
        &["mutate", "-o", "json", "-n", NS, "-"],
        kubeconfig,
        Some(&rs.to_string()),
    );
    assert!(
        out.status.success(),
        "mutate: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mutated: Value = serde_json::from_slice(&out.stdout).expect("mutated JSON");
    let template = &mutated["spec"]["template"];
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": template["metadata"]["labels"],
            "annotations": template["metadata"]["annotations"],
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                "name": stored.metadata.name, "uid": stored.metadata.uid, "controller": true}]},
        "spec": template["spec"]
    })
}

async fn create_pod(pods: &Api<Pod>, pod: Value) {
    let pod: Pod = serde_json::from_value(pod).expect("a valid pod");
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("pod created");
}

fn audit_json(kubeconfig: &Path, scope: &[&str]) -> (Option<i32>, Value, String) {
    let mut args = vec!["audit", "-o", "json"];
    args.extend(scope);
    let out = run(&args, kubeconfig, None);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let report = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out.status.code(), report, stderr)
}

fn row<'r>(report: &'r Value, pod: &str) -> &'r Value {
    let rows = report["pods"].as_array().expect("rows");
    rows.iter()
        .find(|r| r["pod"] == pod)
        .unwrap_or_else(|| panic!("no row {pod}: {report}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audit_as_its_own_user_finds_same_pods_a_planted_difference_and_skips_orphans() {
    let server = ApiServer::new("/tmp/kapi-21-audit");
    if !present(&server) {
        return;
    }
    let admin = client(&server.start_clean()).await;
    apply_cluster(&admin, OBJECTS).await;
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let role =
        std::fs::read_to_string(root.join("manifests/audit/cluster-role.yaml")).expect("role");
    apply(&admin, &role).await;
    apply(&admin, &binding()).await;
    let config = Command::new(env!("CARGO_BIN_EXE_kserve-injector"))
        .arg("default-config")
        .output()
        .expect("default-config");
    apply(
        &admin,
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: kserve}\n",
    )
    .await;
    apply(&admin, &String::from_utf8_lossy(&config.stdout)).await;

    let injector = server.token_kubeconfig("injector", INJECTOR_TOKEN);
    let auditor = server.token_kubeconfig("auditor", AUDITOR_TOKEN);
    let replica_sets: Api<ReplicaSet> = Api::namespaced(admin.clone(), NS);
    let pods: Api<Pod> = Api::namespaced(admin.clone(), NS);
    let post = PostParams::default();
    let s3 = replica_set("rs-s3", "sa-s3", json!({URI: "s3://bucket/model"}));
    let s3 = replica_sets
        .create(&post, &s3)
        .await
        .expect("rs-s3 created");
    let plain = replica_set("rs-plain", "default", json!({}));
    let plain = replica_sets
        .create(&post, &plain)
        .await
        .expect("rs-plain created");

    create_pod(&pods, golden_pod(&s3, "rs-s3-a", &injector)).await;
    create_pod(&pods, golden_pod(&plain, "rs-plain-a", &injector)).await;
    let mut changed = golden_pod(&s3, "rs-s3-changed", &injector);
    let env = changed["spec"]["initContainers"][0]["env"]
        .as_array_mut()
        .expect("init env");
    let endpoint = env
        .iter_mut()
        .find(|v| v["name"] == "S3_ENDPOINT")
        .expect("S3_ENDPOINT");
    endpoint["value"] = json!("s3.elsewhere.example.com");
    create_pod(&pods, changed).await;
    let mut orphan = golden_pod(&plain, "orphan", &injector);
    orphan["metadata"]
        .as_object_mut()
        .expect("metadata")
        .remove("ownerReferences");
    create_pod(&pods, orphan).await;

    let (code, report, stderr) = audit_json(&auditor, &["-n", NS]);
    assert_eq!(code, Some(1), "{stderr}\n{report}");
    assert_eq!(row(&report, "rs-s3-a")["status"], "same", "{report}");
    assert_eq!(row(&report, "rs-plain-a")["status"], "same", "{report}");
    let differs = row(&report, "rs-s3-changed");
    assert_eq!(differs["status"], "differs");
    let path = "spec.initContainers[storage-initializer].env[S3_ENDPOINT].value";
    assert_eq!(
        differs["differences"],
        json!([{"path": path, "kind": "changed"}])
    );
    let skipped = row(&report, "orphan");
    assert_eq!(skipped["status"], "skipped");
    assert!(skipped["reason"]
        .as_str()
        .unwrap_or_default()
        .starts_with("no owner"));
    assert_eq!(
        report["differences"],
        json!([{"path": path, "kind": "changed", "pods": 1}])
    );

    let table = run(&["audit", "-A"], &auditor, None);
    assert_eq!(table.status.code(), Some(1));
    let table = String::from_utf8_lossy(&table.stdout);
    assert!(
        table.contains("4 pods: 2 same, 1 differ, 1 skipped"),
        "{table}"
    );
    eprintln!("e2e audit table:\n{table}");

    // --credentials lists any live pod with a literal credential, as the
    // same user, without printing the value.
    let planted = "e2e-planted-token-93b1";
    create_pod(
        &pods,
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "notebook"},
               "spec": {"containers": [{"name": "lab", "image": "jupyter/base-notebook",
                   "env": [{"name": "HF_TOKEN", "value": planted}]}]}}),
    )
    .await;
    let out = run(
        &["audit", "--credentials", "-n", NS, "-o", "json"],
        &auditor,
        None,
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!stdout.contains(planted), "the value was printed: {stdout}");
    let found: Value = serde_json::from_str(&stdout).expect("JSON report");
    assert_eq!(
        found["findings"],
        json!([{"namespace": NS, "pod": "notebook", "owner": "", "container": "lab", "env": "HF_TOKEN"}])
    );
    assert_eq!(found["podsScanned"], 5, "{found}");
    pods.delete("notebook", &DeleteParams::default())
        .await
        .expect("deleted");

    // The role is all the audit needs; a user without it is refused.
    let nobody = server.token_kubeconfig("nobody", NOBODY_TOKEN);
    let (code, _, stderr) = audit_json(&nobody, &["-n", NS]);
    assert_eq!(code, Some(2));
    assert!(stderr.contains("forbidden"), "{stderr}");

    pods.delete("rs-s3-changed", &DeleteParams::default())
        .await
        .expect("deleted");
    let (code, report, stderr) = audit_json(&auditor, &["-n", NS]);
    assert_eq!(code, Some(0), "{stderr}\n{report}");
    assert_eq!(report["totals"]["same"], 2);
}
