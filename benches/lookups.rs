//! Cluster lookups with warm caches: the time `Lookups::snapshot` adds to an
//! admission when every key is cached (no API call), in the default mode
//! (Secrets fetched and kept for the TTL: `snapshot_s3_pod_warm`) and with
//! every Secret watched (`snapshot_s3_pod_warm_watched`), and the memory of
//! the caches holding 10,000 Secrets and 10,000 ServiceAccounts, filled
//! through the same reduction the watch applies (`Secret::from_api`,
//! `ServiceAccount::from_api`), and the same warm snapshot and the
//! ClusterStorageContainer selection with 10 and 5,000 of them cached
//! (`storage_containers/…`).
//!
//!     cargo bench --bench lookups
//!
//! Prints `rss:` lines (VmRSS of this process, Linux) before the timings.

use criterion::{criterion_group, criterion_main, Criterion};
use k8s_openapi::api::core::v1 as api;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::ByteString;
use kserve_injector::lookups::{LookupMetrics, LookupOptions, Lookups};
use kserve_injector_core::cluster::needed_keys;
use kserve_injector_core::cluster::{ClusterSnapshot, Secret, ServiceAccount, StorageContainers};
use kserve_injector_core::config::Config;
use kserve_injector_core::constants::{ISVC_LABEL, SOURCE_URI_ANNOTATION};
use kserve_injector_core::internals::select_storage_container;
use kserve_injector_core::PodFacts;
use prometheus_client::registry::Registry;
use std::collections::BTreeMap;
use std::future::Future;
use std::hint::black_box;
use std::task::{Context, Poll, Waker};

const OBJECTS: usize = 10_000;
const NAMESPACES: usize = 100;

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    (status.lines())
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn meta(ns: &str, name: &str, annotations: &[(&str, &str)]) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        namespace: Some(ns.into()),
        annotations: Some(
            (annotations.iter())
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        ),
        resource_version: Some("123456".into()),
        uid: Some("0f0e3d2c-1b1a-4098-8776-655443322110".into()),
        ..ObjectMeta::default()
    }
}

/// Realistic objects: each ServiceAccount lists its Secret; each Secret
/// holds S3 credentials with an endpoint, as KServe's docs describe.
fn cluster() -> ClusterSnapshot {
    let mut data = ClusterSnapshot::default();
    for i in 0..OBJECTS {
        let ns = format!("team-{}", i % NAMESPACES);
        let secret = api::Secret {
            metadata: meta(
                &ns,
                &format!("s3-creds-{i}"),
                &[
                    (
                        "serving.kserve.io/s3-endpoint",
                        "s3.eu-west-1.amazonaws.com",
                    ),
                    ("serving.kserve.io/s3-usehttps", "1"),
                ],
            ),
            data: Some(BTreeMap::from([
                (
                    "AWS_ACCESS_KEY_ID".into(),
                    ByteString(b"AKIAIOSFODNN7EXAMPLE".to_vec()),
                ),
                (
                    "AWS_SECRET_ACCESS_KEY".into(),
                    ByteString(b"wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY".to_vec()),
                ),
                (
                    "S3_ENDPOINT".into(),
                    ByteString(b"s3.eu-west-1.amazonaws.com".to_vec()),
                ),
            ])),
            type_: Some("Opaque".into()),
            ..api::Secret::default()
        };
        data.insert_secret(Secret::from_api(&secret, &ns));
        let sa = api::ServiceAccount {
            metadata: meta(
                &ns,
                &format!("sa-{i}"),
                &[(
                    "eks.amazonaws.com/role-arn",
                    "arn:aws:iam::123456789012:role/model-reader",
                )],
            ),
            secrets: Some(vec![api::ObjectReference {
                name: Some(format!("s3-creds-{i}")),
                ..Default::default()
            }]),
            ..api::ServiceAccount::default()
        };
        data.insert_service_account(ServiceAccount::from_api(&sa, &ns));
    }
    data
}

/// `n` ClusterStorageContainers of about 530 B, one in ten matched by a
/// regex, as the API server stores them (defaults filled by the loader).
fn storage_containers(n: usize) -> StorageContainers {
    let docs = (0..n).map(|j| {
        let format = match j % 10 {
            0 => serde_json::json!({"regex": format!("^s3://team-{j}-[a-z]+/")}),
            _ => serde_json::json!({"prefix": format!("s3://bucket-{j}/")}),
        };
        serde_json::json!({
            "apiVersion": "serving.kserve.io/v1alpha1", "kind": "ClusterStorageContainer",
            "metadata": {"name": format!("csc-{j:05}")},
            "spec": {"container": {"name": "storage-initializer",
                                   "image": format!("registry.example.com/initializer-{j}:1.0"),
                                   "resources": {"requests": {"memory": "1Gi", "cpu": "100m"}}},
                     "supportedUriFormats": [format]},
        })
    });
    ClusterSnapshot::from_documents(docs.collect())
        .unwrap()
        .storage_containers
}

/// An S3 pod whose URI `csc-{j}` matches.
fn csc_pod(j: usize) -> PodFacts {
    let mut pod = s3_pod(j);
    pod.annotations.insert(
        SOURCE_URI_ANNOTATION.to_string(),
        format!("s3://bucket-{j}/bert"),
    );
    pod
}

fn client_for_bench(runtime: &tokio::runtime::Runtime) -> kube::Client {
    runtime.block_on(async {
        kube::Client::try_from(kube::Config::new("http://127.0.0.1:9".parse().unwrap())).unwrap()
    })
}

fn s3_pod(i: usize) -> PodFacts {
    PodFacts {
        namespace: format!("team-{}", i % NAMESPACES),
        service_account_name: format!("sa-{i}"),
        annotations: [(
            SOURCE_URI_ANNOTATION.to_string(),
            "s3://models/bert".to_string(),
        )]
        .into(),
        labels: [(ISVC_LABEL.to_string(), "bert".to_string())].into(),
    }
}

/// Polls the snapshot once: with every key cached it never waits, so this is
/// its cost inside an admission task, without an executor round trip.
fn warm_snapshot(lookups: &Lookups, pod: &PodFacts, config: &Config) -> ClusterSnapshot {
    let mut future = std::pin::pin!(lookups.snapshot(pod, config));
    let mut cx = Context::from_waker(Waker::noop());
    match future.as_mut().poll(&mut cx) {
        Poll::Ready(result) => result.expect("all keys are cached"),
        Poll::Pending => panic!("a warm snapshot waited (a key was not cached)"),
    }
}

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let before = rss_kib();
    let data = cluster();
    // Never contacted: every key the benchmark asks for is cached.
    let client = runtime.block_on(async {
        kube::Client::try_from(kube::Config::new("http://127.0.0.1:9".parse().unwrap())).unwrap()
    });
    let mut registry = Registry::default();
    let metrics = LookupMetrics::register(&mut registry);
    let watched = Lookups::preloaded(
        client.clone(),
        metrics.clone(),
        &LookupOptions::watch_all(),
        data,
    );
    let after = rss_kib();
    println!(
        "rss: {} KiB before, {} KiB with {OBJECTS} Secrets and {OBJECTS} ServiceAccounts cached (+{} KiB)",
        before,
        after,
        after.saturating_sub(before)
    );
    let config = Config::default();
    let pods: Vec<PodFacts> = (0..64).map(|i| s3_pod(i * 151)).collect();
    // The default mode: the ServiceAccounts watched, the pods' Secrets
    // fetched a moment ago (fresh for the TTL).
    let mut fetched_data = cluster();
    let needed: ClusterSnapshot = (pods.iter())
        .map(|p| fetched_data.restrict(p, &config))
        .fold(ClusterSnapshot::default(), |mut all, one| {
            all.secrets.extend(one.secrets);
            all
        });
    fetched_data.secrets = needed.secrets;
    let lookups = Lookups::preloaded(client, metrics, &LookupOptions::default(), fetched_data);
    for pod in &pods {
        for l in [&lookups, &watched] {
            let got = runtime.block_on(l.snapshot(pod, &config)).unwrap();
            assert_eq!((got.service_accounts.len(), got.secrets.len()), (1, 1));
        }
    }
    for (name, l) in [
        ("snapshot_s3_pod_warm", &lookups),
        ("snapshot_s3_pod_warm_watched", &watched),
    ] {
        let mut i = 0;
        c.bench_function(name, |b| {
            b.iter(|| {
                i = (i + 1) % pods.len();
                black_box(runtime.block_on(l.snapshot(&pods[i], &config)).unwrap())
            })
        });
    }
    let plain = PodFacts {
        namespace: "team-1".into(),
        ..PodFacts::default()
    };
    c.bench_function("snapshot_pod_without_lookups", |b| {
        b.iter(|| black_box(warm_snapshot(&lookups, &plain, &config)))
    });
    // One round of the key function, given the pod's objects: a warm
    // snapshot runs it three times (ServiceAccount, then its Secrets, then
    // nothing new).
    let known: Vec<ClusterSnapshot> = (pods.iter())
        .map(|p| warm_snapshot(&lookups, p, &config))
        .collect();
    let mut k = 0;
    c.bench_function("needed_keys_s3_pod_one_round", |b| {
        b.iter(|| {
            k = (k + 1) % pods.len();
            black_box(needed_keys(&pods[k], &config, &known[k]))
        })
    });
    // The same keys and copies from a plain snapshot (the core's own
    // `restrict`, no cache, no lock): what the adapter adds is the difference.
    let whole = cluster();
    let mut j = 0;
    c.bench_function("restrict_s3_pod_pure", |b| {
        b.iter(|| {
            j = (j + 1) % pods.len();
            black_box(whole.restrict(&pods[j], &config))
        })
    });
    // The same warm snapshot with 10 and with 5,000 ClusterStorageContainers
    // cached (one in ten matched by a regex), and the selection the
    // storage-initializer makes with it: flat, since the snapshot shares
    // them and the selection reads only the candidates for the URI.
    let mut group = c.benchmark_group("storage_containers");
    for n in [10, 5_000] {
        let pod = csc_pod(n / 2 + 1);
        // As above: the pod's Secret fetched a moment ago. All 10,000 would
        // not fit the fetched Secrets' cache, and an evicted one is a GET.
        let mut with = cluster();
        with.secrets = with.restrict(&pod, &config).secrets;
        with.storage_containers = storage_containers(n);
        let lookups = Lookups::preloaded(
            client_for_bench(&runtime),
            LookupMetrics::unregistered(),
            &LookupOptions::default(),
            with,
        );
        let uri = pod.annotations[SOURCE_URI_ANNOTATION].clone();
        let got = warm_snapshot(&lookups, &pod, &config);
        let want = format!("registry.example.com/initializer-{}:1.0", n / 2 + 1);
        let chosen = select_storage_container(&got, &uri, None).unwrap().unwrap();
        assert_eq!(chosen.container().unwrap().image, Some(want));
        group.bench_function(format!("snapshot_warm/{n}"), |b| {
            b.iter(|| black_box(warm_snapshot(&lookups, &pod, &config)))
        });
        group.bench_function(format!("select/{n}"), |b| {
            b.iter(|| {
                black_box(
                    select_storage_container(&got, &uri, None)
                        .unwrap()
                        .map(|c| c.name().len()),
                )
            })
        });
    }
    group.finish();
    // A miss would have gone to the (absent) API server and failed above.
    let gets =
        kserve_injector::lookups::Kind::ALL.map(|k| lookups.metrics().kind(k).fallback_gets.get());
    assert_eq!(gets, [0; 4]);
}

criterion_group!(benches, bench);
criterion_main!(benches);
