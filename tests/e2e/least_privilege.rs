//! Least privilege on a real kube-apiserver (1.36 and 1.31): `serve` (the binary)
//! in namespaced mode (`--namespaces e2e`), reading the cluster as the
//! webhook's ServiceAccount under exactly the RBAC of
//! `manifests/components/namespaced` (the ClusterRole patched down to
//! ClusterStorageContainers, and its Role and RoleBinding in `e2e`).
//!
//! - a pod needing every credential kind is injected, at one GET per
//!   Secret, and a pod in another namespace is denied with the reason
//!   (`--outside-namespaces deny`) or admitted unchanged (`allow`);
//! - with every log target at TRACE (`--log trace`, JSON), the credential
//!   values planted in `least-privilege-objects.yaml` appear in no log
//!   line, metric, error or denial.

use crate::harness::*;
use crate::ports;
use crate::support::{self, admin_get, metric, Http};
use base64::Engine;
use k8s_openapi::api::core::v1::Secret;
use kube::api::ListParams;
use kube::Api;
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

const OBJECTS: &str = "tests/e2e/least-privilege-objects.yaml";
const PLANTED: &str = "PLANTED-7f3c9e";
const URI: &str = "internal.serving.kserve.io/storage-initializer-sourceuri";
const SECRET_GETS: &str = "kserve_injector_cluster_fallback_gets_total{kind=\"secrets\"}";

/// The marker in every form a leak could take: as planted, and base64 (as
/// the API server sends Secret data).
fn leaks(text: &str) -> Vec<String> {
    let encoded = base64::engine::general_purpose::STANDARD;
    let forms = [
        PLANTED.to_string(),
        encoded.encode(format!("{PLANTED}-s3")),
        encoded.encode(format!("hf_{PLANTED}")),
    ];
    (forms.into_iter())
        .filter(|f| text.contains(f.as_str()))
        .collect()
}

fn review(uid: &str, namespace: &str, sa: &str, annotations: Value) -> Vec<u8> {
    let pod = json!({
        "metadata": {"name": uid, "annotations": annotations,
                     "labels": {"serving.kserve.io/inferenceservice": "isvc",
                                "component": "predictor"}},
        "spec": {"serviceAccountName": sa, "containers": [
            {"name": "kserve-container", "image": "kserve/sklearnserver:v0.15.2"}]}
    });
    let review = json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": uid, "kind": {"group": "", "version": "v1", "kind": "Pod"},
                    "resource": {"group": "", "version": "v1", "resource": "pods"},
                    "namespace": namespace, "operation": "CREATE", "object": pod,
                    "userInfo": {"username": "system:serviceaccount:kube-system:replicaset-controller"}}
    });
    serde_json::to_vec(&review).expect("JSON")
}

/// Where the server under test answers, and the CA to trust it.
struct At<'a> {
    addr: std::net::SocketAddr,
    ca: &'a str,
}

/// The server's answer: (allowed, status code, message, decoded patch).
struct Answer {
    allowed: bool,
    code: u64,
    message: String,
    patch: String,
}

async fn admit(server: &At<'_>, body: Vec<u8>) -> Answer {
    let mut client = support::Client::open(server.addr, server.ca, Http::H1)
        .await
        .expect("a TLS connection");
    let (status, bytes) = client
        .post_json("/mutate-pods", body)
        .await
        .expect("an answer");
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&bytes));
    let answer: Value = serde_json::from_slice(&bytes).expect("an AdmissionReview");
    let response = &answer["response"];
    let patch = response["patch"].as_str().unwrap_or_default();
    let patch = base64::engine::general_purpose::STANDARD
        .decode(patch)
        .expect("base64");
    Answer {
        allowed: response["allowed"] == true,
        code: response["status"]["code"].as_u64().unwrap_or(200),
        message: response["status"]["message"]
            .as_str()
            .unwrap_or_default()
            .into(),
        patch: String::from_utf8(patch).expect("UTF-8"),
    }
}

/// `kserve-injector serve` as a child process logging every target at
/// TRACE, as JSON, to a file.
struct Serve {
    child: Child,
    admin: SocketAddr,
    addr: SocketAddr,
    ca: String,
    log: PathBuf,
}

impl Serve {
    async fn start(port: u16, flags: &[&str], dir: &Path) -> Self {
        let log = dir.join(format!("serve-{port}.log"));
        let ca_file = dir.join(format!("ca-{port}.crt"));
        let (addr, admin) = (
            SocketAddr::from(([127, 0, 0, 1], port)),
            SocketAddr::from(([127, 0, 0, 1], port + 1)),
        );
        let out = std::fs::File::create(&log).expect("a log file");
        let child = Command::new(env!("CARGO_BIN_EXE_kserve-injector"))
            .arg("serve")
            .args([
                "--addr",
                &addr.to_string(),
                "--admin-addr",
                &admin.to_string(),
            ])
            .arg("--self-signed-ca-file")
            .arg(&ca_file)
            .args(["--self-signed", "--shutdown-delay", "0s"])
            .args(["--log", "trace", "--log-format", "json"])
            .args(flags)
            .stdout(out.try_clone().expect("a log file"))
            .stderr(out)
            .spawn()
            .expect("serve starts");
        let mut serve = Self {
            child,
            admin,
            addr,
            ca: String::new(),
            log,
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        while !admin_get(admin, "/readyz")
            .await
            .is_ok_and(|(status, _)| status == 200)
        {
            if let Ok(Some(status)) = serve.child.try_wait() {
                panic!("serve exited ({status}): {}", serve.logs());
            }
            assert!(Instant::now() < deadline, "not ready in 60 s");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        serve.ca = std::fs::read_to_string(&ca_file).expect("the CA");
        serve
    }

    fn at(&self) -> At<'_> {
        At {
            addr: self.addr,
            ca: &self.ca,
        }
    }

    fn logs(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Stops it; its logs, complete.
    fn stop(mut self) -> String {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.logs()
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespaced_mode_and_no_credential_in_logs_on_1_36() {
    namespaced_mode(Kube::V1_36).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespaced_mode_and_no_credential_in_logs_on_1_31() {
    namespaced_mode(Kube::V1_31).await
}

async fn namespaced_mode(kube: Kube) {
    let server = ApiServer::on(kube, "/tmp/kapi-22-least-privilege");
    if !present(&server) {
        return;
    }
    let admin = client(&server.start_clean()).await;
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let read = |p: &str| std::fs::read_to_string(root.join(p)).expect(p);
    apply(&admin, &read("tests/e2e/crds.yaml")).await;
    apply(&admin, &read("manifests/rbac/cluster-role.yaml")).await;
    apply(&admin, &read(OBJECTS)).await;
    patch_cluster_role(&admin, "manifests/components/namespaced").await;
    let role = read("manifests/components/namespaced/role.yaml");
    apply(&admin, &role.replace("namespace: models", "namespace: e2e")).await;

    // The namespaced role: no Secret of another namespace, no listing.
    let kubeconfig = server.token_kubeconfig("injector", INJECTOR_TOKEN);
    let injector = client(&kubeconfig).await;
    let forbidden = |r: kube::Result<_>| matches!(r, Err(kube::Error::Api(s)) if s.code == 403);
    let elsewhere: Api<Secret> = Api::namespaced(injector.clone(), "elsewhere");
    assert!(forbidden(elsewhere.get("s3-creds").await.map(|_| ())));
    let here: Api<Secret> = Api::namespaced(injector.clone(), NS);
    assert!(forbidden(
        here.list(&ListParams::default()).await.map(|_| ())
    ));
    assert!(here.get("s3-creds").await.is_ok());

    let dir = tempfile::tempdir().expect("a temporary directory");
    let kubeconfig = kubeconfig.to_string_lossy().into_owned();
    let flags = [
        "--cluster-lookups",
        "on",
        "--kubeconfig",
        kubeconfig.as_str(),
        "--namespaces",
        NS,
        "--log-summary-interval",
        "1s",
    ];
    let serve = Serve::start(ports::reserve(2), &flags, dir.path()).await;
    let at = serve.at();
    let mut answers = Vec::new();

    // Every credential kind, from the ServiceAccount's seven Secrets: one
    // GET each, and none the second time.
    let s3 = json!({URI: "s3://bucket/model"});
    let all = admit(&at, review("all", NS, "sa-all", s3.clone())).await;
    assert!(all.allowed, "{}", all.message);
    for expected in ["s3-creds", "gcs-creds", "HF_TOKEN", "AZURE_CLIENT_SECRET"] {
        assert!(
            all.patch.contains(expected),
            "{expected} not in {}",
            all.patch
        );
    }
    assert!(all.patch.contains("MODELSCOPE_API_TOKEN") && all.patch.contains("hdfs-secrets"));
    let gets = support::metric_now(serve.admin, SECRET_GETS)
        .await
        .expect("metric");
    assert_eq!(gets, 7.0, "one GET per Secret the pod needs");
    let again = admit(&at, review("all-again", NS, "sa-all", s3.clone())).await;
    assert_eq!(again.patch, all.patch);
    let gets = support::metric_now(serve.admin, SECRET_GETS)
        .await
        .expect("metric");
    assert_eq!(gets, 7.0, "the second pod's Secrets came from memory");
    answers.push(all);

    // The storage-spec Secret, whose entry holds keys.
    let spec = json!({URI: "s3://bucket/model",
        "internal.serving.kserve.io/storage-spec": "true",
        "internal.serving.kserve.io/storage-spec-key": "mys3"});
    let stored = admit(&at, review("spec", NS, "sa-all", spec)).await;
    assert!(
        stored.allowed && stored.patch.contains("STORAGE_CONFIG"),
        "{}",
        stored.message
    );
    answers.push(stored);

    // A missing Secret: KServe's denial, naming it.
    let missing = admit(&at, review("missing", NS, "sa-missing", s3.clone())).await;
    assert!(
        !missing.allowed && missing.message.contains("does-not-exist"),
        "{}",
        missing.message
    );
    answers.push(missing);

    // A pod in a namespace not served: denied with the reason, no GET.
    let outside = admit(&at, review("outside", "elsewhere", "sa-all", s3.clone())).await;
    assert!(!outside.allowed);
    assert_eq!(outside.code, 403);
    assert!(
        outside.message.contains("--namespaces") && outside.message.contains("\"elsewhere\""),
        "{}",
        outside.message
    );
    let gets = support::metric_now(serve.admin, SECRET_GETS)
        .await
        .expect("metric");
    assert_eq!(gets, 9.0, "storage-config and does-not-exist: one GET each");
    answers.push(outside);

    let (_, metrics) = admin_get(serve.admin, "/metrics").await.expect("/metrics");
    assert!(metric(&metrics, SECRET_GETS).is_some());
    let logs = serve.stop();

    // --outside-namespaces allow: the same pod, admitted unchanged.
    let allow = [&flags[..], &["--outside-namespaces", "allow"]].concat();
    let serve_allow = Serve::start(ports::reserve(2), &allow, dir.path()).await;
    let at = serve_allow.at();
    let untouched = admit(&at, review("outside-allowed", "elsewhere", "sa-all", s3)).await;
    assert!(
        untouched.allowed && untouched.patch.is_empty(),
        "{}",
        untouched.patch
    );
    let (_, metrics_allow) = admin_get(serve_allow.admin, "/metrics")
        .await
        .expect("/metrics");
    let logs = [logs, serve_allow.stop()].concat();

    // The planted values: nowhere but in the API server.
    assert!(
        logs.contains("\"level\":\"TRACE\"") && logs.contains("cluster lookups on"),
        "the logs were not captured at TRACE"
    );
    // The Secret GETs themselves were traced (the client's request spans).
    assert!(
        logs.contains("/api/v1/namespaces/e2e/secrets/s3-creds"),
        "the client's requests are not in the logs"
    );
    assert_eq!(
        leaks(&logs),
        Vec::<String>::new(),
        "a credential in the logs"
    );
    assert!(
        !logs.contains("HEADER-PLANTED"),
        "the https headers in the logs"
    );
    for text in [&metrics, &metrics_allow] {
        assert_eq!(
            leaks(text),
            Vec::<String>::new(),
            "a credential in /metrics"
        );
    }
    for answer in &answers {
        assert_eq!(leaks(&answer.message), Vec::<String>::new());
        // The https headers are the one value KServe copies into the pod.
        let patch = answer.patch.replace("HEADER-PLANTED-7f3c9e", "");
        assert_eq!(leaks(&patch), Vec::<String>::new(), "{patch}");
    }
    assert!(answers[0].patch.contains("HEADER-PLANTED-7f3c9e"));
    eprintln!(
        "least privilege: {} log bytes at TRACE, no credential",
        logs.len()
    );
}
