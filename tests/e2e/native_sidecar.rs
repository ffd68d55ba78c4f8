//! `serve --modelcar-mode native-sidecar` through a real kube-apiserver
//! (1.36, and 1.31, where native sidecars are beta and on by default):
//! with cluster lookups on, the server asks the API server its version and
//! starts (native sidecars need 1.29); registered as KServe's pod mutator
//! (IfNeeded) with a second webhook after it, an OCI pod is stored with
//! the modelcar as an init container with `restartPolicy: Always`, once,
//! after the reinvocation. The stored pod created again comes out the
//! same: the mutation is idempotent on what the API server stored.
//!
//! An API server that does not know the field (before 1.28, or 1.29-1.32
//! with `--feature-gates=SidecarContainers=false`, which
//! `E2E_APISERVER_ARGS` passes) drops `restartPolicy` from the init
//! container, and this test fails there.

use crate::harness::*;
use crate::ports;
use crate::sidecar_webhook::{self, SIDECAR};
use crate::webhook::{create, pod, registration, reinvoked, Injector, OBJECTS, URI};
use k8s_openapi::api::core::v1::{Container, Pod};
use kube::Api;
use std::time::Duration;

fn names(containers: &[Container]) -> Vec<&str> {
    containers.iter().map(|c| c.name.as_str()).collect()
}

/// The pod as a client would create it again: its spec and labels as
/// stored, under another name.
fn again(stored: &Pod, name: &str) -> Pod {
    let mut pod = Pod {
        spec: stored.spec.clone(),
        ..Pod::default()
    };
    pod.metadata.name = Some(name.into());
    pod.metadata.labels = stored.metadata.labels.clone();
    pod.metadata.annotations = stored.metadata.annotations.clone();
    pod
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn native_sidecar_modelcar_is_admitted_and_idempotent_on_1_36() {
    native_sidecar_modelcar(Kube::V1_36).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn native_sidecar_modelcar_is_admitted_and_idempotent_on_1_31() {
    native_sidecar_modelcar(Kube::V1_31).await
}

async fn native_sidecar_modelcar(kube: Kube) {
    let server = ApiServer::on(kube, "/tmp/kapi-native-sidecar");
    if !present(&server) {
        return;
    }
    let admin = client(&server.start_clean()).await;
    apply_cluster(&admin, OBJECTS).await;
    let pki = server.work_dir.join("pki");
    let sidecar = sidecar_webhook::start(&pki.join("webhook.crt"), &pki.join("webhook.key")).await;
    let (port, admin_port) = (ports::port(), ports::port());
    // Ready means the version check passed: serve refuses to start in this
    // mode on an API server older than 1.29.
    let mut injector = Injector::spawn(
        &server,
        port,
        admin_port,
        &["--modelcar-mode", "native-sidecar"],
    );
    injector.ready().await;
    let ca = std::fs::read(pki.join("ca.crt")).expect("the harness CA");
    apply(&admin, &registration(port, sidecar, &ca)).await;
    let pods: Api<Pod> = Api::namespaced(admin.clone(), NS);
    let patience = Duration::from_secs(30);

    let oci = [(URI, "oci://registry.example.com/models/sklearn:1")];
    let stored = create(&pods, &pod("oci", "default", "isvc", &oci), patience)
        .await
        .expect("the native-sidecar modelcar pod is admitted");
    assert!(
        reinvoked(&server, "oci"),
        "the audit log shows no reinvocation"
    );
    let spec = stored.spec.clone().expect("spec");
    let inits = spec.init_containers.clone().unwrap_or_default();
    assert_eq!(names(&inits), ["modelcar"], "{inits:?}");
    assert_eq!(
        inits[0].restart_policy.as_deref(),
        Some("Always"),
        "the API server dropped the native sidecar's restartPolicy: {:?}",
        inits[0]
    );
    assert!(inits[0].startup_probe.is_some(), "{:?}", inits[0]);
    assert_eq!(
        names(&spec.containers),
        ["kserve-container", SIDECAR],
        "no classic modelcar container"
    );

    let same = create(&pods, &again(&stored, "oci-again"), patience)
        .await
        .expect("the stored pod is admitted again");
    let again_spec = same.spec.expect("spec");
    assert_eq!(again_spec.init_containers, spec.init_containers);
    assert_eq!(again_spec.containers, spec.containers);
    assert_eq!(again_spec.volumes, spec.volumes);
    eprintln!(
        "e2e native-sidecar on {}: the modelcar stored as {:?}",
        kube.minor(),
        inits[0].restart_policy
    );
}
