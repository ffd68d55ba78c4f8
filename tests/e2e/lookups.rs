//! The cluster lookups against a real kube-apiserver (1.36 and 1.31) + etcd on loopback
//! (`tests/e2e/apiserver/`): the caches run as the webhook's
//! ServiceAccount (a token user), which only the shipped ClusterRole and
//! binding (`manifests/rbac/cluster-role.yaml`) authorise, so the RBAC is
//! what is tested.
//!
//! Without the binaries the test says how to build them and passes as
//! skipped, except under `CI=true`, where it fails.

use crate::harness::*;
use k8s_openapi::api::core::v1::Secret as ApiSecret;
use kserve_injector::lookups::{
    fetch_once, Kind, LookupError, LookupMetrics, LookupOptions, Lookups, StreamingLists,
};
use kserve_injector_core::cluster::ClusterSnapshot;
use kserve_injector_core::cluster::NOT_A_STORAGE_SPEC;
use kserve_injector_core::config::Config;
use kserve_injector_core::constants::{ISVC_LABEL, LOGGER_ANNOTATION, SOURCE_URI_ANNOTATION};
use kserve_injector_core::PodFacts;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::Api;
use prometheus_client::registry::Registry;
use std::time::{Duration, Instant};

const OBJECTS: &str = "tests/e2e/lookups-objects.yaml";

fn pod(sa: &str, isvc: &str, annotations: &[(&str, &str)]) -> PodFacts {
    PodFacts {
        namespace: NS.into(),
        service_account_name: sa.into(),
        annotations: (annotations.iter())
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        labels: [(ISVC_LABEL.to_string(), isvc.to_string())].into(),
    }
}

fn s3_pod(sa: &str) -> PodFacts {
    pod(
        sa,
        "isvc-s3",
        &[(SOURCE_URI_ANNOTATION, "s3://bucket/model")],
    )
}

fn secret_value(data: &ClusterSnapshot, name: &str, key: &str) -> Option<String> {
    data.secret(NS, name)?.get(key).map(str::to_string)
}

/// Per kind: objects cached, watch errors, fallback GETs (for failure messages).
/// The objects file as `mutate --objects` reads it.
fn objects_from_file(path: &str) -> ClusterSnapshot {
    let text = std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(path))
        .unwrap();
    let docs = crate::harness::yaml_docs(&text);
    ClusterSnapshot::load(docs).unwrap().data
}

fn watch_state(lookups: &Lookups) -> String {
    let kinds = Kind::ALL.iter().map(|k| {
        let m = lookups.metrics().kind(*k);
        let (errors, gets) = (m.watch_errors.get(), m.fallback_gets.get());
        format!(
            "{k:?}: {} cached, {errors} watch errors, {gets} GETs",
            lookups.cached(*k)
        )
    });
    kinds.collect::<Vec<_>>().join("; ")
}

fn secret_gets(lookups: &Lookups) -> u64 {
    lookups.metrics().kind(Kind::Secrets).fallback_gets.get()
}

/// A SelfSubjectAccessReview: may `client` do `verb` on `resource`
/// cluster-wide?
async fn can_i(client: &kube::Client, verb: &str, resource: &str) -> bool {
    use k8s_openapi::api::authorization::v1::{
        ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
    };
    let review = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                verb: Some(verb.into()),
                resource: Some(resource.into()),
                ..ResourceAttributes::default()
            }),
            ..SelfSubjectAccessReviewSpec::default()
        },
        ..SelfSubjectAccessReview::default()
    };
    let api: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    let answer = api.create(&PostParams::default(), &review).await.unwrap();
    answer.status.is_some_and(|s| s.allowed)
}

fn fallback_gets(lookups: &Lookups) -> u64 {
    Kind::ALL
        .iter()
        .map(|k| lookups.metrics().kind(*k).fallback_gets.get())
        .sum()
}

/// A measurement, not a check (run by hand): RSS of this process with no
/// lookups, then, in a cluster of 10,000 Secrets and 10,000 ServiceAccounts,
/// either with the default lookups (ServiceAccounts watched, Secrets
/// fetched) after admissions that needed 2,000 distinct Secrets (the cache
/// keeps 1,000), or, with `E2E_RSS_WATCH_SECRETS=1`, with every Secret
/// watched too (as the cluster admin: the shipped role may not list them).
/// One mode per process, so the other's freed memory does not count.
///
///     cargo test --release --test e2e lookups:: -- --ignored --nocapture rss
///     E2E_RSS_WATCH_SECRETS=1 cargo test --release --test e2e lookups:: -- --ignored --nocapture rss
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: creates 20,000 objects"]
async fn rss_with_10k_secrets_and_service_accounts() {
    use futures::StreamExt;
    let server = ApiServer::new("/tmp/kapi-22-rss");
    if !present(&server) {
        return;
    }
    let admin = client(&server.start_clean()).await;
    apply_cluster(&admin, OBJECTS).await;
    let created = Instant::now();
    let docs = (0..10_000).map(|i| {
        format!(
            "apiVersion: v1\nkind: ServiceAccount\nmetadata: {{name: sa-{i}, namespace: e2e, annotations: {{eks.amazonaws.com/role-arn: 'arn:aws:iam::123456789012:role/model-reader'}}}}\nsecrets: [{{name: s3-{i}}}]\n---\napiVersion: v1\nkind: Secret\nmetadata: {{name: s3-{i}, namespace: e2e, annotations: {{serving.kserve.io/s3-endpoint: s3.eu-west-1.amazonaws.com}}}}\nstringData: {{AWS_ACCESS_KEY_ID: AKIAIOSFODNN7EXAMPLE, AWS_SECRET_ACCESS_KEY: wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY, S3_ENDPOINT: s3.eu-west-1.amazonaws.com}}\n"
        )
    });
    futures::stream::iter(docs)
        .for_each_concurrent(16, |doc| {
            let admin = admin.clone();
            async move { apply(&admin, &doc).await }
        })
        .await;
    eprintln!("created 20,000 objects in {:?}", created.elapsed());
    let injector = client(&server.token_kubeconfig("injector", INJECTOR_TOKEN)).await;
    let config = Config::default();
    let none = rss_kib();

    if std::env::var_os("E2E_RSS_WATCH_SECRETS").is_some() {
        let listed = Instant::now();
        let options = LookupOptions::watch_all();
        let watched = Lookups::start(admin, LookupMetrics::unregistered(), &options);
        assert!(watched.wait_ready(Duration::from_secs(120)).await);
        let synced = listed.elapsed();
        assert!(watched.cached(Kind::Secrets) >= 10_000);
        tokio::time::sleep(Duration::from_secs(2)).await;
        let all = rss_kib();
        eprintln!(
            "rss: {none} KiB with no lookups; {all} KiB (+{} KiB) with {} Secrets and {} ServiceAccounts watched (synced in {synced:?})",
            all.saturating_sub(none),
            watched.cached(Kind::Secrets),
            watched.cached(Kind::ServiceAccounts),
        );
        return;
    }
    let listed = Instant::now();
    let options = LookupOptions::default();
    let lookups = Lookups::start(injector, LookupMetrics::unregistered(), &options);
    assert!(lookups.wait_ready(Duration::from_secs(120)).await);
    let synced = listed.elapsed();
    assert!(lookups.cached(Kind::ServiceAccounts) >= 10_000);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let listed = rss_kib();
    let pods: Vec<PodFacts> = (0..2_000).map(|i| s3_pod(&format!("sa-{i}"))).collect();
    futures::stream::iter(&pods)
        .for_each_concurrent(16, |pod| {
            let (lookups, config) = (&lookups, &config);
            async move {
                lookups.snapshot(pod, config).await.unwrap();
            }
        })
        .await;
    assert_eq!(lookups.cached(Kind::Secrets), 1_000);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let fetched = rss_kib();
    eprintln!(
        "rss: {none} KiB with no lookups; {listed} KiB (+{} KiB) with {} ServiceAccounts watched (synced in {synced:?}); {fetched} KiB (+{} KiB more) with {} Secrets fetched and kept, after 2,000 admissions",
        listed.saturating_sub(none),
        lookups.cached(Kind::ServiceAccounts),
        fetched.saturating_sub(listed),
        lookups.cached(Kind::Secrets),
    );
}

/// Listings applied to the ServiceAccount, CSC and InferenceService caches:
/// streaming lists (`true`) or paged LISTs.
fn listings(lookups: &Lookups, streaming: bool) -> [u64; 3] {
    [
        Kind::ServiceAccounts,
        Kind::StorageContainers,
        Kind::InferenceServices,
    ]
    .map(|kind| {
        let m = lookups.metrics().kind(kind);
        match streaming {
            true => m.streaming_lists.get(),
            false => m.paged_lists.get(),
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lookups_against_a_real_api_server_on_1_36() {
    lookups_against(Kube::V1_36).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lookups_against_a_real_api_server_on_1_31() {
    lookups_against(Kube::V1_31).await
}

async fn lookups_against(kube: Kube) {
    // The caches' own logs, when asked for (RUST_LOG=kserve_injector=debug).
    if std::env::var_os("RUST_LOG").is_some() {
        let filter = tracing_subscriber::EnvFilter::from_default_env();
        let logs = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_test_writer();
        let _ = logs.try_init();
    }
    let server = ApiServer::on(kube, "/tmp/kapi-lookups");
    if !present(&server) {
        return;
    }
    let started = Instant::now();
    let admin = client(&server.start_clean()).await;
    apply_cluster(&admin, OBJECTS).await;
    let config = Config::default();

    // The caches, as the webhook's ServiceAccount, in the default mode:
    // Secrets fetched when needed, kept for a (short, here) TTL.
    let injector = client(&server.token_kubeconfig("injector", INJECTOR_TOKEN)).await;
    let mut registry = Registry::with_prefix("kserve_injector");
    let metrics = LookupMetrics::register(&mut registry);
    let ttl = Duration::from_secs(2);
    let options = LookupOptions {
        secret_ttl: ttl,
        streaming_lists: StreamingLists::Auto,
        ..LookupOptions::default()
    };
    let lookups = Lookups::start(injector.clone(), metrics, &options);
    assert!(
        lookups.wait_ready(Duration::from_secs(30)).await,
        "caches not synced in 30 s: {}",
        watch_state(&lookups)
    );
    assert_eq!(lookups.cached(Kind::StorageContainers), 1);
    assert_eq!(lookups.cached(Kind::InferenceServices), 1);
    // With --streaming-lists auto: 1.36 offers streaming lists (WatchList,
    // on by default since 1.34), and the caches are filled by them; 1.31
    // refuses them (422), and they fall back to paged LISTs.
    // At least one each: a watch error right after the first listing (a
    // loaded machine) relists the same way before this is read.
    let streams = listings(&lookups, kube == Kube::V1_36);
    assert!(
        streams.iter().all(|&n| n >= 1),
        "{streams:?}: {}",
        watch_state(&lookups)
    );
    assert_eq!(listings(&lookups, kube != Kube::V1_36), [0, 0, 0]);
    // No Secret is held before a pod needs it.
    assert_eq!(lookups.cached(Kind::Secrets), 0);

    // The default role may not list (nor so watch) Secrets, in any namespace.
    for api in [
        Api::<ApiSecret>::all(injector.clone()),
        Api::<ApiSecret>::namespaced(injector.clone(), NS),
    ] {
        match api.list(&ListParams::default()).await {
            Err(kube::Error::Api(status)) => assert_eq!(status.code, 403, "{status:?}"),
            other => panic!("listing Secrets as the webhook: {other:?}"),
        }
    }
    assert!(
        !can_i(&injector, "list", "secrets").await && !can_i(&injector, "watch", "secrets").await
    );
    assert!(can_i(&injector, "get", "secrets").await);

    // Cold: one GET for the one Secret the pod needs, the rest from the caches.
    let got = lookups.snapshot(&s3_pod("sa-s3"), &config).await.unwrap();
    let sa = got.service_account(NS, "sa-s3").unwrap();
    assert_eq!(sa.secrets().collect::<Vec<_>>(), ["s3-creds"]);
    let s3 = got.secret(NS, "s3-creds").unwrap();
    assert_eq!(
        s3.annotation("serving.kserve.io/s3-endpoint"),
        Some("s3.example.com")
    );
    assert_eq!(s3.get("S3_ENDPOINT").unwrap(), "minio:9000");
    // A credential's value is never held, only that the key exists.
    assert_eq!(s3.get("AWS_SECRET_ACCESS_KEY").unwrap(), NOT_A_STORAGE_SPEC);
    assert!(!format!("{got:?}").contains("very-secret-value"));
    let csc = got.storage_container("custom-prefix").unwrap();
    let container = csc.container().unwrap();
    assert_eq!(
        container.image.as_deref(),
        Some("example.com/custom-initializer:1")
    );
    // The API server filled the CRD's defaults; `--objects` reading the
    // same file fills them too, so both paths hand the injector one CSC.
    let from_file = objects_from_file(OBJECTS);
    assert_eq!(
        Some(csc),
        from_file.storage_container("custom-prefix"),
        "the watch cache and --objects read the CSC differently"
    );
    assert_eq!(
        container.ports.as_ref().unwrap()[0].protocol.as_deref(),
        Some("TCP")
    );
    assert_eq!(fallback_gets(&lookups), 1);
    assert_eq!(secret_gets(&lookups), 1);
    // Warm: no request at all.
    lookups.snapshot(&s3_pod("sa-s3"), &config).await.unwrap();
    assert_eq!(fallback_gets(&lookups), 1);
    assert_eq!(lookups.metrics().kind(Kind::Secrets).hits.get(), 1);
    assert_eq!(lookups.cached(Kind::Secrets), 1);

    // Logger storage from the InferenceService, and its ServiceAccount's Secret.
    let logger_pod = pod("sa-s3", "isvc-logger", &[(LOGGER_ANNOTATION, "true")]);
    let got = lookups.snapshot(&logger_pod, &config).await.unwrap();
    let isvc = got.inference_service(NS, "isvc-logger").unwrap();
    let storage = isvc
        .predictor_logger
        .as_ref()
        .unwrap()
        .storage
        .as_ref()
        .unwrap();
    assert_eq!(storage.service_account_name, "logger-sa");
    assert_eq!(
        secret_value(&got, "logger-creds", "S3_ENDPOINT").unwrap(),
        "logs:9000"
    );
    // s3-creds from memory, logger-creds with one GET.
    assert_eq!(secret_gets(&lookups), 2);

    // Concurrent admissions needing one cold Secret share one GET.
    let accounts = lookups.cached(Kind::ServiceAccounts);
    apply(
        &admin,
        "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: sa-late, namespace: e2e}\nsecrets: [{name: s3-creds-late}]\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: s3-creds-late, namespace: e2e}\nstringData: {S3_ENDPOINT: 'late:9000'}\n",
    )
    .await;
    let late = s3_pod("sa-late");
    let sa_seen = eventually(
        "the ServiceAccount watch sees sa-late",
        Duration::from_secs(10),
        || async { (lookups.cached(Kind::ServiceAccounts) > accounts).then_some(()) },
    );
    sa_seen.await;
    let before = secret_gets(&lookups);
    let together =
        futures::future::join_all((0..8).map(|_| lookups.snapshot(&late, &config))).await;
    for got in together {
        assert_eq!(
            secret_value(&got.unwrap(), "s3-creds-late", "S3_ENDPOINT").unwrap(),
            "late:9000"
        );
    }
    assert_eq!(
        secret_gets(&lookups) - before,
        1,
        "one GET for 8 admissions"
    );

    // A Secret changed between two pods: the next pod within the TTL still
    // sees the old value; one after the TTL sees the new one, with one GET.
    let secrets: Api<ApiSecret> = Api::namespaced(admin.clone(), NS);
    lookups.snapshot(&s3_pod("sa-s3"), &config).await.unwrap();
    let changed = Instant::now();
    let update = serde_json::json!({"stringData": {"S3_ENDPOINT": "minio-2:9000"}});
    secrets
        .patch("s3-creds", &PatchParams::default(), &Patch::Merge(&update))
        .await
        .unwrap();
    let before = secret_gets(&lookups);
    let seen = eventually(
        "the changed Secret is read again after the TTL",
        ttl * 3,
        || async {
            let got = lookups.snapshot(&s3_pod("sa-s3"), &config).await.unwrap();
            (secret_value(&got, "s3-creds", "S3_ENDPOINT")? == "minio-2:9000").then(Instant::now)
        },
    )
    .await;
    assert!(seen.duration_since(changed) <= ttl + Duration::from_secs(2));
    assert_eq!(secret_gets(&lookups) - before, 1);

    // A Secret that does not exist: one GET, then "not found" (no error),
    // itself kept for the TTL.
    let before = secret_gets(&lookups);
    for _ in 0..2 {
        let got = lookups
            .snapshot(&s3_pod("sa-missing"), &config)
            .await
            .unwrap();
        assert!(got.service_account(NS, "sa-missing").is_some());
        assert!(got.secret(NS, "does-not-exist").is_none());
    }
    assert_eq!(secret_gets(&lookups) - before, 1);
    assert_eq!(lookups.metrics().kind(Kind::Secrets).lookup_errors.get(), 0);

    // KServe's rules fail the pod on the first listed Secret missing: the
    // reading stops there (a few GETs in flight beside it), not 50 GETs.
    let names: Vec<String> = std::iter::once("s3-creds".to_string())
        .chain((0..49).map(|i| format!("gone-{i}")))
        .collect();
    let listed = serde_json::json!({"apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": "sa-long", "namespace": NS},
        "secrets": names.iter().map(|n| serde_json::json!({"name": n})).collect::<Vec<_>>()});
    apply(&admin, &serde_json::to_string(&listed).unwrap()).await;
    let before = secret_gets(&lookups);
    let got = eventually("sa-long is cached", Duration::from_secs(10), || async {
        let got = lookups.snapshot(&s3_pod("sa-long"), &config).await.ok()?;
        got.service_account(NS, "sa-long").is_some().then_some(got)
    })
    .await;
    assert!(got.secret(NS, "gone-0").is_none());
    let gets = secret_gets(&lookups) - before;
    assert!(
        gets <= 8,
        "{gets} GETs for a ServiceAccount whose 2nd Secret is missing"
    );

    // Created after its "not found" was kept: seen within the TTL, as
    // docs/operations.md's staleness table says; deleted: gone within it.
    let created = Instant::now();
    apply(
        &admin,
        "apiVersion: v1\nkind: Secret\nmetadata: {name: does-not-exist, namespace: e2e}\nstringData: {S3_ENDPOINT: 'created:9000'}\n",
    )
    .await;
    let found = eventually(
        "the created Secret is read after the TTL",
        ttl * 3,
        || async {
            let got = lookups
                .snapshot(&s3_pod("sa-missing"), &config)
                .await
                .unwrap();
            secret_value(&got, "does-not-exist", "S3_ENDPOINT").map(|_| Instant::now())
        },
    )
    .await;
    assert!(found.duration_since(created) <= ttl + Duration::from_secs(1));
    let deleted = Instant::now();
    secrets
        .delete("does-not-exist", &Default::default())
        .await
        .unwrap();
    let gone = eventually(
        "the deleted Secret is gone after the TTL",
        ttl * 3,
        || async {
            let got = lookups
                .snapshot(&s3_pod("sa-missing"), &config)
                .await
                .unwrap();
            got.secret(NS, "does-not-exist")
                .is_none()
                .then(Instant::now)
        },
    )
    .await;
    assert!(gone.duration_since(deleted) <= ttl + Duration::from_secs(1));
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    let series = format!(
        "kserve_injector_cluster_fallback_gets_total{{kind=\"secrets\"}} {}",
        secret_gets(&lookups)
    );
    assert!(text.contains(&series), "{text}");

    // RBAC: a user the ClusterRole does not cover gets an error, not "not found".
    let nobody = client(&server.token_kubeconfig("nobody", NOBODY_TOKEN)).await;
    let err = fetch_once(nobody, &s3_pod("sa-s3"), &config, Duration::from_secs(5))
        .await
        .unwrap_err();
    assert!(matches!(err, LookupError::Api { .. }), "{err}");
    assert!(err.to_string().contains("forbidden"), "{err}");
    // The one-shot fetch (mutate --kubeconfig) as the webhook's identity.
    let once = fetch_once(
        injector.clone(),
        &s3_pod("sa-late"),
        &config,
        Duration::from_secs(5),
    )
    .await
    .unwrap();
    assert_eq!(
        secret_value(&once, "s3-creds-late", "S3_ENDPOINT").unwrap(),
        "late:9000"
    );

    // The API server restarted while the caches run. (start.sh starts etcd
    // on an empty data dir, so the cluster is re-created; the caches must
    // follow whatever the API server now holds.)
    let restart = Instant::now();
    let watch_errors_before = (lookups.metrics().kind(Kind::ServiceAccounts))
        .watch_errors
        .get();
    server.script(&["stop.sh"]);
    let down = fetch_once(
        injector.clone(),
        &s3_pod("sa-s3"),
        &config,
        Duration::from_secs(2),
    )
    .await;
    assert!(down.is_err(), "lookups with the API server down must fail");
    server.start();
    apply_cluster(&admin, OBJECTS).await;
    apply(
        &admin,
        "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: sa-after, namespace: e2e}\nsecrets: [{name: after-restart}]\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: after-restart, namespace: e2e}\nstringData: {S3_ENDPOINT: 'after:9000'}\n",
    )
    .await;
    let stored = secrets.get("s3-creds").await.unwrap();
    let stored_endpoint = String::from_utf8(stored.data.unwrap()["S3_ENDPOINT"].0.clone()).unwrap();
    let last = std::sync::Mutex::new(String::from("no attempt yet"));
    let recovered = eventually_or(Duration::from_secs(60), || async {
        // The ServiceAccounts come from the relisted cache, the Secrets
        // from GETs once their entries expire.
        let sa_gets = |l: &Lookups| l.metrics().kind(Kind::ServiceAccounts).fallback_gets.get();
        let before = sa_gets(&lookups);
        let after = lookups.snapshot(&s3_pod("sa-after"), &config).await;
        let fresh = lookups.snapshot(&s3_pod("sa-s3"), &config).await;
        let from_cache = sa_gets(&lookups) == before;
        let current = fresh.as_ref().ok().and_then(|f| secret_value(f, "s3-creds", "S3_ENDPOINT"));
        let found = after.as_ref().ok().and_then(|a| secret_value(a, "after-restart", "S3_ENDPOINT"));
        let ok = from_cache
            && current.as_deref() == Some(stored_endpoint.as_str())
            && found.as_deref() == Some("after:9000");
        *last.lock().unwrap() = format!(
            "from_cache {from_cache}, s3-creds {current:?} (stored {stored_endpoint:?}), after-restart {found:?}, errors {:?} / {:?}, {}",
            after.err().map(|e| e.to_string()),
            fresh.err().map(|e| e.to_string()),
            watch_state(&lookups)
        );
        ok.then_some(())
    })
    .await;
    assert!(
        recovered.is_some(),
        "the caches did not recover within 60 s of the restart; last attempt: {}",
        last.lock().unwrap()
    );
    assert!(lookups.ready());
    let watch_errors = lookups
        .metrics()
        .kind(Kind::ServiceAccounts)
        .watch_errors
        .get();
    assert!(watch_errors > watch_errors_before);
    // The relists take the same way as the first listing (the
    // InferenceServices' once its CRD is back).
    eventually(
        "every cache relisted after the restart",
        Duration::from_secs(30),
        || async {
            let relisted = listings(&lookups, kube == Kube::V1_36);
            relisted.iter().all(|&n| n >= 2).then_some(())
        },
    )
    .await;
    assert_eq!(listings(&lookups, kube != Kube::V1_36), [0, 0, 0]);
    eprintln!(
        "e2e lookups: total {:?}, restart and recovery {:?}",
        started.elapsed(),
        restart.elapsed()
    );
}
