//! The pure decisions of `check`, without a cluster: each line's verdict
//! from the objects the API server would return.

use super::report::Status;
use super::*;
use crate::certs::{Authority, Validity};
use k8s_openapi::api::admissionregistration::v1::MutatingWebhook;
use serde_json::json;

fn hook(patch: serde_json::Value) -> MutatingWebhook {
    let mut base = json!({
        "name": WEBHOOK_NAME,
        "admissionReviewVersions": ["v1", "v1beta1"],
        "clientConfig": {"service": {"name": "kserve-injector", "namespace": "kserve", "path": "/mutate-pods"}},
        "failurePolicy": "Fail",
        "sideEffects": "None",
        "reinvocationPolicy": "IfNeeded",
        "timeoutSeconds": 5,
        "namespaceSelector": {"matchExpressions": [
            {"key": "control-plane", "operator": "DoesNotExist"},
            {"key": "kubernetes.io/metadata.name", "operator": "NotIn",
             "values": ["kube-system", "kube-public", "kube-node-lease", "cert-manager", "kserve"]}]},
        "objectSelector": {"matchExpressions": [{"key": "serving.kserve.io/inferenceservice", "operator": "Exists"}]},
        "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}]
    });
    json_patch::merge(&mut base, &patch);
    serde_json::from_value(base).unwrap()
}

fn expected(shadow: bool, request_timeout: u64) -> webhook::Expected {
    webhook::Expected {
        shadow,
        request_timeout: Duration::from_secs(request_timeout),
        request_timeout_from: "the Deployment's".into(),
    }
}

fn namespaces() -> BTreeMap<String, BTreeMap<String, String>> {
    ["kube-system", "kserve"]
        .into_iter()
        .map(|n| (n.to_string(), webhook::namespace_labels(n, None)))
        .collect()
}

fn statuses(lines: &[Line]) -> Vec<(&'static str, Status)> {
    lines.iter().map(|l| (l.id, l.status)).collect()
}

fn failing(lines: &[Line]) -> Vec<&'static str> {
    lines
        .iter()
        .filter(|l| l.status == Status::Fail)
        .map(|l| l.id)
        .collect()
}

#[test]
fn the_shipped_entry_passes_every_setting() {
    let lines = webhook::entry_lines(&hook(json!({})), &expected(false, 3), &namespaces());
    assert!(lines.iter().all(|l| l.status == Status::Pass), "{lines:#?}");
    assert_eq!(lines.len(), 7);
}

#[test]
fn each_broken_setting_fails_its_own_line() {
    let cases = [
        (json!({"failurePolicy": "Ignore"}), "webhook.failurePolicy"),
        (json!({"sideEffects": "Some"}), "webhook.sideEffects"),
        (
            json!({"reinvocationPolicy": "Never"}),
            "webhook.reinvocationPolicy",
        ),
        (json!({"timeoutSeconds": 4}), "webhook.timeoutSeconds"),
        (
            json!({"namespaceSelector": {"matchExpressions": [{"key": "control-plane", "operator": "DoesNotExist"}]}}),
            "webhook.namespaceSelector",
        ),
        (
            json!({"objectSelector": {"matchLabels": {"app": "x"}}}),
            "webhook.objectSelector",
        ),
        (
            json!({"rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["pods"]}]}),
            "webhook.rules",
        ),
    ];
    for (patch, id) in cases {
        let lines = webhook::entry_lines(&hook(patch.clone()), &expected(false, 3), &namespaces());
        assert_eq!(failing(&lines), [id], "{patch}: {lines:#?}");
        let line = lines.iter().find(|l| l.id == id).unwrap();
        assert!(line.fix.is_some(), "{id} says what to do");
    }
}

#[test]
fn shadow_mode_expects_ignore_and_fail_is_refused_there() {
    let ignore = hook(json!({"failurePolicy": "Ignore"}));
    let lines = webhook::entry_lines(&ignore, &expected(true, 3), &namespaces());
    assert!(failing(&lines).is_empty(), "{lines:#?}");
    let lines = webhook::entry_lines(&hook(json!({})), &expected(true, 3), &namespaces());
    assert_eq!(failing(&lines), ["webhook.failurePolicy"]);
}

#[test]
fn the_timeout_needs_the_request_timeout_plus_the_handshake_margin() {
    let five = hook(json!({}));
    assert!(failing(&webhook::entry_lines(
        &five,
        &expected(false, 3),
        &namespaces()
    ))
    .is_empty());
    let lines = webhook::entry_lines(&five, &expected(false, 4), &namespaces());
    assert_eq!(failing(&lines), ["webhook.timeoutSeconds"]);
    let line = lines
        .iter()
        .find(|l| l.id == "webhook.timeoutSeconds")
        .unwrap();
    assert!(
        line.fix.as_deref().unwrap().contains("at least 6"),
        "{line:?}"
    );
    // The API server's default (10 s) when the entry has none.
    let unset = hook(json!({"timeoutSeconds": null}));
    assert!(failing(&webhook::entry_lines(
        &unset,
        &expected(false, 5),
        &namespaces()
    ))
    .is_empty());
}

#[test]
fn a_selector_that_selects_everything_selects_our_namespace() {
    let all = hook(json!({"namespaceSelector": null}));
    let lines = webhook::entry_lines(&all, &expected(false, 3), &namespaces());
    let line = lines
        .iter()
        .find(|l| l.id == "webhook.namespaceSelector")
        .unwrap();
    assert_eq!(line.status, Status::Fail);
    assert!(line.message.contains("kserve and kube-system"), "{line:?}");
}

#[test]
fn an_object_selector_for_every_pod_is_a_warning() {
    let all = hook(json!({"objectSelector": {"matchExpressions": null}}));
    let lines = webhook::entry_lines(&all, &expected(false, 3), &namespaces());
    assert!(
        statuses(&lines).contains(&("webhook.objectSelector", Status::Warn)),
        "{lines:#?}"
    );
}

#[test]
fn kserve_mutator_beside_ours_fails_unless_in_shadow_mode() {
    let found = vec!["inferenceservice.serving.kserve.io".to_string()];
    assert_eq!(
        webhook::kserve_mutator_line(&[], false).status,
        Status::Pass
    );
    assert_eq!(
        webhook::kserve_mutator_line(&found, false).status,
        Status::Fail
    );
    assert_eq!(
        webhook::kserve_mutator_line(&found, true).status,
        Status::Pass
    );
    assert_eq!(webhook::kserve_mutator_line(&[], true).status, Status::Fail);
}

#[test]
fn targets_of_services_and_urls() {
    let service = webhook::target(&hook(json!({}))).unwrap();
    assert_eq!(service.host(), "kserve-injector.kserve.svc");
    assert_eq!(service.port(), 443);
    let url = hook(
        json!({"clientConfig": {"service": null, "url": "https://10.0.0.7:10250/mutate-pods"}}),
    );
    assert_eq!(
        webhook::target(&url),
        Some(webhook::Target::Url {
            host: "10.0.0.7".into(),
            port: 10250
        })
    );
    let v6 = hook(json!({"clientConfig": {"service": null, "url": "https://[::1]/mutate-pods"}}));
    assert_eq!(
        webhook::target(&v6),
        Some(webhook::Target::Url {
            host: "::1".into(),
            port: 443
        })
    );
    let http = hook(json!({"clientConfig": {"service": null, "url": "http://example.com/"}}));
    assert_eq!(webhook::target(&http), None);
}

fn pair(names: &[&str], days: u32) -> (Authority, Vec<CertificateDer<'static>>) {
    let validity = Validity::from(time::OffsetDateTime::now_utc(), days);
    let ca = Authority::generate("check test CA", validity).unwrap();
    let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    let leaf = ca
        .issue_serving("kserve-injector", &names, validity)
        .unwrap();
    (ca, vec![leaf.cert_der])
}

use rustls_pki_types::CertificateDer;

#[test]
fn the_ca_bundle_verifies_the_chain_its_ca_signed_and_no_other() {
    let (ca, chain) = pair(&["kserve-injector.kserve.svc"], 90);
    let (other, _) = pair(&["x"], 90);
    let host = "kserve-injector.kserve.svc";
    let now = UnixTime::now();
    let bundle = certs::bundle(Some(ca.cert_pem().as_bytes())).unwrap();
    assert_eq!(
        certs::ca_bundle_line(&bundle, &chain, "kserve/s", host, now).status,
        Status::Pass
    );
    let wrong = certs::bundle(Some(other.cert_pem().as_bytes())).unwrap();
    let line = certs::ca_bundle_line(&wrong, &chain, "kserve/s", host, now);
    assert_eq!(line.status, Status::Fail);
    assert!(line.message.contains("unknown authority"), "{line:?}");
    assert_eq!(certs::bundle(None).unwrap_err().status, Status::Fail);
    assert_eq!(
        certs::bundle(Some(b"not pem")).unwrap_err().status,
        Status::Fail
    );
}

#[test]
fn the_names_must_cover_the_host_the_api_server_dials() {
    let (_, chain) = pair(
        &["kserve-injector.kserve.svc", "127.0.0.1", "*.models.svc"],
        90,
    );
    let pass = |host: &str| certs::names_line(&chain, host, "Service").status == Status::Pass;
    assert!(pass("kserve-injector.kserve.svc"));
    assert!(pass("KSERVE-INJECTOR.kserve.svc."));
    assert!(pass("127.0.0.1"));
    assert!(pass("webhook.models.svc"));
    assert!(!pass("a.b.models.svc"));
    assert!(!pass("kserve-injector.other.svc"));
    assert!(!pass("127.0.0.2"));
}

#[test]
fn the_lifetime_warns_under_a_week_and_fails_when_expired() {
    let (_, long) = pair(&["x"], 90);
    let (_, short) = pair(&["x"], 3);
    let now = UnixTime::now();
    assert_eq!(certs::lifetime_line(&long, now).status, Status::Pass);
    assert_eq!(certs::lifetime_line(&short, now).status, Status::Warn);
    let later = UnixTime::since_unix_epoch(Duration::from_secs(now.as_secs() + 10 * 86_400));
    let line = certs::lifetime_line(&short, later);
    assert_eq!(line.status, Status::Fail);
    assert!(line.message.contains("expired"), "{line:?}");
    // the chain still verifies: the lifetime is the lifetime line's
    let (ca, chain) = pair(&["x"], 3);
    let bundle = certs::bundle(Some(ca.cert_pem().as_bytes())).unwrap();
    assert_eq!(
        certs::ca_bundle_line(&bundle, &chain, "kserve/s", "x", later).status,
        Status::Pass
    );
}

fn deployment(args: &[&str], replicas: i32, ready: Option<i32>) -> Deployment {
    serde_json::from_value(json!({
        "metadata": {"name": "kserve-injector", "namespace": "kserve"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app.kubernetes.io/name": "kserve-injector"}},
            "template": {
                "metadata": {"labels": {"app.kubernetes.io/name": "kserve-injector"}},
                "spec": {
                    "serviceAccountName": "kserve-injector",
                    "containers": [{
                        "name": "kserve-injector",
                        "args": args,
                        "volumeMounts": [
                            {"name": "serving-cert", "mountPath": "/tmp/k8s-webhook-server/serving-certs"},
                            {"name": "config", "mountPath": "/etc/kserve-injector/config"},
                            {"name": "settings", "mountPath": "/etc/kserve-injector/settings"}]}],
                    "volumes": [
                        {"name": "serving-cert", "secret": {"secretName": "kserve-injector-serving-cert"}},
                        {"name": "config", "configMap": {"name": "inferenceservice-config"}},
                        {"name": "settings", "configMap": {"name": "kserve-injector-settings-1"}}]}}},
        "status": {"readyReplicas": ready}
    }))
    .unwrap()
}

#[test]
fn the_deployment_says_how_serve_runs_and_what_it_mounts() {
    let shipped = [
        "serve",
        "--config=/etc/kserve-injector/config",
        "--request-timeout=3s",
        "--cluster-lookups=on",
        "--config-file=/etc/kserve-injector/settings/settings.yaml",
        "--shadow",
    ];
    let served = serving::served(&deployment(&shipped, 2, Some(2)));
    let serve = served.serve_args.clone().expect("the flags parse");
    assert_eq!(serve.limits.request_timeout, Duration::from_secs(3));
    assert!(served.shadow());
    assert_eq!(
        served.serving_secret,
        Some(("kserve-injector-serving-cert".into(), "tls.crt".into()))
    );
    assert_eq!(
        served.config_map.as_deref(),
        Some("inferenceservice-config")
    );
    assert_eq!(
        served.settings_file,
        Some(("kserve-injector-settings-1".into(), "settings.yaml".into()))
    );
    assert_eq!(served.service_account, "kserve-injector");
    let broken = serving::served(&deployment(&["serve", "--no-such-flag"], 2, Some(2)));
    assert!(broken.serve_args.is_none() && broken.unreadable.unwrap().contains("--no-such-flag"));
}

#[test]
fn replicas_none_ready_fail_some_warn() {
    let line = |replicas, ready| {
        serving::replicas_line(&deployment(&["serve"], replicas, ready), "kserve-injector").status
    };
    assert_eq!(line(2, Some(2)), Status::Pass);
    assert_eq!(line(2, Some(1)), Status::Warn);
    assert_eq!(line(2, None), Status::Fail);
    assert_eq!(line(1, Some(1)), Status::Warn);
}

#[test]
fn a_budget_must_select_the_pods() {
    let labels = BTreeMap::from([(
        "app.kubernetes.io/name".to_string(),
        "kserve-injector".to_string(),
    )]);
    let budget = |selector: serde_json::Value| serving::Budget {
        name: "b".into(),
        selector: serde_json::from_value(selector).ok(),
        budget: "maxUnavailable 1".into(),
    };
    let ours = budget(json!({"matchLabels": {"app.kubernetes.io/name": "kserve-injector"}}));
    let other = budget(json!({"matchLabels": {"app": "other"}}));
    assert_eq!(
        serving::budget_line(Some(&[ours]), &labels).status,
        Status::Pass
    );
    assert_eq!(
        serving::budget_line(Some(&[other]), &labels).status,
        Status::Warn
    );
    assert_eq!(serving::budget_line(None, &labels).status, Status::Skip);
}

#[test]
fn the_release_must_match_the_images_and_the_config_must_parse_under_it() {
    use kserve_injector_core::release::Release;
    let v17: Release = "v0.17".parse().unwrap();
    let manifest = kserve_injector_core::config::Config::shipped_manifest(v17);
    let mut data = kserve_injector_core::config::manifest_data(manifest).unwrap();
    for value in data.values_mut() {
        *value = value.replace(":latest", ":v0.17.1");
    }
    let (line, _) = serving::config_line("kserve/x", Some(&data), v17, None);
    assert_eq!(line.status, Status::Pass, "{line:?}");
    let (line, config) =
        serving::config_line("kserve/inferenceservice-config", Some(&data), v17, None);
    assert_eq!(line.status, Status::Pass, "{line:?}");
    let config = config.unwrap();
    assert_eq!(
        serving::release_line((v17, "--kserve-version"), Some(&config)).status,
        Status::Pass
    );
    let line = serving::release_line((Release::Head, "the default"), Some(&config));
    assert_eq!(line.status, Status::Fail, "{line:?}");
    assert!(
        line.fix
            .as_deref()
            .unwrap()
            .contains("--kserve-version v0.17"),
        "{line:?}"
    );
    let mut broken = data.clone();
    broken.insert("storageInitializer".into(), "{not json".into());
    let (line, config) =
        serving::config_line("kserve/inferenceservice-config", Some(&broken), v17, None);
    assert_eq!(line.status, Status::Fail);
    assert!(config.is_none());
    assert_eq!(serving::release_line((v17, "x"), None).status, Status::Skip);
    assert_eq!(
        serving::config_line("kserve/x", None, v17, None).0.status,
        Status::Fail
    );
}

#[test]
fn rbac_follows_the_lookup_flags() {
    let lookups = |flags: &[&str]| {
        let mut all = vec!["serve".to_string()];
        all.extend(flags.iter().map(|s| s.to_string()));
        crate::server::args::ServeArgs::try_parse_from(&all[1..])
            .unwrap()
            .lookups
    };
    let shown = |l| {
        rbac::needed(&l)
            .iter()
            .map(|a| a.to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        shown(lookups(&["--cluster-lookups=on"])),
        [
            "get serviceaccounts cluster-wide",
            "list serviceaccounts cluster-wide",
            "watch serviceaccounts cluster-wide",
            "get secrets cluster-wide",
            "list clusterstoragecontainers.serving.kserve.io cluster-wide",
            "watch clusterstoragecontainers.serving.kserve.io cluster-wide",
            "get inferenceservices.serving.kserve.io cluster-wide",
            "list inferenceservices.serving.kserve.io cluster-wide",
            "watch inferenceservices.serving.kserve.io cluster-wide",
        ]
    );
    assert!(shown(lookups(&["--cluster-lookups=off"])).is_empty());
    let namespaced = shown(lookups(&[
        "--namespaces=a,b",
        "--watch-kinds=secrets,clusterstoragecontainers",
    ]));
    assert!(
        namespaced.contains(&"watch secrets in b".to_string()),
        "{namespaced:?}"
    );
    assert!(
        namespaced.contains(&"get serviceaccounts in a".to_string()),
        "{namespaced:?}"
    );
    assert!(namespaced
        .contains(&"watch clusterstoragecontainers.serving.kserve.io cluster-wide".to_string()));
    let needed = rbac::needed(&lookups(&[]));
    let all_allowed: Vec<_> = needed
        .iter()
        .cloned()
        .map(|a| (a, rbac::Verdict::Allowed))
        .collect();
    assert_eq!(rbac::rbac_line("sa", &all_allowed).status, Status::Pass);
    let mut one_denied = all_allowed.clone();
    one_denied[3].1 = rbac::Verdict::Denied;
    let line = rbac::rbac_line("sa", &one_denied);
    assert_eq!(line.status, Status::Fail);
    assert!(
        line.message.contains("get secrets cluster-wide"),
        "{line:?}"
    );
}

fn admitted(containers: serde_json::Value, inits: serde_json::Value) -> probe::DryRun {
    let pod: Pod = serde_json::from_value(
        json!({"spec": {"containers": containers, "initContainers": inits}}),
    )
    .unwrap();
    probe::DryRun::Admitted(Box::new(pod))
}

#[test]
fn the_dry_run_passes_only_with_our_injection() {
    let ours = json!({"name": "modelcar", "securityContext": {"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}}});
    let theirs = json!({"name": "modelcar"});
    let server = json!({"name": "kserve-container"});
    let line = |answer, shadow| probe::dry_run_line(&answer, "models", shadow).status;
    assert_eq!(
        line(admitted(json!([server, ours]), json!([])), false),
        Status::Pass
    );
    assert_eq!(
        line(admitted(json!([server, theirs]), json!([])), false),
        Status::Fail
    );
    assert_eq!(
        line(admitted(json!([server, theirs]), json!([])), true),
        Status::Warn
    );
    assert_eq!(
        line(admitted(json!([server]), json!([])), false),
        Status::Fail
    );
    let initializer = json!({"name": "storage-initializer", "securityContext": {"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}}});
    assert_eq!(
        line(admitted(json!([server]), json!([initializer])), false),
        Status::Pass
    );
    let refused = probe::DryRun::Refused { code: 500, message: "Internal error occurred: failed calling webhook \"pod-mutator.kserve-injector.kserve.io\": Post \"https://127.0.0.1:1/mutate-pods?timeout=5s\": dial tcp 127.0.0.1:1: connect: connection refused".into() };
    let line = probe::dry_run_line(&refused, "models", false);
    assert_eq!(line.status, Status::Fail);
    assert!(line.fix.unwrap().contains("nothing listens"));
}

#[test]
fn each_error_users_see_first_gets_its_own_hint() {
    let hints = [
        "x509: certificate signed by unknown authority",
        "context deadline exceeded",
        "no endpoints available for service \"kserve-injector\"",
        "Post \"https://kserve-injector.kserve.svc:443/mutate-pods?timeout=5s\": EOF",
        "dial tcp 10.0.0.1:9443: connect: connection refused",
    ]
    .map(probe::hint);
    let distinct: std::collections::BTreeSet<&String> = hints.iter().collect();
    assert_eq!(distinct.len(), hints.len(), "{hints:#?}");
}

#[test]
fn the_probe_pod_is_selected_and_asks_for_the_restricted_profile() {
    let pod = probe::probe_pod("models");
    let labels = pod.metadata.labels.clone().unwrap();
    assert!(labels.contains_key(webhook::ISVC_LABEL));
    let annotations = pod.metadata.annotations.clone().unwrap();
    assert_eq!(
        annotations["kserve-injector.io/security-profile"],
        "restricted"
    );
    assert_eq!(pod.metadata.namespace.as_deref(), Some("models"));
    assert!(pod.metadata.generate_name.is_some() && pod.metadata.name.is_none());
}

#[test]
fn the_report_exits_1_only_on_a_failure() {
    let report = |lines| Report {
        server: "s".into(),
        version: "v".into(),
        namespace: "kserve".into(),
        name: "kserve-injector".into(),
        checks: lines,
    };
    let ok = report(vec![
        Line::pass("a", "fine"),
        Line::warn("b", "hm", "do"),
        Line::skip("c", "why"),
    ]);
    assert!(!ok.failed());
    assert!(
        ok.text().contains("⚠ b: hm\n    fix: do\n"),
        "{}",
        ok.text()
    );
    assert!(ok
        .text()
        .ends_with("1 passed, 1 warnings, 0 failed, 1 skipped\n"));
    let bad = report(vec![Line::fail("a", "broken", "fix it")]);
    assert!(bad.failed());
    let json: serde_json::Value = serde_json::from_str(&bad.json()).unwrap();
    assert_eq!(json["checks"][0]["status"], "fail");
    assert_eq!(json["summary"]["failed"], 1);
}

#[test]
fn restricted_namespaces_warn_under_the_baseline_profile_only() {
    use kserve_injector_core::SecurityProfile;
    let one = vec!["models".to_string()];
    let line = cluster::pod_security_line(SecurityProfile::Baseline, &one);
    assert_eq!(line.status, Status::Warn);
    assert!(
        line.message.contains("namespace models enforces"),
        "{}",
        line.message
    );
    let many: Vec<String> = (0..7).map(|i| format!("ns{i}")).collect();
    let line = cluster::pod_security_line(SecurityProfile::Baseline, &many);
    assert!(line.message.contains("ns4 and 2 more"), "{}", line.message);
    let line = cluster::pod_security_line(SecurityProfile::Restricted, &many);
    assert_eq!(line.status, Status::Pass);
    let line = cluster::pod_security_line(SecurityProfile::Baseline, &[]);
    assert_eq!(line.status, Status::Pass);
}

#[test]
fn dropped_image_volumes_fail_only_where_the_settings_ask_for_one() {
    let asked = Some("modelVolume.image");
    let line = |kept: Result<bool, String>, asked| cluster::image_volume_line(&kept, asked).status;
    assert_eq!(line(Ok(true), asked), Status::Pass);
    assert_eq!(line(Ok(false), asked), Status::Fail);
    assert_eq!(line(Ok(false), None), Status::Pass);
    assert_eq!(line(Err("forbidden".into()), asked), Status::Warn);
    assert_eq!(line(Err("forbidden".into()), None), Status::Skip);
}
