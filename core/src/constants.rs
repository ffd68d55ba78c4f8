//! Names KServe's pod mutator uses; compatibility depends on every one of them.

pub const ISVC_LABEL: &str = "serving.kserve.io/inferenceservice";

pub const SOURCE_URI_ANNOTATION: &str = "internal.serving.kserve.io/storage-initializer-sourceuri";

pub(crate) const GKE_ACCELERATOR_NODE_SELECTOR: &str = "cloud.google.com/gke-accelerator";

pub(crate) const ISTIO_INIT_CONTAINER: &str = "istio-init";
pub(crate) const ISTIO_DEFAULT_UID: i64 = 1337;

pub(crate) const PROMETHEUS_PORT_ANNOTATION: &str = "prometheus.io/port";
pub(crate) const PROMETHEUS_PATH_ANNOTATION: &str = "prometheus.io/path";
pub(crate) const DEFAULT_CONTAINER_METRICS_PORT: &str = "8080";
pub(crate) const AGGREGATE_METRICS_PORT: &str = "9088";
pub(crate) const AGGREGATE_METRICS_PORT_NUMBER: i32 = 9088;
pub(crate) const DEFAULT_POD_PROMETHEUS_PORT: &str = "9091";
pub(crate) const DEFAULT_METRICS_PATH: &str = "/metrics";

pub const STORAGE_INITIALIZER_CONTAINER: &str = "storage-initializer";
pub const MODELCAR_CONTAINER: &str = "modelcar";
/// Our own annotation: `baseline` or `restricted`, the security profile of
/// the containers we add to this pod, over `--security-profile`.
pub const SECURITY_PROFILE_ANNOTATION: &str = "kserve-injector.io/security-profile";
/// Our own annotations (not KServe's): the storage-initializer's requests
/// and limits for this pod, applied over the ClusterStorageContainer and
/// the ConfigMap.
pub(crate) const INIT_CPU_REQUEST_ANNOTATION: &str =
    "kserve-injector.io/storage-initializer-cpu-request";
pub(crate) const INIT_CPU_LIMIT_ANNOTATION: &str =
    "kserve-injector.io/storage-initializer-cpu-limit";
pub(crate) const INIT_MEMORY_REQUEST_ANNOTATION: &str =
    "kserve-injector.io/storage-initializer-memory-request";
pub(crate) const INIT_MEMORY_LIMIT_ANNOTATION: &str =
    "kserve-injector.io/storage-initializer-memory-limit";

pub(crate) const PVC_SOURCE_VOLUME: &str = "kserve-pvc-source";
pub(crate) const CA_BUNDLE_VOLUME: &str = "cabundle-cert";
pub(crate) const AGENT_CA_BUNDLE_VOLUME: &str = "agent-ca-bundle";
pub(crate) const MODEL_CONFIG_VOLUME: &str = "model-config";
pub(crate) const OCI_FETCH_DOCKER_CONFIG_VOLUME: &str = "kserve-oci-fetch-docker-config";

pub(crate) const DEFAULT_MODEL_LOCAL_MOUNT_PATH: &str = "/mnt/models";
pub(crate) const MODEL_CONFIG_MOUNT_PATH: &str = "/mnt/configs";
pub(crate) const LOGGER_CA_BUNDLE_MOUNT_PATH: &str = "/etc/tls/logger";
pub(crate) const DEFAULT_CA_BUNDLE_MOUNT_PATH: &str = "/etc/ssl/custom-certs";
pub(crate) const OCI_FETCH_AUTH_MOUNT_PATH: &str = "/mnt/oci-fetch-auth";
pub(crate) const OCI_FETCH_DOCKER_CONFIG_ENV: &str = "KSERVE_OCI_DOCKER_CONFIG";
pub(crate) const OCI_INSECURE_REGISTRY_ENV: &str = "KSERVE_OCI_INSECURE_REGISTRY";

pub(crate) const AGENT_PORT: i32 = 9081;
pub(crate) const AGENT_PORT_STR: &str = "9081";
pub(crate) const AGENT_PORT_NAME: &str = "agent-port";
pub(crate) const DEFAULT_COMPONENT_PORT: &str = "8080";

pub(crate) const DEFAULT_STORAGE_INITIALIZER_IMAGE: &str = "kserve/storage-initializer:latest";
pub(crate) const DEFAULT_CPU_MODELCAR: &str = "10m";
pub(crate) const DEFAULT_MEMORY_MODELCAR: &str = "15Mi";

pub(crate) const GLOBAL_CA_BUNDLE_CONFIGMAP: &str = "global-ca-bundle";
pub(crate) const DEFAULT_STORAGE_SPEC_SECRET: &str = "storage-config";
pub(crate) const STORAGE_URI_PLACEHOLDER_SCHEME: &str = "<scheme-placeholder>";
pub(crate) const DEFAULT_LOGGER_MODE: &str = "all";
pub(crate) const DEFAULT_LOGGER_SERVICE_ACCOUNT: &str = "logger-sa";
pub(crate) const DEFAULT_LOGGER_STORAGE_KEY: &str = "credentials";

pub(crate) const CA_BUNDLE_CONFIGMAP_NAME_ENV: &str = "CA_BUNDLE_CONFIGMAP_NAME";
pub(crate) const CA_BUNDLE_VOLUME_MOUNT_POINT_ENV: &str = "CA_BUNDLE_VOLUME_MOUNT_POINT";
pub(crate) const STORAGE_CONFIG_ENV: &str = "STORAGE_CONFIG";
pub(crate) const STORAGE_OVERRIDE_CONFIG_ENV: &str = "STORAGE_OVERRIDE_CONFIG";
pub(crate) const AWS_CA_BUNDLE_CONFIGMAP_ENV: &str = "AWS_CA_BUNDLE_CONFIGMAP";
pub(crate) const CONFIDENTIAL_ENABLED_ENV: &str = "CONFIDENTIAL_ENABLED";
pub(crate) const CONFIDENTIAL_RESOURCE_ID_ENV: &str = "CONFIDENTIAL_RESOURCE_ID";
/// Added after any storage-container merge, only when absent (KServe #4765).
pub(crate) const HF_DEFAULT_ENV: [(&str, &str); 3] = [
    ("HF_HUB_ENABLE_HF_TRANSFER", "1"),
    ("HF_XET_HIGH_PERFORMANCE", "1"),
    ("HF_XET_NUM_CONCURRENT_RANGE_GETS", "8"),
];

pub(crate) const FALLBACK_TO_LOGS_ON_ERROR: &str = "FallbackToLogsOnError";
pub const DEFAULT_CONTROLLER_NAMESPACE: &str = "kserve";

/// The variables the metrics aggregator sets on queue-proxy (which the
/// agent leaves out of its copy of queue-proxy's env).
pub(crate) const METRICS_QUEUE_PROXY_ENV: [&str; 3] = [
    "KSERVE_CONTAINER_PROMETHEUS_METRICS_PORT",
    "KSERVE_CONTAINER_PROMETHEUS_METRICS_PATH",
    "AGGREGATE_PROMETHEUS_METRICS_PORT",
];

// KServe's names the tests name too: public with the `oracle` feature the
// tests build with (one path: this module is private), visible only in the
// crate without it.
#[cfg(feature = "oracle")]
pub use named_by_tests::*;
#[cfg(not(feature = "oracle"))]
pub(crate) use named_by_tests::*;

#[cfg_attr(not(feature = "oracle"), allow(unreachable_pub))]
mod named_by_tests {
    pub const STORAGE_SPEC_ANNOTATION: &str = "internal.serving.kserve.io/storage-spec";
    pub const STORAGE_SPEC_PARAM_ANNOTATION: &str = "internal.serving.kserve.io/storage-spec-param";
    pub const STORAGE_SPEC_KEY_ANNOTATION: &str = "internal.serving.kserve.io/storage-spec-key";
    pub const READONLY_ANNOTATION: &str = "storage.kserve.io/readonly";
    pub const LOCAL_MODEL_LABEL: &str = "internal.serving.kserve.io/localmodel";
    pub const LOCAL_MODEL_SOURCE_URI_ANNOTATION: &str =
        "internal.serving.kserve.io/localmodel-sourceuri";
    pub const LOCAL_MODEL_PVC_NAME_ANNOTATION: &str =
        "internal.serving.kserve.io/localmodel-pvc-name";
    pub const CONFIDENTIAL_ENABLED_ANNOTATION: &str =
        "internal.serving.kserve.io/confidential-enabled";
    pub const CONFIDENTIAL_RESOURCE_ID_ANNOTATION: &str =
        "internal.serving.kserve.io/confidential-resource-id";
    pub const AGENT_ANNOTATION: &str = "internal.serving.kserve.io/agent";
    pub const CONFIG_VOLUME_NAME_ANNOTATION: &str = "internal.serving.kserve.io/configVolumeName";
    pub const CONFIG_MOUNT_PATH_ANNOTATION: &str = "internal.serving.kserve.io/configMountPath";
    pub const MODEL_DIR_ANNOTATION: &str = "internal.serving.kserve.io/modelDir";
    pub const BATCHER_ANNOTATION: &str = "internal.serving.kserve.io/batcher";
    pub const BATCHER_MAX_BATCH_SIZE_ANNOTATION: &str =
        "internal.serving.kserve.io/batcher-max-batchsize";
    pub const BATCHER_MAX_LATENCY_ANNOTATION: &str =
        "internal.serving.kserve.io/batcher-max-latency";
    pub const LOGGER_ANNOTATION: &str = "internal.serving.kserve.io/logger";
    pub const LOGGER_SINK_URL_ANNOTATION: &str = "internal.serving.kserve.io/logger-sink-url";
    pub const LOGGER_MODE_ANNOTATION: &str = "internal.serving.kserve.io/logger-mode";
    pub const LOGGER_METADATA_HEADERS_ANNOTATION: &str =
        "internal.serving.kserve.io/logger-metadata-headers";
    pub const LOGGER_METADATA_ANNOTATIONS_ANNOTATION: &str =
        "internal.serving.kserve.io/logger-metadata-annotations";
    pub const ENDPOINT_LABEL: &str = "endpoint";
    pub const COMPONENT_LABEL: &str = "component";
    pub const GKE_ACCELERATOR_ANNOTATION: &str = "serving.kserve.io/gke-accelerator";
    pub const NVIDIA_GPU_RESOURCE: &str = "nvidia.com/gpu";
    pub const STORAGE_INITIALIZER_UID_ANNOTATION: &str =
        "serving.kserve.io/storage-initializer-uid";
    pub const ISTIO_INTERCEPTION_MODE_ANNOTATION: &str = "sidecar.istio.io/interceptionMode";
    pub const ISTIO_STATUS_ANNOTATION: &str = "sidecar.istio.io/status";
    pub const ENABLE_METRIC_AGGREGATION_ANNOTATION: &str =
        "serving.kserve.io/enable-metric-aggregation";
    pub const ENABLE_PROMETHEUS_SCRAPING_ANNOTATION: &str =
        "serving.kserve.io/enable-prometheus-scraping";
    pub const KSERVE_PROMETHEUS_PORT_ANNOTATION: &str = "prometheus.kserve.io/port";
    pub const KSERVE_PROMETHEUS_PATH_ANNOTATION: &str = "prometheus.kserve.io/path";
    pub const AGGREGATE_METRICS_PORT_NAME: &str = "aggr-metric";
    pub const KSERVE_CONTAINER: &str = "kserve-container";
    pub const TRANSFORMER_CONTAINER: &str = "transformer-container";
    pub const WORKER_CONTAINER: &str = "worker-container";
    pub const QUEUE_PROXY_CONTAINER: &str = "queue-proxy";
    pub const AGENT_CONTAINER: &str = "agent";
    pub const MODELCAR_INIT_CONTAINER: &str = "modelcar-init";
    /// Our own annotation (not KServe's): `classic` or `native-sidecar`, the
    /// modelcar's shape for this pod, over `--modelcar-mode`.
    pub const MODELCAR_MODE_ANNOTATION: &str = "kserve-injector.io/modelcar-mode";
    pub const PROVISION_LOCATION_VOLUME: &str = "kserve-provision-location";
    pub const MODEL_DIR_VOLUME: &str = "model-dir";
    pub const STORAGE_URI_ENV: &str = "STORAGE_URI";
    pub const SERVING_READINESS_PROBE_ENV: &str = "SERVING_READINESS_PROBE";
    pub const USER_PORT_ENV: &str = "USER_PORT";
    pub const MODEL_INIT_MODE_ENV: &str = "MODEL_INIT_MODE";
}
