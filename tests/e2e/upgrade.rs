//! `audit --upgrade-to` against a real API server, as a user bound only to
//! `manifests/audit`'s ClusterRole: the objects of `fixtures/upgrade`
//! (`inferenceservice-config`, ServiceAccounts, Secrets,
//! ClusterStorageContainers, the InferenceService, and per pod its
//! Deployment, ReplicaSet and pod with their owner references) created in
//! the cluster give, for each pair of tags whose mutators differ, the rows the
//! dump gives; without `--kserve-version` the running release is the one
//! the ConfigMap's image tags name. No controller manager runs, so the
//! test creates each pod itself, as its ReplicaSet's template (what the
//! comparison reads is the template; the pod only names it).
//!
//! The dump's `model-mount` pod is left out: its template mounts the model
//! volume without declaring it, which the API server refuses in a
//! ReplicaSet (KServe reaches that case with pods created directly).

use crate::harness::*;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const LEFT_OUT: &str = "model-mount";

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/upgrade")
        .join(name)
}

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kserve-injector"))
        .args(args)
        .output()
        .expect("kserve-injector runs")
}

fn report(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not a JSON report ({e}): {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn namespace_of(doc: &Value) -> String {
    doc["metadata"]["namespace"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// Creates the fixture's objects: what the injectors read as they are, and
/// per pod its Deployment, ReplicaSet and pod, each owned by the one before.
async fn create(admin: &kube::Client, docs: &[Value]) {
    let namespaces: BTreeSet<String> = docs.iter().map(namespace_of).collect();
    for ns in namespaces.iter().filter(|ns| !ns.is_empty()) {
        let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
        apply(admin, &namespace.to_string()).await;
    }
    let looked_up = [
        "ConfigMap",
        "ServiceAccount",
        "Secret",
        "ClusterStorageContainer",
        "InferenceService",
    ];
    for doc in docs
        .iter()
        .filter(|d| looked_up.iter().any(|k| d["kind"] == *k))
    {
        apply(admin, &doc.to_string()).await;
    }
    let post = PostParams::default();
    for rs in docs.iter().filter(|d| d["kind"] == "ReplicaSet") {
        let ns = namespace_of(rs);
        if ns == LEFT_OUT {
            continue;
        }
        let template = &rs["spec"]["template"];
        let owner = &rs["metadata"]["ownerReferences"][0];
        let deployment: Deployment = serde_json::from_value(json!({
            "metadata": {"name": owner["name"], "namespace": ns},
            "spec": {"selector": rs["spec"]["selector"], "template": template},
        }))
        .expect("a Deployment");
        let deployments: Api<Deployment> = Api::namespaced(admin.clone(), &ns);
        let deployment = deployments
            .create(&post, &deployment)
            .await
            .expect("Deployment created");
        let mut rs = rs.clone();
        rs["metadata"]["ownerReferences"][0]["uid"] = json!(deployment.metadata.uid);
        let rs: ReplicaSet = serde_json::from_value(rs).expect("a ReplicaSet");
        let sets: Api<ReplicaSet> = Api::namespaced(admin.clone(), &ns);
        let rs = sets.create(&post, &rs).await.expect("ReplicaSet created");
        let name = rs.metadata.name.clone().unwrap_or_default();
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": format!("{name}-x7k2p"), "namespace": ns,
                "labels": template["metadata"]["labels"],
                "annotations": template["metadata"]["annotations"],
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": name,
                    "uid": rs.metadata.uid, "controller": true}]},
            "spec": template["spec"],
        }))
        .expect("a Pod");
        let pods: Api<Pod> = Api::namespaced(admin.clone(), &ns);
        pods.create(&post, &pod).await.expect("pod created");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_upgrade_audit_of_a_live_cluster_gives_the_dumps_rows() {
    let server = ApiServer::new("/tmp/kapi-23-upgrade");
    if !present(&server) {
        return;
    }
    let admin = client(&server.start_clean()).await;
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let read = |p: &str| std::fs::read_to_string(root.join(p)).expect(p);
    apply(&admin, &read("tests/e2e/crds.yaml")).await;
    apply(&admin, &read("manifests/audit/cluster-role.yaml")).await;
    apply(&admin, &crate::audit::binding()).await;
    let workloads = std::fs::read_to_string(fixture("workloads.yaml")).expect("workloads");
    let docs = crate::harness::yaml_docs(&workloads);
    create(&admin, &docs).await;
    let auditor = server.token_kubeconfig("auditor", AUDITOR_TOKEN);
    let auditor = auditor.display().to_string();
    let objects = fixture("objects.yaml").display().to_string();

    // Each pair of tags whose mutators differ, one after the other (the
    // CLI goldens hold every adjacent pair, those that change nothing too).
    for (from, to) in [
        ("v0.15.0", "v0.15.2"),
        ("v0.15.2", "v0.16.0"),
        ("v0.16.0", "v0.17.0"),
        ("v0.17.1", "v0.18.0"),
        ("v0.18.1", "v0.19.0"),
        ("v0.19.0", "v0.20.0"),
        ("v0.20.0", "head"),
    ] {
        let flags = ["--kserve-version", from, "--upgrade-to", to, "-o", "json"];
        let live = run(&[&["audit", "-A", "--kubeconfig", &auditor][..], &flags].concat());
        let dump = run(&[&["audit", "--objects", &objects][..], &flags].concat());
        let (live_report, dump_report) = (report(&live), report(&dump));
        assert_eq!(live.status.code(), dump.status.code(), "{from} → {to}");
        let kept: Vec<&Value> = (dump_report["pods"].as_array().expect("pods").iter())
            .filter(|p| p["namespace"] != LEFT_OUT)
            .collect();
        let live_pods: Vec<&Value> = live_report["pods"]
            .as_array()
            .expect("pods")
            .iter()
            .collect();
        assert_eq!(live_pods.len(), 21, "{from} → {to}: {live_report}");
        assert_eq!(live_pods, kept, "{from} → {to}");
        assert_eq!(
            live_report["config"], dump_report["config"],
            "{from} → {to}"
        );
        eprintln!("e2e upgrade {from} → {to}: {}", live_report["totals"]);
    }

    // Without --kserve-version: the ConfigMap's image tags name the release.
    let out = run(&[
        "audit",
        "-A",
        "--kubeconfig",
        &auditor,
        "--upgrade-to",
        "v0.18",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("which KServe release does the cluster run?"),
        "{err}"
    );
    let configs: Api<ConfigMap> = Api::namespaced(admin.clone(), "kserve");
    let stored = configs
        .get("inferenceservice-config")
        .await
        .expect("the ConfigMap");
    let mut data = stored.data.unwrap_or_default();
    for text in data.values_mut() {
        *text = text
            .replace("kserve/agent:latest", "kserve/agent:v0.17.0")
            .replace(
                "kserve/storage-initializer:latest",
                "kserve/storage-initializer:v0.17.0",
            );
    }
    let patch = Patch::Merge(json!({"data": data}));
    configs
        .patch("inferenceservice-config", &PatchParams::default(), &patch)
        .await
        .expect("the ConfigMap is patched");
    let out = run(&[
        "audit",
        "-A",
        "--kubeconfig",
        &auditor,
        "--upgrade-to",
        "v0.18",
        "-o",
        "json",
    ]);
    let found = report(&out);
    assert_eq!(found["from"], "v0.17.0", "{found}");
    let local = (found["pods"].as_array().expect("pods").iter())
        .find(|p| p["namespace"] == "local-model")
        .expect("the LocalModel pod");
    assert_eq!(local["status"], "changes");
    assert_eq!(local["changes"][0]["causes"]["rows"], json!(["17.1"]));
    assert_eq!(out.status.code(), Some(1));
    // Both releases read that one ConfigMap: only the LocalModel pod changes.
    let changed: Vec<&Value> = (found["pods"].as_array().expect("pods").iter())
        .filter(|p| p["status"] != "same")
        .map(|p| &p["namespace"])
        .collect();
    assert_eq!(changed, [&json!("local-model")], "{found}");
}
