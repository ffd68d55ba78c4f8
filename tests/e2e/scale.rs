//! `serve` with cluster lookups at scale, inside the memory limit we ship:
//! a real kube-apiserver holding thousands of ClusterStorageContainers
//! (one in ten matched by a regex) and thousands of ServiceAccounts, each
//! listing its own S3 Secret, 50 per namespace; `serve` in a memory cgroup
//! of 128 MiB (the chart's and the kustomize base's limit), the webhook's
//! ServiceAccount under the shipped ClusterRole, the default lookups
//! (Secrets fetched). Then:
//!
//! - reviews for as many different ServiceAccounts, [`CONCURRENCY`] at a
//!   time: no OOM kill, every answer the pod's own Secret and the CSC its
//!   URI selects, the cgroup's peak under [`PEAK_BOUND`];
//! - kube-apiserver killed for [`OUTAGE`] (etcd kept) and started again:
//!   the ServiceAccount cache is reported stale meanwhile, and a
//!   ServiceAccount changed a second after the API server is ready reaches
//!   admissions within [`RESUME_BOUND`].
//!
//! `E2E_SERVE_BIN` runs another build of the binary (an older one, to see
//! this test fail on it). Needs root and a memory cgroup controller; without
//! them it says why and passes as skipped, except under `CI=true`.

use crate::harness::*;
use crate::ports;
use crate::support::{admin_get, metric, Client as Https, Http};
use base64::Engine;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Secret, ServiceAccount};
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use kube::Api;
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

const MIB: u64 = 1 << 20;
const LIMIT: u64 = 128 * MIB;
const STORAGE_CONTAINERS: usize = 3_000;
const ACCOUNTS: usize = 3_000;
const PER_NAMESPACE: usize = 50;
const REVIEWS: usize = 600;
const CONCURRENCY: usize = 8;
/// The cgroup's highest memory while it lists and answers.
const PEAK_BOUND: u64 = 64 * MIB;
/// Long enough for a backoff that doubles per failed relist to grow past
/// the bound below: with a pause of 1 s doubling up to 30 s, the tries
/// come 31 s and 61 s after the outage began, so an API server ready 40 to
/// 50 s in waits 11 s or more.
const OUTAGE: Duration = Duration::from_secs(35);
/// A ServiceAccount change made 1 s after the API server is ready again
/// reaches admissions within this (docs/operations.md, "Staleness").
const RESUME_BOUND: Duration = Duration::from_secs(10);

fn namespace(i: usize) -> String {
    format!("team-{}", i / PER_NAMESPACE)
}

/// The URI whose ClusterStorageContainer is `csc-{j}`.
fn uri(j: usize) -> String {
    match j % 10 {
        0 => format!("s3://team-{j}-models/bert"),
        _ => format!("s3://bucket-{j}/bert"),
    }
}

fn storage_container(j: usize) -> Value {
    let format = match j % 10 {
        0 => json!({"regex": format!("^s3://team-{j}-[a-z]+/")}),
        _ => json!({"prefix": format!("s3://bucket-{j}/")}),
    };
    json!({
        "apiVersion": "serving.kserve.io/v1alpha1",
        "kind": "ClusterStorageContainer",
        "metadata": {"name": format!("csc-{j:05}")},
        "spec": {
            "container": {
                "name": "storage-initializer",
                "image": format!("registry.example.com/initializer-{j}:1.0"),
                "resources": {"requests": {"memory": "1Gi", "cpu": "100m"}, "limits": {"memory": "2Gi"}},
                "env": [{"name": "TEAM", "value": format!("team-{j}")}],
            },
            "supportedUriFormats": [format],
        },
    })
}

fn secret(i: usize) -> Secret {
    serde_json::from_value(json!({
        "metadata": {"name": format!("s3-{i}"), "namespace": namespace(i), "annotations": {
            "serving.kserve.io/s3-endpoint": format!("minio-{i}.example.com:9000"),
            "serving.kserve.io/s3-usehttps": "1",
            "serving.kserve.io/s3-region": "eu-west-1",
            "serving.kserve.io/s3-verifyssl": "1",
        }},
        "stringData": {
            "AWS_ACCESS_KEY_ID": "AKIAIOSFODNN7EXAMPLE",
            "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "config.json": "x".repeat(1_500),
        },
    }))
    .unwrap()
}

fn account(i: usize, secret: usize) -> ServiceAccount {
    serde_json::from_value(json!({
        "metadata": {"name": format!("sa-{i}"), "namespace": namespace(i)},
        "secrets": [{"name": format!("s3-{secret}")}],
    }))
    .unwrap()
}

/// Creates everything, 32 requests at a time.
async fn populate(admin: &kube::Client) {
    let started = Instant::now();
    let post = PostParams::default();
    let namespaces = (0..ACCOUNTS.div_ceil(PER_NAMESPACE)).map(|n| {
        let api: Api<Namespace> = Api::all(admin.clone());
        let ns: Namespace =
            serde_json::from_value(json!({"metadata": {"name": format!("team-{n}")}})).unwrap();
        let post = post.clone();
        async move { api.create(&post, &ns).await.map(|_| ()) }
    });
    let created: Vec<_> = futures::stream::iter(namespaces)
        .buffer_unordered(32)
        .collect()
        .await;
    created
        .into_iter()
        .collect::<Result<(), _>>()
        .expect("namespaces");
    let gvk = GroupVersionKind::gvk("serving.kserve.io", "v1alpha1", "ClusterStorageContainer");
    let resource = ApiResource::from_gvk_with_plural(&gvk, "clusterstoragecontainers");
    let cscs: Api<DynamicObject> = Api::all_with(admin.clone(), &resource);
    let jobs = (0..STORAGE_CONTAINERS.max(ACCOUNTS)).flat_map(|i| {
        let (admin, cscs, post) = (admin.clone(), cscs.clone(), post.clone());
        let csc = async move {
            if i < STORAGE_CONTAINERS {
                let o: DynamicObject = serde_json::from_value(storage_container(i)).unwrap();
                cscs.create(&post, &o).await?;
            }
            Ok::<(), kube::Error>(())
        };
        let (admin2, post2) = (admin.clone(), PostParams::default());
        let pair = async move {
            if i < ACCOUNTS {
                let ns = namespace(i);
                Api::<Secret>::namespaced(admin.clone(), &ns)
                    .create(&post2, &secret(i))
                    .await?;
                Api::<ServiceAccount>::namespaced(admin2, &ns)
                    .create(&post2, &account(i, i))
                    .await?;
            }
            Ok(())
        };
        [
            futures::future::Either::Left(csc),
            futures::future::Either::Right(pair),
        ]
    });
    let created: Vec<_> = futures::stream::iter(jobs)
        .buffer_unordered(32)
        .collect()
        .await;
    created
        .into_iter()
        .collect::<Result<(), _>>()
        .expect("the objects");
    eprintln!(
        "scale: {STORAGE_CONTAINERS} ClusterStorageContainers, {ACCOUNTS} ServiceAccounts and Secrets created in {:?}",
        started.elapsed()
    );
}

fn review(i: usize, j: usize, uid: usize) -> Vec<u8> {
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": format!("bert-{uid}"), "namespace": namespace(i),
            "labels": {"serving.kserve.io/inferenceservice": "bert"},
            "annotations": {"internal.serving.kserve.io/storage-initializer-sourceuri": uri(j)},
        },
        "spec": {
            "serviceAccountName": format!("sa-{i}"),
            "containers": [{"name": "kserve-container", "image": "kserve/sklearnserver:latest"}],
        },
    });
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": format!("uid-{uid}"),
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": namespace(i), "operation": "CREATE", "object": pod,
            "userInfo": {"username": "system:serviceaccount:kube-system:replicaset-controller"},
            "dryRun": false,
        },
    }))
    .unwrap()
}

/// The patch of an allowed answer, as text; `Err` says what came back.
pub(crate) async fn patch_of(client: &mut Https, body: Vec<u8>) -> Result<String, String> {
    let (status, answer) =
        (client.post_json("/mutate-pods", body).await).map_err(|e| e.to_string())?;
    let answer: Value = serde_json::from_slice(&answer).map_err(|e| format!("{status}: {e}"))?;
    let response = &answer["response"];
    if response["allowed"] != true {
        return Err(format!("{status}: not allowed: {response}"));
    }
    let patch = response["patch"]
        .as_str()
        .ok_or(format!("no patch: {response}"))?;
    let patch = base64::engine::general_purpose::STANDARD
        .decode(patch)
        .map_err(|e| e.to_string())?;
    Ok(String::from_utf8_lossy(&patch).into_owned())
}

/// Whether the patch carries Secret `s3-{secret}`'s endpoint and
/// `csc-{j}`'s image.
fn is_right(patch: &str, secret: usize, j: usize) -> bool {
    patch.contains(&format!("minio-{secret}.example.com:9000"))
        && patch.contains(&format!("\"name\":\"s3-{secret}\""))
        && patch.contains(&format!("registry.example.com/initializer-{j}:1.0"))
}

pub(crate) struct Serve {
    pub(crate) child: Child,
    pub(crate) admin: SocketAddr,
    pub(crate) addr: SocketAddr,
    log: PathBuf,
}

impl Serve {
    /// `serve` with cluster lookups in `cgroup`, as the webhook's
    /// ServiceAccount of `server`, with its certificate; `E2E_SERVE_BIN`
    /// runs another build.
    pub(crate) fn start(
        cgroup: &MemoryCgroup,
        server: &ApiServer,
        test: &str,
        extra: &[&str],
    ) -> Self {
        let bin = std::env::var_os("E2E_SERVE_BIN")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_kserve-injector")));
        let (port, admin_port) = (ports::port(), ports::port());
        let pki = server.work_dir.join("pki");
        let log = std::env::temp_dir().join(format!("e2e-{test}-serve-{port}.log"));
        let out = std::fs::File::create(&log).unwrap();
        let child = cgroup
            .command(&bin)
            .arg("serve")
            .args(["--addr", &format!("127.0.0.1:{port}")])
            .args(["--admin-addr", &format!("127.0.0.1:{admin_port}")])
            .arg("--tls-cert-file")
            .arg(pki.join("webhook.crt"))
            .arg("--tls-key-file")
            .arg(pki.join("webhook.key"))
            .arg("--kubeconfig")
            .arg(server.token_kubeconfig("injector", INJECTOR_TOKEN))
            .args(["--cluster-lookups", "on", "--shutdown-delay", "0s"])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .expect("serve starts");
        Serve {
            child,
            admin: SocketAddr::from(([127, 0, 0, 1], admin_port)),
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            log,
        }
    }

    /// Waits until `/readyz` answers 200; panics, with the log, when serve
    /// exits or `limit` passes first.
    pub(crate) async fn wait_ready(&mut self, cgroup: &MemoryCgroup, limit: Duration) {
        let spawned = Instant::now();
        loop {
            if let Ok((status, _)) = admin_get(self.admin, "/readyz").await {
                if status == 200 {
                    return;
                }
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "serve exited ({status}), OOM kills {}:\n{}",
                    cgroup.oom_kills(),
                    self.log_tail()
                );
            }
            assert!(
                spawned.elapsed() < limit,
                "not ready in {limit:?}:\n{}",
                self.log_tail()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub(crate) fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().rev().take(30).collect();
        lines.into_iter().rev().collect::<Vec<_>>().join("\n")
    }

    pub(crate) async fn metric(&self, series: &str) -> Option<f64> {
        let (_, text) = admin_get(self.admin, "/metrics").await.ok()?;
        metric(&text, series)
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!("--- serve's log (last lines)\n{}", self.log_tail());
        }
        let _ = std::fs::remove_file(&self.log);
    }
}

/// The cgroup's peak so far (sampled too, where the kernel keeps none).
pub(crate) struct Peak {
    sampled: std::sync::Arc<std::sync::atomic::AtomicU64>,
    stop: tokio_util::sync::CancellationToken,
}

impl Peak {
    pub(crate) fn watch(cgroup: &std::sync::Arc<MemoryCgroup>) -> Self {
        let sampled = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let stop = tokio_util::sync::CancellationToken::new();
        let (s, c, done) = (sampled.clone(), cgroup.clone(), stop.clone());
        tokio::spawn(async move {
            while !done.is_cancelled() {
                s.fetch_max(c.usage(), std::sync::atomic::Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        });
        Self { sampled, stop }
    }

    pub(crate) fn get(&self, cgroup: &MemoryCgroup) -> u64 {
        let sampled = self.sampled.load(std::sync::atomic::Ordering::Relaxed);
        cgroup.peak().unwrap_or(0).max(sampled)
    }
}

impl Drop for Peak {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousands_of_objects_in_128_mib_and_an_api_server_restart() {
    let server = ApiServer::new("/tmp/kapi-scale");
    if !present(&server) {
        return;
    }
    let cgroup = match MemoryCgroup::new(LIMIT) {
        Ok(c) => std::sync::Arc::new(c),
        Err(why) => {
            let how = format!("the scale e2e runs serve in a memory cgroup: {why} (run as root)");
            assert!(std::env::var("CI").as_deref() != Ok("true"), "{how}");
            eprintln!("SKIPPED: {how}");
            return;
        }
    };
    let started = Instant::now();
    let admin = client(&server.start_clean()).await;
    apply_cluster(&admin, "tests/e2e/lookups-objects.yaml").await;
    populate(&admin).await;

    let pki = server.work_dir.join("pki");
    let mut serve = Serve::start(&cgroup, &server, "scale", &[]);
    let peak = Peak::watch(&cgroup);
    let spawned = Instant::now();
    serve.wait_ready(&cgroup, Duration::from_secs(120)).await;
    let ready = spawned.elapsed();

    // Reviews, each for another ServiceAccount and ClusterStorageContainer.
    let ca = std::fs::read_to_string(pki.join("ca.crt")).unwrap();
    let reviewed = Instant::now();
    let lanes = (0..CONCURRENCY).map(|lane| {
        let (ca, addr) = (ca.clone(), serve.addr);
        async move {
            let mut client = Https::open(addr, &ca, Http::H2)
                .await
                .expect("a connection");
            let mut wrong = Vec::new();
            let mut times = Vec::new();
            for n in (lane..REVIEWS).step_by(CONCURRENCY) {
                let i = (n * 7) % ACCOUNTS;
                let j = (n * 13) % STORAGE_CONTAINERS;
                let sent = Instant::now();
                match patch_of(&mut client, review(i, j, n)).await {
                    Ok(patch) if is_right(&patch, i, j) => times.push(sent.elapsed()),
                    Ok(patch) => wrong.push(format!("review {n}: wrong patch {patch}")),
                    Err(e) => wrong.push(format!("review {n}: {e}")),
                }
            }
            (wrong, times)
        }
    });
    let answers = futures::future::join_all(lanes).await;
    let took = reviewed.elapsed();
    let oom = cgroup.oom_kills();
    let (mut wrong, mut times) = (Vec::new(), Vec::new());
    for (w, t) in answers {
        wrong.extend(w);
        times.extend(t);
    }
    times.sort();
    let at =
        |q: f64| times.get(((times.len() as f64 * q) as usize).min(times.len().saturating_sub(1)));
    let high = peak.get(&cgroup);
    eprintln!(
        "scale: ready {ready:?}; {} of {REVIEWS} reviews right in {took:?} (p50 {:?}, p99 {:?}); cgroup peak {:.1} MiB; OOM kills {oom}",
        times.len(),
        at(0.5),
        at(0.99),
        high as f64 / MIB as f64,
    );
    assert_eq!(oom, 0, "OOM kills in the 128 MiB cgroup");
    assert!(
        wrong.is_empty(),
        "{} wrong answers, first: {:?}",
        wrong.len(),
        wrong.first()
    );
    assert!(
        high < PEAK_BOUND,
        "cgroup peak {:.1} MiB, over the {} MiB stated",
        high as f64 / MIB as f64,
        PEAK_BOUND / MIB
    );

    // The API server restarts (etcd kept); a ServiceAccount changed right
    // after it is back must reach admissions within the bound.
    let stale = "kserve_injector_cluster_cache_stale{kind=\"serviceaccounts\"}";
    assert_eq!(
        serve.metric(stale).await,
        Some(0.0),
        "in sync before the restart"
    );
    let args = server.kill_apiserver().await;
    let down = Instant::now();
    let stale_seen = eventually_or(Duration::from_secs(10), || async {
        (serve.metric(stale).await == Some(1.0)).then_some(())
    });
    // Checked last, so an older build shows first how long it stayed stale.
    let stale_seen = stale_seen.await.is_some();
    tokio::time::sleep(OUTAGE.saturating_sub(down.elapsed())).await;
    server.start_apiserver(&args, &admin).await;
    eprintln!("scale: the API server was down {:?}", down.elapsed());
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (changed, moved) = (5, 7);
    let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), &namespace(changed));
    let update = json!({"secrets": [{"name": format!("s3-{moved}")}]});
    // The Secret must be in the account's namespace: 5 and 7 share team-0.
    assert_eq!(namespace(changed), namespace(moved));
    let patched = Instant::now();
    accounts
        .patch(
            &format!("sa-{changed}"),
            &PatchParams::default(),
            &Patch::Merge(&update),
        )
        .await
        .expect("the ServiceAccount is changed");
    let mut client = Https::open(serve.addr, &ca, Http::H2)
        .await
        .expect("a connection");
    let mut last = String::new();
    let mut seen = None;
    while patched.elapsed() < RESUME_BOUND + Duration::from_secs(60) {
        match patch_of(&mut client, review(changed, 1, 100_000)).await {
            Ok(patch) if is_right(&patch, moved, 1) => {
                seen = Some(patched.elapsed());
                break;
            }
            Ok(patch) => last = patch,
            Err(e) => last = e,
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    eprintln!(
        "scale: after a {OUTAGE:?} outage, the ServiceAccount change reached admissions after {seen:?}; whole test {:?}",
        started.elapsed()
    );
    let seen =
        seen.unwrap_or_else(|| panic!("the change never reached admissions; last answer: {last}"));
    assert!(
        stale_seen,
        "the cache was not reported stale while the API server was down"
    );
    assert!(
        seen <= RESUME_BOUND,
        "the change took {seen:?}, over {RESUME_BOUND:?}"
    );
    // The relist applies objects as they arrive (the change above may come
    // before the LIST ends): in sync once it has ended.
    let in_sync = eventually_or(Duration::from_secs(20), || async {
        (serve.metric(stale).await == Some(0.0)).then_some(())
    });
    assert!(in_sync.await.is_some(), "not in sync 20 s after the change");
    assert_eq!(cgroup.oom_kills(), 0);
}
