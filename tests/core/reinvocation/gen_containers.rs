//! Generators of containers: bodies with probes, security contexts,
//! resources, env and unknown fields, and the queue-proxy.

use super::*;

// Generators
// ---------------------------------------------------------------------------

/// Field names the Pod schema does not know; the generators and the "newer
/// webhook" put unknown data only under these keys.
pub(super) const UNKNOWN_KEYS: [&str; 8] = [
    "someFutureField",
    "someUnknownField",
    "futureMetaField",
    "futureVolumeField",
    "futureEnvField",
    "futureScField",
    "futureTopField",
    "someNewerField",
];

/// A string strategy; the regex is parsed once, here, not per generated value
/// (a `&str` strategy re-parses its regex for every value).
pub(super) fn re(pattern: &str) -> proptest::string::RegexGeneratorStrategy<String> {
    proptest::string::string_regex(pattern).expect("valid regex")
}

pub(super) fn unknown_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!(true)),
        re("[a-z]{0,6}").prop_map(Value::from),
        any::<i32>().prop_map(Value::from),
        Just(json!({"a": 1, "nested": {"list": [1, "x", null], "empty": {}}})),
        Just(json!([{"name": "not-a-container"}])),
        Just(Value::Null),
    ]
}

pub(super) fn probe() -> impl Strategy<Value = Option<Value>> {
    let path = prop::option::of(prop::sample::select(vec![
        "/",
        "/ready",
        "/v1/models/m",
        "",
    ]));
    let named_port = prop::sample::select(vec!["http", "h2c", "user-port"]);
    let handler = prop_oneof![
        (path.clone(), named_port.clone())
            .prop_map(|(p, port)| json!({"httpGet": {"path": p, "port": port, "scheme": "HTTP"}})),
        (path, 1..65_535i32).prop_map(|(p, port)| json!({"httpGet": {"path": p, "port": port}})),
        (1..65_535i32).prop_map(|port| json!({"tcpSocket": {"port": port}})),
        named_port.prop_map(|port| json!({"tcpSocket": {"port": port, "host": "127.0.0.1"}})),
        Just(json!({"exec": {"command": ["cat", "/tmp/ready"]}})),
        (1..65_535i32).prop_map(|port| json!({"grpc": {"port": port}})),
    ];
    prop::option::weighted(
        0.7,
        (
            handler,
            prop::option::of(0..30i32),
            prop::option::of(1..5i32),
        )
            .prop_map(|(mut h, delay, threshold)| {
                if let Some(d) = delay {
                    h["initialDelaySeconds"] = json!(d);
                }
                if let Some(t) = threshold {
                    h["successThreshold"] = json!(t);
                }
                h
            }),
    )
}

#[derive(Debug, Clone)]
pub(super) enum Slot {
    Absent,
    Null,
    Present(Value),
}

pub(super) fn security_context() -> impl Strategy<Value = Slot> {
    prop_oneof![
        4 => Just(Slot::Absent),
        1 => Just(Slot::Null),
        2 => (1000..2000i64).prop_map(|uid| Slot::Present(json!({"runAsUser": uid}))),
        2 => Just(Slot::Present(json!({
            "runAsNonRoot": true,
            "capabilities": {"drop": ["ALL"]},
            "futureScField": {"level": 3}
        }))),
    ]
}

pub(super) fn resources() -> impl Strategy<Value = Option<Value>> {
    prop::option::weighted(
        0.5,
        (
            prop::sample::select(vec!["100m", "1", "2"]),
            prop::sample::select(vec!["128Mi", "1Gi"]),
            prop::bool::weighted(0.25),
        )
            .prop_map(|(cpu, memory, gpu)| {
                let mut limits = json!({"cpu": cpu, "memory": memory});
                if gpu {
                    limits[NVIDIA_GPU_RESOURCE] = json!("1");
                }
                json!({"limits": limits, "requests": {"cpu": cpu}})
            }),
    )
}

pub(super) fn env_entry() -> impl Strategy<Value = (&'static str, Value)> {
    let name = prop::sample::select(vec![
        "FOO",
        "PORT",
        STORAGE_URI_ENV,
        MODEL_INIT_MODE_ENV,
        "KSERVE_CONTAINER_PROMETHEUS_METRICS_PORT",
        "HF_HUB_ENABLE_HF_TRANSFER",
    ]);
    let body = prop_oneof![
        4 => re("[a-z0-9:/]{0,10}").prop_map(|v| json!({"value": v})),
        1 => Just(json!({"valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}})),
        1 => Just(json!({"valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}})),
        1 => Just(json!({"value": "x", "futureEnvField": [1, 2]})),
        1 => Just(json!({})),
    ];
    (name, body)
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Odd {
    None,
    EnvNull,
    MountsNull,
    PortsNull,
}

/// A container body; the name is given when the pod is assembled.
#[derive(Debug, Clone)]
pub(super) struct Body {
    pub(super) image: Option<&'static str>,
    pub(super) ports: Vec<(Option<&'static str>, i32)>,
    pub(super) env: Vec<(&'static str, Value)>,
    pub(super) mounts: Vec<(&'static str, &'static str, bool)>,
    pub(super) probe: Option<Value>,
    pub(super) security: Slot,
    pub(super) resources: Option<Value>,
    pub(super) unknown: Option<Value>,
    pub(super) odd: Odd,
}

pub(super) fn body() -> impl Strategy<Value = Body> {
    (
        prop::option::weighted(
            0.9,
            prop::sample::select(vec![
                "kserve/sklearnserver:latest",
                "busybox",
                "img@sha256:0",
            ]),
        ),
        prop::collection::vec(
            (
                prop::option::of(prop::sample::select(vec![
                    "http",
                    "h2c",
                    "grpc",
                    "metrics",
                    AGGREGATE_METRICS_PORT_NAME,
                ])),
                prop::sample::select(vec![8080, 8081, 9000, 9088, 8012]),
            ),
            0..3,
        ),
        prop::collection::vec(env_entry(), 0..4),
        prop::collection::vec(
            (
                prop::sample::select(vec!["data", "cache", "model-dir", "user-gcp-sa"]),
                prop::sample::select(vec![
                    "/data",
                    "/cache",
                    "/etc/secret",
                    "/mnt/models",
                    "/mnt",
                ]),
                any::<bool>(),
            ),
            0..3,
        ),
        probe(),
        security_context(),
        resources(),
        prop::option::weighted(0.3, unknown_value()),
        prop_oneof![
            12 => Just(Odd::None),
            1 => Just(Odd::EnvNull),
            1 => Just(Odd::MountsNull),
            1 => Just(Odd::PortsNull),
        ],
    )
        .prop_map(
            |(image, ports, env, mounts, probe, security, resources, unknown, odd)| Body {
                image,
                ports,
                env,
                mounts,
                probe,
                security,
                resources,
                unknown,
                odd,
            },
        )
}

/// Knative sets queue-proxy's `USER_PORT` to the serving container's port;
/// once KServe points it at the agent, that port is what an agent re-created
/// after another webhook removed it can recover.
pub(super) fn align_user_port(containers: &mut [Value]) {
    let first_port = |name: &str| {
        containers
            .iter()
            .find(|c| c["name"] == name)
            .and_then(|c| c["ports"][0]["containerPort"].as_i64())
    };
    let has_transformer = containers
        .iter()
        .any(|c| c["name"] == TRANSFORMER_CONTAINER);
    let port = if has_transformer {
        first_port(TRANSFORMER_CONTAINER)
    } else {
        first_port(KSERVE_CONTAINER)
    }
    .unwrap_or(8080)
    .to_string();
    for qp in containers
        .iter_mut()
        .filter(|c| c["name"] == QUEUE_PROXY_CONTAINER)
    {
        if let Some(env) = qp.get_mut("env").and_then(Value::as_array_mut) {
            for var in env
                .iter_mut()
                .filter(|v| v["name"] == USER_PORT_ENV && v.get("value").is_some())
            {
                var["value"] = json!(port);
            }
        }
    }
}

/// What Knative gives queue-proxy.
#[derive(Debug, Clone)]
pub(super) struct QueueProxy {
    pub(super) user_port: Option<Value>,
    pub(super) readiness_env: bool,
    pub(super) aggr_port: bool,
    pub(super) env_unknown: bool,
}

pub(super) fn queue_proxy() -> impl Strategy<Value = QueueProxy> {
    (
        prop::option::weighted(
            0.9,
            prop_oneof![
                5 => Just(json!({"value": "8080"})),
                1 => Just(json!({"value": "8080", "futureEnvField": "kept"})),
                1 => Just(json!({"valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations['port']"}}})),
            ],
        ),
        prop::bool::weighted(0.8),
        prop::bool::weighted(0.15),
        prop::bool::weighted(0.2),
    )
        .prop_map(|(user_port, readiness_env, aggr_port, env_unknown)| QueueProxy {
            user_port,
            readiness_env,
            aggr_port,
            env_unknown,
        })
}

pub(super) fn render_container(name: &str, body: &Body, qp: Option<&QueueProxy>) -> Value {
    let mut c = Map::new();
    c.insert("name".into(), json!(name));
    let image = match name {
        QUEUE_PROXY_CONTAINER => Some("gcr.io/knative-releases/queue:v1"),
        "istio-proxy" => Some("docker.io/istio/proxyv2:1.22"),
        _ => body.image,
    };
    if let Some(image) = image {
        c.insert("image".into(), json!(image));
    }
    let mut ports: Vec<Value> = Vec::new();
    let mut port_names = BTreeSet::new();
    if let Some(qp) = qp {
        ports.push(json!({"name": "http1", "containerPort": 8012, "protocol": "TCP"}));
        port_names.insert("http1");
        if qp.aggr_port {
            ports.push(json!({"name": AGGREGATE_METRICS_PORT_NAME, "containerPort": 9088}));
            port_names.insert(AGGREGATE_METRICS_PORT_NAME);
        }
    }
    for (port_name, number) in &body.ports {
        match port_name {
            Some(n) if !port_names.insert(n) => {}
            Some(n) => ports.push(json!({"name": n, "containerPort": number, "protocol": "TCP"})),
            None => ports.push(json!({"containerPort": number})),
        }
    }
    if body.odd == Odd::PortsNull {
        c.insert("ports".into(), Value::Null);
    } else if !ports.is_empty() {
        c.insert("ports".into(), Value::Array(ports));
    }
    let mut env: Vec<Value> = Vec::new();
    let mut env_names = BTreeSet::new();
    if let Some(qp) = qp {
        if let Some(user_port) = &qp.user_port {
            let mut entry = user_port.clone();
            entry["name"] = json!(USER_PORT_ENV);
            env.push(entry);
            env_names.insert(USER_PORT_ENV);
        }
        if qp.readiness_env {
            env.push(json!({
                "name": SERVING_READINESS_PROBE_ENV,
                "value": r#"{"tcpSocket":{"port":8080,"host":"127.0.0.1"},"successThreshold":1}"#
            }));
            env_names.insert(SERVING_READINESS_PROBE_ENV);
        }
        let mut ns = json!({"name": "SERVING_NAMESPACE", "value": "default"});
        if qp.env_unknown {
            ns["futureEnvField"] = json!({"k": "v"});
        }
        env.push(ns);
        env_names.insert("SERVING_NAMESPACE");
    }
    for (var, entry) in &body.env {
        if env_names.insert(var) {
            let mut entry = entry.clone();
            entry["name"] = json!(var);
            env.push(entry);
        }
    }
    if body.odd == Odd::EnvNull {
        c.insert("env".into(), Value::Null);
    } else if !env.is_empty() {
        c.insert("env".into(), Value::Array(env));
    }
    let mut mounts = Vec::new();
    let mut mount_names = BTreeSet::new();
    let mut mount_paths = BTreeSet::new();
    for (volume, path, read_only) in &body.mounts {
        if mount_names.insert(volume) && mount_paths.insert(path) {
            let mut m = json!({"name": volume, "mountPath": path});
            if *read_only {
                m["readOnly"] = json!(true);
            }
            mounts.push(m);
        }
    }
    if body.odd == Odd::MountsNull {
        c.insert("volumeMounts".into(), Value::Null);
    } else if !mounts.is_empty() {
        c.insert("volumeMounts".into(), Value::Array(mounts));
    }
    let probe = if qp.is_some() {
        Some(json!({
            "httpGet": {"port": 8012, "httpHeaders": [{"name": "K-Network-Probe", "value": "queue"}]},
            "successThreshold": 1
        }))
    } else {
        body.probe.clone()
    };
    if let Some(probe) = probe {
        c.insert("readinessProbe".into(), probe);
    }
    match (&body.security, name) {
        (_, "istio-proxy") => {
            c.insert(
                "securityContext".into(),
                json!({"runAsUser": 1337, "runAsGroup": 1337}),
            );
        }
        (Slot::Absent, _) => {}
        (Slot::Null, _) => {
            c.insert("securityContext".into(), Value::Null);
        }
        (Slot::Present(sc), _) => {
            c.insert("securityContext".into(), sc.clone());
        }
    }
    if let Some(r) = &body.resources {
        c.insert("resources".into(), r.clone());
    }
    if let Some(u) = &body.unknown {
        c.insert("someUnknownField".into(), u.clone());
    }
    Value::Object(c)
}
