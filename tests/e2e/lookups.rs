//! The cluster lookups against a real kube-apiserver 1.20 + etcd on loopback
//! (`../shared/tools/kube-apiserver/`): the caches run as the webhook's
//! ServiceAccount (a token user), which only the shipped ClusterRole and
//! binding (`manifests/rbac/cluster-role.yaml`) authorise, so the RBAC is
//! what is tested.
//!
//! Without the binaries the test says how to build them and passes as
//! skipped, except under `CI=true`, where it fails.

use crate::harness::*;
use k8s_openapi::api::core::v1::{Secret as ApiSecret, ServiceAccount as ApiServiceAccount};
use kserve_injector::cluster::keys::PodFacts;
use kserve_injector::cluster::objects::NOT_A_STORAGE_SPEC;
use kserve_injector::cluster::ClusterData;
use kserve_injector::constants::{ISVC_LABEL, LOGGER_ANNOTATION, SOURCE_URI_ANNOTATION};
use kserve_injector::lookups::{
    fetch_once, Kind, LookupError, LookupMetrics, LookupOptions, Lookups,
};
use kserve_injector::Config;
use kube::api::{Patch, PatchParams};
use kube::Api;
use prometheus_client::registry::Registry;
use serde::Deserialize;
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

fn secret_value(data: &ClusterData, name: &str, key: &str) -> Option<String> {
    data.secret(NS, name)?.get(key).cloned()
}

/// Per kind: objects cached, watch errors, fallback GETs (for failure messages).
/// The objects file as `mutate --objects` reads it.
fn objects_from_file(path: &str) -> ClusterData {
    let text = std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(path))
        .unwrap();
    let docs = serde_yaml::Deserializer::from_str(&text)
        .map(|d| serde_json::Value::deserialize(d).unwrap())
        .filter(|d| !d.is_null())
        .collect();
    ClusterData::load(docs).unwrap().data
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

fn fallback_gets(lookups: &Lookups) -> u64 {
    Kind::ALL
        .iter()
        .map(|k| lookups.metrics().kind(*k).fallback_gets.get())
        .sum()
}

/// A measurement, not a check (run by hand): RSS of this process before and
/// after the caches list 10,000 Secrets and 10,000 ServiceAccounts from the
/// API server.
///
///     cargo test --release --test e2e lookups:: -- --ignored --nocapture rss
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: creates 20,000 objects"]
async fn rss_with_10k_secrets_and_service_accounts_cached() {
    use futures::StreamExt;
    let server = ApiServer::new("/tmp/kapi-lookups-rss", 36544, 32481);
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
    let before = rss_kib();
    let listed = Instant::now();
    let lookups = Lookups::start(
        injector,
        LookupMetrics::unregistered(),
        &LookupOptions::default(),
    );
    assert!(lookups.wait_ready(Duration::from_secs(120)).await);
    let synced = listed.elapsed();
    assert!(lookups.cached(Kind::Secrets) >= 10_000);
    assert!(lookups.cached(Kind::ServiceAccounts) >= 10_000);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = rss_kib();
    eprintln!(
        "rss: {before} KiB before the caches, {after} KiB with {} Secrets and {} ServiceAccounts cached (+{} KiB); listed in {synced:?}",
        lookups.cached(Kind::Secrets),
        lookups.cached(Kind::ServiceAccounts),
        after.saturating_sub(before)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lookups_against_a_real_api_server() {
    // The caches' own logs, when asked for (RUST_LOG=kserve_injector=debug).
    if std::env::var_os("RUST_LOG").is_some() {
        let filter = tracing_subscriber::EnvFilter::from_default_env();
        let logs = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_test_writer();
        let _ = logs.try_init();
    }
    let server = ApiServer::from_env();
    if !present(&server) {
        return;
    }
    let started = Instant::now();
    let admin = client(&server.start_clean()).await;
    apply_cluster(&admin, OBJECTS).await;
    let config = Config::default();

    // The caches, as the webhook's ServiceAccount.
    let injector = client(&server.token_kubeconfig("injector", INJECTOR_TOKEN)).await;
    let mut registry = Registry::with_prefix("kserve_injector");
    let metrics = LookupMetrics::register(&mut registry);
    let lookups = Lookups::start(injector.clone(), metrics, &LookupOptions::default());
    assert!(
        lookups.wait_ready(Duration::from_secs(30)).await,
        "caches not synced in 30 s"
    );
    assert_eq!(lookups.cached(Kind::StorageContainers), 1);
    assert_eq!(lookups.cached(Kind::InferenceServices), 1);
    // s3-creds and logger-creds; not the Helm release record.
    assert_eq!(lookups.cached(Kind::Secrets), 2);

    // Warm: the ServiceAccount, its Secret and the CSCs from the caches, no request.
    let got = lookups.snapshot(&s3_pod("sa-s3"), &config).await.unwrap();
    assert_eq!(
        got.service_account(NS, "sa-s3").unwrap().secrets,
        ["s3-creds"]
    );
    let s3 = got.secret(NS, "s3-creds").unwrap();
    assert_eq!(
        s3.annotations["serving.kserve.io/s3-endpoint"],
        "s3.example.com"
    );
    assert_eq!(s3.get("S3_ENDPOINT").unwrap(), "minio:9000");
    // A credential's value is never held, only that the key exists.
    assert_eq!(s3.get("AWS_SECRET_ACCESS_KEY").unwrap(), NOT_A_STORAGE_SPEC);
    assert!(!format!("{got:?}").contains("very-secret-value"));
    let csc = got.storage_container("custom-prefix").unwrap();
    assert_eq!(
        csc.container.image.as_deref(),
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
        csc.container.ports.as_ref().unwrap()[0].protocol.as_deref(),
        Some("TCP")
    );
    assert_eq!(fallback_gets(&lookups), 0);
    assert_eq!(lookups.metrics().kind(Kind::Secrets).hits.get(), 1);

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
    assert_eq!(fallback_gets(&lookups), 0);

    // A Secret updated is seen through the watch, with no request.
    let secrets: Api<ApiSecret> = Api::namespaced(admin.clone(), NS);
    let update = serde_json::json!({"stringData": {"S3_ENDPOINT": "minio-2:9000"}});
    secrets
        .patch("s3-creds", &PatchParams::default(), &Patch::Merge(&update))
        .await
        .unwrap();
    eventually(
        "the watch delivers the update",
        Duration::from_secs(10),
        || async {
            let got = lookups.snapshot(&s3_pod("sa-s3"), &config).await.unwrap();
            (secret_value(&got, "s3-creds", "S3_ENDPOINT")? == "minio-2:9000").then_some(())
        },
    )
    .await;
    assert_eq!(fallback_gets(&lookups), 0);

    // A Secret that does not exist: one GET, then "not found" (no error).
    let got = lookups
        .snapshot(&s3_pod("sa-missing"), &config)
        .await
        .unwrap();
    assert!(got.service_account(NS, "sa-missing").is_some());
    assert!(got.secret(NS, "does-not-exist").is_none());
    let m = lookups.metrics().kind(Kind::Secrets);
    assert_eq!(
        (m.misses.get(), m.fallback_gets.get(), m.lookup_errors.get()),
        (1, 1, 0)
    );

    // The fallback GET fills a key no cache has seen: a layer that does not
    // watch Secrets, asked for one created just now.
    let mut registry2 = Registry::with_prefix("kserve_injector");
    let metrics2 = LookupMetrics::register(&mut registry2);
    let no_secret_cache = LookupOptions {
        watched: vec![
            Kind::ServiceAccounts,
            Kind::StorageContainers,
            Kind::InferenceServices,
        ],
        ..LookupOptions::default()
    };
    apply(
        &admin,
        "apiVersion: v1\nkind: Secret\nmetadata: {name: s3-creds-late, namespace: e2e}\nstringData: {S3_ENDPOINT: 'late:9000'}\n",
    )
    .await;
    let sa_api: Api<ApiServiceAccount> = Api::namespaced(admin.clone(), NS);
    let sa_patch =
        serde_json::json!({"secrets": [{"name": "s3-creds"}, {"name": "s3-creds-late"}]});
    sa_api
        .patch("sa-s3", &PatchParams::default(), &Patch::Merge(&sa_patch))
        .await
        .unwrap();
    // Started after the change, so its ServiceAccount cache lists it.
    let partial = Lookups::start(injector.clone(), metrics2, &no_secret_cache);
    assert!(partial.wait_ready(Duration::from_secs(30)).await);
    let got = partial.snapshot(&s3_pod("sa-s3"), &config).await.unwrap();
    // Both Secrets came from GETs: this layer has no Secret cache.
    assert_eq!(
        secret_value(&got, "s3-creds-late", "S3_ENDPOINT").unwrap(),
        "late:9000"
    );
    assert_eq!(partial.metrics().kind(Kind::Secrets).fallback_gets.get(), 2);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry2).unwrap();
    assert!(
        text.contains("kserve_injector_cluster_fallback_gets_total{kind=\"secrets\"} 2"),
        "{text}"
    );
    drop(partial);

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
        &s3_pod("sa-s3"),
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
    let watch_errors_before = lookups.metrics().kind(Kind::Secrets).watch_errors.get();
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
        let before = fallback_gets(&lookups);
        let after = lookups.snapshot(&s3_pod("sa-after"), &config).await;
        let fresh = lookups.snapshot(&s3_pod("sa-s3"), &config).await;
        let from_cache = fallback_gets(&lookups) == before;
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
    assert!(lookups.metrics().kind(Kind::Secrets).watch_errors.get() > watch_errors_before);
    eprintln!(
        "e2e lookups: total {:?}, restart and recovery {:?}",
        started.elapsed(),
        restart.elapsed()
    );
}
