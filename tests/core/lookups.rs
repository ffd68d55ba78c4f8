//! Property tests for the injectors with cluster lookups: generated
//! ServiceAccounts, Secrets, ClusterStorageContainers (prefix and regex
//! formats, disabled ones, other workload types, containers that rename the
//! init container, env with value or valueFrom) and InferenceServices with
//! logger storage, and pods that read them.
//!
//! For every case, with a fixed seed:
//! * (a) the patch applies to the pod and gives `mutate`'s pod, and the
//!   AdmissionReview path answers exactly the same (or the same denial);
//! * (b) a second pass on the output changes nothing (idempotence), also
//!   after another webhook appended a sidecar and a volume in between: this
//!   is KServe #3900 (a CSC that renames the init container) among others;
//! * (c) no duplicate container, volume or per-container mount name or
//!   mount path;
//! * (d) mutating with `restrict(pod)` (what the CLI and the server's
//!   lookups hand the core) gives exactly what the whole snapshot gives;
//! * (e) no env var has both `value` and `valueFrom` (KServe #5516).
//!
//! The run prints how many cases were denied, got a renamed init container,
//! or got credentials, so a generator that stops reaching them shows.

use base64::Engine;
use kserve_injector_core::PodFacts;
use kserve_injector_core::{
    admission, cluster::ClusterSnapshot, config::Config, mutate, Inputs, MutationError,
};
use proptest::prelude::*;
use proptest::test_runner::{Config as RunnerConfig, RngAlgorithm, TestRng, TestRunner};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};

const SEED: &[u8; 16] = b"kserve-lookups-1";
const CASES: u32 = 1_500;
const NAMESPACES: [&str; 2] = ["default", "team"];
const ACCOUNTS: [&str; 3] = ["default", "models", "logger-sa"];
/// Secret names; each has a fixed kind (see [`secret`]).
const SECRETS: [&str; 8] = [
    "s3", "s3-https", "gcs", "gcs-2", "hf", "azure", "hdfs", "absent",
];
const URIS: [&str; 7] = [
    "gs://bucket/m",
    "s3://bucket/m",
    "hf://org/m",
    "https://acct.blob.core.windows.net/c/m",
    "custom://m",
    "pvc://claim/m",
    "abc://m",
];

fn secret(namespace: &str, name: &str) -> Value {
    let data = match name {
        "s3" => json!({"AWS_ACCESS_KEY_ID": "i", "AWS_SECRET_ACCESS_KEY": "k"}),
        "s3-https" => json!({"AWS_ACCESS_KEY_ID": "i", "AWS_SECRET_ACCESS_KEY": "k",
                             "S3_ENDPOINT": "https://minio:9000", "AWS_CA_BUNDLE_CONFIGMAP": "s3-ca"}),
        "gcs" | "gcs-2" => json!({"gcloud-application-credentials.json": "{}"}),
        "hf" => json!({"HF_TOKEN": "t"}),
        "azure" => json!({"AZ_CLIENT_ID": "c", "AZ_CLIENT_SECRET": "s"}),
        "hdfs" => json!({"HDFS_NAMENODE": "nn"}),
        _ => json!({"default": r#"{"type":"s3","bucket":"b"}"#}),
    };
    json!({"apiVersion": "v1", "kind": "Secret",
           "metadata": {"name": name, "namespace": namespace}, "stringData": data})
}

#[derive(Debug, Clone)]
struct Csc {
    name: &'static str,
    container_name: &'static str,
    formats: Vec<&'static str>,
    disabled: bool,
    other_workload: bool,
    env_from: bool,
}

fn csc_doc(c: &Csc) -> Value {
    let formats: Vec<Value> = (c.formats.iter())
        .map(|f| match f.strip_prefix("re:") {
            Some(re) => json!({"regex": re}),
            None => json!({"prefix": f}),
        })
        .collect();
    let env = if c.env_from {
        json!([{"name": "HF_HUB_ENABLE_HF_TRANSFER",
                "valueFrom": {"configMapKeyRef": {"name": "hf", "key": "transfer"}}},
               {"name": "AWS_ACCESS_KEY_ID", "value": "from-csc"}])
    } else {
        json!([{"name": "CA_BUNDLE_CONFIGMAP_NAME", "value": "csc-ca"}])
    };
    let mut spec = json!({
        "container": {"name": c.container_name, "image": format!("kserve/{}:1", c.name),
                      "env": env, "resources": {"limits": {"memory": "300Mi"}}},
        "supportedUriFormats": formats,
    });
    if c.other_workload {
        spec["workloadType"] = json!("localModelDownloadJob");
    }
    let mut doc = json!({"apiVersion": "serving.kserve.io/v1alpha1",
                         "kind": "ClusterStorageContainer",
                         "metadata": {"name": c.name}, "spec": spec});
    if c.disabled {
        doc["disabled"] = json!(true);
    }
    doc
}

fn csc() -> impl Strategy<Value = Csc> {
    let format = prop::sample::select(vec![
        "gs://",
        "s3://",
        "hf://",
        "custom://",
        "re:https://(.+?).blob.core.windows.net/(.+)",
        "re:^abc",
    ]);
    (
        prop::sample::select(vec!["alpha", "default", "zeta"]),
        prop::sample::select(vec!["storage-initializer", "", "custom-init"]),
        prop::collection::vec(format, 1..3),
        prop::bool::weighted(0.15),
        prop::bool::weighted(0.15),
        any::<bool>(),
    )
        .prop_map(
            |(name, container_name, formats, disabled, other_workload, env_from)| Csc {
                name,
                container_name,
                formats,
                disabled,
                other_workload,
                env_from,
            },
        )
}

#[derive(Debug, Clone)]
pub(crate) struct Case {
    /// (namespace, account, listed secrets, IRSA annotation)
    accounts: Vec<(usize, usize, Vec<usize>, bool)>,
    /// Per namespace, which of [`SECRETS`] exist (`absent` never does).
    secrets: [[bool; SECRETS.len()]; 2],
    cscs: Vec<Csc>,
    /// The InferenceService's logger: None = no ISVC; Some(None) = logger
    /// without storage; Some(Some(sa)) = storage with that account or default.
    isvc_logger: Option<Option<Option<usize>>>,
    namespace: usize,
    pod_account: Option<usize>,
    uri: Option<usize>,
    explicit_csc: Option<&'static str>,
    annotated_secret: Option<usize>,
    /// logger, batcher, puller, storage-spec
    flags: [bool; 4],
    config_logger_storage: bool,
    transformer: bool,
}

pub(crate) fn case() -> impl Strategy<Value = Case> {
    let account = (
        0..2usize,
        0..ACCOUNTS.len(),
        prop::collection::vec(0..SECRETS.len(), 0..4),
        prop::bool::weighted(0.2),
    );
    (
        (
            prop::collection::vec(account, 0..5),
            [
                prop::array::uniform8(prop::bool::weighted(0.85)),
                prop::array::uniform8(prop::bool::weighted(0.85)),
            ],
            prop::collection::vec(csc(), 0..4),
            prop::option::weighted(
                0.4,
                prop::option::weighted(0.7, prop::option::of(0..3usize)),
            ),
        ),
        (
            0..2usize,
            prop::option::of(0..ACCOUNTS.len()),
            prop::option::weighted(0.9, 0..URIS.len()),
            prop::option::weighted(
                0.15,
                prop::sample::select(vec!["alpha", "default", "zeta", "missing"]),
            ),
            prop::option::weighted(0.15, 0..SECRETS.len()),
            [
                prop::bool::weighted(0.3),
                prop::bool::weighted(0.15),
                prop::bool::weighted(0.1),
                prop::bool::weighted(0.1),
            ],
            any::<bool>(),
            prop::bool::weighted(0.3),
        ),
    )
        .prop_map(
            |(
                (accounts, secrets, cscs, isvc_logger),
                (namespace, pod_account, uri, explicit_csc, annotated_secret, flags, cls, tr),
            )| Case {
                accounts,
                secrets,
                cscs,
                isvc_logger,
                namespace,
                pod_account,
                uri,
                explicit_csc,
                annotated_secret,
                flags,
                config_logger_storage: cls,
                transformer: tr,
            },
        )
}

impl Case {
    pub(crate) fn cluster(&self) -> ClusterSnapshot {
        let mut docs = Vec::new();
        let mut seen = BTreeSet::new();
        for (ns, account, listed, irsa) in &self.accounts {
            if !seen.insert(("sa", *ns, *account)) {
                continue;
            }
            let secrets: Vec<Value> = listed
                .iter()
                .map(|s| json!({"name": SECRETS[*s]}))
                .collect();
            let mut sa = json!({"apiVersion": "v1", "kind": "ServiceAccount",
                "metadata": {"name": ACCOUNTS[*account], "namespace": NAMESPACES[*ns]},
                "secrets": secrets});
            if *irsa {
                sa["metadata"]["annotations"] = json!({
                    "eks.amazonaws.com/role-arn": "arn:aws:iam::1:role/r",
                    "serving.kserve.io/s3-endpoint": "s3.example.com"});
            }
            docs.push(sa);
        }
        for (ns, present) in self.secrets.iter().enumerate() {
            for (s, name) in SECRETS.iter().enumerate() {
                if present[s] && *name != "absent" {
                    docs.push(secret(NAMESPACES[ns], name));
                }
            }
        }
        let mut names = BTreeSet::new();
        for c in self.cscs.iter().filter(|c| names.insert(c.name)) {
            docs.push(csc_doc(c));
        }
        if let Some(logger) = self.isvc_logger {
            let storage = logger.map(|account| match account {
                Some(a) => json!({"path": "/isvc", "serviceAccountName": ACCOUNTS[a]}),
                None => json!({"path": "/isvc", "parameters": {"format": "json"}}),
            });
            let mut logger = json!({"mode": "all"});
            if let Some(storage) = storage {
                logger["storage"] = storage;
            }
            docs.push(json!({"apiVersion": "serving.kserve.io/v1beta1",
                "kind": "InferenceService",
                "metadata": {"name": "isvc", "namespace": NAMESPACES[self.namespace]},
                "spec": {"predictor": {"logger": logger}}}));
        }
        ClusterSnapshot::from_documents(docs).expect("generated objects load")
    }

    fn env(&self) -> Inputs {
        let mut config = Config::default();
        config.credentials.storage_secret_name_annotation =
            "serving.kserve.io/storageSecretName".into();
        if self.config_logger_storage {
            config.logger.storage = Some(kserve_injector_core::config::LoggerStorage {
                path: "/logs".into(),
                ..Default::default()
            });
        }
        let mut inputs = Inputs::new(config);
        inputs.cluster = self.cluster();
        inputs
    }

    pub(crate) fn pod(&self) -> Value {
        let mut annotations = serde_json::Map::new();
        let mut put = |k: &str, v: &str| {
            annotations.insert(k.to_string(), json!(v));
        };
        if let Some(uri) = self.uri {
            put(
                "internal.serving.kserve.io/storage-initializer-sourceuri",
                URIS[uri],
            );
        }
        if let Some(name) = self.explicit_csc {
            put("internal.serving.kserve.io/storage-container-name", name);
        }
        if let Some(s) = self.annotated_secret {
            put("serving.kserve.io/storageSecretName", SECRETS[s]);
        }
        let [logger, batcher, puller, storage_spec] = self.flags;
        if logger {
            put("internal.serving.kserve.io/logger", "true");
        }
        if batcher {
            put("internal.serving.kserve.io/batcher", "true");
        }
        if puller {
            put("internal.serving.kserve.io/agent", "true");
            put(
                "internal.serving.kserve.io/configVolumeName",
                "models-config",
            );
            put("internal.serving.kserve.io/modelDir", "/mnt/models");
        }
        if storage_spec {
            put("internal.serving.kserve.io/storage-spec", "true");
            put(
                "internal.serving.kserve.io/storage-spec-param",
                r#"{"type":"s3","bucket":"b"}"#,
            );
        }
        let mut containers = vec![json!({"name": "kserve-container", "image": "server:1",
            "ports": [{"containerPort": 8080}]})];
        if self.transformer {
            containers.push(json!({"name": "transformer-container", "image": "t:1"}));
        }
        containers.push(json!({"name": "queue-proxy", "image": "qp:1",
            "env": [{"name": "USER_PORT", "value": "8080"}]}));
        let mut spec = json!({"containers": containers});
        if let Some(a) = self.pod_account {
            spec["serviceAccountName"] = json!(ACCOUNTS[a]);
        }
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": "p", "labels": {"serving.kserve.io/inferenceservice": "isvc"},
                            "annotations": annotations},
               "spec": spec})
    }

    pub(crate) fn namespace(&self) -> &'static str {
        NAMESPACES[self.namespace]
    }
}

/// Another webhook between passes: a sidecar and a volume of its own.
fn other_webhook(pod: &mut Value) {
    if let Some(containers) = pod["spec"]["containers"].as_array_mut() {
        containers.push(json!({"name": "istio-proxy", "image": "proxy:1"}));
    }
    match pod["spec"]["volumes"].as_array_mut() {
        Some(volumes) => volumes.push(json!({"name": "istio-envoy", "emptyDir": {}})),
        None => pod["spec"]["volumes"] = json!([{"name": "istio-envoy", "emptyDir": {}}]),
    }
}

fn env_is_valid(pod: &Value) -> Result<(), String> {
    for list in ["containers", "initContainers"] {
        for c in pod["spec"][list].as_array().into_iter().flatten() {
            for var in c["env"].as_array().into_iter().flatten() {
                if var.get("value").is_some() && var.get("valueFrom").is_some() {
                    return Err(format!("(e) value and valueFrom both set: {var}"));
                }
            }
        }
    }
    Ok(())
}

static DENIED: AtomicUsize = AtomicUsize::new(0);
static RENAMED: AtomicUsize = AtomicUsize::new(0);
static CREDENTIALS: AtomicUsize = AtomicUsize::new(0);

fn count(pod: &Value) {
    let inits = pod["spec"]["initContainers"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if inits.iter().any(|c| c["name"] == "custom-init") {
        RENAMED.fetch_add(1, Ordering::Relaxed);
    }
    let text = pod.to_string();
    if text.contains("secretKeyRef") || text.contains("user-gcp-sa") {
        CREDENTIALS.fetch_add(1, Ordering::Relaxed);
    }
}

fn no_duplicates(pod: &Value) -> Result<(), String> {
    let names = |list: &Value| -> Vec<String> {
        (list.as_array().into_iter().flatten())
            .filter_map(|e| e["name"].as_str().map(str::to_string))
            .collect()
    };
    let unique = |what: &str, items: Vec<String>| {
        let set: BTreeSet<&String> = items.iter().collect();
        if set.len() == items.len() {
            Ok(())
        } else {
            Err(format!("(c) duplicate {what}: {items:?}"))
        }
    };
    let spec = &pod["spec"];
    let mut all = names(&spec["containers"]);
    all.extend(names(&spec["initContainers"]));
    unique("container names", all)?;
    unique("volume names", names(&spec["volumes"]))?;
    for list in ["containers", "initContainers"] {
        for c in spec[list].as_array().into_iter().flatten() {
            unique("mount names", names(&c["volumeMounts"]))?;
            let paths = (c["volumeMounts"].as_array().into_iter().flatten())
                .filter_map(|m| m["mountPath"].as_str().map(str::to_string))
                .collect();
            unique("mount paths", paths)?;
        }
    }
    Ok(())
}

fn via_review(pod: &Value, namespace: &str, inputs: &Inputs) -> Result<Value, String> {
    let body = serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "u", "kind": {"group": "", "version": "v1", "kind": "Pod"},
                    "resource": {"group": "", "version": "v1", "resource": "pods"},
                    "namespace": namespace, "operation": "CREATE", "userInfo": {},
                    "object": pod}}))
    .map_err(|e| e.to_string())?;
    let reviewed = admission::prepare(&body, admission::Mode::Mutate)
        .and_then(|prepared| prepared.answer(inputs))
        .map_err(|e| e.to_string())?;
    let response: Value = serde_json::from_slice(&reviewed.body).map_err(|e| e.to_string())?;
    if response["response"]["allowed"] != true {
        return Err(response["response"]["status"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_string());
    }
    let mut out = pod.clone();
    if let Some(patch) = response["response"]["patch"].as_str() {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(patch)
            .map_err(|e| e.to_string())?;
        let patch: json_patch::Patch = serde_json::from_slice(&bytes).map_err(|e| e.to_string())?;
        json_patch::patch(&mut out, &patch).map_err(|e| e.to_string())?;
    }
    Ok(out)
}

fn check(case: &Case) -> Result<(), String> {
    let env = case.env();
    let ns = case.namespace();
    let pod = case.pod();
    let first = mutate(&pod, ns, &env);
    let review = via_review(&pod, ns, &env);
    let restricted = env.with_cluster(env.cluster.restrict(
        &PodFacts::from_pod_value(&pod, ns, &env.config),
        &env.config,
    ));
    let narrow = mutate(&pod, ns, &restricted);
    match (&first, &narrow) {
        (Ok(a), Ok(b)) if a.pod == b.pod => {}
        (Err(a), Err(b)) if a == b => {}
        _ => {
            return Err(format!(
                "(d) whole snapshot {first:?}\nrestricted {narrow:?}"
            ))
        }
    }
    let first = match first {
        Ok(m) => m,
        Err(MutationError::Inject(e)) => {
            DENIED.fetch_add(1, Ordering::Relaxed);
            return match review {
                Err(message) if message == e.message => Ok(()),
                other => Err(format!("(a) mutate denied {e}, review answered {other:?}")),
            };
        }
        Err(e) => return Err(format!("the generated pod does not decode: {e}")),
    };
    let mut applied = pod.clone();
    let wire = serde_json::to_value(&first.patch).map_err(|e| format!("(a) {e}"))?;
    let patch: json_patch::Patch = serde_json::from_value(wire).map_err(|e| format!("(a) {e}"))?;
    json_patch::patch(&mut applied, &patch).map_err(|e| format!("(a) {e}"))?;
    if applied != first.pod {
        return Err("(a) input + patch is not mutate's pod".into());
    }
    if review.as_ref() != Ok(&first.pod) {
        return Err(format!("(a) review answered {review:?}"));
    }
    no_duplicates(&first.pod)?;
    env_is_valid(&first.pod)?;
    count(&first.pod);
    let again = mutate(&first.pod, ns, &env).map_err(|e| format!("(b) second pass: {e}"))?;
    if !again.patch.is_empty() {
        return Err(format!("(b) second pass patched: {:?}", again.patch));
    }
    let mut touched = first.pod.clone();
    other_webhook(&mut touched);
    let after = mutate(&touched, ns, &env).map_err(|e| format!("(b) after a webhook: {e}"))?;
    if !after.patch.is_empty() {
        return Err(format!(
            "(b) pass after another webhook patched: {:?}",
            after.patch
        ));
    }
    no_duplicates(&after.pod)
}

#[test]
fn lookups_are_idempotent_and_restricted_snapshots_agree() {
    let config = RunnerConfig {
        cases: CASES,
        failure_persistence: None,
        rng_algorithm: RngAlgorithm::XorShift,
        max_shrink_iters: 2_048,
        ..RunnerConfig::default()
    };
    let rng = TestRng::from_seed(RngAlgorithm::XorShift, SEED);
    let mut runner = TestRunner::new_with_rng(config, rng);
    let result = runner.run(&case(), |case| check(&case).map_err(TestCaseError::fail));
    println!(
        "proptest lookups: seed {SEED:?} (XorShift), {CASES} cases: {} denied, {} with a renamed init container, {} with credentials",
        DENIED.load(Ordering::Relaxed),
        RENAMED.load(Ordering::Relaxed),
        CREDENTIALS.load(Ordering::Relaxed)
    );
    if let Err(e) = result {
        panic!("{e}");
    }
}
