//! The Argo CD manifests: the argocd-cm component that ships the health check, the
//! Application, and (rendered with `kubectl kustomize`, the kustomize Argo CD embeds) the
//! webhook overlay and the KServe stack.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use super::{fixtures, root};

const RENDER_REQUIRED: &str = "ARGOCD_RENDER_REQUIRED";
const HEALTH_KEY: &str = "resource.customizations.health.serving.kserve.io_InferenceService";

/// The kustomize component writes the script, byte for byte, under the key Argo CD reads.
#[test]
fn argocd_cm_component_carries_the_script_under_the_health_key() {
    let dir = root().join("manifests/argocd");
    let text = std::fs::read_to_string(dir.join("kustomization.yaml")).expect("read");
    let doc = yaml_text_docs(&text).remove(0);
    assert_eq!(doc["kind"], "Component");
    let generators = doc["configMapGenerator"].as_array().expect("generators");
    let cm = generators
        .iter()
        .find(|g| g["name"] == "argocd-cm")
        .expect("an argocd-cm generator");
    assert_eq!(
        cm["behavior"], "merge",
        "merge into Argo CD's own argocd-cm"
    );
    assert_eq!(cm["options"]["disableNameSuffixHash"], true);
    let files: Vec<&str> = cm["files"]
        .as_array()
        .expect("files")
        .iter()
        .filter_map(|f| f.as_str())
        .collect();
    assert_eq!(files, [format!("{HEALTH_KEY}=inferenceservice-health.lua")]);
}

fn yaml_docs(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    yaml_text_docs(&text)
}

/// The documents of a YAML text, read by the core's reader (as kubectl reads YAML).
fn yaml_text_docs(text: &str) -> Vec<Value> {
    kserve_injector_core::reader::documents(&mut text.as_bytes())
        .and_then(|docs| docs.collect())
        .expect("parse")
}

#[test]
fn application_ignores_injected_ca_bundles_and_self_heals() {
    let docs = yaml_docs(&root().join("manifests/argocd/application.yaml"));
    let app = docs
        .iter()
        .find(|d| d["kind"] == "Application")
        .expect("an Application");
    let spec = &app["spec"];
    let source_path = spec["source"]["path"].as_str().expect("source.path");
    assert!(
        root()
            .join(source_path)
            .join("kustomization.yaml")
            .is_file(),
        "source.path {source_path} is not a kustomization in this repository"
    );
    let automated = &spec["syncPolicy"]["automated"];
    assert_eq!(automated["selfHeal"], true);
    assert_eq!(automated["prune"], true);
    let options: Vec<&str> = spec["syncPolicy"]["syncOptions"]
        .as_array()
        .expect("syncOptions")
        .iter()
        .filter_map(|o| o.as_str())
        .collect();
    assert!(
        options.contains(&"RespectIgnoreDifferences=true"),
        "without it a sync writes the empty caBundle back: {options:?}"
    );
    let rule = spec["ignoreDifferences"]
        .as_array()
        .expect("ignoreDifferences")
        .iter()
        .find(|r| r["kind"] == "MutatingWebhookConfiguration")
        .expect("a rule for MutatingWebhookConfiguration");
    assert_eq!(rule["group"], "admissionregistration.k8s.io");
    assert!(
        rule.get("name").is_none(),
        "covers KServe's webhook configuration too"
    );
    let paths: Vec<&str> = rule["jqPathExpressions"]
        .as_array()
        .expect("jqPathExpressions")
        .iter()
        .filter_map(|p| p.as_str())
        .collect();
    assert_eq!(paths, [".webhooks[]?.clientConfig.caBundle"]);
}

// Renders with `kubectl kustomize` (the kustomize Argo CD embeds does the same). Without
// kubectl on PATH these tests say so and return, unless ARGOCD_RENDER_REQUIRED is set
// (.ci/argocd.sh sets it).

fn has_kubectl() -> bool {
    let found = Command::new("kubectl")
        .args(["version", "--client"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !found {
        assert!(
            std::env::var_os(RENDER_REQUIRED).is_none(),
            "{RENDER_REQUIRED} is set and kubectl is not on PATH"
        );
        eprintln!("SKIPPED: kubectl is not on PATH, nothing rendered");
    }
    found
}

/// The overlays build on manifests/base and manifests/components/*; say so when this
/// tree does not have them yet rather than fail on a missing directory.
fn has_base() -> bool {
    let found = root().join("manifests/base/kustomization.yaml").is_file();
    if !found {
        eprintln!("SKIPPED: manifests/base is not in this tree, overlays not rendered");
    }
    found
}

fn render(dir: &Path) -> Vec<Value> {
    let out = Command::new("kubectl")
        .arg("kustomize")
        .arg(dir)
        .output()
        .expect("run kubectl kustomize");
    assert!(
        out.status.success(),
        "kubectl kustomize {}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("utf-8 output");
    yaml_text_docs(&text)
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read dir") {
        let entry = entry.expect("dir entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("file type").is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

fn wave(obj: &Value) -> i64 {
    obj["metadata"]["annotations"]["argocd.argoproj.io/sync-wave"]
        .as_str()
        .map(|w| w.parse().expect("numeric sync wave"))
        .unwrap_or(0)
}

fn find<'a>(objs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objs.iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name} rendered"))
}

#[test]
fn rendered_argocd_cm_holds_the_script_byte_for_byte() {
    if !has_kubectl() {
        return;
    }
    // kustomize takes only relative component paths: copy the component beside a
    // stand-in for Argo CD's install (its argocd-cm with a setting of its own).
    let tmp = tempfile::tempdir().expect("tempdir");
    copy_tree(
        &root().join("manifests/argocd"),
        &tmp.path().join("component"),
    );
    let install = tmp.path().join("install");
    std::fs::create_dir(&install).expect("mkdir");
    std::fs::write(
        install.join("install.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: argocd-cm\ndata:\n  url: https://argocd.example.com\n",
    )
    .expect("write");
    std::fs::write(
        install.join("kustomization.yaml"),
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: argocd\nresources: [install.yaml]\ncomponents: [../component]\n",
    )
    .expect("write");
    let objs = render(&install);
    assert_eq!(objs.len(), 1, "only argocd-cm, merged: {objs:?}");
    let cm = find(&objs, "ConfigMap", "argocd-cm");
    assert_eq!(cm["metadata"]["namespace"], "argocd");
    assert_eq!(cm["data"]["url"], "https://argocd.example.com");
    let shipped =
        std::fs::read_to_string(root().join("manifests/argocd/inferenceservice-health.lua"))
            .expect("read script");
    assert_eq!(cm["data"][HEALTH_KEY].as_str(), Some(shipped.as_str()));
}

#[test]
fn rendered_webhook_overlay_orders_certificates_deployment_webhook() {
    if !has_kubectl() || !has_base() {
        return;
    }
    let objs = render(&root().join("manifests/argocd/webhook"));
    let cert_manager: Vec<&Value> = objs
        .iter()
        .filter(|o| {
            o["apiVersion"]
                .as_str()
                .is_some_and(|v| v.starts_with("cert-manager.io/"))
        })
        .collect();
    assert!(
        cert_manager.iter().any(|o| o["kind"] == "Certificate")
            && cert_manager.iter().any(|o| o["kind"] == "Issuer"),
        "the cert-manager component is rendered"
    );
    let deployment = wave(find(&objs, "Deployment", "kserve-injector"));
    let webhook = wave(find(
        &objs,
        "MutatingWebhookConfiguration",
        "kserve-injector",
    ));
    for obj in &cert_manager {
        assert!(
            wave(obj) < deployment,
            "{:?} after the Deployment",
            obj["metadata"]["name"]
        );
    }
    assert!(
        deployment < webhook,
        "webhook registered before its Deployment"
    );
    for obj in &objs {
        assert!(
            wave(obj) <= webhook,
            "{:?} after the webhook",
            obj["metadata"]["name"]
        );
    }
}

#[test]
fn rendered_stack_switches_kserve_pod_mutator_off_after_ours() {
    if !has_kubectl() || !has_base() {
        return;
    }
    // Offline: KServe's release URL is replaced by a stub with the objects the overlay touches.
    let tmp = tempfile::tempdir().expect("tempdir");
    let manifests = tmp.path().join("manifests");
    copy_tree(&root().join("manifests"), &manifests);
    let stack = manifests.join("argocd/stack");
    std::fs::copy(
        fixtures().join("kserve-release-stub.yaml"),
        stack.join("kserve-release-stub.yaml"),
    )
    .expect("copy stub");
    let kustomization = std::fs::read_to_string(stack.join("kustomization.yaml")).expect("read");
    let remote: Vec<&str> = kustomization
        .lines()
        .filter(|l| l.trim_start().starts_with("- https://"))
        .collect();
    assert_eq!(remote.len(), 1, "one remote resource: KServe's release");
    std::fs::write(
        stack.join("kustomization.yaml"),
        kustomization.replace(remote[0], "  - kserve-release-stub.yaml"),
    )
    .expect("write");
    let objs = render(&stack);
    let kserve = find(
        &objs,
        "MutatingWebhookConfiguration",
        "inferenceservice.serving.kserve.io",
    );
    let names: Vec<&str> = kserve["webhooks"]
        .as_array()
        .expect("webhooks")
        .iter()
        .filter_map(|w| w["name"].as_str())
        .collect();
    assert_eq!(names, ["inferenceservice.kserve-webhook-server.defaulter"]);
    let ours = find(&objs, "MutatingWebhookConfiguration", "kserve-injector");
    assert!(
        wave(kserve) > wave(ours),
        "KServe's mutator goes before ours is up"
    );
    for (kind, name, options) in [
        (
            "CustomResourceDefinition",
            "inferenceservices.serving.kserve.io",
            "ServerSideApply=true,Prune=false,Delete=false",
        ),
        ("Namespace", "kserve", "Prune=false,Delete=false"),
    ] {
        let obj = find(&objs, kind, name);
        assert_eq!(
            obj["metadata"]["annotations"]["argocd.argoproj.io/sync-options"], options,
            "{kind} {name}: never deleted with the Application"
        );
    }
}
