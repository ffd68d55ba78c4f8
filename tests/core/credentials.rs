//! The storage-initializer's credentials, CA bundle and
//! ClusterStorageContainer merge against a second implementation of
//! KServe's rules, written here from the Go sources and sharing no code
//! with the injector:
//! - `CreateSecretVolumeAndEnv` / `mountSecretCredential` (first matching
//!   data key decides the kind; S3 env through `MergeEnvs`, the rest
//!   appended; volumes by `AppendVolumeIfNotExists`);
//! - `BuildS3EnvVars` / `getEndpointConfiguration` (presence, the trimmed
//!   endpoint, the scheme);
//! - `needCaBundleMount` and the CA env, volume and mount of
//!   `CommonStorageInitialization`;
//! - `MergeContainerWithPatch`: Go's `omitempty`, apimachinery's strategic
//!   merge (`mergeSliceWithoutSpecialElements`, `normalizeElementOrder`,
//!   `mergeSortedSlice`) and `reconcileEnvValueConflicts`;
//! - `AddDefaultHuggingFaceEnvVars`.
//!
//! One deliberate difference is modelled: an identical credential mount is
//! added once (KServe appends it twice and the API server refuses the pod).
//!
//! Generated: ServiceAccounts listing several Secrets of mixed kinds (S3,
//! GCS, Hugging Face, HDFS, unknown, missing), S3 settings in annotations,
//! data and config with and without whitespace and scheme, a CSC whose env
//! and mounts overlap the credential, CA and Hugging Face ones, and CA
//! settings from the ConfigMap, annotations and Secret data together.

use kserve_injector_core::{cluster::ClusterSnapshot, config::Config, mutate, Inputs};
use proptest::prelude::*;
use proptest::test_runner::{Config as RunnerConfig, RngAlgorithm, TestRng, TestRunner};
use serde_json::{json, Map, Value};
use std::sync::atomic::{AtomicUsize, Ordering};

const SEED: &[u8; 16] = b"kserve-creds-v01";
const CASES: u32 = 5_000;
const SECRET_NAMES: [&str; 5] = ["sa", "sb", "sc", "sd", "missing"];
const SECRET_ANNOTATION: &str = "serving.kserve.io/storageSecretName";
const CONTROLLER_NAMESPACE: &str = "kserve";
const ENDPOINTS: [&str; 8] = [
    "",
    "s3.example",
    " s3.example ",
    "https://h:9000/p",
    " HTTP://h ",
    "   ",
    "hTTps://",
    "minio:9000",
];
const FLAGS: [&str; 4] = ["", "0", "1", "false"];
const CA_FILES: [&str; 4] = ["", "/c/d/ca.crt", "rel/ca.crt", "/x/../y//ca.crt"];
const CA_MAPS: [&str; 3] = ["", "cm-a", "cm-b"];
const CSC_ENV: [&str; 13] = [
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "S3_ENDPOINT",
    "AWS_ENDPOINT_URL",
    "S3_USE_HTTPS",
    "HF_HUB_ENABLE_HF_TRANSFER",
    "HF_XET_HIGH_PERFORMANCE",
    "CA_BUNDLE_CONFIGMAP_NAME",
    "CA_BUNDLE_VOLUME_MOUNT_POINT",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "HF_TOKEN",
    "CUSTOM_A",
    "CUSTOM_B",
];
const CSC_MOUNTS: [(&str, &str); 3] = [
    ("cache", "/cache"),
    ("mine", "/mnt/models"),
    ("gcs-override", "/var/secrets/"),
];

static DENIED: AtomicUsize = AtomicUsize::new(0);
static WITH_CSC: AtomicUsize = AtomicUsize::new(0);
static WITH_CA: AtomicUsize = AtomicUsize::new(0);
static S3_MERGED: AtomicUsize = AtomicUsize::new(0);

/// S3 settings: (endpoint, use-https, CA file, CA map) as indexes into the
/// pools; with `blank`, the empty ones are written too (present but empty).
#[derive(Debug, Clone)]
struct S3Settings([usize; 4], bool);

fn s3_settings() -> impl Strategy<Value = Option<S3Settings>> {
    prop::option::weighted(
        0.6,
        (
            (
                0..ENDPOINTS.len(),
                0..FLAGS.len(),
                0..CA_FILES.len(),
                0..CA_MAPS.len(),
            ),
            prop::bool::weighted(0.15),
        )
            .prop_map(|((a, b, c, d), blank)| S3Settings([a, b, c, d], blank)),
    )
}

impl S3Settings {
    fn values(&self) -> [(&'static str, &'static str, &'static str); 4] {
        let [e, h, f, m] = self.0;
        [
            ("s3-endpoint", "S3_ENDPOINT", ENDPOINTS[e]),
            ("s3-usehttps", "S3_USE_HTTPS", FLAGS[h]),
            ("s3-cabundle", "AWS_CA_BUNDLE", CA_FILES[f]),
            (
                "s3-cabundle-configmap",
                "AWS_CA_BUNDLE_CONFIGMAP",
                CA_MAPS[m],
            ),
        ]
    }

    fn written(&self) -> impl Iterator<Item = (&'static str, &'static str, &'static str)> {
        let blank = self.1;
        self.values()
            .into_iter()
            .filter(move |(_, _, v)| blank || !v.is_empty())
    }

    fn annotations(&self) -> Map<String, Value> {
        (self.written())
            .map(|(a, _, v)| (format!("serving.kserve.io/{a}"), json!(v)))
            .collect()
    }

    fn data(&self) -> Map<String, Value> {
        (self.written())
            .map(|(_, k, v)| (k.to_string(), json!(v)))
            .collect()
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    S3,
    S3AndHf,
    Gcs,
    GcsAndHf,
    Hf,
    Hdfs,
    Unknown,
}

#[derive(Debug, Clone)]
struct SecretCase {
    kind: Kind,
    annotations: Option<S3Settings>,
    data: Option<S3Settings>,
}

fn secret_case() -> impl Strategy<Value = SecretCase> {
    let kind = prop::sample::select(vec![
        Kind::S3,
        Kind::S3,
        Kind::S3AndHf,
        Kind::Gcs,
        Kind::GcsAndHf,
        Kind::Hf,
        Kind::Hdfs,
        Kind::Unknown,
    ]);
    (kind, s3_settings(), s3_settings()).prop_map(|(kind, annotations, data)| SecretCase {
        kind,
        annotations,
        data,
    })
}

#[derive(Debug, Clone)]
struct CscCase {
    container_name: &'static str,
    /// (name, 0 literal / 1 empty literal / 2 secretKeyRef / 3 configMapKeyRef)
    env: Vec<(&'static str, u8)>,
    /// (index into CSC_MOUNTS, readOnly: None / false / true)
    mounts: Vec<(usize, Option<bool>)>,
    args: bool,
}

fn csc_case() -> impl Strategy<Value = CscCase> {
    (
        prop::sample::select(vec!["", "storage-initializer"]),
        prop::sample::subsequence(CSC_ENV.to_vec(), 0..6).prop_shuffle(),
        prop::collection::vec(0..4u8, 6),
        prop::sample::subsequence(vec![0usize, 1, 2], 0..3).prop_shuffle(),
        prop::collection::vec(prop::option::of(any::<bool>()), 3),
        prop::bool::weighted(0.2),
    )
        .prop_map(|(container_name, names, forms, mounts, ro, args)| CscCase {
            container_name,
            env: names.into_iter().zip(forms).collect(),
            mounts: mounts.into_iter().map(|m| (m, ro[m])).collect(),
            args,
        })
}

#[derive(Debug, Clone)]
struct Case {
    in_controller_namespace: bool,
    sa_exists: bool,
    irsa: Option<S3Settings>,
    listed: Vec<usize>,
    secrets: [SecretCase; 4],
    annotated: Option<usize>,
    config: S3Settings,
    config_ca_map: bool,
    config_ca_path: bool,
    csc: Option<CscCase>,
}

fn case() -> impl Strategy<Value = Case> {
    (
        (
            any::<bool>(),
            prop::bool::weighted(0.95),
            prop::option::weighted(
                0.3,
                s3_settings().prop_map(|s| s.unwrap_or(S3Settings([0; 4], false))),
            ),
            prop::collection::vec(0..SECRET_NAMES.len(), 0..4),
            [secret_case(), secret_case(), secret_case(), secret_case()],
        ),
        (
            prop::option::weighted(0.1, 0..SECRET_NAMES.len()),
            (
                0..ENDPOINTS.len(),
                0..FLAGS.len(),
                0..CA_FILES.len(),
                0..CA_MAPS.len(),
            ),
            prop::bool::weighted(0.3),
            prop::bool::weighted(0.3),
            prop::option::weighted(0.6, csc_case()),
        ),
    )
        .prop_map(
            |(
                (in_controller_namespace, sa_exists, irsa, listed, secrets),
                (annotated, c, m, p, csc),
            )| {
                Case {
                    in_controller_namespace,
                    sa_exists,
                    irsa,
                    listed,
                    secrets,
                    annotated,
                    config: S3Settings([c.0, c.1, c.2, c.3], false),
                    config_ca_map: m,
                    config_ca_path: p,
                    csc,
                }
            },
        )
}

impl Case {
    fn namespace(&self) -> &'static str {
        if self.in_controller_namespace {
            CONTROLLER_NAMESPACE
        } else {
            "team"
        }
    }

    fn secret_doc(&self, i: usize) -> Value {
        let s = &self.secrets[i];
        let mut data = s.data.as_ref().map(S3Settings::data).unwrap_or_default();
        let mut put = |k: &str| {
            data.insert(k.to_string(), json!("x"));
        };
        match s.kind {
            Kind::S3 => put("AWS_SECRET_ACCESS_KEY"),
            Kind::S3AndHf => {
                put("AWS_SECRET_ACCESS_KEY");
                put("AWS_ACCESS_KEY_ID");
                put("HF_TOKEN");
            }
            Kind::Gcs => put("gcloud-application-credentials.json"),
            Kind::GcsAndHf => {
                put("gcloud-application-credentials.json");
                put("HF_TOKEN");
            }
            Kind::Hf => put("HF_TOKEN"),
            Kind::Hdfs => put("HDFS_NAMENODE"),
            Kind::Unknown => put("other"),
        }
        let annotations = s
            .annotations
            .as_ref()
            .map(S3Settings::annotations)
            .unwrap_or_default();
        json!({"apiVersion": "v1", "kind": "Secret",
               "metadata": {"name": SECRET_NAMES[i], "namespace": self.namespace(),
                            "annotations": annotations},
               "stringData": data})
    }

    fn csc_doc(&self) -> Option<Value> {
        let c = self.csc.as_ref()?;
        let env: Vec<Value> = (c.env.iter())
            .map(|(name, form)| match form {
                0 => json!({"name": name, "value": format!("csc-{name}")}),
                1 => json!({"name": name, "value": ""}),
                2 => json!({"name": name, "valueFrom": {"secretKeyRef": {"name": "csc-s", "key": name}}}),
                _ => json!({"name": name, "valueFrom": {"configMapKeyRef": {"name": "csc-cm", "key": name}}}),
            })
            .collect();
        let mounts: Vec<Value> = (c.mounts.iter())
            .map(|(m, ro)| {
                let (name, path) = CSC_MOUNTS[*m];
                let mut mount = json!({"name": name, "mountPath": path});
                if let Some(ro) = ro {
                    mount["readOnly"] = json!(ro);
                }
                mount
            })
            .collect();
        let mut container = json!({"name": c.container_name, "image": "csc/init:1",
                                   "env": env, "volumeMounts": mounts});
        if c.args {
            container["args"] = json!(["--from-csc"]);
        }
        Some(
            json!({"apiVersion": "serving.kserve.io/v1alpha1", "kind": "ClusterStorageContainer",
                    "metadata": {"name": "csc"},
                    "spec": {"container": container, "supportedUriFormats": [{"prefix": "s3://"}]}}),
        )
    }

    fn env(&self) -> Inputs {
        let mut docs: Vec<Value> = (0..4).map(|i| self.secret_doc(i)).collect();
        if self.sa_exists {
            let annotations = match &self.irsa {
                Some(s) => {
                    let mut a = s.annotations();
                    a.insert("eks.amazonaws.com/role-arn".into(), json!("arn"));
                    a
                }
                None => Map::new(),
            };
            let secrets: Vec<Value> = (self.listed.iter())
                .map(|i| json!({"name": SECRET_NAMES[*i]}))
                .collect();
            docs.push(json!({"apiVersion": "v1", "kind": "ServiceAccount",
                "metadata": {"name": "models", "namespace": self.namespace(), "annotations": annotations},
                "secrets": secrets}));
        }
        docs.extend(self.csc_doc());
        let mut config = Config::default();
        config.credentials.storage_secret_name_annotation = SECRET_ANNOTATION.into();
        let [e, h, f, m] = self.config.values().map(|(_, _, v)| v.to_string());
        let s3 = &mut config.credentials.s3;
        (
            s3.endpoint,
            s3.use_https,
            s3.ca_bundle,
            s3.ca_bundle_config_map,
        ) = (e, h, f, m);
        let si = &mut config.storage_initializer;
        si.ca_bundle_config_map_name = if self.config_ca_map {
            "cfg-ca".into()
        } else {
            String::new()
        };
        si.ca_bundle_volume_mount_path = if self.config_ca_path {
            "/cfg/certs".into()
        } else {
            String::new()
        };
        let mut inputs = Inputs::new(config);
        inputs.controller_namespace = CONTROLLER_NAMESPACE.into();
        inputs.cluster = ClusterSnapshot::from_documents(docs).expect("generated objects load");
        inputs
    }

    fn pod(&self) -> Value {
        let mut annotations = json!({
            "internal.serving.kserve.io/storage-initializer-sourceuri": "s3://bucket/model"});
        if let Some(i) = self.annotated {
            annotations[SECRET_ANNOTATION] = json!(SECRET_NAMES[i]);
        }
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": "p", "namespace": self.namespace(), "annotations": annotations,
                            "labels": {"serving.kserve.io/inferenceservice": "m"}},
               "spec": {"serviceAccountName": "models",
                        "containers": [{"name": "kserve-container", "image": "server:1"}]}})
    }
}

// ---- The reference, from the Go sources ----

/// What the reference expects: the init container's env and mounts, and
/// the pod volumes after the model volume.
#[derive(Debug, PartialEq)]
struct Expected {
    env: Vec<Value>,
    mounts: Vec<Value>,
    volumes: Vec<Value>,
}

fn lit(name: &str, value: &str) -> Value {
    json!({"name": name, "value": value})
}

fn secret_ref(name: &str, secret: &str, key: &str) -> Value {
    json!({"name": name, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}})
}

fn name_of(v: &Value) -> &str {
    v["name"].as_str().unwrap_or_default()
}

/// `getEnvValue`: annotation if present, else data if present, else config.
fn get_env_value(
    ann: &Map<String, Value>,
    data: Option<&Map<String, Value>>,
    a: &str,
    k: &str,
    c: &str,
) -> String {
    if let Some(v) = ann.get(&format!("serving.kserve.io/{a}")) {
        return v.as_str().unwrap_or_default().to_string();
    }
    if let Some(v) = data.and_then(|d| d.get(k)) {
        return v.as_str().unwrap_or_default().to_string();
    }
    c.to_string()
}

/// `BuildS3EnvVars`, for the four settings the generator writes.
fn build_s3_env_vars(
    ann: &Map<String, Value>,
    data: Option<&Map<String, Value>>,
    cfg: &S3Settings,
) -> Vec<Value> {
    let c = cfg.values();
    let mut out = Vec::new();
    let configured = get_env_value(ann, data, "s3-endpoint", "S3_ENDPOINT", c[0].2);
    if !configured.is_empty() {
        let ep = configured.trim();
        let lower = ep.to_lowercase();
        let (use_https, endpoint, url) = if lower.starts_with("https://") {
            ("1".to_string(), ep[8..].to_string(), ep.to_string())
        } else if lower.starts_with("http://") {
            ("0".to_string(), ep[7..].to_string(), ep.to_string())
        } else {
            let h = get_env_value(ann, data, "s3-usehttps", "S3_USE_HTTPS", c[1].2);
            let url = if h == "0" {
                format!("http://{ep}")
            } else {
                format!("https://{ep}")
            };
            (h, ep.to_string(), url)
        };
        if !use_https.is_empty() {
            out.push(lit("S3_USE_HTTPS", &use_https));
        }
        out.push(lit("S3_ENDPOINT", &endpoint));
        out.push(lit("AWS_ENDPOINT_URL", &url));
    }
    for (a, k, cv) in [
        ("s3-cabundle", "AWS_CA_BUNDLE", c[2].2),
        ("s3-cabundle-configmap", "AWS_CA_BUNDLE_CONFIGMAP", c[3].2),
    ] {
        let v = get_env_value(ann, data, a, k, cv);
        if !v.is_empty() {
            out.push(lit(k, &v));
        }
    }
    out
}

/// `MergeEnvs`: same names get the override's value in place (their
/// valueFrom stays); new ones are appended.
fn merge_envs(base: &mut Vec<Value>, overrides: Vec<Value>) {
    let mut extra = Vec::new();
    for o in overrides {
        let mut in_base = false;
        for b in base.iter_mut() {
            if name_of(b) == name_of(&o) {
                in_base = true;
                match o.get("value") {
                    Some(v) => b["value"] = v.clone(),
                    None => {
                        b.as_object_mut().map(|m| m.remove("value"));
                    }
                }
                break;
            }
        }
        if !in_base {
            extra.push(o);
        }
    }
    base.extend(extra);
}

struct Built {
    env: Vec<Value>,
    mounts: Vec<Value>,
    volumes: Vec<Value>,
}

/// `CreateSecretVolumeAndEnv` with `mountSecretCredential`.
fn credentials(case: &Case, built: &mut Built) -> Result<(), String> {
    if !case.sa_exists {
        return Ok(());
    }
    if let Some(irsa) = &case.irsa {
        let mut ann = irsa.annotations();
        ann.insert("eks.amazonaws.com/role-arn".into(), json!("arn"));
        built
            .env
            .extend(build_s3_env_vars(&ann, None, &case.config));
    }
    let names: Vec<usize> = match case.annotated {
        Some(i) => vec![i],
        None => case.listed.clone(),
    };
    for i in names {
        if i >= 4 {
            return Err(format!("secrets \"{}\" not found", SECRET_NAMES[i]));
        }
        let doc = case.secret_doc(i);
        let name = SECRET_NAMES[i];
        let data = doc["stringData"].as_object().cloned().unwrap_or_default();
        let ann = doc["metadata"]["annotations"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        let add_volume = |volume: &str, path: &str, built: &mut Built| {
            if !built.volumes.iter().any(|v| name_of(v) == volume) {
                built
                    .volumes
                    .push(json!({"name": volume, "secret": {"secretName": name}}));
            }
            let mount = json!({"name": volume, "mountPath": path, "readOnly": true});
            if !built.mounts.contains(&mount) {
                built.mounts.push(mount);
            }
        };
        if data.contains_key("AWS_SECRET_ACCESS_KEY") {
            S3_MERGED.fetch_add(1, Ordering::Relaxed);
            let mut envs = vec![
                secret_ref("AWS_ACCESS_KEY_ID", name, "AWS_ACCESS_KEY_ID"),
                secret_ref("AWS_SECRET_ACCESS_KEY", name, "AWS_SECRET_ACCESS_KEY"),
            ];
            envs.extend(build_s3_env_vars(&ann, Some(&data), &case.config));
            merge_envs(&mut built.env, envs);
        } else if data.contains_key("gcloud-application-credentials.json") {
            add_volume("user-gcp-sa", "/var/secrets/", built);
            built.env.push(lit(
                "GOOGLE_APPLICATION_CREDENTIALS",
                "/var/secrets/gcloud-application-credentials.json",
            ));
        } else if data.contains_key("HDFS_NAMENODE") {
            add_volume("hdfs-secrets", "/var/secrets/kserve-hdfscreds", built);
        } else if data.contains_key("HF_TOKEN") {
            built.env.push(secret_ref("HF_TOKEN", name, "HF_TOKEN"));
        }
    }
    Ok(())
}

/// Go's `filepath.Dir` for the paths the generator writes.
fn go_dir(path: &str) -> String {
    let dir = &path[..path.rfind('/').map_or(0, |i| i + 1)];
    let mut parts: Vec<&str> = Vec::new();
    for p in dir.split('/') {
        match p {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    match (dir.starts_with('/'), parts.is_empty()) {
        (true, _) => format!("/{}", parts.join("/")),
        (false, true) => ".".into(),
        (false, false) => parts.join("/"),
    }
}

/// Go's `omitempty` on the fields the generator can leave zero.
fn go_marshal(mut container: Value) -> Value {
    for list in ["env", "volumeMounts"] {
        if let Some(items) = container.get_mut(list).and_then(Value::as_array_mut) {
            for item in items.iter_mut() {
                let m = item.as_object_mut().expect("object");
                m.retain(|k, v| !((k == "value" && v == "") || (k == "readOnly" && v == false)));
            }
            if items.is_empty() {
                container.as_object_mut().map(|m| m.remove(list));
            }
        }
    }
    container
}

/// apimachinery's `index`: the first position of the item's key.
fn index(list: &[Value], item: &Value, key: &str) -> i64 {
    for (i, v) in list.iter().enumerate() {
        if v[key] == item[key] {
            return i as i64;
        }
    }
    -1
}

/// `mergeSlice` for a list of maps with a merge key.
fn merge_slice(original: &[Value], patch: &[Value], key: &str) -> Vec<Value> {
    let mut merged = original.to_vec();
    for p in patch {
        let i = index(&merged, p, key);
        if i >= 0 {
            merge_map(&mut merged[i as usize], p);
        } else {
            merged.push(p.clone());
        }
    }
    let mut patch_items = Vec::new();
    let mut server_only = Vec::new();
    for m in merged {
        if index(patch, &m, key) >= 0 {
            patch_items.push(m);
        } else {
            server_only.push(m);
        }
    }
    patch_items.sort_by_key(|m| index(patch, m, key));
    server_only.sort_by_key(|m| index(original, m, key));
    let (left, right) = (server_only, patch_items);
    let (mut i, mut j) = (0, 0);
    let mut s = Vec::new();
    for _ in 0..left.len() + right.len() {
        if i >= left.len() {
            s.push(right[j].clone());
            j += 1;
        } else if j >= right.len() {
            s.push(left[i].clone());
            i += 1;
        } else {
            let (li, ri) = (
                index(original, &left[i], key),
                index(original, &right[j], key),
            );
            if li >= 0 && ri >= 0 && li < ri {
                s.push(left[i].clone());
                i += 1;
            } else {
                s.push(right[j].clone());
                j += 1;
            }
        }
    }
    s
}

fn merge_map(original: &mut Value, patch: &Value) {
    for (k, p) in patch.as_object().expect("patch object") {
        let key = match k.as_str() {
            "env" => Some("name"),
            "volumeMounts" => Some("mountPath"),
            _ => None,
        };
        let slot = &mut original[k];
        match (key, &*slot, p) {
            (Some(key), Value::Array(o), Value::Array(p)) => {
                *slot = Value::Array(merge_slice(o, p, key))
            }
            (None, Value::Object(_), Value::Object(_)) => merge_map(slot, p),
            _ => *slot = p.clone(),
        }
    }
}

/// `MergeContainerWithPatch` for the fields the generator uses.
fn merge_container_with_patch(base: Value, overlay: Value) -> Value {
    let mut merged = go_marshal(base.clone());
    let overlay = go_marshal(overlay);
    merge_map(&mut merged, &overlay);
    let by_name: Vec<&Value> = overlay["env"]
        .as_array()
        .map(|v| v.iter().collect())
        .unwrap_or_default();
    if let Some(env) = merged.get_mut("env").and_then(Value::as_array_mut) {
        for e in env.iter_mut() {
            let Some(o) = by_name.iter().rev().find(|o| name_of(o) == name_of(e)) else {
                continue;
            };
            let has_value = e.get("value").is_some_and(|v| v != "");
            if has_value && e.get("valueFrom").is_some() {
                if o.get("valueFrom").is_some() {
                    e.as_object_mut().map(|m| m.remove("value"));
                } else if o.get("value").is_some_and(|v| v != "") {
                    e.as_object_mut().map(|m| m.remove("valueFrom"));
                }
            }
        }
    }
    if merged["name"] == "" {
        merged["name"] = base["name"].clone();
    }
    merged
}

fn reference(case: &Case) -> Result<Expected, String> {
    let mut built = Built {
        env: Vec::new(),
        mounts: vec![json!({"name": "kserve-provision-location", "mountPath": "/mnt/models"})],
        volumes: Vec::new(),
    };
    credentials(case, &mut built)?;
    // needCaBundleMount, decided before the merge.
    let mut ca = None;
    let has_cm = built
        .env
        .iter()
        .any(|e| name_of(e) == "AWS_CA_BUNDLE_CONFIGMAP");
    if case.config_ca_map || has_cm {
        let mut name = if case.config_ca_map {
            "cfg-ca".to_string()
        } else {
            String::new()
        };
        if !case.in_controller_namespace {
            name = "global-ca-bundle".into();
        }
        let mut path = if case.config_ca_path {
            "/cfg/certs".to_string()
        } else {
            "/etc/ssl/custom-certs".to_string()
        };
        for e in &built.env {
            let value = e["value"].as_str().unwrap_or_default();
            match name_of(e) {
                "AWS_CA_BUNDLE_CONFIGMAP" => name = value.to_string(),
                "AWS_CA_BUNDLE" => path = go_dir(value),
                _ => {}
            }
        }
        ca = Some((name, path));
    }
    let mut container =
        json!({"name": "storage-initializer", "env": built.env, "volumeMounts": built.mounts});
    if let Some(doc) = case.csc_doc() {
        container = merge_container_with_patch(container, doc["spec"]["container"].clone());
    }
    let mut env: Vec<Value> = container["env"].as_array().cloned().unwrap_or_default();
    let mut mounts: Vec<Value> = container["volumeMounts"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut volumes = built.volumes;
    let add_if_absent = |env: &mut Vec<Value>, name: &str, value: &str| {
        if !env.iter().any(|e| name_of(e) == name) {
            env.push(lit(name, value));
        }
    };
    if let Some((name, path)) = ca {
        add_if_absent(&mut env, "CA_BUNDLE_CONFIGMAP_NAME", &name);
        add_if_absent(&mut env, "CA_BUNDLE_VOLUME_MOUNT_POINT", &path);
        volumes.push(json!({"name": "cabundle-cert", "configMap": {"name": name}}));
        mounts.push(json!({"name": "cabundle-cert", "mountPath": path, "readOnly": true}));
    }
    for (name, value) in [
        ("HF_HUB_ENABLE_HF_TRANSFER", "1"),
        ("HF_XET_HIGH_PERFORMANCE", "1"),
        ("HF_XET_NUM_CONCURRENT_RANGE_GETS", "8"),
    ] {
        add_if_absent(&mut env, name, value);
    }
    let env = go_marshal(json!({"env": env}))["env"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    Ok(Expected {
        env,
        mounts,
        volumes,
    })
}

// ---- The check ----

fn injected(case: &Case) -> Result<Expected, String> {
    let out = mutate(&case.pod(), case.namespace(), &case.env()).map_err(|e| e.to_string())?;
    let spec = &out.pod["spec"];
    let init = spec["initContainers"]
        .as_array()
        .and_then(|c| c.first())
        .ok_or("no init container")?;
    let volumes = spec["volumes"].as_array().cloned().unwrap_or_default();
    Ok(Expected {
        env: init["env"].as_array().cloned().unwrap_or_default(),
        mounts: init["volumeMounts"].as_array().cloned().unwrap_or_default(),
        volumes: volumes
            .into_iter()
            .filter(|v| name_of(v) != "kserve-provision-location")
            .collect(),
    })
}

fn check(case: &Case) -> Result<(), String> {
    let want = reference(case);
    let got = injected(case);
    match (&want, &got) {
        (Err(_), Err(_)) => {
            DENIED.fetch_add(1, Ordering::Relaxed);
            Ok(())
        }
        (Ok(w), Ok(g)) if w == g => {
            if case.csc.is_some() {
                WITH_CSC.fetch_add(1, Ordering::Relaxed);
            }
            if w.volumes.iter().any(|v| name_of(v) == "cabundle-cert") {
                WITH_CA.fetch_add(1, Ordering::Relaxed);
            }
            Ok(())
        }
        _ => Err(format!(
            "reference and injector differ\nreference: {}\ninjector:  {}",
            serde_json::to_string_pretty(&want.map(|e| json!([e.env, e.mounts, e.volumes])))
                .unwrap_or_default(),
            serde_json::to_string_pretty(&got.map(|e| json!([e.env, e.mounts, e.volumes])))
                .unwrap_or_default(),
        )),
    }
}

#[test]
fn credentials_and_csc_merge_agree_with_the_go_rules() {
    let config = RunnerConfig {
        cases: CASES,
        failure_persistence: None,
        rng_algorithm: RngAlgorithm::XorShift,
        max_shrink_iters: 4_096,
        ..RunnerConfig::default()
    };
    let rng = TestRng::from_seed(RngAlgorithm::XorShift, SEED);
    let mut runner = TestRunner::new_with_rng(config, rng);
    let result = runner.run(&case(), |case| check(&case).map_err(TestCaseError::fail));
    println!(
        "proptest credentials: seed {SEED:?} (XorShift), {CASES} clusters: {} denied, {} merged with a CSC, {} with a CA bundle, {} S3 Secrets",
        DENIED.load(Ordering::Relaxed),
        WITH_CSC.load(Ordering::Relaxed),
        WITH_CA.load(Ordering::Relaxed),
        S3_MERGED.load(Ordering::Relaxed),
    );
    if let Err(e) = result {
        panic!("{e}");
    }
}
