//! `kserve-injector serve` as the API server's webhook, end to end: a real
//! kube-apiserver (1.36 and 1.31) + etcd on loopback calls the binary, registered as
//! KServe registers its pod mutator (`reinvocationPolicy: IfNeeded`, the
//! InferenceService object selector, AdmissionReview v1beta1), followed by a
//! second webhook that adds a sidecar, so every pod is reinvoked. The binary
//! reads the cluster as the webhook's ServiceAccount (a token user) under
//! the shipped ClusterRole only. Each stored pod is checked field by field.
//!
//! Without the kube-apiserver binaries the test says how to build them and
//! passes as skipped, except under `CI=true`, where it fails.

use crate::harness::*;
use crate::ports;
use crate::sidecar_webhook::{self, SIDECAR};
use crate::support::{admin_get, metric};
use base64::Engine;
use k8s_openapi::api::core::v1::{Container, EnvVar, Pod, Secret};
use kube::api::{Patch, PatchParams, PostParams};
use kube::Api;
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub(crate) const OBJECTS: &str = "tests/e2e/webhook-objects.yaml";
const WEBHOOK: &str = "inferenceservice.kserve-webhook-server.pod-mutator";
const FALLBACK_SECRETS: &str = "kserve_injector_cluster_fallback_gets_total{kind=\"secrets\"}";
const WATCH_ERRORS: &str = "kserve_injector_cluster_watch_errors_total{kind=\"serviceaccounts\"}";
/// The `--secret-ttl` of the webhook under test: short, so a changed Secret
/// is seen within the test.
const SECRET_TTL: &str = "3s";

/// The binary under test, as a child process on ports the test chose.
pub(crate) struct Injector {
    child: Child,
    admin: SocketAddr,
    log: PathBuf,
}

impl Injector {
    pub(crate) fn spawn(server: &ApiServer, port: u16, admin: u16, extra: &[&str]) -> Self {
        let pki = server.work_dir.join("pki");
        let kubeconfig = server.token_kubeconfig("injector", INJECTOR_TOKEN);
        let log = std::env::temp_dir().join(format!("e2e-webhook-injector-{port}.log"));
        let out = std::fs::File::create(&log).expect("log file");
        let child = Command::new(env!("CARGO_BIN_EXE_kserve-injector"))
            .arg("serve")
            .args(["--addr", &format!("127.0.0.1:{port}")])
            .args(["--admin-addr", &format!("127.0.0.1:{admin}")])
            .arg("--tls-cert-file")
            .arg(pki.join("webhook.crt"))
            .arg("--tls-key-file")
            .arg(pki.join("webhook.key"))
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(["--cluster-lookups", "on", "--shutdown-delay", "0s"])
            .args(["--log-format", "text", "--log", "kserve_injector=debug"])
            .args(extra)
            // The logs are written to stdout; stderr has what comes before them.
            .stdout(out.try_clone().expect("log file handle"))
            .stderr(out)
            .spawn()
            .expect("kserve-injector starts");
        let admin = SocketAddr::from(([127, 0, 0, 1], admin));
        Self { child, admin, log }
    }

    /// Waits for `/readyz` 200: listening, and every watch cache listed once.
    pub(crate) async fn ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok((status, _)) = admin_get(self.admin, "/readyz").await {
                if status == 200 {
                    return;
                }
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("kserve-injector exited ({status}):\n{}", self.log_text());
            }
            assert!(
                Instant::now() < deadline,
                "not ready in 60 s:\n{}",
                self.log_text()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub(crate) async fn metric(&self, series: &str) -> f64 {
        let (_, text) = admin_get(self.admin, "/metrics").await.expect("/metrics");
        metric(&text, series).unwrap_or_else(|| panic!("no {series} in\n{text}"))
    }

    pub(crate) fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Injector {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            let text = self.log_text();
            let tail: Vec<&str> = text.lines().rev().take(40).collect();
            eprintln!("--- kserve-injector log (last lines)");
            for line in tail.iter().rev() {
                eprintln!("{line}");
            }
        }
        let _ = std::fs::remove_file(&self.log);
    }
}

pub(crate) fn registration(port: u16, sidecar: SocketAddr, ca: &[u8]) -> String {
    let ca = base64::engine::general_purpose::STANDARD.encode(ca);
    let rules =
        r#"[{apiGroups: [""], apiVersions: ["v1"], operations: ["CREATE"], resources: ["pods"]}]"#;
    format!(
        r#"apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {{name: e2e-webhooks}}
webhooks:
- name: {WEBHOOK}
  clientConfig: {{url: "https://127.0.0.1:{port}/mutate-pods", caBundle: "{ca}"}}
  rules: {rules}
  objectSelector: {{matchExpressions: [{{key: serving.kserve.io/inferenceservice, operator: Exists}}]}}
  namespaceSelector: {{matchExpressions: [{{key: control-plane, operator: DoesNotExist}}]}}
  admissionReviewVersions: ["v1beta1"]
  sideEffects: None
  failurePolicy: Fail
  reinvocationPolicy: IfNeeded
  timeoutSeconds: 10
- name: sidecar.e2e.example.com
  clientConfig: {{url: "https://{sidecar}/", caBundle: "{ca}"}}
  rules: {rules}
  admissionReviewVersions: ["v1"]
  sideEffects: None
  failurePolicy: Fail
  timeoutSeconds: 10
"#
    )
}

pub(crate) fn pod(name: &str, sa: &str, isvc: &str, annotations: &[(&str, &str)]) -> Pod {
    let annotations: serde_json::Map<String, Value> = (annotations.iter())
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect();
    serde_json::from_value(json!({
        "metadata": {"name": name, "annotations": annotations,
                     "labels": {"serving.kserve.io/inferenceservice": isvc,
                                "component": "predictor", "endpoint": "default"}},
        "spec": {"serviceAccountName": sa, "containers": [
            {"name": "kserve-container", "image": "kserve/sklearnserver:v0.15.2",
             "ports": [{"containerPort": 8080, "protocol": "TCP"}]}]}
    }))
    .expect("a valid pod")
}

pub(crate) const URI: &str = "internal.serving.kserve.io/storage-initializer-sourceuri";
const PROFILE: &str = "kserve-injector.io/security-profile";

fn init_container(pod: &Pod) -> &Container {
    let inits = pod.spec.as_ref().and_then(|s| s.init_containers.as_ref());
    let inits = inits.expect("init containers");
    assert_eq!(inits.len(), 1, "exactly one init container: {inits:?}");
    &inits[0]
}

fn container<'p>(pod: &'p Pod, name: &str) -> &'p Container {
    let containers = &pod.spec.as_ref().expect("spec").containers;
    let found: Vec<&Container> = containers.iter().filter(|c| c.name == name).collect();
    assert_eq!(found.len(), 1, "one container {name}: {containers:?}");
    found[0]
}

fn env<'c>(c: &'c Container, name: &str) -> &'c EnvVar {
    let vars = c.env.iter().flatten();
    let found: Vec<&EnvVar> = vars.filter(|v| v.name == name).collect();
    assert_eq!(found.len(), 1, "one env {name} in {}: {:?}", c.name, c.env);
    found[0]
}

fn secret_ref(var: &EnvVar) -> (String, String) {
    let r = (var.value_from.as_ref())
        .and_then(|f| f.secret_key_ref.as_ref())
        .unwrap_or_else(|| panic!("{} is not a secretKeyRef: {var:?}", var.name));
    (r.name.clone(), r.key.clone())
}

fn value(var: &EnvVar) -> &str {
    var.value.as_deref().unwrap_or_default()
}

fn volume_names(pod: &Pod) -> Vec<String> {
    let volumes = pod.spec.as_ref().and_then(|s| s.volumes.as_ref());
    volumes
        .into_iter()
        .flatten()
        .map(|v| v.name.clone())
        .collect()
}

/// The S3 pod of the vectors: credentials of `sa-s3`, the model mount, the
/// sidecar once, and exactly one of each injected entry after reinvocation.
fn check_s3(pod: &Pod, endpoint: &str) {
    assert_eq!(pod.metadata.namespace.as_deref(), Some(NS));
    let init = init_container(pod);
    assert_eq!(init.name, "storage-initializer");
    let args = init.args.clone().unwrap_or_default();
    assert_eq!(args, ["s3://bucket/model", "/mnt/models"]);
    let key_id = secret_ref(env(init, "AWS_ACCESS_KEY_ID"));
    assert_eq!(key_id, ("s3-creds".into(), "AWS_ACCESS_KEY_ID".into()));
    let secret = secret_ref(env(init, "AWS_SECRET_ACCESS_KEY"));
    assert_eq!(secret, ("s3-creds".into(), "AWS_SECRET_ACCESS_KEY".into()));
    assert_eq!(value(env(init, "S3_ENDPOINT")), endpoint);
    let url = format!("https://{endpoint}");
    assert_eq!(value(env(init, "AWS_ENDPOINT_URL")), url);
    assert_eq!(value(env(init, "HF_HUB_ENABLE_HF_TRANSFER")), "1");
    assert_eq!(volume_names(pod), ["kserve-provision-location"]);
    let server = container(pod, "kserve-container");
    let mounts = server.volume_mounts.clone().unwrap_or_default();
    assert_eq!(mounts.len(), 1, "{mounts:?}");
    assert_eq!(
        (
            mounts[0].name.as_str(),
            mounts[0].mount_path.as_str(),
            mounts[0].read_only
        ),
        ("kserve-provision-location", "/mnt/models", Some(true))
    );
    container(pod, SIDECAR);
}

/// The audit log records, per webhook call, `round_R_index_I`: round 1 for
/// our webhook (index 0) means the API server reinvoked it on this pod.
pub(crate) fn reinvoked(server: &ApiServer, pod: &str) -> bool {
    let audit = server.work_dir.join("logs/audit.log");
    let text = std::fs::read_to_string(audit).unwrap_or_default();
    text.lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|e| e["objectRef"]["name"] == pod && e["verb"] == "create")
        .any(|e| {
            let round = &e["annotations"]["mutation.webhook.admission.k8s.io/round_1_index_0"];
            round.as_str().is_some_and(|r| r.contains(WEBHOOK))
        })
}

/// Creates `pod`; a webhook's denial is returned at once, anything else
/// (the API server restarting, a webhook not reachable yet) is retried
/// until `patience` has passed.
pub(crate) async fn create(pods: &Api<Pod>, pod: &Pod, patience: Duration) -> Result<Pod, String> {
    let deadline = Instant::now() + patience;
    loop {
        match pods.create(&PostParams::default(), pod).await {
            Ok(stored) => return Ok(stored),
            Err(kube::Error::Api(s)) if s.message.contains("denied the request") => {
                return Err(s.message)
            }
            Err(e) if Instant::now() >= deadline => return Err(e.to_string()),
            Err(_) => tokio::time::sleep(Duration::from_millis(250)).await,
        }
    }
}

/// Creates S3 pods (`<prefix>-1`, `-2`, …) until one is stored with the
/// S3 endpoint `endpoint`, within `seconds`: the caches have caught up.
async fn s3_pod_with_endpoint(pods: &Api<Pod>, prefix: &str, endpoint: &str, seconds: u64) -> Pod {
    let mut attempt = 0;
    let what = format!("a new pod gets the S3 endpoint {endpoint}");
    eventually(&what, Duration::from_secs(seconds), || {
        attempt += 1;
        let name = format!("{prefix}-{attempt}");
        async move {
            let p = pod(&name, "sa-s3", "isvc", &[(URI, "s3://bucket/model")]);
            let stored = create(pods, &p, Duration::from_secs(5)).await.ok()?;
            let got = value(env(init_container(&stored), "S3_ENDPOINT")).to_string();
            (got == endpoint).then_some(stored)
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_server_calls_the_webhook_and_stores_injected_pods_on_1_36() {
    calls_the_webhook(Kube::V1_36).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_server_calls_the_webhook_and_stores_injected_pods_on_1_31() {
    calls_the_webhook(Kube::V1_31).await
}

async fn calls_the_webhook(kube: Kube) {
    let server = ApiServer::on(kube, "/tmp/kapi-webhook");
    if !present(&server) {
        return;
    }
    let started = Instant::now();
    let admin = client(&server.start_clean()).await;
    apply_cluster(&admin, OBJECTS).await;
    let pki = server.work_dir.join("pki");
    let sidecar = sidecar_webhook::start(&pki.join("webhook.crt"), &pki.join("webhook.key")).await;
    let (port, admin_port) = (ports::port(), ports::port());
    let mut injector = Injector::spawn(&server, port, admin_port, &["--secret-ttl", SECRET_TTL]);
    injector.ready().await;
    let ca = std::fs::read(pki.join("ca.crt")).expect("the harness CA");
    apply(&admin, &registration(port, sidecar, &ca)).await;
    let pods: Api<Pod> = Api::namespaced(admin.clone(), NS);
    let patience = Duration::from_secs(30);

    // S3 credentials through the ServiceAccount, with a reinvocation.
    let stored = create(
        &pods,
        &pod("s3", "sa-s3", "isvc", &[(URI, "s3://bucket/model")]),
        patience,
    )
    .await
    .expect("the S3 pod is admitted");
    check_s3(&stored, "s3.example.com");
    assert!(
        reinvoked(&server, "s3"),
        "the audit log shows no reinvocation"
    );
    // Cold: one GET for the one Secret the pod needs; the reinvocation
    // read it from memory.
    assert_eq!(injector.metric(FALLBACK_SECRETS).await, 1.0);

    // GCS: a secret volume, its mount and the credentials path.
    let stored = create(
        &pods,
        &pod("gcs", "sa-gcs", "isvc", &[(URI, "gs://bucket/model")]),
        patience,
    )
    .await
    .expect("the GCS pod is admitted");
    let init = init_container(&stored);
    assert_eq!(
        value(env(init, "GOOGLE_APPLICATION_CREDENTIALS")),
        "/var/secrets/gcloud-application-credentials.json"
    );
    let mounts = init.volume_mounts.clone().unwrap_or_default();
    assert!(mounts.iter().any(|m| m.name == "user-gcp-sa"
        && m.mount_path == "/var/secrets/"
        && m.read_only == Some(true)));
    assert_eq!(
        volume_names(&stored),
        ["kserve-provision-location", "user-gcp-sa"]
    );
    let volumes = stored
        .spec
        .as_ref()
        .and_then(|s| s.volumes.clone())
        .unwrap_or_default();
    let gcs = volumes[1]
        .secret
        .as_ref()
        .and_then(|s| s.secret_name.as_deref());
    assert_eq!(gcs, Some("gcs-creds"));
    assert_eq!(injector.metric(FALLBACK_SECRETS).await, 2.0);

    // Hugging Face: the token by reference.
    let stored = create(
        &pods,
        &pod("hf", "sa-hf", "isvc", &[(URI, "hf://org/model")]),
        patience,
    )
    .await
    .expect("the HF pod is admitted");
    let token = secret_ref(env(init_container(&stored), "HF_TOKEN"));
    assert_eq!(token, ("hf-creds".into(), "HF_TOKEN".into()));
    assert_eq!(injector.metric(FALLBACK_SECRETS).await, 3.0);

    // A ClusterStorageContainer chosen by URI prefix.
    let stored = create(
        &pods,
        &pod("csc", "default", "isvc", &[(URI, "custom://model")]),
        patience,
    )
    .await
    .expect("the CSC pod is admitted");
    let init = init_container(&stored);
    assert_eq!(
        init.image.as_deref(),
        Some("example.com/custom-initializer:1")
    );
    let limits = init
        .resources
        .as_ref()
        .and_then(|r| r.limits.clone())
        .unwrap_or_default();
    assert_eq!(limits["memory"].0, "1Gi");

    // Logger storage from the InferenceService, with logger-sa's credentials.
    let logger = [("internal.serving.kserve.io/logger", "true")];
    let stored = create(
        &pods,
        &pod("logger", "default", "isvc-logger", &logger),
        patience,
    )
    .await
    .expect("the logger pod is admitted");
    let agent = container(&stored, "agent");
    let args = agent.args.clone().unwrap_or_default().join(" ");
    assert!(
        args.contains("--log-store-path s3://logs/isvc --log-store-format json"),
        "{args}"
    );
    let creds = secret_ref(env(agent, "AWS_ACCESS_KEY_ID"));
    assert_eq!(creds, ("logger-creds".into(), "AWS_ACCESS_KEY_ID".into()));
    assert_eq!(value(env(agent, "S3_ENDPOINT")), "logs:9000");

    // A Secret the ServiceAccount lists does not exist: denied, KServe's message.
    let missing = pod(
        "missing",
        "sa-missing",
        "isvc",
        &[(URI, "s3://bucket/model")],
    );
    let denied = create(&pods, &missing, patience).await.expect_err("denied");
    assert!(
        denied.contains(r#"secrets "does-not-exist" not found"#),
        "{denied}"
    );

    // A denial quoting a 250,000-character annotation: the API server hands
    // KServe's message to the client whole (it cuts only warnings), while
    // no line of the webhook's log holds more than 1,024 bytes of it.
    let long = format!("strict-{}", "x".repeat(249_993));
    let quoting = pod(
        "long-annotation",
        "sa-s3",
        "isvc",
        &[(URI, "s3://bucket/model"), (PROFILE, &long)],
    );
    let denied = create(&pods, &quoting, patience).await.expect_err("denied");
    assert!(
        denied.contains(&long)
            && denied.ends_with("is not a security profile (expected baseline or restricted)"),
        "the denial through the API server: {} bytes: {:.500}",
        denied.len(),
        denied
    );
    let log = injector.log_text();
    let longest = log.lines().map(str::len).max().unwrap_or_default();
    eprintln!(
        "e2e webhook: a {}-byte denial through the API server; the webhook's longest log line {longest} bytes",
        denied.len()
    );
    assert!(longest < 8 * 1024, "a log line of {longest} bytes");

    // `mutate --kubeconfig` reads the same objects with direct GETs, as the
    // webhook's identity, and gives the pod the webhook gave.
    let offline = pod("offline", "sa-s3", "isvc", &[(URI, "s3://bucket/model")]);
    let mut input = serde_json::to_value(&offline).expect("a pod as JSON");
    input["metadata"]["namespace"] = json!(NS);
    let kubeconfig = server.token_kubeconfig("injector", INJECTOR_TOKEN);
    let out = Command::new(env!("CARGO_BIN_EXE_kserve-injector"))
        .args(["mutate", "-o", "json", "--kubeconfig"])
        .arg(&kubeconfig)
        .arg("-")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child
                .stdin
                .take()
                .expect("stdin")
                .write_all(input.to_string().as_bytes())?;
            child.wait_with_output()
        })
        .expect("mutate runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "mutate --kubeconfig: {stderr}");
    let mut mutated: Pod = serde_json::from_slice(&out.stdout).expect("a pod");
    mutated
        .spec
        .as_mut()
        .expect("spec")
        .containers
        .push(Container {
            name: SIDECAR.into(),
            ..Container::default()
        });
    check_s3(&mutated, "s3.example.com");

    // A Secret updated between two pods reaches a pod created after the
    // TTL, read again with a GET.
    let gets_before = injector.metric(FALLBACK_SECRETS).await;
    let changed = Instant::now();
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), NS);
    let update =
        json!({"metadata": {"annotations": {"serving.kserve.io/s3-endpoint": "s3-2.example.com"}}});
    secrets
        .patch("s3-creds", &PatchParams::default(), &Patch::Merge(&update))
        .await
        .expect("the Secret is updated");
    let updated = s3_pod_with_endpoint(&pods, "s3-updated", "s3-2.example.com", 15).await;
    check_s3(&updated, "s3-2.example.com");
    eprintln!(
        "the changed Secret reached a pod after {:?}",
        changed.elapsed()
    );
    assert!(
        injector.metric(FALLBACK_SECRETS).await > gets_before,
        "the Secret was not read again"
    );

    // The API server restarts under the running webhook. start.sh begins
    // with an empty etcd, so the objects are created again (s3-creds with its
    // first endpoint): the caches must relist and follow what it holds now.
    let restart = Instant::now();
    let watch_errors = injector.metric(WATCH_ERRORS).await;
    server.script(&["stop.sh"]);
    server.start();
    apply_cluster(&admin, OBJECTS).await;
    apply(&admin, &registration(port, sidecar, &ca)).await;
    let stored = s3_pod_with_endpoint(&pods, "after-restart", "s3.example.com", 90).await;
    check_s3(&stored, "s3.example.com");
    assert!(
        injector.metric(WATCH_ERRORS).await > watch_errors,
        "no watch error seen"
    );
    let recovered = restart.elapsed();

    // The opt-in Secret watch: the role as components/watch-secrets patches
    // it, `secrets` in --watch-kinds; every Secret then comes from the watch,
    // with no GET, and the pod is the same.
    drop(injector);
    patch_cluster_role(&admin, "manifests/components/watch-secrets").await;
    let mut watching = Injector::spawn(
        &server,
        port,
        admin_port,
        &[
            "--watch-kinds",
            "serviceaccounts,secrets,clusterstoragecontainers,inferenceservices",
        ],
    );
    watching.ready().await;
    let p = pod("watched", "sa-s3", "isvc", &[(URI, "s3://bucket/model")]);
    let stored = create(&pods, &p, patience)
        .await
        .expect("admitted from the watch");
    check_s3(&stored, "s3.example.com");
    assert_eq!(watching.metric(FALLBACK_SECRETS).await, 0.0);
    eprintln!(
        "e2e webhook: total {:?}, API server restart and recovery {recovered:?}",
        started.elapsed()
    );
}
