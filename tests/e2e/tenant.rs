//! An in-cluster tenant who may create ServiceAccounts and Secrets in its
//! own namespace, and nothing else, against `serve` with cluster lookups in
//! the 128 MiB memory cgroup we ship (docs/security.md, "A tenant with
//! namespace rights"), while another namespace's pods keep being admitted:
//!
//! 1. ServiceAccounts of about 1.2 MB each (a 200 KB annotation and 4,000
//!    long Secret names), no pod needed: each lands in the ServiceAccount
//!    watch cache;
//! 2. Secrets of about 1 MB (a 200 KB annotation, a 600 KB `S3_ENDPOINT`)
//!    listed by one ServiceAccount whose pods are reviewed;
//! 3. a ServiceAccount listing 10,000 Secrets that do not exist, whose pods
//!    are reviewed;
//! 4. the tenant's own pods get a reason naming what is too big or too many;
//!
//! then `serve` restarted with every one of those objects still there must
//! become ready. Passes when the victim's reviews are ≥ 99% right within
//! 5 s during and after the attack, with no OOM kill. `E2E_SERVE_BIN` runs
//! another build (an older one, to see it fail).

use crate::harness::*;
use crate::scale::{patch_of, Peak, Serve};
use crate::support::{Client as Https, Http};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Secret, ServiceAccount};
use kube::api::PostParams;
use kube::Api;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const MIB: u64 = 1 << 20;
const LIMIT: u64 = 128 * MIB;
const ATTACKER: &str = "tenant-a";
const VICTIM: &str = "tenant-b";
const BIG_ACCOUNTS: usize = 100;
const BIG_SECRETS: usize = 30;
const MISSING_SECRETS: usize = 10_000;
/// What the API server's webhook timeout leaves a review.
const IN_TIME: Duration = Duration::from_secs(5);

fn object<T: serde::de::DeserializeOwned>(value: Value) -> T {
    serde_json::from_value(value).unwrap()
}

/// Even: 4,000 long Secret names beside an annotation no rule reads; odd:
/// an annotation KServe's S3 rules read, of 200 KB.
fn big_account(i: usize) -> ServiceAccount {
    let (names, annotation) = match i % 2 {
        0 => (4_000, "note"),
        _ => (40, "serving.kserve.io/s3-endpoint"),
    };
    let secrets: Vec<Value> = (0..names)
        .map(|j| json!({"name": format!("s-{i}-{j}-{}", "a".repeat(240))}))
        .collect();
    object(json!({
        "metadata": {"name": format!("big-{i}"), "namespace": ATTACKER,
                     "annotations": {annotation: "n".repeat(200_000)}},
        "secrets": secrets,
    }))
}

fn big_secret(k: usize) -> Secret {
    object(json!({
        "metadata": {"name": format!("big-secret-{k}"), "namespace": ATTACKER,
                     "annotations": {"note": "n".repeat(200_000)}},
        "stringData": {"S3_ENDPOINT": "e".repeat(600_000), "AWS_SECRET_ACCESS_KEY": "x",
                       "AWS_ACCESS_KEY_ID": "y"},
    }))
}

fn review(namespace: &str, sa: &str, uid: usize) -> Vec<u8> {
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": format!("model-{uid}"), "namespace": namespace,
            "labels": {"serving.kserve.io/inferenceservice": "model"},
            "annotations": {"internal.serving.kserve.io/storage-initializer-sourceuri": "s3://bucket/model"},
        },
        "spec": {
            "serviceAccountName": sa,
            "containers": [{"name": "kserve-container", "image": "kserve/sklearnserver:latest"}],
        },
    });
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": format!("uid-{uid}"),
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": namespace, "operation": "CREATE", "object": pod,
            "userInfo": {"username": "system:serviceaccount:kube-system:replicaset-controller"},
            "dryRun": false,
        },
    }))
    .unwrap()
}

/// The denial's message, or what came back instead.
async fn denial(client: &mut Https, body: Vec<u8>) -> String {
    match client.post_json("/mutate-pods", body).await {
        Ok((status, answer)) => {
            let answer: Value = serde_json::from_slice(&answer).unwrap_or(Value::Null);
            let response = &answer["response"];
            match response["allowed"] {
                Value::Bool(false) => response["status"]["message"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                _ => format!("HTTP {status}: {answer}"),
            }
        }
        Err(e) => format!("no answer: {e}"),
    }
}

/// The victim's pods, one every 100 ms on one persistent connection (as
/// the API server keeps one) until `stop`: (sent, right within 5 s, the
/// first wrong answers).
async fn victim(
    ca: String,
    addr: std::net::SocketAddr,
    stop: Arc<AtomicBool>,
) -> (usize, usize, Vec<String>) {
    let (mut sent, mut right, mut wrong) = (0, 0, Vec::new());
    let mut client = None;
    while !stop.load(Ordering::Relaxed) {
        sent += 1;
        let started = Instant::now();
        if client.is_none() {
            client = Https::open(addr, &ca, Http::H2).await.ok();
        }
        let answer = match client.as_mut() {
            Some(c) => {
                tokio::time::timeout(IN_TIME, patch_of(c, review(VICTIM, "victim-sa", sent)))
                    .await
                    .unwrap_or_else(|_| Err("no answer within 5 s".into()))
            }
            None => Err("no connection".into()),
        };
        match answer {
            Ok(p) if p.contains("minio-victim.example.com") && p.contains("victim-s3") => {
                right += usize::from(started.elapsed() <= IN_TIME)
            }
            Ok(p) => wrong.push(format!("wrong patch: {}", &p[..p.len().min(300)])),
            Err(e) => {
                client = None;
                wrong.push(e);
            }
        }
        wrong.truncate(5);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    (sent, right, wrong)
}

async fn create_all<K, I>(api: &Api<K>, objects: I)
where
    K: kube::Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
    I: Iterator<Item = K>,
{
    let post = PostParams::default();
    let created: Vec<_> = futures::stream::iter(objects.map(|o| {
        let (api, post) = (api.clone(), post.clone());
        async move { api.create(&post, &o).await.map(|_| ()) }
    }))
    .buffer_unordered(4)
    .collect()
    .await;
    created
        .into_iter()
        .collect::<Result<(), _>>()
        .expect("the objects");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_with_namespace_rights_cannot_knock_over_the_webhook() {
    let server = ApiServer::new("/tmp/kapi-tenant");
    if !present(&server) {
        return;
    }
    let cgroup = match MemoryCgroup::new(LIMIT) {
        Ok(c) => Arc::new(c),
        Err(why) => {
            let how = format!("the tenant e2e runs serve in a memory cgroup: {why} (run as root)");
            assert!(std::env::var("CI").as_deref() != Ok("true"), "{how}");
            eprintln!("SKIPPED: {how}");
            return;
        }
    };
    let admin = client(&server.start_clean()).await;
    apply_cluster(&admin, "tests/e2e/lookups-objects.yaml").await;
    let namespaces: Api<Namespace> = Api::all(admin.clone());
    for ns in [ATTACKER, VICTIM] {
        namespaces
            .create(
                &PostParams::default(),
                &object(json!({"metadata": {"name": ns}})),
            )
            .await
            .unwrap();
    }
    let victim_secrets: Api<Secret> = Api::namespaced(admin.clone(), VICTIM);
    create_all(&victim_secrets, [object(json!({
        "metadata": {"name": "victim-s3", "namespace": VICTIM,
                     "annotations": {"serving.kserve.io/s3-endpoint": "minio-victim.example.com:9000"}},
        "stringData": {"AWS_ACCESS_KEY_ID": "id", "AWS_SECRET_ACCESS_KEY": "key"},
    }))].into_iter())
    .await;
    let victim_accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), VICTIM);
    create_all(
        &victim_accounts,
        [object(json!({
            "metadata": {"name": "victim-sa", "namespace": VICTIM},
            "secrets": [{"name": "victim-s3"}],
        }))]
        .into_iter(),
    )
    .await;

    let mut serve = Serve::start(&cgroup, &server, "tenant", &[]);
    let peak = Peak::watch(&cgroup);
    serve.wait_ready(&cgroup, Duration::from_secs(60)).await;
    let ca = std::fs::read_to_string(server.work_dir.join("pki/ca.crt")).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let victim_task = tokio::spawn(victim(ca.clone(), serve.addr, stop.clone()));

    // 1. Large ServiceAccounts, no pod needed.
    let attacked = Instant::now();
    let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), ATTACKER);
    create_all(&accounts, (0..BIG_ACCOUNTS).map(big_account)).await;
    // 2. Large Secrets listed by one ServiceAccount; 3. 10,000 missing ones.
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), ATTACKER);
    create_all(&secrets, (0..BIG_SECRETS).map(big_secret)).await;
    let listed: Vec<Value> = (0..BIG_SECRETS)
        .map(|k| json!({"name": format!("big-secret-{k}")}))
        .collect();
    let missing: Vec<Value> = (0..MISSING_SECRETS)
        .map(|k| json!({"name": format!("missing-{k}")}))
        .collect();
    create_all(
        &accounts,
        [
            object(
                json!({"metadata": {"name": "lister", "namespace": ATTACKER}, "secrets": listed}),
            ),
            object(
                json!({"metadata": {"name": "many", "namespace": ATTACKER}, "secrets": missing}),
            ),
        ]
        .into_iter(),
    )
    .await;
    eprintln!(
        "tenant: the attacker's objects created in {:?}",
        attacked.elapsed()
    );

    // 4. The attacker's own pods, 5 a second for each class, for 15 s.
    let lanes = [
        ("big-0", "lists 4000 Secrets"),
        ("big-1", "is too large"),
        ("lister", "bytes"),
        ("many", "lists 10000 Secrets"),
    ];
    let attacks = lanes.map(|(sa, expected)| {
        let (ca, addr) = (ca.clone(), serve.addr);
        async move {
            let mut reasons = Vec::new();
            let until = Instant::now() + Duration::from_secs(15);
            let mut n = 0;
            while Instant::now() < until {
                n += 1;
                let reason = match Https::open(addr, &ca, Http::H2).await {
                    Ok(mut c) => denial(&mut c, review(ATTACKER, sa, 1_000_000 + n)).await,
                    Err(e) => format!("no connection: {e}"),
                };
                reasons.push(reason);
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            let named = reasons.iter().filter(|r| r.contains(expected)).count();
            (
                sa,
                expected,
                named,
                reasons.len(),
                reasons.into_iter().find(|r| !r.contains(expected)),
            )
        }
    });
    let attacks = futures::future::join_all(attacks).await;
    // And the victim's pods for 10 s after it.
    tokio::time::sleep(Duration::from_secs(10)).await;
    stop.store(true, Ordering::Relaxed);
    let (sent, right, wrong) = victim_task.await.unwrap();
    let (oom, high) = (cgroup.oom_kills(), peak.get(&cgroup));
    let too_large = serve
        .metric("kserve_injector_cluster_objects_too_large_total{kind=\"serviceaccounts\"}")
        .await;
    eprintln!(
        "tenant: victim {right} of {sent} right within 5 s; cgroup peak {:.1} MiB; OOM kills {oom}; serviceaccounts too large: {too_large:?}",
        high as f64 / MIB as f64
    );
    for (sa, expected, named, of, other) in &attacks {
        eprintln!(
            "tenant: {sa}'s pods: {named} of {of} denied naming {expected:?}; other: {other:?}"
        );
    }
    assert_eq!(oom, 0, "OOM kills in the 128 MiB cgroup");
    assert!(
        right * 100 >= sent * 99,
        "the victim got {right} of {sent} right within 5 s; first wrong: {wrong:?}"
    );
    for (sa, expected, named, of, other) in attacks {
        assert!(
            of > 0 && named == of,
            "{sa}: {named} of {of} named {expected:?}; other: {other:?}"
        );
    }
    assert!(
        too_large >= Some(1.0),
        "ServiceAccounts too large, counted: {too_large:?}"
    );

    // A restart with every object still in the cluster becomes ready, and
    // so does one that watches the Secrets too (its LIST streams the 1 MB
    // Secrets one at a time).
    let _ = serve.child.kill();
    let _ = serve.child.wait();
    patch_cluster_role(&admin, "manifests/components/watch-secrets").await;
    let all = "serviceaccounts,secrets,clusterstoragecontainers,inferenceservices";
    for extra in [&[][..], &["--watch-kinds", all][..]] {
        let restarted = Instant::now();
        let mut serve = Serve::start(&cgroup, &server, "tenant", extra);
        serve.wait_ready(&cgroup, Duration::from_secs(60)).await;
        eprintln!(
            "tenant: ready {:?} after a restart {extra:?}; cgroup peak {:.1} MiB",
            restarted.elapsed(),
            peak.get(&cgroup) as f64 / MIB as f64
        );
        let mut c = Https::open(serve.addr, &ca, Http::H2).await.unwrap();
        let patch = patch_of(&mut c, review(VICTIM, "victim-sa", 42)).await;
        assert!(
            patch
                .as_deref()
                .is_ok_and(|p| p.contains("minio-victim.example.com")),
            "{patch:?}"
        );
        let reason = denial(&mut c, review(ATTACKER, "lister", 43)).await;
        assert!(reason.contains("bytes"), "{reason}");
        let _ = serve.child.kill();
        let _ = serve.child.wait();
    }
    assert_eq!(cgroup.oom_kills(), 0);
}
