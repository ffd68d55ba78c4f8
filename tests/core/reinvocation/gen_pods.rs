//! Generators of pods: annotations for every injector, volumes, layouts
//! of containers and init containers, and extras such as managedFields.

use super::*;

pub(super) fn source_uri() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "oci://myrepo/mymodelimage:v1",
        "oci+native://registry.io/org/model:v2",
        "oci+fetch://registry.io/org/model:v3",
        "oci+modelcar://registry.io/org/model:v4",
        "gs://kfserving-examples/models/sklearn/1.0/model",
        "s3://bucket/path/model",
        "pvc://model-pvc/path/to/model",
        "pvc://model-pvc",
        "hf://meta-llama/Llama-3.1-8B",
        "https://example.com/models/model.tar.gz",
        "<scheme-placeholder>://path/model",
    ])
}

pub(super) type Pairs = Vec<(String, String)>;

pub(super) fn pairs(items: &[(&str, &str)]) -> Pairs {
    items
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

pub(super) fn agent_annotations() -> impl Strategy<Value = Pairs> {
    (
        prop::bool::weighted(0.9),
        prop::bool::weighted(0.9),
        any::<bool>(),
    )
        .prop_map(|(config_volume, model_dir, mount_path)| {
            let mut p = pairs(&[(AGENT_ANNOTATION, "true")]);
            if config_volume {
                p.extend(pairs(&[(
                    CONFIG_VOLUME_NAME_ANNOTATION,
                    "modelconfig-sklearn-0",
                )]));
            }
            if model_dir {
                p.extend(pairs(&[(MODEL_DIR_ANNOTATION, "/mnt/models")]));
            }
            if mount_path {
                p.extend(pairs(&[(CONFIG_MOUNT_PATH_ANNOTATION, "/mnt/configs")]));
            }
            p
        })
}

pub(super) fn logger_annotations() -> impl Strategy<Value = Pairs> {
    (any::<bool>(), any::<bool>(), any::<bool>()).prop_map(|(sink, mode, metadata)| {
        let mut p = pairs(&[(LOGGER_ANNOTATION, "true")]);
        if sink {
            p.extend(pairs(&[(
                LOGGER_SINK_URL_ANNOTATION,
                "http://message-dumper",
            )]));
        }
        if mode {
            p.extend(pairs(&[(LOGGER_MODE_ANNOTATION, "request")]));
        }
        if metadata {
            p.extend(pairs(&[
                (LOGGER_METADATA_HEADERS_ANNOTATION, "X-Request-Id,X-B3"),
                (
                    LOGGER_METADATA_ANNOTATIONS_ANNOTATION,
                    "team.example.com/owner,missing.example.com/key",
                ),
                ("team.example.com/owner", "ml~team"),
            ]));
        }
        p
    })
}

pub(super) fn batcher_annotations() -> impl Strategy<Value = Pairs> {
    any::<bool>().prop_map(|limits| {
        let mut p = pairs(&[(BATCHER_ANNOTATION, "true")]);
        if limits {
            p.extend(pairs(&[
                (BATCHER_MAX_BATCH_SIZE_ANNOTATION, "32"),
                (BATCHER_MAX_LATENCY_ANNOTATION, "5000"),
            ]));
        }
        p
    })
}

pub(super) fn metrics_annotations() -> impl Strategy<Value = Pairs> {
    let flag = || prop::option::of(prop::sample::select(vec!["true", "false", ""]));
    (
        flag(),
        flag(),
        prop::option::weighted(0.3, Just("8082")),
        prop::option::weighted(0.3, Just("/stats")),
    )
        .prop_map(|(aggregate, scrape, port, path)| {
            let mut p = Vec::new();
            let mut put = |k: &str, v: Option<&str>| {
                if let Some(v) = v {
                    p.push((k.to_string(), v.to_string()));
                }
            };
            put(ENABLE_METRIC_AGGREGATION_ANNOTATION, aggregate);
            put(ENABLE_PROMETHEUS_SCRAPING_ANNOTATION, scrape);
            put(KSERVE_PROMETHEUS_PORT_ANNOTATION, port);
            put(KSERVE_PROMETHEUS_PATH_ANNOTATION, path);
            p
        })
}

pub(super) fn istio_annotations() -> impl Strategy<Value = Pairs> {
    (
        prop_oneof![
            6 => Just(Some(r#"{"initContainers":["istio-init"],"containers":["istio-proxy"],"volumes":["istio-envoy"],"imagePullSecrets":null,"revision":"default"}"#)),
            1 => Just(Some(r#"{"containers":[]}"#)),
            1 => Just(Some(r#"{"containers":"istio-proxy"}"#)),
            1 => Just(Some("{not json")),
            1 => Just(None),
        ],
        prop::option::of(prop::sample::select(vec!["REDIRECT", "TPROXY"])),
        prop::option::weighted(0.3, prop::sample::select(vec!["1234", "abc"])),
    )
        .prop_map(|(status, mode, uid)| {
            let mut p = Vec::new();
            if let Some(s) = status {
                p.push((ISTIO_STATUS_ANNOTATION.to_string(), s.to_string()));
            }
            if let Some(m) = mode {
                p.push((ISTIO_INTERCEPTION_MODE_ANNOTATION.to_string(), m.to_string()));
            }
            if let Some(u) = uid {
                p.push((STORAGE_INITIALIZER_UID_ANNOTATION.to_string(), u.to_string()));
            }
            p
        })
}

pub(super) fn storage_spec_annotations() -> impl Strategy<Value = Pairs> {
    (
        prop::option::of(prop::sample::select(vec![
            r#"{"type":"s3","bucket":"b"}"#,
            r#"{"region":"eu"}"#,
            "not json",
        ])),
        prop::option::weighted(0.3, prop::sample::select(vec!["default_s3", "missing"])),
    )
        .prop_map(|(params, key)| {
            let mut p = pairs(&[(STORAGE_SPEC_ANNOTATION, "true")]);
            if let Some(params) = params {
                p.push((
                    STORAGE_SPEC_PARAM_ANNOTATION.to_string(),
                    params.to_string(),
                ));
            }
            if let Some(key) = key {
                p.push((STORAGE_SPEC_KEY_ANNOTATION.to_string(), key.to_string()));
            }
            p
        })
}

/// Our modelcar-mode annotation: either mode, or rarely a value naming
/// none (refused when it would decide the shape).
pub(super) fn modelcar_mode_annotation() -> impl Strategy<Value = &'static str> {
    prop_oneof![
        4 => Just("classic"),
        4 => Just("native-sidecar"),
        1 => Just("sidecar"),
    ]
}

/// Keys with `/` and `~` (including the JSON Pointer escapes `~0` and `~1`).
pub(super) fn odd_key() -> impl Strategy<Value = String> {
    re("[a-z]{1,3}(~[01])?(\\.example\\.com)?/[a-z]{0,3}~[a-z01~/]{0,4}")
}

/// Everything under `metadata.annotations` (and the labels some of it needs).
#[derive(Debug, Clone)]
pub(super) struct Annotations {
    pub(super) kserve: Pairs,
    pub(super) local_model: bool,
    pub(super) random: Pairs,
}

pub(super) fn annotations() -> impl Strategy<Value = Annotations> {
    (
        (
            prop::option::weighted(0.75, source_uri()),
            prop::option::weighted(0.15, prop::sample::select(vec!["true", "false"])),
            prop::option::weighted(0.2, agent_annotations()),
            prop::option::weighted(0.25, logger_annotations()),
            prop::option::weighted(0.15, batcher_annotations()),
            metrics_annotations(),
        ),
        (
            prop::option::weighted(0.25, Just(())),
            prop::option::weighted(0.45, istio_annotations()),
            prop::option::weighted(0.06, storage_spec_annotations()),
            prop::option::weighted(0.04, prop::bool::weighted(0.8)),
            prop::option::weighted(0.06, any::<bool>()),
            prop::collection::vec((odd_key(), re("[a-z0-9~/]{0,6}")), 0..3),
            prop::option::weighted(0.35, modelcar_mode_annotation()),
        ),
    )
        .prop_map(
            |(
                (uri, readonly, agent, logger, batcher, metrics),
                (gke, istio, storage_spec, local_model, confidential, random, modelcar_mode),
            )| {
                let mut kserve = Vec::new();
                if let Some(uri) = uri {
                    kserve.push((SOURCE_URI_ANNOTATION.to_string(), uri.to_string()));
                }
                if let Some(mode) = modelcar_mode {
                    kserve.push((MODELCAR_MODE_ANNOTATION.to_string(), mode.to_string()));
                }
                if let Some(r) = readonly {
                    kserve.push((READONLY_ANNOTATION.to_string(), r.to_string()));
                }
                for extra in [agent, logger, batcher, istio, storage_spec]
                    .into_iter()
                    .flatten()
                {
                    kserve.extend(extra);
                }
                kserve.extend(metrics);
                if gke.is_some() {
                    kserve.push((GKE_ACCELERATOR_ANNOTATION.into(), "nvidia-tesla-t4".into()));
                }
                // With the PVC annotation or, rarely, without it (an error).
                let local_model = match local_model {
                    Some(with_pvc) => {
                        kserve.push((
                            LOCAL_MODEL_SOURCE_URI_ANNOTATION.into(),
                            "gs://kfserving-examples".into(),
                        ));
                        if with_pvc {
                            kserve.push((
                                LOCAL_MODEL_PVC_NAME_ANNOTATION.into(),
                                "node-cache".into(),
                            ));
                        }
                        true
                    }
                    None => false,
                };
                if let Some(with_id) = confidential {
                    kserve.push((CONFIDENTIAL_ENABLED_ANNOTATION.into(), "true".into()));
                    if with_id {
                        kserve.push((CONFIDENTIAL_RESOURCE_ID_ANNOTATION.into(), "res-1".into()));
                    }
                }
                Annotations {
                    kserve,
                    local_model,
                    random,
                }
            },
        )
}

pub(super) fn volume() -> impl Strategy<Value = Value> {
    (
        prop::sample::select(vec![
            "data",
            "cache",
            "user-gcp-sa",
            "istio-envoy",
            PROVISION_LOCATION_VOLUME,
            MODEL_DIR_VOLUME,
        ]),
        prop_oneof![
            Just(json!({"emptyDir": {}})),
            Just(json!({"configMap": {"name": "cm"}})),
            Just(json!({"secret": {"secretName": "sec", "defaultMode": 420}})),
            Just(json!({"persistentVolumeClaim": {"claimName": "claim"}})),
        ],
        prop::option::weighted(0.3, unknown_value()),
    )
        .prop_map(|(name, source, unknown)| {
            let mut v = source;
            v["name"] = json!(name);
            if let Some(u) = unknown {
                v["futureVolumeField"] = u;
            }
            v
        })
}

/// Which containers a pod has (names are chosen from these slots).
#[derive(Debug, Clone)]
pub(super) struct Layout {
    pub(super) kserve: bool,
    pub(super) transformer: bool,
    pub(super) worker: bool,
    pub(super) queue_proxy: bool,
    pub(super) istio_proxy: bool,
    pub(super) others: Vec<&'static str>,
    pub(super) inits: Vec<&'static str>,
    /// Sort keys that shuffle the regular containers.
    pub(super) order: Vec<u8>,
}

pub(super) fn layout() -> impl Strategy<Value = Layout> {
    (
        prop::bool::weighted(0.9),
        prop::bool::weighted(0.2),
        prop::bool::weighted(0.15),
        prop::bool::weighted(0.5),
        prop::bool::weighted(0.3),
        prop::collection::vec(
            prop_oneof![
                6 => prop::sample::select(vec!["user-sidecar", "log-shipper", "envoy"]),
                1 => prop::sample::select(vec![
                    AGENT_CONTAINER,
                    MODELCAR_CONTAINER,
                    STORAGE_INITIALIZER_CONTAINER,
                ]),
            ],
            0..3,
        ),
        prop::collection::vec(
            prop_oneof![
                6 => prop::sample::select(vec!["istio-init", "user-init", "vault-agent-init"]),
                // The modelcar as an init container: a native sidecar already there.
                1 => prop::sample::select(vec![
                    STORAGE_INITIALIZER_CONTAINER,
                    MODELCAR_INIT_CONTAINER,
                    MODELCAR_CONTAINER,
                    AGENT_CONTAINER,
                ]),
            ],
            0..3,
        ),
        prop::collection::vec(any::<u8>(), 8),
    )
        .prop_map(
            |(kserve, transformer, worker, queue_proxy, istio_proxy, others, inits, order)| {
                Layout {
                    kserve,
                    transformer,
                    worker,
                    queue_proxy,
                    istio_proxy,
                    others,
                    inits,
                    order,
                }
            },
        )
}

/// Pod-level odds and ends.
#[derive(Debug, Clone)]
pub(super) struct Extras {
    pub(super) named: bool,
    pub(super) namespace: Option<&'static str>,
    pub(super) isvc_label: bool,
    pub(super) labels: Pairs,
    pub(super) annotations_null: bool,
    pub(super) meta_unknown: Option<Value>,
    pub(super) managed_fields: bool,
    pub(super) spec_unknown: Option<Value>,
    pub(super) top_unknown: Option<Value>,
    pub(super) service_account: bool,
    pub(super) pull_secret: bool,
    pub(super) pod_security: bool,
    pub(super) node_selector: Slot,
    pub(super) share_process_namespace: Option<bool>,
    pub(super) volumes_null: bool,
    pub(super) inits_null: bool,
}

pub(super) fn extras() -> impl Strategy<Value = Extras> {
    (
        (
            prop::bool::weighted(0.8),
            prop::option::of(prop::sample::select(vec!["default", "team-a"])),
            prop::bool::weighted(0.9),
            prop::collection::vec(
                (
                    prop::sample::select(vec![ENDPOINT_LABEL, COMPONENT_LABEL, "app", "x/y~z"]),
                    re("[a-z]{1,6}"),
                ),
                0..3,
            ),
            prop::bool::weighted(0.03),
            prop::option::weighted(0.3, unknown_value()),
            prop::bool::weighted(0.2),
            prop::option::weighted(0.4, unknown_value()),
        ),
        (
            prop::option::weighted(0.1, unknown_value()),
            any::<bool>(),
            prop::bool::weighted(0.2),
            prop::bool::weighted(0.2),
            prop_oneof![
                6 => Just(Slot::Absent),
                1 => Just(Slot::Null),
                1 => Just(Slot::Present(json!({"disk": "ssd"}))),
            ],
            prop::option::weighted(0.1, any::<bool>()),
            prop::bool::weighted(0.05),
            prop::bool::weighted(0.05),
        ),
    )
        .prop_map(
            |(
                (
                    named,
                    namespace,
                    isvc_label,
                    labels,
                    annotations_null,
                    meta_unknown,
                    managed_fields,
                    spec_unknown,
                ),
                (
                    top_unknown,
                    service_account,
                    pull_secret,
                    pod_security,
                    node_selector,
                    share_process_namespace,
                    volumes_null,
                    inits_null,
                ),
            )| Extras {
                named,
                namespace,
                isvc_label,
                labels: labels
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v))
                    .collect(),
                annotations_null,
                meta_unknown,
                managed_fields,
                spec_unknown,
                top_unknown,
                service_account,
                pull_secret,
                pod_security,
                node_selector,
                share_process_namespace,
                volumes_null,
                inits_null,
            },
        )
}

#[derive(Clone)]
pub(super) struct PodParts {
    pub(super) layout: Layout,
    pub(super) bodies: Vec<Body>,
    pub(super) queue_proxy: QueueProxy,
    pub(super) annotations: Annotations,
    pub(super) volumes: Vec<Value>,
    pub(super) extras: Extras,
}

impl fmt::Debug for PodParts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.render())
    }
}

pub(super) fn pod_parts() -> impl Strategy<Value = PodParts> {
    (
        layout(),
        prop::collection::vec(body(), 11),
        queue_proxy(),
        annotations(),
        prop::collection::vec(volume(), 0..4),
        extras(),
    )
        .prop_map(
            |(layout, bodies, queue_proxy, annotations, volumes, extras)| PodParts {
                layout,
                bodies,
                queue_proxy,
                annotations,
                volumes,
                extras,
            },
        )
}

impl PodParts {
    pub(super) fn render(&self) -> Value {
        let l = &self.layout;
        let mut names: Vec<&str> = Vec::new();
        for (on, name) in [
            (l.kserve, KSERVE_CONTAINER),
            (l.transformer, TRANSFORMER_CONTAINER),
            (l.worker, WORKER_CONTAINER),
            (l.queue_proxy, QUEUE_PROXY_CONTAINER),
            (l.istio_proxy, "istio-proxy"),
        ] {
            if on {
                names.push(name);
            }
        }
        names.extend(l.others.iter().copied());
        let mut seen = BTreeSet::new();
        let mut containers: Vec<(u8, Value)> = Vec::new();
        for (i, name) in names.into_iter().enumerate() {
            if !seen.insert(name) {
                continue;
            }
            let qp = (name == QUEUE_PROXY_CONTAINER).then_some(&self.queue_proxy);
            let body = &self.bodies[i % self.bodies.len()];
            containers.push((l.order[i % l.order.len()], render_container(name, body, qp)));
        }
        containers.sort_by_key(|(key, _)| *key);
        let mut containers: Vec<Value> = containers.into_iter().map(|(_, c)| c).collect();
        align_user_port(&mut containers);
        let mut inits = Vec::new();
        for (i, name) in l.inits.iter().enumerate() {
            if seen.insert(name) {
                let mut init = render_container(name, &self.bodies[8 + i % 3], None);
                if let Some(obj) = init.as_object_mut() {
                    obj.remove("readinessProbe");
                }
                inits.push(init);
            }
        }

        let e = &self.extras;
        let mut spec = Map::new();
        spec.insert("containers".into(), Value::Array(containers));
        if !inits.is_empty() {
            spec.insert("initContainers".into(), Value::Array(inits));
        } else if e.inits_null {
            spec.insert("initContainers".into(), Value::Null);
        }
        let mut volume_names = BTreeSet::new();
        let volumes: Vec<Value> = self
            .volumes
            .iter()
            .filter(|v| volume_names.insert(v["name"].as_str().unwrap_or_default().to_string()))
            .cloned()
            .collect();
        if !volumes.is_empty() {
            spec.insert("volumes".into(), Value::Array(volumes));
        } else if e.volumes_null {
            spec.insert("volumes".into(), Value::Null);
        }
        if e.service_account {
            spec.insert("serviceAccountName".into(), json!("sa"));
        }
        if e.pull_secret {
            spec.insert("imagePullSecrets".into(), json!([{"name": "regcred"}]));
        }
        if e.pod_security {
            spec.insert("securityContext".into(), json!({"fsGroup": 1000}));
        }
        match &e.node_selector {
            Slot::Absent => {}
            Slot::Null => {
                spec.insert("nodeSelector".into(), Value::Null);
            }
            Slot::Present(v) => {
                spec.insert("nodeSelector".into(), v.clone());
            }
        }
        if let Some(share) = e.share_process_namespace {
            spec.insert("shareProcessNamespace".into(), json!(share));
        }
        if let Some(u) = &e.spec_unknown {
            spec.insert("someFutureField".into(), u.clone());
        }

        let mut meta = Map::new();
        if e.named {
            meta.insert(
                "name".into(),
                json!("sklearn-predictor-00001-deployment-abc"),
            );
        } else {
            meta.insert(
                "generateName".into(),
                json!("sklearn-predictor-00001-deployment-"),
            );
        }
        if let Some(ns) = e.namespace {
            meta.insert("namespace".into(), json!(ns));
        }
        let mut labels = Map::new();
        if e.isvc_label {
            labels.insert(ISVC_LABEL.into(), json!("sklearn"));
        }
        if self.annotations.local_model {
            labels.insert(LOCAL_MODEL_LABEL.into(), json!("node-cache"));
        }
        for (k, v) in &e.labels {
            labels.insert(k.clone(), json!(v));
        }
        if !labels.is_empty() {
            meta.insert("labels".into(), Value::Object(labels));
        }
        if e.annotations_null {
            meta.insert("annotations".into(), Value::Null);
        } else {
            let mut annotations = Map::new();
            for (k, v) in self
                .annotations
                .kserve
                .iter()
                .chain(&self.annotations.random)
            {
                annotations.insert(k.clone(), json!(v));
            }
            if !annotations.is_empty() {
                meta.insert("annotations".into(), Value::Object(annotations));
            }
        }
        if let Some(u) = &e.meta_unknown {
            meta.insert("futureMetaField".into(), u.clone());
        }
        if e.managed_fields {
            meta.insert("managedFields".into(), managed_fields(2));
        }

        let mut pod = Map::new();
        pod.insert("apiVersion".into(), json!("v1"));
        pod.insert("kind".into(), json!("Pod"));
        pod.insert("metadata".into(), Value::Object(meta));
        pod.insert("spec".into(), Value::Object(spec));
        if let Some(u) = &e.top_unknown {
            pod.insert("futureTopField".into(), u.clone());
        }
        Value::Object(pod)
    }
}

/// A `metadata.managedFields` block like the API server's, `n` containers wide.
pub(super) fn managed_fields(n: usize) -> Value {
    let mut containers = Map::new();
    for i in 0..n {
        containers.insert(
            format!("k:{{\"name\":\"c{i}\"}}"),
            json!({".": {}, "f:image": {}, "f:name": {}, "f:resources": {}}),
        );
    }
    json!([{
        "manager": "kube-controller-manager",
        "operation": "Update",
        "apiVersion": "v1",
        "time": "2024-05-01T10:00:00Z",
        "fieldsType": "FieldsV1",
        "fieldsV1": {"f:metadata": {"f:labels": {".": {}}}, "f:spec": {"f:containers": containers}}
    }])
}

/// A `modelVolume` of `--config-file`: the source the storage-initializer
/// downloads into, as a volume named `kserve-provision-location`.
pub(super) fn model_volume_source() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!({"ephemeral": {"volumeClaimTemplate": {"spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": "local-nvme",
            "resources": {"requests": {"storage": "200Gi"}}
        }}}})),
        Just(json!({"persistentVolumeClaim": {"claimName": "model-scratch"}})),
        Just(json!({"emptyDir": {"medium": "Memory", "sizeLimit": "8Gi"}})),
        Just(json!({"hostPath": {"path": "/mnt/nvme/models", "type": "DirectoryOrCreate"}})),
    ]
    .prop_map(|mut source| {
        source["name"] = json!(PROVISION_LOCATION_VOLUME);
        source
    })
}
