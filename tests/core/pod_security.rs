//! A test implementation of the Kubernetes *restricted* Pod Security
//! Standard's container checks (with the baseline checks it includes),
//! written from the policy's published rules, and its use on every golden
//! fixture under `--security-profile restricted`: no container we add may
//! violate it. The same run with the profile off must find violations, so
//! the checker is shown to fail.
//!
//! Each check reads a container's securityContext and, where the standard
//! lets the pod's value stand in for an unset one, the pod's.

use kserve_injector::files;
use kserve_injector_core::constants::SECURITY_PROFILE_ANNOTATION;
use kserve_injector_core::{mutate, Inputs};
use kserve_injector_core::{ModelcarMode, SecurityProfile};
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Capabilities the baseline standard lets a container add.
const BASELINE_CAPABILITIES: [&str; 13] = [
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
];
const SELINUX_TYPES: [&str; 5] = [
    "",
    "container_t",
    "container_init_t",
    "container_kvm_t",
    "container_engine_t",
];

fn field<'a>(sc: Option<&'a Value>, name: &str) -> Option<&'a Value> {
    sc.and_then(|s| s.get(name)).filter(|v| !v.is_null())
}

/// The restricted standard's violations of one container, each as
/// "field: why"; empty when it passes. `pod_sc` is the pod's securityContext.
pub fn violations(container: &Value, pod_sc: Option<&Value>) -> Vec<String> {
    let sc = container.get("securityContext").filter(|v| !v.is_null());
    let mut found = Vec::new();
    let mut fail = |what: &str| found.push(what.to_string());
    // Baseline.
    if field(sc, "privileged") == Some(&Value::Bool(true)) {
        fail("privileged: must be unset or false");
    }
    let caps = field(sc, "capabilities");
    let list = |name: &str| -> Vec<String> {
        field(caps, name)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    };
    let added = list("add");
    if added
        .iter()
        .any(|c| !BASELINE_CAPABILITIES.contains(&c.as_str()))
    {
        fail("capabilities.add: beyond the baseline set");
    }
    let ports = container.get("ports").and_then(Value::as_array);
    if ports
        .into_iter()
        .flatten()
        .any(|p| p.get("hostPort").and_then(Value::as_i64).unwrap_or(0) != 0)
    {
        fail("ports.hostPort: must be unset or 0");
    }
    if field(sc, "procMount").is_some_and(|m| m != "Default") {
        fail("procMount: must be unset or Default");
    }
    for selinux in [field(sc, "seLinuxOptions"), field(pod_sc, "seLinuxOptions")] {
        let text = |name: &str| {
            field(selinux, name)
                .and_then(Value::as_str)
                .unwrap_or_default()
        };
        if !SELINUX_TYPES.contains(&text("type"))
            || !text("user").is_empty()
            || !text("role").is_empty()
        {
            fail("seLinuxOptions: type outside the allowed set, or user/role set");
        }
    }
    for profile in [
        field(sc, "appArmorProfile"),
        field(pod_sc, "appArmorProfile"),
    ] {
        if field(profile, "type").is_some_and(|t| t == "Unconfined") {
            fail("appArmorProfile.type: must not be Unconfined");
        }
    }
    let host_process = |s: Option<&Value>| {
        field(field(s, "windowsOptions"), "hostProcess") == Some(&Value::Bool(true))
    };
    if host_process(sc) || host_process(pod_sc) {
        fail("windowsOptions.hostProcess: must not be true");
    }
    // Restricted.
    if !added.iter().all(|c| c == "NET_BIND_SERVICE") {
        fail("capabilities.add: only NET_BIND_SERVICE");
    }
    if !list("drop").iter().any(|c| c == "ALL") {
        fail("capabilities.drop: must include ALL");
    }
    if field(sc, "allowPrivilegeEscalation") != Some(&Value::Bool(false)) {
        fail("allowPrivilegeEscalation: must be false");
    }
    let non_root = match field(sc, "runAsNonRoot") {
        Some(v) => v == &Value::Bool(true),
        None => field(pod_sc, "runAsNonRoot") == Some(&Value::Bool(true)),
    };
    if !non_root {
        fail("runAsNonRoot: must be true (container, or pod with the container unset)");
    }
    let uid = field(sc, "runAsUser").or_else(|| field(pod_sc, "runAsUser"));
    if uid.and_then(Value::as_i64) == Some(0) {
        fail("runAsUser: must not be 0");
    }
    let seccomp_ok = |s: Option<&Value>| {
        matches!(
            field(field(s, "seccompProfile"), "type").and_then(Value::as_str),
            Some("RuntimeDefault" | "Localhost")
        )
    };
    let seccomp = match field(sc, "seccompProfile") {
        Some(_) => seccomp_ok(sc),
        None => seccomp_ok(pod_sc),
    };
    if !seccomp {
        fail("seccompProfile.type: must be RuntimeDefault or Localhost");
    }
    found
}

fn names(pod: &Value) -> BTreeSet<(String, String)> {
    ["containers", "initContainers"]
        .iter()
        .flat_map(|list| {
            let items = pod
                .pointer(&format!("/spec/{list}"))
                .and_then(Value::as_array);
            items
                .into_iter()
                .flatten()
                .filter_map(move |c| Some((list.to_string(), c.get("name")?.as_str()?.to_string())))
        })
        .collect()
}

/// The violations of every container `output` has and `input` had not
/// (the containers we added), each prefixed with the container's name.
pub fn added_violations(input: &Value, output: &Value) -> Vec<String> {
    let before = names(input);
    let pod_sc = output.pointer("/spec/securityContext");
    let mut found = Vec::new();
    for list in ["containers", "initContainers"] {
        let items = output
            .pointer(&format!("/spec/{list}"))
            .and_then(Value::as_array);
        for c in items.into_iter().flatten() {
            let name = c.get("name").and_then(Value::as_str).unwrap_or_default();
            if before.contains(&(list.to_string(), name.to_string())) {
                continue;
            }
            found.extend(
                violations(c, pod_sc)
                    .into_iter()
                    .map(|v| format!("{list}/{name}: {v}")),
            );
        }
    }
    found
}

struct Golden {
    name: String,
    input: Value,
    env: Inputs,
}

fn read_doc(path: &Path) -> Value {
    let text = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut bytes = text.as_slice();
    let mut docs = kserve_injector_core::reader::documents(&mut bytes)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    docs.next()
        .unwrap_or_else(|| panic!("{}: empty", path.display()))
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every golden case as `tests/cli/golden.rs` reads it (config, settings,
/// cluster objects and the `--modelcar-mode` of its `args`).
fn goldens() -> Vec<Golden> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .expect("fixtures/")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.join("input.yaml").is_file())
        // A config refused at load makes no pod.
        .filter(|p| !p.join("expected-config-error.txt").is_file())
        .collect();
    dirs.sort();
    dirs.into_iter()
        .map(|dir| {
            let optional = |name: &str| Some(dir.join(name)).filter(|p| p.is_file());
            let settings =
                files::load_settings(optional("settings.yaml").as_deref()).expect("settings");
            let config = files::load_config(optional("config.yaml").as_deref(), &settings, None)
                .expect("config");
            let mut inputs = Inputs::new(config);
            inputs.model_volume = settings.model_volume;
            if let Some(path) = optional("cluster.yaml") {
                let file = std::fs::File::open(&path).expect("cluster.yaml");
                inputs.cluster =
                    kserve_injector::lookups::load_objects(&mut std::io::BufReader::new(file))
                        .expect("objects")
                        .data;
            }
            let args = std::fs::read_to_string(dir.join("args")).unwrap_or_default();
            if args.contains("native-sidecar") {
                inputs.modelcar_mode = ModelcarMode::NativeSidecar;
            }
            Golden {
                name: dir
                    .file_name()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .into_owned(),
                input: read_doc(&dir.join("input.yaml")),
                env: inputs,
            }
        })
        .collect()
}

/// Mutates `g` under `profile`: the violations of the containers added, or
/// `None` when the pod is denied.
/// The pod's own profile annotation is dropped, so `profile` decides.
fn run(g: &Golden, profile: SecurityProfile) -> Option<(Vec<String>, bool)> {
    let mut env = g.env.clone();
    env.security_profile = profile;
    let mut input = g.input.clone();
    if let Some(a) = input
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    {
        a.remove(SECURITY_PROFILE_ANNOTATION);
    }
    let ns = input
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("default");
    let m = mutate(&input, ns, &env).ok()?;
    let added = names(&m.pod).len() > names(&input).len();
    Some((added_violations(&input, &m.pod), added))
}

#[test]
fn no_container_we_add_to_a_golden_violates_restricted() {
    let goldens = goldens();
    let (mut checked, mut denied) = (0, 0);
    let mut failures = Vec::new();
    for g in &goldens {
        match run(g, SecurityProfile::Restricted) {
            None => denied += 1,
            Some((v, added)) if v.is_empty() => checked += usize::from(added),
            Some((v, _)) => failures.push(format!("{}: {}", g.name, v.join("; "))),
        }
    }
    println!(
        "restricted: {} goldens, {checked} add containers that all pass the checker, {denied} denied",
        goldens.len()
    );
    assert!(failures.is_empty(), "violations:\n{}", failures.join("\n"));
    assert!(checked > 50, "too few goldens add a container");
}

#[test]
fn the_checker_fails_the_goldens_with_the_profile_off() {
    let goldens = goldens();
    let mut failing = 0;
    let mut adding = 0;
    for g in &goldens {
        let Some((baseline, added)) = run(g, SecurityProfile::Baseline) else {
            continue;
        };
        if added {
            adding += 1;
            assert!(
                !baseline.is_empty(),
                "{}: KServe's containers passed the restricted checker; it cannot fail",
                g.name
            );
            failing += 1;
        }
    }
    println!("baseline: {failing} of {adding} goldens that add a container fail the checker");
    assert!(adding > 20, "too few goldens add a container");
}

#[test]
fn each_check_can_fail() {
    use serde_json::json;
    let good = json!({"name": "c", "securityContext": {
        "allowPrivilegeEscalation": false, "runAsNonRoot": true,
        "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}}});
    assert!(violations(&good, None).is_empty());
    let broken = [
        (
            "/securityContext/allowPrivilegeEscalation",
            json!(true),
            "allowPrivilegeEscalation",
        ),
        (
            "/securityContext/runAsNonRoot",
            json!(false),
            "runAsNonRoot",
        ),
        (
            "/securityContext/capabilities",
            json!({"drop": ["NET_RAW"]}),
            "capabilities.drop",
        ),
        (
            "/securityContext/capabilities",
            json!({"add": ["SYS_ADMIN"], "drop": ["ALL"]}),
            "capabilities.add",
        ),
        (
            "/securityContext/seccompProfile",
            json!({"type": "Unconfined"}),
            "seccompProfile",
        ),
        ("/securityContext/privileged", json!(true), "privileged"),
        ("/securityContext/procMount", json!("Unmasked"), "procMount"),
        ("/securityContext/runAsUser", json!(0), "runAsUser"),
        (
            "/securityContext/seLinuxOptions",
            json!({"type": "spc_t"}),
            "seLinuxOptions",
        ),
        (
            "/securityContext/appArmorProfile",
            json!({"type": "Unconfined"}),
            "appArmorProfile",
        ),
        (
            "/securityContext/windowsOptions",
            json!({"hostProcess": true}),
            "hostProcess",
        ),
        (
            "/ports",
            json!([{"containerPort": 80, "hostPort": 80}]),
            "hostPort",
        ),
    ];
    for (pointer, value, want) in broken {
        let mut c = good.clone();
        let (parent, key) = pointer.rsplit_once('/').expect("pointer");
        let target = if parent.is_empty() {
            &mut c
        } else {
            c.pointer_mut(parent).expect("parent")
        };
        target[key] = value;
        let v = violations(&c, None);
        assert!(v.iter().any(|m| m.contains(want)), "{pointer}: {v:?}");
    }
    // The pod's values stand in for unset container ones, and only then.
    let bare = json!({"name": "c", "securityContext": {
        "allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}}});
    let pod = json!({"runAsNonRoot": true, "runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}});
    assert!(violations(&bare, Some(&pod)).is_empty());
    let root_pod =
        json!({"runAsNonRoot": true, "runAsUser": 0, "seccompProfile": {"type": "RuntimeDefault"}});
    assert!(violations(&bare, Some(&root_pod))
        .iter()
        .any(|m| m.contains("runAsUser")));
    assert!(violations(&bare, None).len() >= 2);
}
