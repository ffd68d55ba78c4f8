//! `kserve-injector policy`: the MutatingAdmissionPolicy and its binding
//! against their goldens in `fixtures/policy/`, the size on stderr, and a
//! config it cannot read refused with exit 2. (The policy itself is proven
//! against a real API server by `tests/e2e/policy.rs`.)

use crate::run_bin;
use std::path::Path;

fn fixtures() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures"))
}

/// `policy ARGS` against `fixtures/policy/GOLDEN`; `REGENERATE_GOLDENS=1`
/// rewrites the golden.
fn golden(args: &[&str], golden: &str) -> String {
    let mut all = vec!["policy"];
    all.extend_from_slice(args);
    let out = run_bin(&all, b"");
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let golden = fixtures().join("policy").join(golden);
    if std::env::var_os("REGENERATE_GOLDENS").is_some_and(|v| v != "0") {
        std::fs::write(&golden, &out.stdout).expect("golden written");
    }
    let want = std::fs::read_to_string(&golden).expect("golden readable");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        want,
        "{}",
        golden.display()
    );
    stderr
}

#[test]
fn policy_with_the_shipped_config_is_its_golden() {
    let stderr = golden(&[], "expected.yaml");
    let docs = kserve_injector_core::reader::documents(
        &mut std::fs::read(fixtures().join("policy/expected.yaml"))
            .unwrap()
            .as_slice(),
    )
    .and_then(|d| d.collect::<Result<Vec<_>, _>>())
    .expect("the golden reads back");
    let kinds: Vec<&str> = docs.iter().map(|d| d["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        ["MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding"]
    );
    // The size said is the policy's, as JSON.
    let size = docs[0].to_string().len();
    assert_eq!(
        stderr.trim(),
        format!("policy: {size} bytes as JSON (the MutatingAdmissionPolicy)")
    );
    // The webhook's own selectors: the policy never takes a pod the
    // webhook would not be called for.
    let webhook =
        std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests/base/webhook.yaml"))
            .unwrap();
    let webhook = kserve_injector_core::reader::documents(&mut webhook.as_slice())
        .and_then(|d| d.collect::<Result<Vec<_>, _>>())
        .unwrap();
    let hook = &webhook[0]["webhooks"][0];
    let constraints = &docs[0]["spec"]["matchConstraints"];
    assert_eq!(constraints["namespaceSelector"], hook["namespaceSelector"]);
    assert_eq!(constraints["objectSelector"], hook["objectSelector"]);
    assert_eq!(constraints["resourceRules"], hook["rules"]);
}

#[test]
fn policy_with_aggregation_on_is_its_golden() {
    let config = fixtures().join("ma08-config-true-custom-port-path/config.yaml");
    golden(
        &["--config", config.to_str().unwrap()],
        "expected-aggregation.yaml",
    );
    let text =
        std::fs::read_to_string(fixtures().join("policy/expected-aggregation.yaml")).unwrap();
    assert!(text.contains("name: no-queue-proxy-container"), "{text}");
}

#[test]
fn policy_refuses_a_config_it_cannot_read() {
    let out = run_bin(&["policy", "--config", "/nonexistent/config.yaml"], b"");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.starts_with("error: "), "{stderr}");
    assert!(stderr.contains("/nonexistent/config.yaml"), "{stderr}");
    assert!(out.stdout.is_empty());
}
