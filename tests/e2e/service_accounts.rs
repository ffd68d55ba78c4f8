//! Credential lookups for ServiceAccounts as Kubernetes 1.24 and later
//! leave them: no token Secret is created or listed (pods get a projected
//! token instead), so a ServiceAccount's `secrets` holds only what its
//! owner put there, and `imagePullSecrets` is a separate list. Here the
//! API server runs every default admission plugin, the ServiceAccount
//! plugin among them (off in the other tests: it refuses a pod whose
//! ServiceAccount does not exist), as a real cluster does: it names
//! `default` for a pod that names none, adds the projected token volume and
//! copies the ServiceAccount's `imagePullSecrets` into the pod before the
//! webhooks run (1.36 and 1.31).
//!
//! KServe reads storage credentials from the Secrets in `secrets` only: a
//! ServiceAccount with S3 credentials and a pull Secret gives the S3
//! variables, one with only a pull Secret gives none, and neither pod is
//! denied; each keeps its projected token and pull Secret.

use crate::harness::*;
use crate::ports;
use crate::sidecar_webhook::{self, SIDECAR};
use crate::webhook::{create, pod, registration, reinvoked, Injector, OBJECTS, URI};
use k8s_openapi::api::core::v1::{Container, Pod};
use kube::Api;
use std::time::Duration;

/// The ServiceAccounts and pull Secret of this test, beside the webhook
/// test's objects; `default` too, which only a controller would create.
const ACCOUNTS: &str = r#"
apiVersion: v1
kind: ServiceAccount
metadata: {name: default, namespace: e2e}
---
apiVersion: v1
kind: Secret
metadata: {name: regcred, namespace: e2e}
type: kubernetes.io/dockerconfigjson
stringData: {.dockerconfigjson: '{"auths": {"registry.example.com": {"auth": "ZTJlOmUyZQ=="}}}'}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: sa-s3-pull, namespace: e2e}
secrets: [{name: s3-creds}]
imagePullSecrets: [{name: regcred}]
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: sa-pull-only, namespace: e2e}
imagePullSecrets: [{name: regcred}]
"#;

const TOKEN_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

fn env_names(c: &Container) -> Vec<String> {
    (c.env.iter().flatten()).map(|e| e.name.clone()).collect()
}

fn pull_secrets(p: &Pod) -> Vec<String> {
    let spec = p.spec.as_ref().expect("spec");
    (spec.image_pull_secrets.iter().flatten())
        .map(|r| r.name.clone())
        .collect()
}

/// The storage-initializer, and that the pod kept its projected token.
fn initializer(p: &Pod) -> Container {
    let spec = p.spec.clone().expect("spec");
    let server = &spec.containers[0];
    let mounts = server.volume_mounts.iter().flatten();
    let token = mounts.clone().find(|m| m.mount_path == TOKEN_PATH);
    let token = token.expect("the ServiceAccount plugin's token mount on the model server");
    let volumes = spec.volumes.clone().unwrap_or_default();
    let projected = volumes.iter().find(|v| v.name == token.name);
    assert!(
        projected.is_some_and(|v| v.projected.is_some()),
        "the token volume is projected: {volumes:?}"
    );
    assert!(mounts.clone().any(|m| m.mount_path == "/mnt/models"));
    let inits = spec.init_containers.unwrap_or_default();
    let found = inits.into_iter().find(|c| c.name == "storage-initializer");
    found.expect("a storage-initializer")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_accounts_without_token_secrets_on_1_36() {
    token_less(Kube::V1_36).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_accounts_without_token_secrets_on_1_31() {
    token_less(Kube::V1_31).await
}

async fn token_less(kube: Kube) {
    let mut server = ApiServer::on(kube, "/tmp/kapi-service-accounts");
    server.disable_admission = "";
    if !present(&server) {
        return;
    }
    let admin = client(&server.start_clean()).await;
    apply_cluster(&admin, OBJECTS).await;
    apply(&admin, ACCOUNTS).await;
    let pki = server.work_dir.join("pki");
    let sidecar = sidecar_webhook::start(&pki.join("webhook.crt"), &pki.join("webhook.key")).await;
    let (port, admin_port) = (ports::port(), ports::port());
    let mut injector = Injector::spawn(&server, port, admin_port, &[]);
    injector.ready().await;
    let ca = std::fs::read(pki.join("ca.crt")).expect("the harness CA");
    apply(&admin, &registration(port, sidecar, &ca)).await;
    let pods: Api<Pod> = Api::namespaced(admin.clone(), NS);
    let patience = Duration::from_secs(30);
    let s3 = [(URI, "s3://bucket/model")];

    // Credentials from `secrets`; the pull Secret is the pod's, not a credential.
    let stored = create(&pods, &pod("s3-pull", "sa-s3-pull", "isvc", &s3), patience)
        .await
        .expect("the pod of a ServiceAccount with credentials is admitted");
    assert!(reinvoked(&server, "s3-pull"), "no reinvocation");
    let init = initializer(&stored);
    let names = env_names(&init);
    for var in ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "S3_ENDPOINT"] {
        assert!(names.iter().any(|n| n == var), "{var} in {names:?}");
    }
    assert_eq!(pull_secrets(&stored), ["regcred"]);
    let containers = &stored.spec.as_ref().expect("spec").containers;
    assert!(containers.iter().any(|c| c.name == SIDECAR));

    // Only a pull Secret: no credentials, and no denial.
    let stored = create(
        &pods,
        &pod("pull-only", "sa-pull-only", "isvc", &s3),
        patience,
    )
    .await
    .expect("the pod of a ServiceAccount with only a pull Secret is admitted");
    let names = env_names(&initializer(&stored));
    assert!(
        !names.iter().any(|n| n.starts_with("AWS_")),
        "no credentials: {names:?}"
    );
    assert_eq!(pull_secrets(&stored), ["regcred"]);

    // No ServiceAccount named: the plugin names `default`, which lists nothing.
    let mut unnamed = pod("unnamed", "", "isvc", &s3);
    unnamed.spec.as_mut().expect("spec").service_account_name = None;
    let stored = create(&pods, &unnamed, patience)
        .await
        .expect("the pod of the default ServiceAccount is admitted");
    let spec = stored.spec.as_ref().expect("spec");
    assert_eq!(spec.service_account_name.as_deref(), Some("default"));
    let names = env_names(&initializer(&stored));
    assert!(!names.iter().any(|n| n.starts_with("AWS_")), "{names:?}");
    assert!(pull_secrets(&stored).is_empty());
    eprintln!(
        "e2e service accounts on {}: three pods admitted with projected tokens",
        kube.minor()
    );
}
