use super::*;
use kserve_injector_core::config::Config;
use kserve_injector_core::constants::{ISVC_LABEL, SOURCE_URI_ANNOTATION};
use kserve_injector_core::PodFacts;

fn s3_pod(sa: &str) -> PodFacts {
    PodFacts {
        namespace: "ns".into(),
        service_account_name: sa.into(),
        annotations: [(
            SOURCE_URI_ANNOTATION.to_string(),
            "s3://bucket/model".to_string(),
        )]
        .into(),
        labels: [(ISVC_LABEL.to_string(), "isvc".to_string())].into(),
    }
}

fn data() -> ClusterSnapshot {
    let mut data = ClusterSnapshot::default();
    data.insert_service_account(ServiceAccount::new(
        "ns",
        "sa",
        ["creds"],
        None::<(&str, &str)>,
    ));
    data.insert_secret(Secret::from_data(
        "ns",
        "creds",
        [("S3_ENDPOINT", "minio:9000")],
    ));
    data.insert_secret(Secret::from_data("ns", "unrelated", [("x", "y")]));
    data
}

/// A client whose server accepts connections and never answers.
fn silent_client() -> (Client, std::net::TcpListener) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let client = Client::try_from(kube::Config::new(url.parse().unwrap())).unwrap();
    (client, listener)
}

#[tokio::test]
async fn warm_cache_answers_exactly_the_needed_keys_without_a_request() {
    let (client, _listener) = silent_client();
    let lookups = Lookups::preloaded(
        client,
        LookupMetrics::unregistered(),
        &LookupOptions::watch_all(),
        data(),
    );
    assert!(lookups.ready());
    let config = Config::default();
    let pod = s3_pod("sa");
    let got = lookups.snapshot(&pod, &config).await.unwrap();
    assert_eq!(got, data().restrict(&pod, &config));
    assert!(got.secret("ns", "creds").is_some());
    assert!(got.secret("ns", "unrelated").is_none());
    let m = lookups.metrics().kind(Kind::Secrets);
    assert_eq!(
        (m.hits.get(), m.misses.get(), m.fallback_gets.get()),
        (1, 0, 0)
    );
}

#[tokio::test]
async fn a_miss_goes_to_the_api_server_and_its_timeout_is_an_error() {
    let (client, _listener) = silent_client();
    let mut lookups = Lookups::preloaded(
        client,
        LookupMetrics::unregistered(),
        &LookupOptions::watch_all(),
        data(),
    );
    lookups.get_timeout = Duration::from_millis(200);
    let err = lookups
        .snapshot(&s3_pod("other"), &Config::default())
        .await
        .unwrap_err();
    assert!(matches!(err, LookupError::Timeout { .. }), "{err}");
    assert!(
        err.to_string().contains("serviceaccounts ns/other"),
        "{err}"
    );
    let m = lookups.metrics().kind(Kind::ServiceAccounts);
    assert_eq!(
        (m.misses.get(), m.fallback_gets.get(), m.lookup_errors.get()),
        (1, 1, 1)
    );
}

#[tokio::test]
async fn a_pod_without_lookups_needs_nothing() {
    let (client, _listener) = silent_client();
    let lookups = Lookups::uncached(client, Duration::from_millis(100));
    let pod = PodFacts {
        namespace: "ns".into(),
        ..PodFacts::default()
    };
    assert!(lookups
        .snapshot(&pod, &Config::default())
        .await
        .unwrap()
        .is_empty());
}

#[tokio::test]
async fn an_unusable_storage_container_fails_the_lookup_that_needs_it() {
    let (client, _listener) = silent_client();
    let lookups = Lookups::preloaded(
        client,
        LookupMetrics::unregistered(),
        &LookupOptions::watch_all(),
        data(),
    );
    if let Some(c) = &lookups.storage_containers {
        let error = kserve_injector_core::cluster::StorageContainerLoadError::Disabled {
            name: "bad".into(),
        };
        c.insert(super::entry::Entry::new(
            &ObjectRef::new("", "bad"),
            Err(error.into()),
        ));
    }
    let err = lookups
        .snapshot(&s3_pod("sa"), &Config::default())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("\"bad\""), "{err}");
}

#[tokio::test]
async fn fetched_secrets_answer_from_memory_while_fresh() {
    let (client, _listener) = silent_client();
    let options = LookupOptions::default();
    assert!(!options.watched.contains(&Kind::Secrets));
    let lookups = Lookups::preloaded(client, LookupMetrics::unregistered(), &options, data());
    assert!(lookups.ready());
    let config = Config::default();
    let pod = s3_pod("sa");
    let got = lookups.snapshot(&pod, &config).await.unwrap();
    assert_eq!(got, data().restrict(&pod, &config));
    let m = lookups.metrics().kind(Kind::Secrets);
    assert_eq!(
        (m.hits.get(), m.misses.get(), m.fallback_gets.get()),
        (1, 0, 0)
    );
    assert_eq!(lookups.cached(Kind::Secrets), 2);
}

#[tokio::test]
async fn a_fetched_secret_that_cannot_be_read_is_an_error_naming_it() {
    let (client, _listener) = silent_client();
    let mut lookups = Lookups::preloaded(
        client,
        LookupMetrics::unregistered(),
        &LookupOptions::default(),
        ClusterSnapshot::default(),
    );
    lookups.get_timeout = Duration::from_millis(200);
    let mut known = data();
    known.secrets.clear();
    lookups = Lookups::preloaded(
        lookups.client.clone(),
        LookupMetrics::unregistered(),
        &LookupOptions {
            get_timeout: Duration::from_millis(200),
            ..LookupOptions::default()
        },
        known,
    );
    let err = lookups
        .snapshot(&s3_pod("sa"), &Config::default())
        .await
        .unwrap_err();
    assert!(matches!(err, LookupError::Timeout { .. }), "{err}");
    assert!(err.to_string().contains("secrets ns/creds"), "{err}");
    let m = lookups.metrics().kind(Kind::Secrets);
    assert_eq!((m.misses.get(), m.fallback_gets.get()), (1, 1));
    assert_eq!(lookups.cached(Kind::Secrets), 0);
}

#[tokio::test]
async fn only_the_listed_namespaces_are_served() {
    let (client, _listener) = silent_client();
    let mut options = LookupOptions::default();
    let all = Lookups::preloaded(
        client.clone(),
        LookupMetrics::unregistered(),
        &options,
        data(),
    );
    assert_eq!(all.outside("anywhere"), None);
    options.namespaces = ["a".to_string(), "b".to_string()].into();
    options.outside = OutsideNamespaces::Allow;
    let some = Lookups::preloaded(client, LookupMetrics::unregistered(), &options, data());
    assert_eq!(some.outside("a"), None);
    assert_eq!(some.outside("c"), Some(OutsideNamespaces::Allow));
    assert_eq!(some.namespaces(), "a,b");
    assert_eq!(options.scopes(), [Some("a".into()), Some("b".into())]);
    assert_eq!(LookupOptions::default().scopes(), [None]);
}

/// `n` ClusterStorageContainers as a cluster would hold them: one in ten
/// matched by a regex, each with its own image and resources.
fn with_storage_containers(n: usize) -> ClusterSnapshot {
    let docs = (0..n).map(|i| {
        let format = match i % 10 {
            0 => serde_json::json!({"regex": format!("^s3://team-{i}-[a-z]+/")}),
            _ => serde_json::json!({"prefix": format!("s3://bucket-{i}/")}),
        };
        serde_json::json!({
            "apiVersion": "serving.kserve.io/v1alpha1",
            "kind": "ClusterStorageContainer",
            "metadata": {"name": format!("csc-{i:05}")},
            "spec": {
                "container": {
                    "name": "storage-initializer",
                    "image": format!("registry.example.com/initializer-{i}:1.0"),
                    "resources": {"requests": {"memory": "1Gi", "cpu": "100m"}},
                    "env": [{"name": "TEAM", "value": format!("team-{i}")}],
                },
                "supportedUriFormats": [format],
            },
        })
    });
    let mut out = data();
    out.storage_containers = ClusterSnapshot::from_documents(docs.collect())
        .unwrap()
        .storage_containers;
    out
}

/// What one warm snapshot of an S3 pod allocates, and the snapshot, polled
/// once on this thread (every key is cached, so it never waits).
fn allocated_by_snapshot(lookups: &Lookups, pod: &PodFacts) -> (u64, ClusterSnapshot) {
    use std::future::Future;
    use std::task::{Context, Poll, Waker};
    let config = Config::default();
    let mut cx = Context::from_waker(Waker::noop());
    crate::test_alloc::allocated_by(|| {
        let mut future = std::pin::pin!(lookups.snapshot(pod, &config));
        match future.as_mut().poll(&mut cx) {
            Poll::Ready(got) => got.unwrap(),
            Poll::Pending => panic!("a warm snapshot waited"),
        }
    })
}

/// An admission's snapshot costs the same with 10 or 5,000
/// ClusterStorageContainers cached: they are shared with it, not copied.
#[tokio::test]
async fn a_snapshot_costs_the_same_whatever_the_storage_containers_cached() {
    let (client, _listener) = silent_client();
    let pod = s3_pod("sa");
    let mut costs = Vec::new();
    for n in [10, 5_000] {
        let lookups = Lookups::preloaded(
            client.clone(),
            LookupMetrics::unregistered(),
            &LookupOptions::default(),
            with_storage_containers(n),
        );
        // The first admission after a change builds the shared set.
        let (_, first) = allocated_by_snapshot(&lookups, &pod);
        assert_eq!(first.storage_containers.len(), n);
        let (bytes, got) = allocated_by_snapshot(&lookups, &pod);
        assert!(got.secret("ns", "creds").is_some());
        costs.push((
            bytes,
            got.storage_containers.shares(&first.storage_containers),
        ));
    }
    // Not one byte more per cached ClusterStorageContainer.
    assert_eq!(
        costs[0].0, costs[1].0,
        "bytes allocated by one snapshot with 10 and 5,000"
    );
    assert!(costs[1].0 < 8 * 1024, "{costs:?}");
    assert_eq!((costs[0].1, costs[1].1), (true, true), "shared, not copied");
}

/// With one admission per namespace reading the API server, a second one of
/// the same namespace is shed at once, while another namespace's is served
/// (here: its GET runs until the lookup timeout, as the first one's does).
#[tokio::test]
async fn a_namespace_past_its_share_is_shed_and_another_namespace_is_not() {
    let (client, _listener) = silent_client();
    let options = LookupOptions {
        namespace_admissions: 1,
        get_timeout: Duration::from_millis(300),
        ..LookupOptions::default()
    };
    let mut known = ClusterSnapshot::default();
    for ns in ["ns", "other"] {
        known.insert_service_account(ServiceAccount::new(
            ns,
            "sa",
            ["creds"],
            None::<(&str, &str)>,
        ));
    }
    let lookups = Lookups::preloaded(client, LookupMetrics::unregistered(), &options, known);
    let config = Config::default();
    let mut elsewhere = s3_pod("sa");
    elsewhere.namespace = "other".into();
    let later = |pod: PodFacts| {
        let (lookups, config) = (&lookups, &config);
        async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            lookups.snapshot(&pod, config).await
        }
    };
    let pod = s3_pod("sa");
    let (first, second, other) = tokio::join!(
        lookups.snapshot(&pod, &config),
        later(s3_pod("sa")),
        later(elsewhere),
    );
    assert!(
        matches!(first, Err(LookupError::Timeout { .. })),
        "{first:?}"
    );
    let shed = second.unwrap_err();
    assert!(matches!(shed, LookupError::Shed(_)), "{shed}");
    assert!(shed.to_string().contains("namespace \"ns\""), "{shed}");
    assert!(
        matches!(other, Err(LookupError::Timeout { .. })),
        "{other:?}"
    );
    // The turn is given back: the namespace reads again.
    let again = lookups.snapshot(&pod, &config).await;
    assert!(
        matches!(again, Err(LookupError::Timeout { .. })),
        "{again:?}"
    );
}
