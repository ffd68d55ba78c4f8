//! What `check` concludes from our MutatingWebhookConfiguration's entry and
//! from KServe's: pure functions of the objects the API server returned
//! (with its defaults filled in), and of what the Deployment runs.

use super::report::Line;
use k8s_openapi::api::admissionregistration::v1::{MutatingWebhook, MutatingWebhookConfiguration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::core::{ParseExpressionError, Selector, SelectorExt};
use std::collections::BTreeMap;
use std::time::Duration;

/// Our entry's name, in the kustomize base and the chart alike.
pub(crate) const WEBHOOK_NAME: &str = "pod-mutator.kserve-injector.kserve.io";
/// KServe's pod mutator, in its MutatingWebhookConfiguration.
pub(super) const KSERVE_WEBHOOK: &str = "inferenceservice.kserve-webhook-server.pod-mutator";
/// The label KServe puts on every InferenceService pod.
pub(super) const ISVC_LABEL: &str = "serving.kserve.io/inferenceservice";
/// The label the API server gives every namespace (Kubernetes 1.22 on),
/// which the shipped namespaceSelector excludes namespaces by.
pub(super) const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";
/// The time `serve` needs beyond its `--request-timeout` within the API
/// server's `timeoutSeconds`: the connection and the TLS handshake (the
/// chart and CI check the same margin).
pub(super) const HANDSHAKE_MARGIN: Duration = Duration::from_secs(2);

/// What the entry is checked against: how the Deployment runs `serve`.
#[derive(Debug, Clone)]
pub(super) struct Expected {
    /// `serve --shadow`: failurePolicy Ignore, beside KServe's mutator.
    pub shadow: bool,
    pub request_timeout: Duration,
    /// Where the request timeout was read ("--request-timeout" or "serve's default").
    pub request_timeout_from: String,
}

/// Where the API server sends the admission requests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Target {
    Service {
        name: String,
        namespace: String,
        port: u16,
    },
    Url {
        host: String,
        port: u16,
    },
}

impl Target {
    /// The name the API server verifies the serving certificate for.
    pub(super) fn host(&self) -> String {
        match self {
            Target::Service {
                name, namespace, ..
            } => format!("{name}.{namespace}.svc"),
            Target::Url { host, .. } => host.clone(),
        }
    }

    pub(super) fn port(&self) -> u16 {
        match self {
            Target::Service { port, .. } | Target::Url { port, .. } => *port,
        }
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Service {
                name,
                namespace,
                port,
            } => write!(f, "Service {namespace}/{name} port {port}"),
            Target::Url { host, port } => write!(f, "URL host {host} port {port}"),
        }
    }
}

/// The entry's clientConfig as a [`Target`]; `None` when it has neither a
/// service nor a URL that parses.
pub(super) fn target(hook: &MutatingWebhook) -> Option<Target> {
    let config = &hook.client_config;
    if let Some(service) = &config.service {
        return Some(Target::Service {
            name: service.name.clone(),
            namespace: service.namespace.clone(),
            port: service
                .port
                .and_then(|p| u16::try_from(p).ok())
                .unwrap_or(443),
        });
    }
    let url = config.url.as_deref()?;
    let rest = url.strip_prefix("https://")?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let (host, port) = match authority.strip_prefix('[') {
        Some(v6) => {
            let (host, after) = v6.split_once(']')?;
            (host, after.strip_prefix(':'))
        }
        None => match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        },
    };
    let port = match port {
        Some(text) => text.parse().ok()?,
        None => 443,
    };
    (!host.is_empty()).then(|| Target::Url {
        host: host.to_string(),
        port,
    })
}

/// Our entry in `config`, or the failing line that says it is missing.
pub(super) fn our_entry<'c>(
    config: Option<&'c MutatingWebhookConfiguration>,
    name: &str,
) -> Result<&'c MutatingWebhook, Line> {
    let install = "install kserve-injector (kubectl apply -k manifests/, or helm install), or pass --name with the name it was installed under";
    let Some(config) = config else {
        return Err(Line::fail(
            "webhook.configuration",
            format!("MutatingWebhookConfiguration {name} not found"),
            install,
        ));
    };
    let entries = config.webhooks.iter().flatten();
    let found = entries.clone().find(|h| h.name == WEBHOOK_NAME);
    found.ok_or_else(|| {
        let names: Vec<&str> = entries.map(|h| h.name.as_str()).collect();
        Line::fail(
            "webhook.configuration",
            format!("MutatingWebhookConfiguration {name} has no entry {WEBHOOK_NAME} (it has: {names:?})"),
            install,
        )
    })
}

/// The lines about the entry's settings. `namespaces` holds the labels of
/// kube-system and our namespace (with the label the API server sets from
/// Kubernetes 1.22 on).
pub(super) fn entry_lines(
    hook: &MutatingWebhook,
    expected: &Expected,
    namespaces: &BTreeMap<String, BTreeMap<String, String>>,
) -> Vec<Line> {
    vec![
        failure_policy(hook, expected),
        side_effects(hook),
        reinvocation(hook),
        timeout(hook, expected),
        namespace_selector(hook, namespaces),
        object_selector(hook),
        rules(hook),
    ]
}

fn failure_policy(hook: &MutatingWebhook, expected: &Expected) -> Line {
    const ID: &str = "webhook.failurePolicy";
    // admissionregistration/v1's default
    let policy = hook.failure_policy.as_deref().unwrap_or("Fail");
    match (policy, expected.shadow) {
        ("Fail", false) => Line::pass(
            ID,
            "Fail: a pod the webhook cannot answer for is not created without its injection",
        ),
        ("Ignore", true) => Line::pass(
            ID,
            "Ignore, as shadow mode needs (a webhook that only watches never blocks a pod)",
        ),
        ("Ignore", false) => Line::fail(
            ID,
            "Ignore where Fail is expected: whenever the API server cannot call the webhook, InferenceService pods are created without their injection, silently",
            "set failurePolicy: Fail (Helm: webhook.failurePolicy=Fail); Ignore belongs to shadow mode (serve --shadow)",
        ),
        (other, true) => Line::fail(
            ID,
            format!("{other} in shadow mode (serve --shadow): a webhook that changes no pod would block pod creation whenever it cannot answer"),
            "set failurePolicy: Ignore, as components/shadow and the chart's shadow.enabled do",
        ),
        (other, false) => Line::fail(
            ID,
            format!("{other:?} is not a failurePolicy"),
            "set failurePolicy: Fail",
        ),
    }
}

fn side_effects(hook: &MutatingWebhook) -> Line {
    const ID: &str = "webhook.sideEffects";
    match hook.side_effects.as_str() {
        "None" | "NoneOnDryRun" => Line::pass(
            ID,
            format!(
                "{}: dry-run requests (kubectl --dry-run=server, this check) reach it",
                hook.side_effects
            ),
        ),
        other => Line::fail(
            ID,
            format!(
                "{other}: the API server refuses every dry-run request that this webhook would see"
            ),
            "set sideEffects: None (the webhook writes nothing)",
        ),
    }
}

fn reinvocation(hook: &MutatingWebhook) -> Line {
    const ID: &str = "webhook.reinvocationPolicy";
    match hook.reinvocation_policy.as_deref().unwrap_or("Never") {
        "IfNeeded" => Line::pass(
            ID,
            "IfNeeded: called again when a later webhook changed the pod",
        ),
        other => Line::fail(
            ID,
            format!("{other}: a webhook after this one that changes the pod (a sidecar injector) leaves it without what KServe's mutator would add on the second round"),
            "set reinvocationPolicy: IfNeeded, as KServe registers its own pod mutator",
        ),
    }
}

fn timeout(hook: &MutatingWebhook, expected: &Expected) -> Line {
    const ID: &str = "webhook.timeoutSeconds";
    // admissionregistration/v1's default
    let seconds = hook.timeout_seconds.unwrap_or(10);
    let needed = expected.request_timeout + HANDSHAKE_MARGIN;
    let given = Duration::from_secs(u64::try_from(seconds).unwrap_or(0));
    let request = humantime::format_duration(expected.request_timeout);
    if given >= needed {
        Line::pass(
            ID,
            format!("{seconds} s, at least {} s above serve's --request-timeout ({request}, {}), so serve answers (504 at the latest) before the API server gives up", HANDSHAKE_MARGIN.as_secs(), expected.request_timeout_from),
        )
    } else {
        Line::fail(
            ID,
            format!("{seconds} s is less than serve's --request-timeout ({request}, {}) plus {} s for the connection and TLS handshake: the API server gives up first, with \"context deadline exceeded\"", expected.request_timeout_from, HANDSHAKE_MARGIN.as_secs()),
            format!("raise timeoutSeconds to at least {} (at most 30), or lower --request-timeout (Helm: webhook.timeoutSeconds, server.requestTimeout)", needed.as_secs_f64().ceil()),
        )
    }
}

/// Whether `selector` (`None`: everything) selects `labels`; an invalid
/// selector is an error the line reports.
pub(super) fn selects(
    selector: Option<&LabelSelector>,
    labels: &BTreeMap<String, String>,
) -> Result<bool, ParseExpressionError> {
    let Some(selector) = selector else {
        return Ok(true);
    };
    let parsed = Selector::try_from(selector.clone())?;
    Ok(parsed.matches(labels))
}

fn namespace_selector(
    hook: &MutatingWebhook,
    namespaces: &BTreeMap<String, BTreeMap<String, String>>,
) -> Line {
    const ID: &str = "webhook.namespaceSelector";
    let mut selected = Vec::new();
    for (name, labels) in namespaces {
        match selects(hook.namespace_selector.as_ref(), labels) {
            Ok(true) => selected.push(name.as_str()),
            Ok(false) => {}
            Err(e) => {
                return Line::fail(
                    ID,
                    format!("not a valid selector: {e}"),
                    "fix the namespaceSelector",
                )
            }
        }
    }
    let names: Vec<&str> = namespaces.keys().map(String::as_str).collect();
    if selected.is_empty() {
        Line::pass(ID, format!("excludes {}", names.join(" and ")))
    } else {
        Line::fail(
            ID,
            format!("selects {}: pods there go through the webhook (failurePolicy Fail), so a webhook that cannot answer blocks the control plane's and its own namespace's pods", selected.join(" and ")),
            format!("exclude them: list them in the namespaceSelector's {NAMESPACE_NAME_LABEL} NotIn values (Helm: webhook.excludedNamespaces; the release namespace is always added)"),
        )
    }
}

fn object_selector(hook: &MutatingWebhook) -> Line {
    const ID: &str = "webhook.objectSelector";
    let isvc = BTreeMap::from([(ISVC_LABEL.to_string(), "probe".to_string())]);
    let selector = hook.object_selector.as_ref();
    match (selects(selector, &isvc), selects(selector, &BTreeMap::new())) {
        (Err(e), _) | (_, Err(e)) => Line::fail(ID, format!("not a valid selector: {e}"), "fix the objectSelector"),
        (Ok(false), _) => Line::fail(
            ID,
            format!("does not select pods labelled {ISVC_LABEL}: InferenceService pods are never sent to the webhook"),
            format!("select them: matchExpressions [{{key: {ISVC_LABEL}, operator: Exists}}] (Helm's default webhook.objectSelector)"),
        ),
        (Ok(true), Ok(true)) => Line::warn(
            ID,
            format!("selects pods without the {ISVC_LABEL} label too: every pod created in the selected namespaces goes through the webhook"),
            format!("select only InferenceService pods: matchExpressions [{{key: {ISVC_LABEL}, operator: Exists}}]"),
        ),
        (Ok(true), Ok(false)) => Line::pass(ID, format!("selects only pods labelled {ISVC_LABEL}")),
    }
}

fn rules(hook: &MutatingWebhook) -> Line {
    const ID: &str = "webhook.rules";
    let has = |list: &Option<Vec<String>>, want: &str| {
        list.iter().flatten().any(|v| v == want || v == "*")
    };
    let covers = hook.rules.iter().flatten().any(|r| {
        has(&r.operations, "CREATE")
            && has(&r.api_groups, "")
            && has(&r.api_versions, "v1")
            && r.resources
                .iter()
                .flatten()
                .any(|v| v == "pods" || v == "*" || v == "*/*")
    });
    if covers {
        Line::pass(ID, "pods are sent on CREATE")
    } else {
        Line::fail(
            ID,
            "no rule sends the CREATE of v1 pods",
            "rules: [{apiGroups: [\"\"], apiVersions: [\"v1\"], operations: [\"CREATE\"], resources: [\"pods\"]}]",
        )
    }
}

/// KServe's pod mutator beside ours: `found` names each configuration that
/// still has its entry. Both injecting is what replacing it avoids; in
/// shadow mode it must be there (it is the one that injects).
pub(super) fn kserve_mutator_line(found: &[String], shadow: bool) -> Line {
    const ID: &str = "kserve.podMutator";
    match (found.is_empty(), shadow) {
        (true, false) => Line::pass(ID, format!("KServe's {KSERVE_WEBHOOK} is not registered: only kserve-injector injects")),
        (false, true) => Line::pass(
            ID,
            format!("shadow mode beside KServe's {KSERVE_WEBHOOK} (in {}), which injects", found.join(", ")),
        ),
        (false, false) => Line::fail(
            ID,
            format!("KServe's {KSERVE_WEBHOOK} is still registered (in {}): both inject into every InferenceService pod, and KServe's reinvocation bugs still apply", found.join(", ")),
            "remove KServe's entry: components/replace-kserve-mutator, the Helm post-renderer or replaceKServeMutator=true (docs/install.md, step 4)",
        ),
        (true, true) => Line::fail(
            ID,
            format!("shadow mode, but KServe's {KSERVE_WEBHOOK} is not registered: nothing injects InferenceService pods"),
            "restore KServe's entry, or leave shadow mode (drop --shadow, failurePolicy Fail)",
        ),
    }
}

/// The names of the configurations in `all` that have KServe's entry.
pub(super) fn kserve_mutator_configurations(all: &[MutatingWebhookConfiguration]) -> Vec<String> {
    all.iter()
        .filter(|c| {
            c.webhooks
                .iter()
                .flatten()
                .any(|h| h.name == KSERVE_WEBHOOK)
        })
        .map(|c| c.metadata.name.clone().unwrap_or_default())
        .collect()
}

/// The labels `namespace` is selected by: its own (when it could be read)
/// and the one the API server sets on every namespace from Kubernetes 1.22.
pub(super) fn namespace_labels(
    name: &str,
    read: Option<BTreeMap<String, String>>,
) -> BTreeMap<String, String> {
    let mut labels = read.unwrap_or_default();
    labels
        .entry(NAMESPACE_NAME_LABEL.to_string())
        .or_insert_with(|| name.to_string());
    labels
}
