//! Image volumes through a real kube-apiserver: the model volume's `image`
//! source (`modelVolume: {image: …}` of `--config-file`) and an OCI model
//! served natively (`oci+native://`), each after another mutator, IfNeeded.
//!
//! On 1.36 (ImageVolume GA) both pods are stored with their image volume
//! and its mount. On 1.31 (ImageVolume alpha, off) the API server accepts
//! such a pod and drops the volume and its mounts without a word, which
//! this test shows with a pod the webhook does not see; `serve` learns it
//! at start from a dry-run PodTemplate and denies both pods, naming the
//! fix. With `E2E_APISERVER_ARGS=--feature-gates=ImageVolume=true` 1.31
//! keeps image volumes and the image model volume is admitted as on 1.36;
//! the native OCI pod is refused there by the API server itself, as
//! KServe's would be: it mounts the image's `models` directory (`subPath`),
//! which image volumes allow only from 1.33.

use crate::harness::*;
use crate::ports;
use crate::sidecar_webhook;
use crate::webhook::{create, pod, registration, Injector, OBJECTS, URI};
use k8s_openapi::api::core::v1::Pod;
use kube::api::PostParams;
use kube::Api;
use std::time::Duration;

/// The Role the dry run needs: `create` on `podtemplates` in the namespace
/// of the webhook's client configuration (`default` for a kubeconfig that
/// names none).
const PROBE_ROLE: &str = r#"apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: kserve-injector-image-volume-probe, namespace: default}
rules:
- {apiGroups: [""], resources: [podtemplates], verbs: [create]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: kserve-injector-image-volume-probe, namespace: default}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: kserve-injector-image-volume-probe}
subjects:
- {kind: ServiceAccount, name: kserve-injector, namespace: kserve}
"#;

const MODEL_IMAGE: &str = "registry.example.com/models/base:1";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn image_volumes_are_admitted_on_1_36() {
    image_volumes(Kube::V1_36).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn image_volumes_are_denied_where_dropped_on_1_31() {
    image_volumes(Kube::V1_31).await
}

/// The image volume named `volume` and a mount of it in kserve-container.
fn image_volume_of(stored: &Pod, volume: &str) -> (bool, bool) {
    let spec = stored.spec.as_ref().expect("spec");
    let has_volume = (spec.volumes.iter().flatten()).any(|v| v.name == volume && v.image.is_some());
    let mounted = (spec.containers.iter())
        .filter(|c| c.name == "kserve-container")
        .flat_map(|c| c.volume_mounts.iter().flatten())
        .any(|m| m.name == volume);
    (has_volume, mounted)
}

async fn image_volumes(kube: Kube) {
    let server = ApiServer::on(kube, "/tmp/kapi-image-volume");
    if !present(&server) {
        return;
    }
    let gate_on = std::env::var("E2E_APISERVER_ARGS").is_ok_and(|a| a.contains("ImageVolume=true"));
    let kept = kube == Kube::V1_36 || gate_on;
    let admin = client(&server.start_clean()).await;
    apply_cluster(&admin, OBJECTS).await;
    apply(&admin, PROBE_ROLE).await;
    let pods: Api<Pod> = Api::namespaced(admin.clone(), NS);

    // What the API server itself does with an image volume, on a pod no
    // webhook sees (no InferenceService label).
    let plain: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "plain"},
        "spec": {"containers": [{"name": "kserve-container", "image": "kserve/sklearnserver:v0.15.2",
            "volumeMounts": [{"name": "model", "mountPath": "/mnt/models", "readOnly": true}]}],
          "volumes": [{"name": "model", "image": {"reference": MODEL_IMAGE}}]}
    }))
    .expect("a pod");
    let plain =
        (pods.create(&PostParams::default(), &plain).await).expect("the API server takes it");
    assert_eq!(
        image_volume_of(&plain, "model"),
        (kept, kept),
        "on {}, ImageVolume {}: the API server's own handling of an image volume",
        kube.minor(),
        if kept { "on" } else { "off" }
    );

    let settings = server.work_dir.join("settings.yaml");
    let model_volume = format!("modelVolume:\n  image: {{reference: \"{MODEL_IMAGE}\"}}\n");
    std::fs::write(&settings, model_volume).expect("settings written");
    let pki = server.work_dir.join("pki");
    let sidecar = sidecar_webhook::start(&pki.join("webhook.crt"), &pki.join("webhook.key")).await;
    let (port, admin_port) = (ports::port(), ports::port());
    let config_file = settings.to_str().expect("a UTF-8 path");
    let mut injector = Injector::spawn(&server, port, admin_port, &["--config-file", config_file]);
    injector.ready().await;
    let said = match kept {
        true => "the API server keeps them",
        false => "the API server drops them",
    };
    assert!(
        injector.log_text().contains(said),
        "{}",
        injector.log_text()
    );
    let ca = std::fs::read(pki.join("ca.crt")).expect("the harness CA");
    apply(&admin, &registration(port, sidecar, &ca)).await;
    let patience = Duration::from_secs(30);

    let downloads = [(URI, "gs://models/sklearn/1")];
    let native = [(URI, "oci+native://registry.example.com/models/sklearn:1")];
    for (name, annotations, volume) in [
        (
            "image-model-volume",
            &downloads,
            "kserve-provision-location",
        ),
        ("native-oci", &native, "mnt-models"),
    ] {
        let created = create(&pods, &pod(name, "default", "isvc", annotations), patience).await;
        if kube == Kube::V1_31 && gate_on && name == "native-oci" {
            // KServe mounts the image's `models` directory (subPath), which
            // image volumes allow from 1.33: 1.31 refuses the pod, visibly.
            let e = created.expect_err("1.31 refuses a subPath into an image volume");
            assert!(e.contains("not allowed in image volume sources"), "{e}");
            continue;
        }
        match (kept, created) {
            (true, Ok(stored)) => assert_eq!(
                image_volume_of(&stored, volume),
                (true, true),
                "{name}: {:?}",
                stored.spec
            ),
            (true, Err(e)) => panic!("{name} on {}: {e}", kube.minor()),
            (false, Ok(stored)) => panic!(
                "{name} on {} without ImageVolume was admitted, stored as {:?}",
                kube.minor(),
                stored.spec
            ),
            (false, Err(e)) => {
                for part in ["drops image volumes", "ImageVolume feature gate"] {
                    assert!(e.contains(part), "{name}: {e}");
                }
                eprintln!("e2e image volume on {}: {name} denied: {e}", kube.minor());
            }
        }
    }
}
