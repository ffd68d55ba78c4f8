//! The end-to-end check: a pod labelled like an InferenceService pod,
//! created with `dryRun=All`, goes through the real API server, its
//! webhook configuration, the Service (or URL), TLS and `serve`, and must
//! come back with the modelcar (or the storage-initializer) injected by
//! kserve-injector. Nothing is stored. Pure: the pod to send, and what
//! the answer means.
//!
//! The probe asks for the restricted security profile
//! (`kserve-injector.io/security-profile`, an annotation of ours that
//! KServe's mutator ignores), so a container injected by kserve-injector
//! is told apart from one KServe's mutator injected: only ours carries
//! `allowPrivilegeEscalation: false` and drops every capability. Its own
//! container meets the restricted Pod Security Standard too, so a namespace
//! that enforces it admits the probe.

use super::report::Line;
use super::webhook::ISVC_LABEL;
use k8s_openapi::api::core::v1::{Container, Pod};
use kserve_injector_core::constants::{
    MODELCAR_CONTAINER, SECURITY_PROFILE_ANNOTATION, SOURCE_URI_ANNOTATION,
    STORAGE_INITIALIZER_CONTAINER,
};
use serde_json::json;

const ID: &str = "endToEnd.dryRun";
/// The probe's model: an OCI image, so that the modelcar is injected (or,
/// where the ConfigMap turns the modelcar off, the storage-initializer);
/// never pulled, since nothing is created.
pub(super) const PROBE_MODEL: &str = "oci://registry.invalid/kserve-injector-check/model:probe";

/// The pod `check` sends with `dryRun=All` into `namespace`.
pub(super) fn probe_pod(namespace: &str) -> Pod {
    let restricted = json!({
        "allowPrivilegeEscalation": false,
        "capabilities": {"drop": ["ALL"]},
        "runAsNonRoot": true,
        "runAsUser": 1000,
        "seccompProfile": {"type": "RuntimeDefault"}
    });
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": "kserve-injector-check-",
            "namespace": namespace,
            "labels": {ISVC_LABEL: "kserve-injector-check", "component": "predictor"},
            "annotations": {
                SOURCE_URI_ANNOTATION: PROBE_MODEL,
                SECURITY_PROFILE_ANNOTATION: "restricted",
            },
        },
        "spec": {
            "automountServiceAccountToken": false,
            "securityContext": {"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{
                "name": "kserve-container",
                "image": "registry.invalid/kserve-injector-check/server:probe",
                "securityContext": restricted,
            }],
        },
    }))
    .unwrap_or_default()
}

/// What the API server answered the dry run of the probe pod.
#[derive(Debug, Clone)]
pub(super) enum DryRun {
    /// The pod as it would have been stored.
    Admitted(Box<Pod>),
    /// The API server's refusal (its HTTP code and message).
    Refused { code: u16, message: String },
    /// No answer (a connection error, a timeout).
    Failed(String),
}

/// The container kserve-injector (or KServe's mutator) adds for the probe.
fn injected(pod: &Pod) -> Option<&Container> {
    let spec = pod.spec.as_ref()?;
    let all = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten());
    let mut found = None;
    for c in all {
        if c.name == MODELCAR_CONTAINER {
            return Some(c);
        }
        if c.name == STORAGE_INITIALIZER_CONTAINER {
            found = Some(c);
        }
    }
    found
}

/// Only kserve-injector's restricted profile hardens what it adds.
fn hardened(c: &Container) -> bool {
    let sc = c.security_context.as_ref();
    let no_escalation = sc.and_then(|s| s.allow_privilege_escalation) == Some(false);
    let drops_all = sc
        .and_then(|s| s.capabilities.as_ref())
        .and_then(|c| c.drop.as_ref())
        .is_some_and(|d| d.iter().any(|x| x == "ALL"));
    no_escalation && drops_all
}

/// The end-to-end line. `shadow`: serve changes no pod, so the probe can
/// only come back as KServe's mutator made it.
pub(super) fn dry_run_line(answer: &DryRun, namespace: &str, shadow: bool) -> Line {
    match answer {
        DryRun::Admitted(pod) => match (injected(pod), shadow) {
            (Some(c), false) if hardened(c) => Line::pass(
                ID,
                format!("a dry-run pod in {namespace} came back from the API server with the {} kserve-injector injected", c.name),
            ),
            (Some(c), true) => Line::warn(
                ID,
                format!("a dry-run pod in {namespace} came back with the {} KServe's mutator injected; in shadow mode kserve-injector changes nothing, so the dry run cannot show it was reached", c.name),
                "kserve_injector_requests_total and the shadow-mode log lines show the requests it gets",
            ),
            (Some(c), false) => Line::fail(
                ID,
                format!("a dry-run pod in {namespace} came back with a {} that kserve-injector did not make (no restricted securityContext for its kserve-injector.io/security-profile annotation): another mutator injected it, and kserve-injector was not called or its failure was ignored", c.name),
                "see the kserve.podMutator and webhook.failurePolicy lines; the API server's log names the failed call",
            ),
            (None, _) => Line::fail(
                ID,
                format!("a dry-run pod in {namespace}, labelled {ISVC_LABEL}, came back without a modelcar or storage-initializer: the API server did not send it to kserve-injector, or its failure was ignored (failurePolicy Ignore)"),
                format!("check that the namespaceSelector selects {namespace} and the failurePolicy line; --probe-namespace names a namespace the webhook serves"),
            ),
        },
        DryRun::Refused { code, message } => Line::fail(
            ID,
            format!("the API server refused a dry-run pod in {namespace} ({code}): {}", bounded(message)),
            hint(message),
        ),
        DryRun::Failed(message) => Line::fail(
            ID,
            format!("the dry run of a pod in {namespace} got no answer: {}", bounded(message)),
            "check the connection to the API server",
        ),
    }
}

fn bounded(text: &str) -> String {
    const MAX: usize = 600;
    match text.char_indices().nth(MAX) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

/// What to do about the API server's message, for the errors users see
/// first (docs/operations.md, "Troubleshooting").
pub(super) fn hint(message: &str) -> String {
    let fix = if message.contains("x509: certificate signed by unknown authority")
        || message.contains("certificate signed by unknown authority")
    {
        "the caBundle does not verify the certificate the webhook serves: see the webhook.caBundle and webhook.handshake lines"
    } else if message.contains("x509:") {
        "the API server refuses the webhook's certificate: see the certificate.names, certificate.lifetime and webhook.handshake lines"
    } else if message.contains("no endpoints available for service") {
        "no ready replica behind the webhook's Service: see the deployment.replicas line (kubectl get endpoints)"
    } else if message.contains("context deadline exceeded")
        || message.contains("Client.Timeout")
        || message.contains("i/o timeout")
    {
        "the API server got no answer within timeoutSeconds: a firewall or NetworkPolicy between the control plane and the pods' port (managed clusters: allow the control plane to reach the nodes on the webhook port, or run on the host network), or an overloaded webhook"
    } else if message.contains("connection refused") {
        "nothing listens where the webhook configuration points: serve is not running there (see deployment.replicas), or the Service's targetPort or the URL's port is wrong"
    } else if message.contains("EOF") || message.contains("connection reset") {
        "the connection was closed during the TLS handshake or the request: a port that does not speak TLS, a proxy in between, or serve restarting"
    } else if message.contains("denied the request") {
        "the webhook denied the probe pod: its message says why"
    } else if message.contains("not found") && message.contains("service") {
        "the Service the webhook configuration names does not exist: apply the install again"
    } else {
        "read the API server's message above; docs/operations.md, \"Troubleshooting\""
    };
    fix.to_string()
}
