//! `serve --security-profile restricted` through a real kube-apiserver's
//! PodSecurity admission (1.36 and 1.31): in a namespace labelled
//! `pod-security.kubernetes.io/enforce: restricted`, pods whose own
//! containers meet the restricted standard are admitted with what the
//! webhook adds to them (the storage-initializer, the modelcar and
//! `modelcar-init`, the native-sidecar modelcar, the agent), after another
//! mutator and the IfNeeded reinvocation. The same pod under the baseline
//! profile (KServe's containers as they are, here by the pod's
//! `kserve-injector.io/security-profile` annotation) is refused by the API
//! server, naming the container we added and what it must set.

use crate::harness::*;
use crate::ports;
use crate::sidecar_webhook::{self, SIDECAR};
use crate::webhook::{create, pod, registration, reinvoked, Injector, OBJECTS, URI};
use k8s_openapi::api::core::v1::{Container, Namespace, Pod};
use kube::api::{Patch, PatchParams, PostParams};
use kube::Api;
use serde_json::json;
use std::time::Duration;

const PROFILE: &str = "kserve-injector.io/security-profile";
const MODELCAR_MODE: &str = "kserve-injector.io/modelcar-mode";
const LOGGER: &str = "internal.serving.kserve.io/logger";

/// A pod whose model server meets the restricted standard itself (UID
/// 1000, which the modelcar shares).
fn hardened(name: &str, sa: &str, isvc: &str, annotations: &[(&str, &str)]) -> Pod {
    let mut p = pod(name, sa, isvc, annotations);
    let server = &mut p.spec.as_mut().expect("spec").containers[0];
    server.security_context = Some(
        serde_json::from_value(json!({
            "allowPrivilegeEscalation": false, "runAsNonRoot": true, "runAsUser": 1000,
            "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}
        }))
        .expect("a security context"),
    );
    p
}

fn names(containers: &Option<Vec<Container>>) -> Vec<String> {
    (containers.iter().flatten())
        .map(|c| c.name.clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restricted_profile_pods_pass_pod_security_restricted_on_1_36() {
    restricted_namespace(Kube::V1_36).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restricted_profile_pods_pass_pod_security_restricted_on_1_31() {
    restricted_namespace(Kube::V1_31).await
}

async fn restricted_namespace(kube: Kube) {
    let server = ApiServer::on(kube, "/tmp/kapi-pod-security");
    if !present(&server) {
        return;
    }
    let admin = client(&server.start_clean()).await;
    apply_cluster(&admin, OBJECTS).await;
    let labels = json!({"metadata": {"labels": {
        "pod-security.kubernetes.io/enforce": "restricted",
        "pod-security.kubernetes.io/enforce-version": "latest"}}});
    Api::<Namespace>::all(admin.clone())
        .patch(NS, &PatchParams::default(), &Patch::Merge(&labels))
        .await
        .expect("the namespace enforces restricted");
    let pki = server.work_dir.join("pki");
    let sidecar = sidecar_webhook::start(&pki.join("webhook.crt"), &pki.join("webhook.key")).await;
    let (port, admin_port) = (ports::port(), ports::port());
    let mut injector = Injector::spawn(
        &server,
        port,
        admin_port,
        &["--security-profile", "restricted"],
    );
    injector.ready().await;
    let ca = std::fs::read(pki.join("ca.crt")).expect("the harness CA");
    apply(&admin, &registration(port, sidecar, &ca)).await;
    let pods: Api<Pod> = Api::namespaced(admin.clone(), NS);
    let patience = Duration::from_secs(30);

    // What the webhook adds, per pod: (init containers, containers).
    let oci = "oci://registry.example.com/models/sklearn:1";
    let cases: [(Pod, &[&str], &[&str]); 4] = [
        (
            hardened("s3", "sa-s3", "isvc", &[(URI, "s3://bucket/model")]),
            &["storage-initializer"],
            &["kserve-container", SIDECAR],
        ),
        (
            hardened("modelcar", "default", "isvc", &[(URI, oci)]),
            &["modelcar-init"],
            &["kserve-container", "modelcar", SIDECAR],
        ),
        (
            hardened(
                "native-sidecar",
                "default",
                "isvc",
                &[(URI, oci), (MODELCAR_MODE, "native-sidecar")],
            ),
            &["modelcar"],
            &["kserve-container", SIDECAR],
        ),
        (
            hardened("agent", "default", "isvc-logger", &[(LOGGER, "true")]),
            &[],
            &["kserve-container", "agent", SIDECAR],
        ),
    ];
    for (p, inits, containers) in &cases {
        let name = p.metadata.name.clone().unwrap_or_default();
        let stored = create(&pods, p, patience)
            .await
            .unwrap_or_else(|e| panic!("{name} under restricted: {e}"));
        let spec = stored.spec.expect("spec");
        assert_eq!(names(&spec.init_containers), *inits, "{name}");
        let mut got = names(&Some(spec.containers));
        got.sort();
        let mut want: Vec<String> = containers.iter().map(|c| c.to_string()).collect();
        want.sort();
        assert_eq!(got, want, "{name}");
        assert!(reinvoked(&server, &name), "{name}: no reinvocation");
    }

    // Baseline: KServe's storage-initializer sets no securityContext, and
    // PodSecurity (after every mutation) refuses the pod, naming it.
    let baseline = hardened(
        "baseline",
        "sa-s3",
        "isvc",
        &[(URI, "s3://bucket/model"), (PROFILE, "baseline")],
    );
    let refused = match pods.create(&PostParams::default(), &baseline).await {
        Err(kube::Error::Api(status)) => status,
        other => panic!("the baseline pod is not refused: {other:?}"),
    };
    eprintln!("e2e pod-security on {}: {}", kube.minor(), refused.message);
    assert_eq!(refused.code, 403, "{refused:?}");
    assert!(
        refused.message.contains(r#"violates PodSecurity "restricted:latest""#)
            && refused.message.contains(r#"container "storage-initializer" must set securityContext.allowPrivilegeEscalation=false"#),
        "{}",
        refused.message
    );
    // Our model server is not the cause: the same pod with no model.
    let plain = hardened("plain", "default", "isvc", &[]);
    create(&pods, &plain, patience)
        .await
        .expect("the model server alone passes restricted");
}
