//! `audit --upgrade-to` and `mutate --compare-to` on generated pods (this
//! module's pods, and the cluster-lookup cases of `lookups.rs` with their
//! ServiceAccounts, Secrets, ClusterStorageContainers and InferenceServices)
//! and generated cluster objects, under each release's shipped ConfigMap
//! or HEAD's edited:
//! * `upgrading_to_the_running_release_changes_nothing` (u1): no change,
//!   and no denial that differs, also where the target's ConfigMap is the
//!   same values written another way (compact JSON, a key the mutator
//!   does not read);
//! * `the_changes_are_the_difference_and_each_has_a_row` (u2): between any
//!   two releases, the reported changes are exactly the difference between
//!   the pods the two releases make, mutated here on their own: every leaf
//!   that differs lies under a change, every change's old and new values
//!   are the two pods' values there and something under it differs, every
//!   reordering of named entries is one; denials are the two releases'
//!   own; each change and denial names rows docs/compatibility.md has
//!   (read here), no ConfigMap key (both sides read the same one) and
//!   nothing unexplained.
//!
//! Both sample one release of each set of tags that make the same pods
//! ([`distinct_releases`]).
//!
//! The checks (the two pods' difference by a flattening apart from the
//! core's, the rows of docs/compatibility.md) are in `upgrade_checks.rs`,
//! with `every_switch_row_is_in_the_table_of_a_release_that_has_the_older_behaviour`:
//! the release a switch's row number names is the last with the older
//! behaviour, and its table lists the row.

use super::upgrade_checks::{check_causes, check_difference};
use super::*;
use crate::lookups;
use kserve_injector_core::audit::{Causes, Form, Side, Upgrade};
use kserve_injector_core::cluster::ClusterSnapshot;
use kserve_injector_core::config::{manifest_data, ConfigError, Resources};
use kserve_injector_core::PodFacts;
use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

const SAME_CASES: u32 = 700;
const PAIR_CASES: u32 = 1_200;

/// HEAD's shipped ConfigMap with these edits (`section`, JSON pointer, value;
/// `None` removes), or, for [`Data::Shipped`], each release's own.
const EDITS: [&[(&str, &str, Option<&str>)]; 6] = [
    &[],
    &[("storageInitializer", "ociModelMode", Some("\"native\""))],
    &[
        ("storageInitializer", "ociModelMode", Some("\"fetch\"")),
        (
            "storageInitializer",
            "caBundleConfigMapName",
            Some("\"custom-ca\""),
        ),
        ("storageInitializer", "ociInsecureRegistry", Some("true")),
    ],
    &[
        ("storageInitializer", "enableModelcar", Some("false")),
        ("storageInitializer", "uidModelcar", None),
        (
            "metricsAggregator",
            "enableMetricAggregation",
            Some("\"true\""),
        ),
        (
            "metricsAggregator",
            "enablePrometheusScraping",
            Some("\"true\""),
        ),
        ("logger", "caBundle", Some("\"logger-ca\"")),
    ],
    &[
        (
            "storageInitializer",
            "enableDirectPvcVolumeMount",
            Some("true"),
        ),
        (
            "logger",
            "storage",
            Some(r#"{"path": "/logs", "parameters": {"format": "json"}}"#),
        ),
        (
            "logger",
            "marshallerUrl",
            Some("\"http://marshaller:8080\""),
        ),
        ("logger", "batchSize", Some("8")),
        (
            "credentials",
            "s3",
            Some(r#"{"s3Endpoint": "s3.example.com", "s3UseHttps": "0"}"#),
        ),
    ],
    // v0.16 refuses it: every pod is denied.
    &[
        ("storageInitializer", "cpuModelcar", None),
        ("storageInitializer", "memoryModelcar", None),
    ],
];

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Data {
    /// Each side the ConfigMap its release shipped.
    Shipped,
    /// Both sides HEAD's with [`EDITS`]`[i]`.
    Edited(usize),
}

fn edited(i: usize) -> BTreeMap<String, String> {
    let mut data = manifest_data(Config::shipped_manifest(Release::Head)).expect("shipped");
    for (section, key, value) in EDITS[i] {
        let mut map: Value = serde_json::from_str(&data[*section]).expect("JSON");
        let object = map.as_object_mut().expect("an object");
        match value {
            Some(v) => {
                object.insert(key.to_string(), serde_json::from_str(v).expect("JSON"));
            }
            None => {
                object.remove(*key);
            }
        }
        data.insert(section.to_string(), map.to_string());
    }
    data
}

/// The same values as [`edited`], written another way: compact JSON,
/// and a key the mutator does not read.
fn rewritten(i: usize) -> BTreeMap<String, String> {
    let mut data = edited(i);
    for text in data.values_mut() {
        let value: Value = serde_json::from_str(text).expect("JSON");
        *text = value.to_string();
    }
    let ingress = r#"{"ingressGateway": "knative-serving/knative-ingress-gateway"}"#;
    data.insert("ingress".into(), ingress.into());
    data
}

/// The two sides; with `rewrite`, the target's ConfigMap is the current
/// one written another way.
fn sides(data: Data, from: Release, to: Release, rewrite: bool) -> (Side, Side) {
    match data {
        Data::Shipped => (Side::shipped(from), Side::shipped(to)),
        Data::Edited(i) if rewrite => (Side::new(from, edited(i)), Side::new(to, rewritten(i))),
        Data::Edited(i) => (Side::new(from, edited(i)), Side::new(to, edited(i))),
    }
}

type Built = Arc<Result<Upgrade, ConfigError>>;

/// Each (from, to, ConfigMap) built once: a walk parses many configs.
fn upgrade(data: Data, from: Release, to: Release, rewrite: bool) -> Built {
    type Cache = Mutex<HashMap<(Data, Release, Release, bool), Built>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    let mut cache = cache.lock().unwrap_or_else(|e| e.into_inner());
    let built = cache.entry((data, from, to, rewrite)).or_insert_with(|| {
        let (current, target) = sides(data, from, to, rewrite);
        let settings = (Inputs::default(), Resources::default());
        Arc::new(Upgrade::new(current, target, &settings.0, &settings.1))
    });
    built.clone()
}

// ---------------------------------------------------------------------------
// Cases
// ---------------------------------------------------------------------------

/// Secrets the generated ServiceAccounts list, one of each kind whose env
/// changed between releases.
const SECRETS: [&str; 7] = [
    "s3-data",
    "s3-annotated",
    "hf",
    "azure-token",
    "azure-sp",
    "modelscope",
    "gcs",
];

fn secret(namespace: &str, name: &str) -> Value {
    let (data, annotations) = match name {
        "s3-data" => (
            json!({"AWS_ACCESS_KEY_ID": "i", "AWS_SECRET_ACCESS_KEY": "k",
                   "S3_ENDPOINT": "minio.example:9000", "S3_USE_HTTPS": "0"}),
            json!({}),
        ),
        "s3-annotated" => (
            json!({"AWS_ACCESS_KEY_ID": "i", "AWS_SECRET_ACCESS_KEY": "k"}),
            json!({"serving.kserve.io/s3-endpoint": " HTTP://minio:9000 ",
                   "serving.kserve.io/s3-usehttps": "1",
                   "serving.kserve.io/s3-cabundle-configmap": "s3-ca"}),
        ),
        "hf" => (json!({"HF_TOKEN": "t"}), json!({})),
        "azure-token" => (
            json!({"AZURE_ACCESS_TOKEN": "t", "AZURE_ACCOUNT_NAME": "a"}),
            json!({}),
        ),
        "azure-sp" => (
            json!({"AZURE_CLIENT_ID": "c", "AZURE_STORAGE_ACCESS_KEY": "k"}),
            json!({}),
        ),
        "modelscope" => (json!({"MODELSCOPE_API_TOKEN": "t"}), json!({})),
        _ => (
            json!({"gcloud-application-credentials.json": "{}"}),
            json!({}),
        ),
    };
    json!({"apiVersion": "v1", "kind": "Secret",
           "metadata": {"name": name, "namespace": namespace, "annotations": annotations},
           "stringData": data})
}

/// The cluster objects of a generated pod of this module.
#[derive(Debug, Clone)]
struct Objects {
    /// The secrets each ServiceAccount (`default`, `sa`) lists.
    accounts: [Vec<usize>; 2],
    /// A ClusterStorageContainer for `gs://` or `s3://` (with env of its own).
    csc: Option<usize>,
    /// An InferenceService `sklearn` whose logger has storage and batching.
    isvc_logger: bool,
}

fn objects() -> impl Strategy<Value = Objects> {
    let listed = || prop::collection::vec(0..SECRETS.len(), 0..3);
    (
        [listed(), listed()],
        prop::option::weighted(0.3, 0..2usize),
        any::<bool>(),
    )
        .prop_map(|(accounts, csc, isvc_logger)| Objects {
            accounts,
            csc,
            isvc_logger,
        })
}

impl Objects {
    fn cluster(&self) -> ClusterSnapshot {
        let mut docs = Vec::new();
        for ns in NAMESPACES {
            for (account, listed) in ["default", "sa"].iter().zip(&self.accounts) {
                let secrets: Vec<Value> = listed
                    .iter()
                    .map(|s| json!({"name": SECRETS[*s]}))
                    .collect();
                docs.push(json!({"apiVersion": "v1", "kind": "ServiceAccount",
                    "metadata": {"name": account, "namespace": ns}, "secrets": secrets}));
            }
            docs.extend(SECRETS.iter().map(|name| secret(ns, name)));
            if self.isvc_logger {
                docs.push(json!({"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
                    "metadata": {"name": "sklearn", "namespace": ns},
                    "spec": {"predictor": {"logger": {"mode": "all",
                        "storage": {"path": "/isvc-logs", "serviceAccountName": "sa"},
                        "marshallerUrl": "http://m:8080", "batchSize": 4, "batchInterval": "1s"}}}}));
            }
        }
        if let Some(i) = self.csc {
            let prefix = ["gs://", "s3://"][i];
            docs.push(json!({"apiVersion": "serving.kserve.io/v1alpha1", "kind": "ClusterStorageContainer",
                "metadata": {"name": "custom"},
                "spec": {"container": {"name": "storage-initializer", "image": "custom:1",
                    "env": [{"name": "CA_BUNDLE_CONFIGMAP_NAME", "value": "csc-ca"}, {"name": "EXTRA", "value": "1"}]},
                    "supportedUriFormats": [{"prefix": prefix}]}}));
        }
        ClusterSnapshot::from_documents(docs).expect("generated objects load")
    }
}

/// A pod, the namespace it is created in, and the objects it may read.
#[derive(Clone)]
struct Subject {
    pod: Value,
    namespace: &'static str,
    cluster: ClusterSnapshot,
    /// How it was made, for failure reports.
    made: String,
}

impl fmt::Debug for Subject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "namespace {:?}, {}\npod: {}",
            self.namespace, self.made, self.pod
        )
    }
}

fn subject() -> impl Strategy<Value = Subject> {
    let ours = (
        pod_parts(),
        prop::sample::select(NAMESPACES.to_vec()),
        objects(),
    )
        .prop_map(|(parts, namespace, objects)| Subject {
            pod: parts.render(),
            namespace,
            cluster: objects.cluster(),
            made: format!("objects {objects:?}"),
        });
    let looked_up = lookups::case().prop_map(|case| Subject {
        pod: case.pod(),
        namespace: case.namespace(),
        cluster: case.cluster(),
        made: format!("lookups case {case:?}"),
    });
    prop_oneof![3 => ours, 2 => looked_up]
}

fn data() -> impl Strategy<Value = Data> {
    prop_oneof![1 => Just(Data::Shipped), 3 => (0..EDITS.len()).prop_map(Data::Edited)]
}

/// The releases that make pods no older release makes: a tag whose switches
/// and shipped ConfigMap are the previous tag's (v0.17.1, v0.18.1 and
/// v0.19.0, as the core's
/// `patch_releases_share_the_behaviour_of_the_tag_whose_sources_they_equal`
/// says) gives every pair the pods its predecessor gives, so sampling it
/// too would spend the case budget on no new comparison.
fn distinct_releases() -> Vec<Release> {
    use kserve_injector_core::internals::Switch;
    let same = |a: Release, b: Release| {
        Switch::ALL
            .iter()
            .all(|s| s.in_release(a) == s.in_release(b))
            && Config::shipped(a).for_release(Release::Head)
                == Config::shipped(b).for_release(Release::Head)
    };
    let mut out: Vec<Release> = Vec::new();
    for &release in Release::SUPPORTED {
        if !out.last().is_some_and(|&previous| same(previous, release)) {
            out.push(release);
        }
    }
    out
}

fn release() -> impl Strategy<Value = Release> {
    prop::sample::select(distinct_releases())
}

#[test]
fn the_sampled_releases_are_each_mutator_and_configmap_once() {
    use Release::*;
    assert_eq!(
        distinct_releases(),
        [V0_15_0, V0_15_1, V0_15_2, V0_16_0, V0_17_0, V0_18_0, V0_20_0, Head]
    );
}

// ---------------------------------------------------------------------------
// Checks
// ---------------------------------------------------------------------------

/// What one release makes of the pod on its own: the pod, or its denial.
fn direct(side: &Side, subject: &Subject) -> Result<Result<Value, String>, String> {
    let config = match Config::from_data_with(&side.data, &Resources::default(), side.release) {
        Ok(config) => config,
        Err(e) => return Ok(Err(e.to_string())),
    };
    let facts = PodFacts::from_pod_value(&subject.pod, subject.namespace, &config);
    let objects = subject.cluster.restrict(&facts, &config);
    let inputs = Inputs::new(config).with_cluster(objects);
    match mutate(&subject.pod, subject.namespace, &inputs) {
        Ok(m) => Ok(Ok(m.pod)),
        Err(MutationError::Inject(e)) => Ok(Err(e.message)),
        Err(e) => Err(e.to_string()),
    }
}

fn pair_case(
    subject: &Subject,
    data: Data,
    from: Release,
    to: Release,
    stats: &PairStats,
) -> Result<(), String> {
    Stats::bump(&stats.cases);
    let (current, target) = sides(data, from, to, false);
    let upgrade = upgrade(data, from, to, false);
    let upgrade = match upgrade.as_ref() {
        Ok(u) => u,
        Err(e) => {
            check!(
                direct(&current, subject)?.is_err(),
                "the upgrade refused a ConfigMap {from} reads: {e}"
            );
            Stats::bump(&stats.refused_config);
            return Ok(());
        }
    };
    let lookup = |facts: &PodFacts, config: &Config| {
        Ok::<_, Infallible>(subject.cluster.restrict(facts, config))
    };
    let got = match upgrade.pod(&subject.pod, Form::Pod, subject.namespace, lookup) {
        Ok(got) => got,
        Err(e) => {
            check!(
                direct(&current, subject).is_err(),
                "the upgrade refused a pod mutate reads: {e}"
            );
            Stats::bump(&stats.refused);
            return Ok(());
        }
    };
    let (old, new) = (direct(&current, subject)?, direct(&target, subject)?);
    match (&old, &new) {
        (Ok(old), Ok(new)) => {
            check!(
                got.admission.is_none(),
                "both admit the pod, but {:?}",
                got.admission
            );
            check_difference(old, new, &got.changes)?;
            if !got.changes.is_empty() {
                Stats::bump(&stats.changed);
            }
        }
        _ => {
            let admission = got.admission.as_ref().ok_or("a denial is not reported")?;
            check!(
                admission.current.as_ref() == old.as_ref().err(),
                "current denial {:?}, {from} says {old:?}",
                admission.current
            );
            check!(
                admission.target.as_ref() == new.as_ref().err(),
                "target denial {:?}, {to} says {:?}",
                admission.target,
                new.as_ref().err()
            );
            check!(
                got.changes.is_empty(),
                "changes beside a denial: {:?}",
                got.changes
            );
            if old != new {
                check_causes("the denial", &admission.causes)?;
            }
            Stats::bump(&stats.denied);
        }
    }
    for c in &got.changes {
        check_causes(&c.path, &c.causes)?;
        if let Ok(mut rows) = stats.rows.lock() {
            for row in &c.causes.rows {
                *rows.entry(row.to_string()).or_default() += 1;
            }
        }
    }
    Ok(())
}

#[derive(Default)]
struct PairStats {
    cases: AtomicUsize,
    refused: AtomicUsize,
    refused_config: AtomicUsize,
    denied: AtomicUsize,
    changed: AtomicUsize,
    rows: Mutex<BTreeMap<String, usize>>,
}

#[test]
fn upgrading_to_the_running_release_changes_nothing() {
    let unchanged = AtomicUsize::new(0);
    let strategy = (subject(), data(), release());
    run_property(
        "upgrading_to_the_running_release_changes_nothing",
        8,
        SAME_CASES,
        strategy,
        |(subject, data, release)| {
            let upgrade = upgrade(data, release, release, true);
            let Ok(upgrade) = upgrade.as_ref() else {
                return Ok(());
            };
            let lookup = |facts: &PodFacts, config: &Config| {
                Ok::<_, Infallible>(subject.cluster.restrict(facts, config))
            };
            let Ok(got) = upgrade.pod(&subject.pod, Form::Pod, subject.namespace, lookup) else {
                return Ok(());
            };
            let check = || -> Result<(), String> {
                check!(
                    got.changes.is_empty(),
                    "{release} → {release}: changes {:?}",
                    got.changes
                );
                if let Some(a) = &got.admission {
                    check!(
                        a.current == a.target && a.causes == Causes::default(),
                        "{release} → {release}: {a:?}"
                    );
                }
                Ok(())
            };
            check().map_err(fail)?;
            unchanged.fetch_add(1, Ordering::Relaxed);
            Ok(())
        },
    );
    println!(
        "proptest upgrading_to_the_running_release_changes_nothing: {} pods compared",
        unchanged.load(Ordering::Relaxed)
    );
    assert!(
        unchanged.load(Ordering::Relaxed) * 2 > SAME_CASES as usize,
        "most cases must compare a pod"
    );
}

#[test]
fn the_changes_are_the_difference_and_each_has_a_row() {
    let stats = PairStats::default();
    let strategy = (subject(), data(), release(), release());
    run_property(
        "the_changes_are_the_difference_and_each_has_a_row",
        9,
        PAIR_CASES,
        strategy,
        |(subject, data, from, to)| {
            pair_case(&subject, data, from, to, &stats)
                .map_err(|e| fail(format!("{from} → {to}, {data:?}: {e}")))
        },
    );
    let rows = stats.rows.lock().map(|r| r.clone()).unwrap_or_default();
    println!(
        "proptest the_changes_are_the_difference_and_each_has_a_row: {} cases, {} with changes, {} with a denial, {} refused pods, {} refused ConfigMaps; rows cited: {rows:?}",
        Stats::get(&stats.cases),
        Stats::get(&stats.changed),
        Stats::get(&stats.denied),
        Stats::get(&stats.refused),
        Stats::get(&stats.refused_config),
    );
    // The generators reach most rows, and many pods change.
    assert!(
        Stats::get(&stats.changed) * 6 > PAIR_CASES as usize,
        "too few pods change"
    );
    assert!(rows.len() >= 15, "too few rows reached: {rows:?}");
}
