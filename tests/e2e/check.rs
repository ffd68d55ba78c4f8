//! `kserve-injector check` against a real kube-apiserver (1.36 and 1.31): an install
//! made of the shipped manifests (the base's Deployment, Service,
//! ServiceAccount, PodDisruptionBudget, ClusterRole and webhook
//! configuration), whose webhook entry points by URL at a running `serve`
//! with the harness CA, passes every check; each broken variant fails with
//! its own line (and only the lines it breaks).
//!
//! This API server runs no controllers, so the Deployment's status stays
//! empty (0 ready replicas) until the test writes it through the status
//! subresource, as the Deployment controller would: the first run shows
//! what check says of that state. The base's PodDisruptionBudget is created
//! as it ships, policy/v1 (policy/v1beta1 is gone since 1.25).

use crate::harness::*;
use crate::ports;
use crate::webhook::Injector;
use base64::Engine;
use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const NAMESPACE: &str = "kserve";

fn read(path: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(path)).expect(path)
}

fn yaml(path: &str) -> Value {
    yaml_docs(&read(path)).remove(0)
}

/// `check`'s report as JSON, its text and its exit code.
struct Run {
    code: i32,
    text: String,
    failing: BTreeSet<String>,
    statuses: Vec<(String, String)>,
}

fn check(kubeconfig: &Path) -> Run {
    let run = |output: &str| {
        Command::new(env!("CARGO_BIN_EXE_kserve-injector"))
            .args([
                "check",
                "--namespace",
                NAMESPACE,
                "--probe-namespace",
                "default",
                "-o",
                output,
            ])
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .output()
            .expect("check runs")
    };
    let json_run = run("json");
    let text_run = run("table");
    let report: Value = serde_json::from_slice(&json_run.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}{}",
            String::from_utf8_lossy(&json_run.stdout),
            String::from_utf8_lossy(&json_run.stderr)
        )
    });
    let statuses: Vec<(String, String)> = (report["checks"].as_array().expect("checks").iter())
        .map(|c| {
            (
                c["id"].as_str().unwrap().to_string(),
                c["status"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let failing = statuses
        .iter()
        .filter(|(_, s)| s == "fail")
        .map(|(id, _)| id.clone())
        .collect();
    assert_eq!(json_run.status.code(), text_run.status.code());
    Run {
        code: json_run.status.code().unwrap_or(-1),
        text: String::from_utf8_lossy(&text_run.stdout).into_owned(),
        failing,
        statuses,
    }
}

/// Runs check until exactly `expected` fail (the API server picks a
/// changed webhook configuration up within a moment), and shows the output.
async fn expect_failing(what: &str, kubeconfig: &Path, expected: &[&str]) -> Run {
    let expected: BTreeSet<String> = expected.iter().map(|s| s.to_string()).collect();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let run = check(kubeconfig);
        if run.failing == expected || Instant::now() >= deadline {
            eprintln!("--- check, {what} (exit code {}):\n{}", run.code, run.text);
            assert_eq!(run.failing, expected, "{what}:\n{}", run.text);
            assert_eq!(run.code, if expected.is_empty() { 0 } else { 1 }, "{what}");
            return run;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

async fn apply_value(admin: &Client, value: &Value) {
    // JSON is YAML.
    apply(admin, &value.to_string()).await;
}

/// The base's objects, in namespace kserve, the webhook at `url` with the
/// harness CA.
async fn install(admin: &Client, pki: &Path, url: &str) {
    apply(
        admin,
        &format!("apiVersion: v1\nkind: Namespace\nmetadata: {{name: {NAMESPACE}}}\n"),
    )
    .await;
    for file in ["serviceaccount.yaml", "service.yaml"] {
        let mut doc = yaml(&format!("manifests/base/{file}"));
        doc["metadata"]["namespace"] = json!(NAMESPACE);
        apply_value(admin, &doc).await;
    }
    let mut pdb = yaml("manifests/base/pdb.yaml");
    pdb["metadata"]["namespace"] = json!(NAMESPACE);
    apply_value(admin, &pdb).await;
    let mut deployment = yaml("manifests/base/deployment.yaml");
    deployment["metadata"]["namespace"] = json!(NAMESPACE);
    apply_value(admin, &deployment).await;
    let b64 = |p: &str| {
        base64::engine::general_purpose::STANDARD.encode(std::fs::read(pki.join(p)).unwrap())
    };
    apply_value(admin, &json!({
        "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
        "metadata": {"name": "kserve-injector-serving-cert", "namespace": NAMESPACE},
        "data": {"tls.crt": b64("webhook.crt"), "tls.key": b64("webhook.key"), "ca.crt": b64("ca.crt")}
    }))
    .await;
    apply_value(admin, &config_map(&good_config())).await;
    apply_value(admin, &registration(url, &b64("ca.crt"))).await;
}

/// KServe's shipped ConfigMap with its images tagged as KServe's chart
/// renders them at HEAD.
fn good_config() -> serde_json::Map<String, Value> {
    let out = Command::new(env!("CARGO_BIN_EXE_kserve-injector"))
        .arg("default-config")
        .output()
        .unwrap();
    let doc: Value = yaml_docs(&String::from_utf8(out.stdout).unwrap()).remove(0);
    let mut data = doc["data"].as_object().unwrap().clone();
    for value in data.values_mut() {
        *value = json!(value.as_str().unwrap().replace(":latest", ":v0.20.0"));
    }
    data
}

fn config_map(data: &serde_json::Map<String, Value>) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": "inferenceservice-config", "namespace": NAMESPACE}, "data": data})
}

/// The base's webhook configuration, its clientConfig a URL.
fn registration(url: &str, ca: &str) -> Value {
    let mut hook = yaml("manifests/base/webhook.yaml");
    hook["webhooks"][0]["clientConfig"] = json!({"url": url, "caBundle": ca});
    hook
}

async fn edit_webhook(admin: &Client, edit: impl FnOnce(&mut Value)) {
    let api: Api<MutatingWebhookConfiguration> = Api::all(admin.clone());
    let current = api.get("kserve-injector").await.expect("our configuration");
    let mut value = serde_json::to_value(&current).unwrap();
    edit(&mut value["webhooks"][0]);
    let changed: MutatingWebhookConfiguration = serde_json::from_value(value).unwrap();
    api.replace("kserve-injector", &PostParams::default(), &changed)
        .await
        .expect("replaced");
}

/// Edits our Deployment's pod spec.
async fn edit_deployment(admin: &Client, edit: impl FnOnce(&mut Value)) {
    let api: Api<Deployment> = Api::namespaced(admin.clone(), NAMESPACE);
    let current = api.get("kserve-injector").await.expect("our Deployment");
    let mut value = serde_json::to_value(&current).unwrap();
    edit(&mut value["spec"]["template"]["spec"]);
    let changed: Deployment = serde_json::from_value(value).unwrap();
    api.replace("kserve-injector", &PostParams::default(), &changed)
        .await
        .expect("replaced");
}

/// What the Deployment controller would write once both pods are ready.
async fn set_ready(admin: &Client, ready: i32) {
    let api: Api<Deployment> = Api::namespaced(admin.clone(), NAMESPACE);
    let status = json!({"status": {"replicas": 2, "updatedReplicas": 2, "readyReplicas": ready,
                                   "availableReplicas": ready, "observedGeneration": 1}});
    api.patch_status(
        "kserve-injector",
        &PatchParams::default(),
        &Patch::Merge(&status),
    )
    .await
    .expect("the status is written");
}

fn kserve_mutator(url: &str, ca: &str) -> Value {
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "inferenceservice.serving.kserve.io"},
        "webhooks": [{
            "name": "inferenceservice.kserve-webhook-server.pod-mutator",
            "clientConfig": {"url": url, "caBundle": ca},
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}],
            "objectSelector": {"matchExpressions": [{"key": "serving.kserve.io/inferenceservice", "operator": "Exists"}]},
            "admissionReviewVersions": ["v1beta1"], "sideEffects": "None", "failurePolicy": "Fail",
            "reinvocationPolicy": "IfNeeded", "timeoutSeconds": 10
        }]
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_passes_a_good_install_and_names_each_broken_part_on_1_36() {
    check_install(Kube::V1_36).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_passes_a_good_install_and_names_each_broken_part_on_1_31() {
    check_install(Kube::V1_31).await
}

async fn check_install(kube: Kube) {
    let server = ApiServer::on(kube, "/tmp/kapi-check");
    if !present(&server) {
        return;
    }
    let started = Instant::now();
    let kubeconfig: PathBuf = server.start_clean();
    let admin = client(&kubeconfig).await;
    apply(&admin, &read("tests/e2e/crds.yaml")).await;
    apply(&admin, &read("manifests/rbac/cluster-role.yaml")).await;
    let pki = server.work_dir.join("pki");
    let (port, admin_port) = (ports::port(), ports::port());
    let mut injector = Injector::spawn(&server, port, admin_port, &[]);
    injector.ready().await;
    let url = format!("https://127.0.0.1:{port}/mutate-pods");
    install(&admin, &pki, &url).await;

    // As this API server leaves a Deployment: no controller, no ready replica.
    expect_failing(
        "the Deployment's status as a kube-apiserver without controllers leaves it",
        &kubeconfig,
        &["deployment.replicas"],
    )
    .await;
    set_ready(&admin, 2).await;
    let good = expect_failing("a good install", &kubeconfig, &[]).await;
    assert!(
        good.statuses.iter().all(|(_, s)| s == "pass"),
        "every check passes:\n{}",
        good.text
    );
    // What serve negotiates: TLS 1.3 by default, and TLS 1.2 (its default
    // minimum) when offered alone.
    let handshake = (good.text.lines()).find(|l| l.contains("webhook.handshake"));
    let handshake = handshake.unwrap_or_default();
    assert!(
        handshake.contains("TLSv1_3, TLS13_")
            && handshake.contains("offered TLS 1.2 alone: TLSv1_2, TLS_ECDHE_"),
        "{handshake}"
    );
    let ids: BTreeSet<&str> = good.statuses.iter().map(|(id, _)| id.as_str()).collect();
    for id in [
        "webhook.configuration",
        "webhook.failurePolicy",
        "webhook.sideEffects",
        "webhook.reinvocationPolicy",
        "webhook.timeoutSeconds",
        "webhook.namespaceSelector",
        "webhook.objectSelector",
        "webhook.rules",
        "webhook.caBundle",
        "certificate.names",
        "certificate.lifetime",
        "webhook.handshake",
        "deployment.replicas",
        "deployment.podDisruptionBudget",
        "config.inferenceservice-config",
        "deployment.kserveVersion",
        "kserve.podMutator",
        "rbac.lookups",
        "podSecurity.restricted",
        "cluster.imageVolume",
        "endToEnd.dryRun",
    ] {
        assert!(ids.contains(id), "no {id} line:\n{}", good.text);
    }
    let status = |run: &Run, id: &str| {
        let found = run.statuses.iter().find(|(i, _)| i == id);
        found.map(|(_, s)| s.clone()).unwrap_or_default()
    };

    // A namespace the webhook serves enforcing the restricted Pod Security
    // Standard, while serve runs with the baseline profile: a warning.
    let namespaces: Api<Namespace> = Api::all(admin.clone());
    let enforce = |value: Value| {
        json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": "models-restricted",
                     "labels": {"pod-security.kubernetes.io/enforce": value}}})
    };
    apply_value(&admin, &enforce(json!("restricted"))).await;
    let run = expect_failing("a restricted namespace", &kubeconfig, &[]).await;
    assert_eq!(
        status(&run, "podSecurity.restricted"),
        "warn",
        "{}",
        run.text
    );
    for part in ["models-restricted", "--security-profile restricted"] {
        assert!(run.text.contains(part), "{part}:\n{}", run.text);
    }
    let relabel = Patch::Merge(enforce(json!("baseline")));
    (namespaces
        .patch("models-restricted", &PatchParams::default(), &relabel)
        .await)
        .expect("relabelled");
    let run = expect_failing("the namespace baseline again", &kubeconfig, &[]).await;
    assert_eq!(
        status(&run, "podSecurity.restricted"),
        "pass",
        "{}",
        run.text
    );

    // serve's settings file gives the model volume an image source: on an API
    // server that drops image volumes (1.31, the gate off) check fails.
    let gate_on = std::env::var("E2E_APISERVER_ARGS").is_ok_and(|a| a.contains("ImageVolume=true"));
    let kept = kube == Kube::V1_36 || gate_on;
    apply_value(&admin, &json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "kserve-injector-settings", "namespace": NAMESPACE},
        "data": {"settings.yaml": "modelVolume:\n  image: {reference: registry.example.com/models/base:1}\n"}}))
    .await;
    edit_deployment(&admin, |spec| {
        let container = &mut spec["containers"][0];
        (container["args"].as_array_mut().unwrap())
            .push(json!("--config-file=/etc/kserve-injector/settings/settings.yaml"));
        (container["volumeMounts"].as_array_mut().unwrap()).push(
            json!({"name": "settings", "mountPath": "/etc/kserve-injector/settings", "readOnly": true}),
        );
        (spec["volumes"].as_array_mut().unwrap()).push(
            json!({"name": "settings", "configMap": {"name": "kserve-injector-settings"}}),
        );
    })
    .await;
    let expected: &[&str] = if kept { &[] } else { &["cluster.imageVolume"] };
    let run = expect_failing("an image model volume", &kubeconfig, expected).await;
    if !kept {
        assert!(run.text.contains("drops image volumes"), "{}", run.text);
    }
    edit_deployment(&admin, |spec| {
        spec["containers"][0]["args"].as_array_mut().unwrap().pop();
        spec["containers"][0]["volumeMounts"]
            .as_array_mut()
            .unwrap()
            .pop();
        spec["volumes"].as_array_mut().unwrap().pop();
    })
    .await;
    expect_failing("the settings file gone", &kubeconfig, &[]).await;

    // No webhook configuration.
    let configs: Api<MutatingWebhookConfiguration> = Api::all(admin.clone());
    configs
        .delete("kserve-injector", &DeleteParams::default())
        .await
        .expect("deleted");
    let run = expect_failing(
        "no webhook configuration",
        &kubeconfig,
        &["webhook.configuration"],
    )
    .await;
    assert!(
        run.statuses
            .contains(&("endToEnd.dryRun".into(), "skip".into())),
        "{}",
        run.text
    );
    let b64 = |bytes: &[u8]| base64::engine::general_purpose::STANDARD.encode(bytes);
    let ca = b64(&std::fs::read(pki.join("ca.crt")).unwrap());
    apply_value(&admin, &registration(&url, &ca)).await;
    expect_failing("the configuration back", &kubeconfig, &[]).await;

    // A caBundle from another CA.
    let validity = kserve_injector::certs::Validity::from(time::OffsetDateTime::now_utc(), 30);
    let other = kserve_injector::certs::Authority::generate("another CA", validity).unwrap();
    let other_ca = b64(other.cert_pem().as_bytes());
    edit_webhook(&admin, |h| h["clientConfig"]["caBundle"] = json!(other_ca)).await;
    let run = expect_failing(
        "a caBundle from another CA",
        &kubeconfig,
        &["webhook.caBundle", "webhook.handshake", "endToEnd.dryRun"],
    )
    .await;
    assert!(
        run.text
            .contains("x509: certificate signed by unknown authority"),
        "{}",
        run.text
    );
    edit_webhook(&admin, |h| h["clientConfig"]["caBundle"] = json!(ca)).await;
    expect_failing("the caBundle back", &kubeconfig, &[]).await;

    // failurePolicy Ignore where Fail is expected.
    edit_webhook(&admin, |h| h["failurePolicy"] = json!("Ignore")).await;
    expect_failing(
        "failurePolicy Ignore",
        &kubeconfig,
        &["webhook.failurePolicy"],
    )
    .await;
    edit_webhook(&admin, |h| h["failurePolicy"] = json!("Fail")).await;

    // A namespaceSelector that does not exclude our namespace.
    edit_webhook(&admin, |h| {
        h["namespaceSelector"] = json!({"matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system"]}]})
    })
    .await;
    let run = expect_failing(
        "a namespaceSelector without our namespace",
        &kubeconfig,
        &["webhook.namespaceSelector"],
    )
    .await;
    assert!(run.text.contains("selects kserve:"), "{}", run.text);
    let shipped = yaml("manifests/base/webhook.yaml")["webhooks"][0]["namespaceSelector"].clone();
    edit_webhook(&admin, |h| h["namespaceSelector"] = shipped).await;
    expect_failing("the namespaceSelector back", &kubeconfig, &[]).await;

    // KServe's pod mutator still injecting beside ours (it calls the same
    // serve, which injects the same containers once).
    apply_value(&admin, &kserve_mutator(&url, &ca)).await;
    let run = expect_failing(
        "KServe's pod mutator beside ours",
        &kubeconfig,
        &["kserve.podMutator"],
    )
    .await;
    assert!(
        run.statuses
            .contains(&("endToEnd.dryRun".into(), "pass".into())),
        "{}",
        run.text
    );
    configs
        .delete(
            "inferenceservice.serving.kserve.io",
            &DeleteParams::default(),
        )
        .await
        .expect("deleted");

    // A ConfigMap the release cannot parse.
    let maps: Api<ConfigMap> = Api::namespaced(admin.clone(), NAMESPACE);
    let mut broken = good_config();
    broken.insert(
        "storageInitializer".into(),
        json!("{\"image\": \"kserve/storage-initializer:v0.20.0\", \"memoryRequest\": "),
    );
    maps.patch(
        "inferenceservice-config",
        &PatchParams::default(),
        &Patch::Merge(&json!({"data": broken})),
    )
    .await
    .unwrap();
    let run = expect_failing(
        "a ConfigMap the release cannot parse",
        &kubeconfig,
        &["config.inferenceservice-config"],
    )
    .await;
    assert!(
        run.statuses
            .contains(&("deployment.kserveVersion".into(), "skip".into())),
        "{}",
        run.text
    );
    maps.patch(
        "inferenceservice-config",
        &PatchParams::default(),
        &Patch::Merge(&json!({"data": good_config()})),
    )
    .await
    .unwrap();
    expect_failing("the ConfigMap back", &kubeconfig, &[]).await;

    // serve stopped: the dry run fails and says why.
    drop(injector);
    let run = expect_failing("serve stopped", &kubeconfig, &["endToEnd.dryRun"]).await;
    assert!(run.text.contains("connection refused"), "{}", run.text);
    assert!(
        run.statuses
            .contains(&("webhook.handshake".into(), "warn".into())),
        "{}",
        run.text
    );
    eprintln!("check e2e: {:.1} s", started.elapsed().as_secs_f64());
}
