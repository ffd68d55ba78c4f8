//! `kserve-injector policy` on kube-apiserver 1.36 with no webhook at all:
//! the generated MutatingAdmissionPolicy and its binding applied as
//! written, every fixture pod (`fixtures/*/input.yaml`) and 400 generated
//! pods created through the API server, each compared field for field
//! (after the API server's defaulting) with two pods created before the
//! policy existed: the pod as it is, and what `kserve-injector mutate`
//! prints for it. A pod the policy changed must equal mutate's; every other
//! pod must equal itself as created without the policy. The share is the
//! count of pods the policy changed, printed for each config: KServe
//! HEAD's shipped one, and one with both metrics switches on (whose policy
//! sends queue-proxy pods to the webhook).

use crate::harness::*;
use kube::api::{ApiResource, DynamicObject, PostParams};
use kube::{Api, Client};
use serde_json::{json, Value};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

const POLICY_NS: &str = "e2e-policy";
const ISVC: &str = "serving.kserve.io/inferenceservice";
const AGGREGATION: &str = "serving.kserve.io/enable-metric-aggregation";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The binary with `args`, `stdin` written to it: (exit code, stdout).
fn run(args: &[&str], stdin: &[u8]) -> (Option<i32>, Vec<u8>, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_kserve-injector"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary starts");
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    (out.status.code(), out.stdout, stderr)
}

/// Every Pod of `fixtures/*/input.yaml`, named after its case.
fn fixture_pods() -> Vec<(String, Value)> {
    let mut cases: Vec<PathBuf> = std::fs::read_dir(root().join("fixtures"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("input.yaml").is_file())
        .collect();
    cases.sort();
    let mut pods = Vec::new();
    for case in cases {
        let text = std::fs::read_to_string(case.join("input.yaml")).unwrap();
        let Ok(docs) = kserve_injector_core::reader::documents(&mut text.as_bytes())
            .and_then(|d| d.collect::<Result<Vec<_>, _>>())
        else {
            continue;
        };
        let name = case.file_name().unwrap().to_string_lossy().to_string();
        for (i, doc) in docs.into_iter().enumerate() {
            if doc["kind"] == "Pod" {
                pods.push((format!("{name}#{i}"), doc));
            }
        }
    }
    pods
}

/// A small deterministic generator (an LCG): InferenceService pods, most
/// with only annotations no rule reads, some with a trigger, queue-proxy
/// or an init container the injectors look for, some without the label.
fn generated_pods(count: usize) -> Vec<(String, Value)> {
    let mut state: u64 = 0x005e_ed62;
    let mut next = move |n: u64| {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 33) % n
    };
    let quiet = [
        "example.com/team",
        "prometheus.io/port",
        "prometheus.io/path",
        "autoscaling.knative.dev/class",
        "serving.knative.dev/creator",
    ];
    let triggers = [
        AGGREGATION,
        "serving.kserve.io/enable-prometheus-scraping",
        "prometheus.kserve.io/port",
        "internal.serving.kserve.io/logger",
        "serving.kserve.io/gke-accelerator",
        "sidecar.istio.io/status",
        "kserve-injector.io/security-profile",
    ];
    let values = ["true", "false", "9000", "/stats", "x", ""];
    let others = ["transformer-container", "worker-container", "agent", "user"];
    let inits = [
        "storage-initializer",
        "istio-init",
        "setup",
        "modelcar-init",
    ];
    (0..count)
        .map(|i| {
            let mut annotations = serde_json::Map::new();
            for _ in 0..next(4) {
                let key = if next(5) == 0 {
                    triggers[next(triggers.len() as u64) as usize]
                } else {
                    quiet[next(quiet.len() as u64) as usize]
                };
                let value = values[next(values.len() as u64) as usize];
                annotations.insert(key.into(), value.into());
            }
            let mut containers = vec![json!({"name": "kserve-container", "image": "model"})];
            if next(2) == 0 {
                containers.push(json!({"name": "queue-proxy", "image": "qp",
                    "ports": [{"name": "http-usermetric", "containerPort": 9091, "protocol": "TCP"}],
                    "env": [{"name": "SERVING_PORT", "value": "8012"}]}));
            }
            if next(5) == 0 {
                containers.push(json!({"name": others[next(others.len() as u64) as usize], "image": "o"}));
            }
            let mut pod = json!({
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"labels": {}},
                "spec": {"containers": containers}
            });
            if next(8) != 0 {
                pod["metadata"]["labels"][ISVC] = json!(format!("gen-{i}"));
            }
            if !annotations.is_empty() || next(3) == 0 {
                pod["metadata"]["annotations"] = Value::Object(annotations);
            }
            if next(7) == 0 {
                let name = inits[next(inits.len() as u64) as usize];
                pod["spec"]["initContainers"] = json!([{"name": name, "image": "i"}]);
            }
            (format!("generated-{i}"), pod)
        })
        .collect()
}

/// The pod as this test creates it: in its namespace, without the name it
/// had and what only the API server writes, every container with an
/// image (hand-written fixtures leave it out; the API server requires it).
fn creatable(mut pod: Value) -> Value {
    let meta = pod["metadata"].as_object_mut().cloned().unwrap_or_default();
    let mut meta: serde_json::Map<String, Value> = meta
        .into_iter()
        .filter(|(k, _)| matches!(k.as_str(), "labels" | "annotations"))
        .collect();
    meta.insert("namespace".into(), json!(POLICY_NS));
    pod["metadata"] = Value::Object(meta);
    if let Some(obj) = pod.as_object_mut() {
        obj.remove("status");
    }
    for list in ["containers", "initContainers"] {
        if let Some(items) = pod["spec"][list].as_array_mut() {
            for c in items {
                if c.get("image").is_none() {
                    c["image"] = json!("fixture");
                }
            }
        }
    }
    pod
}

/// What `mutate` prints for `pod`, `None` when it would deny it.
fn mutated(pod: &Value, config: Option<&Path>) -> Option<Value> {
    let mut args = vec!["mutate", "-o", "json"];
    let config_arg;
    if let Some(config) = config {
        config_arg = config.display().to_string();
        args.extend(["--config", config_arg.as_str()]);
    }
    args.push("-");
    let (code, stdout, stderr) = run(&args, pod.to_string().as_bytes());
    match code {
        Some(0) => Some(serde_json::from_slice(&stdout).expect("mutate prints JSON")),
        Some(1) => None,
        _ => panic!("mutate failed on {pod}: {stderr}"),
    }
}

/// The stored pod without what differs between two creations of the same
/// pod: its name, identity, times and status.
fn normalized(stored: &DynamicObject) -> Value {
    let mut value = serde_json::to_value(stored).unwrap();
    if let Some(meta) = value["metadata"].as_object_mut() {
        for k in [
            "name",
            "uid",
            "resourceVersion",
            "creationTimestamp",
            "managedFields",
            "generation",
        ] {
            meta.remove(k);
        }
    }
    if let Some(obj) = value.as_object_mut() {
        obj.remove("status");
    }
    value
}

async fn create(pods: &Api<DynamicObject>, name: &str, pod: &Value) -> Result<Value, String> {
    let mut pod = pod.clone();
    pod["metadata"]["name"] = json!(name);
    // A number no client can send (a fixture of the reader's big numbers)
    // is refused here, like a pod the API server refuses.
    let obj: DynamicObject = serde_json::from_value(pod).map_err(|e| e.to_string())?;
    match pods.create(&PostParams::default(), &obj).await {
        Ok(stored) => Ok(normalized(&stored)),
        Err(kube::Error::Api(s)) => Err(s.message),
        Err(e) => panic!("creating {name}: {e}"),
    }
}

struct Case {
    name: String,
    pod: Value,
    raw: Value,
    mutated: Option<Value>,
}

/// Creates the policy of `config` and waits for a sentinel pod of its
/// share to come back mutated (the API server compiles policies
/// asynchronously).
async fn apply_policy(admin: &Client, pods: &Api<DynamicObject>, config: Option<&Path>) -> usize {
    let mut args = vec!["policy"];
    let config_arg;
    if let Some(config) = config {
        config_arg = config.display().to_string();
        args.extend(["--config", config_arg.as_str()]);
    }
    let (code, stdout, stderr) = run(&args, b"");
    assert_eq!(code, Some(0), "{stderr}");
    let text = String::from_utf8(stdout).unwrap();
    apply(admin, &text).await;
    let sentinel = creatable(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"labels": {ISVC: "sentinel"}},
        "spec": {"containers": [{"name": "kserve-container", "image": "model"}]}
    }));
    let mut attempt = 0;
    eventually(
        "a sentinel pod mutated by the policy",
        Duration::from_secs(60),
        || {
            attempt += 1;
            let name = format!("sentinel-{attempt}");
            let sentinel = sentinel.clone();
            async move {
                let stored = create(pods, &name, &sentinel).await.ok()?;
                stored["metadata"]["annotations"]
                    .get(AGGREGATION)
                    .map(|_| ())
            }
        },
    )
    .await;
    yaml_docs(&text)[0].to_string().len()
}

async fn share_on_1_36(work_dir: &str, config: Option<&str>) {
    let server = ApiServer::new(work_dir);
    if !present(&server) {
        return;
    }
    let admin = client(&server.start_clean()).await;
    apply(
        &admin,
        &format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {POLICY_NS}\n"),
    )
    .await;
    let config = config.map(|c| root().join(c));
    let config = config.as_deref();
    let resource = ApiResource::erase::<k8s_openapi::api::core::v1::Pod>(&());
    let pods: Api<DynamicObject> = Api::namespaced_with(admin.clone(), POLICY_NS, &resource);

    // Before the policy: each pod as it is, and as mutate prints it.
    let mut cases = Vec::new();
    let mut refused = 0;
    let all = fixture_pods().into_iter().map(|p| (true, p));
    let all = all.chain(generated_pods(400).into_iter().map(|p| (false, p)));
    let mut kinds = Vec::new();
    for (i, (fixture, (name, pod))) in all.enumerate() {
        let pod = creatable(pod);
        let Ok(raw) = create(&pods, &format!("raw-{i}"), &pod).await else {
            // The API server refuses the pod itself (a fixture of a field
            // it validates); nothing to compare.
            refused += 1;
            continue;
        };
        // Denied by mutate, or its pod refused by the API server (a
        // fixture of a pod KServe's mutator spoils): no pod to compare, and
        // the policy must leave it alone.
        let mutated = match mutated(&pod, config) {
            Some(m) => create(&pods, &format!("mutated-{i}"), &m).await.ok(),
            None => None,
        };
        kinds.push(fixture);
        cases.push(Case {
            name,
            pod,
            raw,
            mutated,
        });
    }

    let size = apply_policy(&admin, &pods, config).await;

    let (mut taken, mut taken_fixtures, mut fixtures) = (0, 0, 0);
    for (i, (case, fixture)) in cases.iter().zip(kinds).enumerate() {
        fixtures += usize::from(fixture);
        let stored = create(&pods, &format!("policy-{i}"), &case.pod)
            .await
            .unwrap_or_else(|e| panic!("{}: refused with the policy: {e}", case.name));
        if stored == case.raw {
            continue;
        }
        let Some(mutated) = &case.mutated else {
            panic!(
                "{}: the policy changed a pod mutate denies (or whose mutated pod is refused): {stored}",
                case.name
            );
        };
        assert_eq!(
            &stored, mutated,
            "{}: the policy's pod differs from mutate's (input {})",
            case.name, case.pod
        );
        taken += 1;
        taken_fixtures += usize::from(fixture);
    }
    let generated = cases.len() - fixtures;
    eprintln!(
        "e2e policy ({}): the policy ({size} bytes as JSON) took {taken_fixtures} of {fixtures} fixture pods and {} of {generated} generated pods, each as mutate prints it; {refused} refused by the API server itself",
        config.map_or("shipped config".to_string(), |c| c.display().to_string()),
        taken - taken_fixtures,
    );
    assert!(
        taken_fixtures > 0 && taken > taken_fixtures,
        "the policy took too little to prove anything"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn policy_pods_equal_mutates_with_no_webhook_on_1_36() {
    share_on_1_36("/tmp/kapi-policy", None).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn policy_with_aggregation_on_pods_equal_mutates_with_no_webhook_on_1_36() {
    share_on_1_36(
        "/tmp/kapi-policy-aggregation",
        Some("fixtures/ma08-config-true-custom-port-path/config.yaml"),
    )
    .await
}
