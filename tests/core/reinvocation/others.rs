//! Other webhooks: the mutations another admission webhook may make between
//! two of our passes (Istio, Vault, policy engines).

use super::*;

// Other webhooks
// ---------------------------------------------------------------------------

/// A mutation another webhook makes between two of our passes. None removes
/// or rewrites anything of ours.
#[derive(Debug, Clone)]
pub(super) enum Other {
    /// Istio's injector; `cni` leaves out `istio-init`, which makes our
    /// Istio-CNI step give the storage initializer the sidecar's UID.
    Istio {
        prepend: bool,
        cni: bool,
        rewrite_probes: bool,
    },
    InitPrepended(&'static str),
    VolumesAdded(Vec<&'static str>),
    EnvAdded {
        target: Index,
        init: bool,
        name: &'static str,
        value: String,
    },
    LabelsAdded(Pairs),
    AnnotationsAdded(Pairs),
    /// Sets our modelcar-mode annotation after the modelcar is in: the
    /// shape present must still decide.
    ModelcarModeAnnotated(&'static str),
    ResourcesChanged {
        target: Index,
        init: bool,
        cpu: &'static str,
        memory: &'static str,
    },
    SecurityHardened,
    MountAdded {
        target: Index,
        name: &'static str,
        path: &'static str,
    },
    PortAdded {
        target: Index,
        name: &'static str,
        port: i32,
    },
    NewerFieldAdded(Value),
    /// Makes our GKE accelerator step act when its annotation is present.
    GpuLimitAdded(Index),
    /// Reorders without removing: containers, volumes, one container's env
    /// and mounts.
    Reordered(Index),
}

impl Other {
    /// Whether the next pass may legitimately change the pod.
    pub(super) fn triggers(&self) -> bool {
        matches!(
            self,
            Other::Istio { cni: true, .. } | Other::GpuLimitAdded(_)
        )
    }
}

pub(super) fn other() -> impl Strategy<Value = Other> {
    prop_oneof![
        3 => (any::<bool>(), prop::bool::weighted(0.3), any::<bool>()).prop_map(
            |(prepend, cni, rewrite_probes)| Other::Istio { prepend, cni, rewrite_probes }
        ),
        1 => prop::sample::select(vec!["vault-agent-init", "linkerd-init", "istio-init"])
            .prop_map(Other::InitPrepended),
        1 => prop::collection::vec(
            prop::sample::select(vec!["vault-secrets", "istio-data", "dapr-certs"]),
            1..3
        )
        .prop_map(Other::VolumesAdded),
        2 => (
            any::<Index>(),
            prop::bool::weighted(0.2),
            prop::sample::select(vec!["VAULT_ADDR", "OTEL_EXPORTER", "TZ"]),
            re("[a-z0-9]{1,6}")
        )
            .prop_map(|(target, init, name, value)| Other::EnvAdded { target, init, name, value }),
        1 => prop::collection::vec(
            (re("webhook\\.example\\.com/[a-z~]{1,5}"), re("[a-z]{1,4}")),
            1..3
        )
        .prop_map(Other::LabelsAdded),
        1 => prop::collection::vec(
            (re("policy\\.example\\.com/[a-z~/]{1,6}"), re("[a-z0-9~/]{0,6}")),
            1..3
        )
        .prop_map(Other::AnnotationsAdded),
        1 => modelcar_mode_annotation().prop_map(Other::ModelcarModeAnnotated),
        2 => (
            any::<Index>(),
            prop::bool::weighted(0.3),
            prop::sample::select(vec!["250m", "2", "500m"]),
            prop::sample::select(vec!["256Mi", "2Gi"])
        )
            .prop_map(|(target, init, cpu, memory)| Other::ResourcesChanged { target, init, cpu, memory }),
        1 => Just(Other::SecurityHardened),
        1 => (
            any::<Index>(),
            prop::sample::select(vec!["vault-secrets", "dapr-certs"]),
            prop::sample::select(vec!["/vault/secrets", "/var/run/dapr"])
        )
            .prop_map(|(target, name, path)| Other::MountAdded { target, name, path }),
        1 => (
            any::<Index>(),
            prop::sample::select(vec!["envoy-admin", "dapr-http"]),
            prop::sample::select(vec![15000, 3500])
        )
            .prop_map(|(target, name, port)| Other::PortAdded { target, name, port }),
        1 => unknown_value().prop_map(Other::NewerFieldAdded),
        1 => any::<Index>().prop_map(Other::GpuLimitAdded),
        1 => any::<Index>().prop_map(Other::Reordered),
    ]
}

pub(super) fn object_slot<'v>(parent: &'v mut Value, key: &str) -> &'v mut Map<String, Value> {
    if !parent.is_object() {
        *parent = Value::Object(Map::new());
    }
    let obj = parent.as_object_mut().expect("object");
    let slot = obj.entry(key.to_string()).or_insert(Value::Null);
    if !slot.is_object() {
        *slot = Value::Object(Map::new());
    }
    slot.as_object_mut().expect("object")
}

pub(super) fn array_slot<'v>(parent: &'v mut Value, key: &str) -> &'v mut Vec<Value> {
    if !parent.is_object() {
        *parent = Value::Object(Map::new());
    }
    let obj = parent.as_object_mut().expect("object");
    let slot = obj.entry(key.to_string()).or_insert(Value::Null);
    if !slot.is_array() {
        *slot = Value::Array(Vec::new());
    }
    slot.as_array_mut().expect("array")
}

pub(super) fn names_in(items: &[Value]) -> impl Iterator<Item = &str> {
    items
        .iter()
        .filter_map(|e| e.get("name").and_then(Value::as_str))
}

pub(super) fn has_named(items: &[Value], name: &str) -> bool {
    names_in(items).any(|n| n == name)
}

pub(super) fn list_key(init: bool) -> &'static str {
    if init {
        "initContainers"
    } else {
        "containers"
    }
}

pub(super) fn container_by_index<'v>(
    pod: &'v mut Value,
    init: bool,
    target: &Index,
) -> Option<&'v mut Value> {
    let items = pod
        .get_mut("spec")?
        .get_mut(list_key(init))?
        .as_array_mut()?;
    if items.is_empty() {
        return None;
    }
    let i = target.index(items.len());
    items.get_mut(i)
}

pub(super) fn any_container_named(pod: &Value, name: &str) -> bool {
    ["containers", "initContainers"].iter().any(|k| {
        pod["spec"][k]
            .as_array()
            .is_some_and(|items| has_named(items, name))
    })
}

pub(super) fn apply_other(pod: &mut Value, other: &Other) {
    match other {
        Other::Istio {
            prepend,
            cni,
            rewrite_probes,
        } => {
            if *rewrite_probes {
                if let Some(items) = pod["spec"]["containers"].as_array_mut() {
                    for c in items.iter_mut() {
                        let name = c["name"].as_str().unwrap_or_default().to_string();
                        if c.pointer("/readinessProbe/httpGet").is_some() && name != "istio-proxy" {
                            c["readinessProbe"]["httpGet"] = json!({
                                "path": format!("/app-health/{name}/readyz"),
                                "port": 15020,
                                "scheme": "HTTP"
                            });
                        }
                    }
                }
            }
            if !any_container_named(pod, "istio-proxy") {
                let sidecar = json!({
                    "name": "istio-proxy",
                    "image": "docker.io/istio/proxyv2:1.22",
                    "args": ["proxy", "sidecar"],
                    "ports": [{"name": "http-envoy-prom", "containerPort": 15090, "protocol": "TCP"}],
                    "env": [{"name": "ISTIO_KUBE_APP_PROBERS", "value": "{}"}],
                    "securityContext": {"runAsUser": 1337, "runAsGroup": 1337},
                    "volumeMounts": [{"name": "istio-envoy", "mountPath": "/etc/istio/proxy"}]
                });
                let containers = array_slot(&mut pod["spec"], "containers");
                if *prepend {
                    containers.insert(0, sidecar);
                } else {
                    containers.push(sidecar);
                }
            }
            if !cni && !any_container_named(pod, "istio-init") {
                array_slot(&mut pod["spec"], "initContainers").insert(
                    0,
                    json!({"name": "istio-init", "image": "docker.io/istio/proxyv2:1.22", "args": ["istio-iptables"]}),
                );
            }
            let volumes = array_slot(&mut pod["spec"], "volumes");
            for (name, source) in [
                ("istio-envoy", json!({"emptyDir": {"medium": "Memory"}})),
                (
                    "istiod-ca-cert",
                    json!({"configMap": {"name": "istio-ca-root-cert"}}),
                ),
            ] {
                if !has_named(volumes, name) {
                    let mut v = source;
                    v["name"] = json!(name);
                    volumes.push(v);
                }
            }
            let annotations = object_slot(&mut pod["metadata"], "annotations");
            annotations.insert(
                ISTIO_STATUS_ANNOTATION.into(),
                json!(r#"{"initContainers":["istio-init"],"containers":["istio-proxy"],"volumes":["istio-envoy","istiod-ca-cert"],"revision":"default"}"#),
            );
            annotations.insert(ISTIO_INTERCEPTION_MODE_ANNOTATION.into(), json!("REDIRECT"));
            let labels = object_slot(&mut pod["metadata"], "labels");
            labels.insert("security.istio.io/tlsMode".into(), json!("istio"));
            labels.insert("service.istio.io/canonical-name".into(), json!("sklearn"));
        }
        Other::InitPrepended(name) => {
            if !any_container_named(pod, name) {
                array_slot(&mut pod["spec"], "initContainers").insert(
                    0,
                    json!({"name": name, "image": "busybox", "command": ["sh", "-c", "true"]}),
                );
            }
        }
        Other::VolumesAdded(names) => {
            let volumes = array_slot(&mut pod["spec"], "volumes");
            for name in names {
                if !has_named(volumes, name) {
                    volumes.push(json!({"name": name, "emptyDir": {}}));
                }
            }
        }
        Other::EnvAdded {
            target,
            init,
            name,
            value,
        } => {
            if let Some(c) = container_by_index(pod, *init, target) {
                let env = array_slot(c, "env");
                if !has_named(env, name) {
                    env.push(json!({"name": name, "value": value}));
                }
            }
        }
        Other::LabelsAdded(items) => {
            let labels = object_slot(&mut pod["metadata"], "labels");
            for (k, v) in items {
                labels.insert(k.clone(), json!(v));
            }
        }
        Other::AnnotationsAdded(items) => {
            let annotations = object_slot(&mut pod["metadata"], "annotations");
            for (k, v) in items {
                annotations.insert(k.clone(), json!(v));
            }
        }
        Other::ModelcarModeAnnotated(mode) => {
            let annotations = object_slot(&mut pod["metadata"], "annotations");
            annotations.insert(MODELCAR_MODE_ANNOTATION.to_string(), json!(mode));
        }
        Other::ResourcesChanged {
            target,
            init,
            cpu,
            memory,
        } => {
            if let Some(c) = container_by_index(pod, *init, target) {
                let resources = object_slot(c, "resources");
                for part in ["limits", "requests"] {
                    let slot = resources.entry(part).or_insert(Value::Null);
                    let amounts = object_slot_value(slot);
                    amounts.insert("cpu".into(), json!(cpu));
                    amounts.insert("memory".into(), json!(memory));
                }
            }
        }
        Other::SecurityHardened => {
            for key in ["containers", "initContainers"] {
                if let Some(items) = pod["spec"][key].as_array_mut() {
                    for c in items {
                        let sc = object_slot(c, "securityContext");
                        sc.insert("allowPrivilegeEscalation".into(), json!(false));
                        sc.entry("capabilities")
                            .or_insert_with(|| json!({"drop": ["ALL"]}));
                    }
                }
            }
        }
        Other::MountAdded { target, name, path } => {
            let mut added = false;
            if let Some(c) = container_by_index(pod, false, target) {
                let mounts = array_slot(c, "volumeMounts");
                let path_used = mounts
                    .iter()
                    .any(|m| m.get("mountPath").and_then(Value::as_str) == Some(path));
                if !has_named(mounts, name) && !path_used {
                    mounts.push(json!({"name": name, "mountPath": path, "readOnly": true}));
                    added = true;
                }
            }
            if added {
                let volumes = array_slot(&mut pod["spec"], "volumes");
                if !has_named(volumes, name) {
                    volumes.push(json!({"name": name, "emptyDir": {"medium": "Memory"}}));
                }
            }
        }
        Other::PortAdded { target, name, port } => {
            if let Some(c) = container_by_index(pod, false, target) {
                let ports = array_slot(c, "ports");
                if !has_named(ports, name) {
                    ports.push(json!({"name": name, "containerPort": port, "protocol": "TCP"}));
                }
            }
        }
        Other::NewerFieldAdded(value) => {
            if let Some(spec) = pod["spec"].as_object_mut() {
                spec.entry("someNewerField")
                    .or_insert_with(|| value.clone());
            }
        }
        Other::Reordered(target) => {
            for key in ["containers", "volumes"] {
                if let Some(items) = pod["spec"][key].as_array_mut() {
                    items.reverse();
                }
            }
            if let Some(c) = container_by_index(pod, false, target) {
                for key in ["env", "volumeMounts"] {
                    if let Some(items) = c[key].as_array_mut() {
                        items.reverse();
                    }
                }
            }
        }
        Other::GpuLimitAdded(target) => {
            if let Some(c) = container_by_index(pod, false, target) {
                let resources = object_slot(c, "resources");
                let slot = resources.entry("limits").or_insert(Value::Null);
                object_slot_value(slot).insert(NVIDIA_GPU_RESOURCE.into(), json!("1"));
            }
        }
    }
}

pub(super) fn object_slot_value(slot: &mut Value) -> &mut Map<String, Value> {
    if !slot.is_object() {
        *slot = Value::Object(Map::new());
    }
    slot.as_object_mut().expect("object")
}
