//! The `agent` sidecar: model puller, batcher and request logger in one
//! process that fronts the model server on port 9081.

use super::InjectError;
use crate::cluster::credentials::{
    add_service_account_credentials, CredentialError, CredentialRequest, CredentialTarget,
};
use crate::cluster::logger::{effective_logger, logger_service_account};
use crate::config::LoggerConfig;
use crate::constants::*;
use crate::inputs::Inputs;
use crate::json_text::go::probe::probe_json;
use crate::pod::build::{empty_dir_volume, env_var, mount, resources};
use crate::pod::{List, WorkingSet};
use crate::release::Behaviour;
use crate::view::ContainerView;
use k8s_openapi::api::core::v1::{
    ConfigMapVolumeSource, Container, ContainerPort, EnvVar, HTTPGetAction, HTTPHeader, Probe,
    Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

pub(crate) const NAME: &str = "agent";

pub(crate) fn inject(pod: &mut WorkingSet<'_>, inputs: &Inputs) -> Result<(), InjectError> {
    let puller = pod.annotation(AGENT_ANNOTATION).is_some();
    let batcher = pod.annotation(BATCHER_ANNOTATION).is_some();
    let logger = pod.annotation(LOGGER_ANNOTATION).is_some();
    if !(puller || batcher || logger) || pod.has_container_named(AGENT_CONTAINER) {
        return Ok(());
    }
    let puller_volumes = if puller {
        Some(puller_config(pod)?)
    } else {
        None
    };

    // The InferenceService's logger overrides the config's (KServe reads it
    // for every pod; only a logger uses it).
    let logger_config = logger.then(|| {
        let isvc = pod.label(ISVC_LABEL).unwrap_or_default();
        // v0.15 does not fetch it (and has no logger storage).
        let isvc = (inputs.cluster.inference_service(pod.namespace(), isvc))
            .filter(|_| inputs.config.release.logger_storage());
        let mut config = effective_logger(&inputs.config.logger, isvc);
        // Before v0.17 neither the config nor the InferenceService has them.
        if !inputs.config.release.logger_marshaller() {
            config.marshaller_url.clear();
            config.batch_size = 0;
            config.batch_interval.clear();
        }
        config
    });
    let mut args = Vec::new();
    if puller {
        args.extend(puller_args(pod));
    }
    if batcher {
        args.extend(batcher_args(pod));
    }
    if let Some(config) = &logger_config {
        args.extend(logger_args(pod, config, inputs.config.release));
    }
    let port = component_port(pod);
    args.extend(["--component-port".to_string(), port.clone()]);

    let queue_proxy = pod
        .container(List::Containers, QUEUE_PROXY_CONTAINER)
        .map(|qp| queue_proxy_env(qp));
    let has_queue_proxy = queue_proxy.is_some();
    let (agent_env, probe_path) = match queue_proxy {
        Some(env) => (env, "/".to_string()),
        None => readiness_from_user_probe(pod),
    };

    let mut target = CredentialTarget {
        env: agent_env,
        ..CredentialTarget::default()
    };
    if let Some((volume, mount)) = logger.then(|| logger_ca_bundle(inputs)).flatten() {
        target.volumes.push(volume);
        target.volume_mounts.push(mount);
    }
    add_credentials(pod, inputs, logger_config.as_ref(), &mut target)
        .map_err(|e| InjectError::from_source(NAME, e))?;
    if let Some((model_dir, model_config)) = puller_volumes {
        target.volumes.extend([model_dir, model_config]);
        target.volume_mounts.push(model_dir_mount());
        let config_mount = mount(MODEL_CONFIG_VOLUME, MODEL_CONFIG_MOUNT_PATH, false);
        target.volume_mounts.push(config_mount);
    }
    let CredentialTarget {
        env: agent_env,
        volume_mounts: mounts,
        volumes,
    } = target;

    let security_context = (pod.containers(List::Containers).first())
        .and_then(|c| c.security_context.as_deref().cloned());
    let mut agent = Container {
        name: AGENT_CONTAINER.to_string(),
        image: Some(inputs.config.agent.image.clone()).filter(|i| !i.is_empty()),
        args: Some(args),
        resources: Some(resources(&inputs.config.agent.resources)),
        ports: Some(vec![ContainerPort {
            name: Some(AGENT_PORT_NAME.to_string()),
            container_port: AGENT_PORT,
            protocol: Some("TCP".to_string()),
            ..Default::default()
        }]),
        security_context,
        env: (!agent_env.is_empty()).then_some(agent_env),
        readiness_probe: Some(agent_probe(probe_path)),
        volume_mounts: (!mounts.is_empty()).then_some(mounts),
        ..Default::default()
    };
    let profile = super::security_profile::choose(pod, inputs, NAME)?;
    super::security_profile::harden(&mut agent, profile, None, NAME)?;
    pod.ensure_container(List::Containers, agent);
    for volume in &volumes {
        pod.ensure_volume(volume);
    }
    if puller {
        if let Some(mut c) = pod.container_mut(List::Containers, KSERVE_CONTAINER) {
            c.ensure_mount(&model_dir_mount());
        }
    }
    if has_queue_proxy {
        redirect_queue_proxy(pod);
    }
    Ok(())
}

/// The logger's CA bundle ConfigMap (optional: the agent starts without it).
fn logger_ca_bundle(inputs: &Inputs) -> Option<(Volume, VolumeMount)> {
    let name = &inputs.config.logger.ca_bundle;
    if name.is_empty() {
        return None;
    }
    let volume = Volume {
        name: AGENT_CA_BUNDLE_VOLUME.to_string(),
        config_map: Some(ConfigMapVolumeSource {
            name: name.clone(),
            optional: Some(true),
            ..Default::default()
        }),
        ..Default::default()
    };
    let mount = mount(AGENT_CA_BUNDLE_VOLUME, LOGGER_CA_BUNDLE_MOUNT_PATH, true);
    Some((volume, mount))
}

/// The pod's ServiceAccount credentials, then, for a logger with storage,
/// the storage ServiceAccount's (`logger-sa` by default), as KServe does.
fn add_credentials(
    pod: &WorkingSet<'_>,
    inputs: &Inputs,
    logger: Option<&LoggerConfig>,
    target: &mut CredentialTarget,
) -> Result<(), CredentialError> {
    let mut request = CredentialRequest {
        namespace: pod.namespace(),
        service_account_name: pod.service_account_name(),
        pod_annotations: pod,
        release: inputs.config.release,
    };
    let config = &inputs.config.credentials;
    add_service_account_credentials(&inputs.cluster, config, &request, target)?;
    let storage_account = logger
        .filter(|_| inputs.config.release.logger_storage_credentials())
        .and_then(logger_service_account);
    if let Some(account) = storage_account {
        request.service_account_name = account;
        add_service_account_credentials(&inputs.cluster, config, &request, target)?;
    }
    Ok(())
}

fn model_dir_mount() -> VolumeMount {
    mount(MODEL_DIR_VOLUME, DEFAULT_MODEL_LOCAL_MOUNT_PATH, false)
}

/// The puller's volumes; both annotations are required, with KServe's message.
fn puller_config(pod: &WorkingSet<'_>) -> Result<(Volume, Volume), InjectError> {
    let config_volume = pod.annotation(CONFIG_VOLUME_NAME_ANNOTATION);
    let model_dir = pod.annotation(MODEL_DIR_ANNOTATION);
    let (Some(config_volume), Some(_)) = (config_volume, model_dir) else {
        return Err(InjectError::new(
            NAME,
            format!("can not find {CONFIG_VOLUME_NAME_ANNOTATION} label"),
        ));
    };
    let model_dir = empty_dir_volume(MODEL_DIR_VOLUME);
    let model_config = Volume {
        name: MODEL_CONFIG_VOLUME.to_string(),
        config_map: Some(ConfigMapVolumeSource {
            name: config_volume.to_string(),
            ..Default::default()
        }),
        ..Default::default()
    };
    Ok((model_dir, model_config))
}

fn flag_if(pod: &WorkingSet<'_>, flag: &str, annotation: &str) -> Vec<String> {
    pod.annotation(annotation)
        .map(|v| vec![flag.to_string(), v.to_string()])
        .unwrap_or_default()
}

fn puller_args(pod: &WorkingSet<'_>) -> Vec<String> {
    let mut args = vec!["--enable-puller".to_string()];
    args.extend(flag_if(pod, "--config-dir", CONFIG_MOUNT_PATH_ANNOTATION));
    args.extend(flag_if(pod, "--model-dir", MODEL_DIR_ANNOTATION));
    args
}

fn batcher_args(pod: &WorkingSet<'_>) -> Vec<String> {
    let mut args = vec!["--enable-batcher".to_string()];
    args.extend(flag_if(
        pod,
        "--max-batchsize",
        BATCHER_MAX_BATCH_SIZE_ANNOTATION,
    ));
    args.extend(flag_if(
        pod,
        "--max-latency",
        BATCHER_MAX_LATENCY_ANNOTATION,
    ));
    args
}

fn logger_args(pod: &WorkingSet<'_>, config: &LoggerConfig, release: Behaviour) -> Vec<String> {
    let label = |key: &str| pod.label(key).unwrap_or_default().to_string();
    let url = pod
        .annotation(LOGGER_SINK_URL_ANNOTATION)
        .map_or_else(|| config.default_url.clone(), str::to_string);
    let mode = pod
        .annotation(LOGGER_MODE_ANNOTATION)
        .unwrap_or(DEFAULT_LOGGER_MODE);
    let mut args: Vec<String> = [
        ("--log-url", url),
        ("--source-uri", pod.name().to_string()),
        ("--log-mode", mode.to_string()),
        ("--inference-service", label(ISVC_LABEL)),
        ("--namespace", pod.namespace().to_string()),
        ("--endpoint", label(ENDPOINT_LABEL)),
        ("--component", label(COMPONENT_LABEL)),
    ]
    .into_iter()
    .flat_map(|(flag, value)| [flag.to_string(), value])
    .collect();
    let mut optional = |flag: &str, value: Option<String>| {
        if let Some(value) = value {
            args.extend([flag.to_string(), value]);
        }
    };
    let non_empty = |s: &str| (!s.is_empty()).then(|| s.to_string());
    if let Some(storage) = &config.storage {
        optional("--log-store-path", non_empty(&storage.path));
        let format = storage.parameters.as_ref().and_then(|p| p.get("format"));
        optional("--log-store-format", format.and_then(|f| non_empty(f)));
    }
    optional("--log-marshaller-url", non_empty(&config.marshaller_url));
    optional(
        "--log-batch-size",
        (config.batch_size > 0).then(|| config.batch_size.to_string()),
    );
    optional("--log-batch-interval", non_empty(&config.batch_interval));
    optional(
        "--metadata-headers",
        pod.annotation(LOGGER_METADATA_HEADERS_ANNOTATION)
            .map(str::to_string),
    );
    optional(
        "--metadata-annotations",
        (pod.annotation(LOGGER_METADATA_ANNOTATIONS_ANNOTATION))
            .filter(|_| release.logger_metadata_annotations())
            .map(|keys| metadata_annotations(pod, keys)),
    );
    optional("--logger-ca-cert-file", non_empty(&config.ca_cert_file));
    optional(
        "--logger-tls-skip-verify",
        Some(config.tls_skip_verify.to_string()),
    );
    args
}

/// `k=v` for each listed key that the pod carries, in listed order.
fn metadata_annotations(pod: &WorkingSet<'_>, keys: &str) -> String {
    keys.split(',')
        .filter_map(|k| pod.annotation(k).map(|v| format!("{k}={v}")))
        .collect::<Vec<_>>()
        .join(",")
}

fn first_port(c: &ContainerView) -> Option<String> {
    c.ports
        .as_ref()?
        .0
        .first()?
        .container_port
        .map(|p| p.to_string())
}

/// The port the agent forwards to: the transformer's when there is one.
fn component_port(pod: &mut WorkingSet<'_>) -> String {
    if let Some(transformer) = pod.container(List::Containers, TRANSFORMER_CONTAINER) {
        return first_port(transformer).unwrap_or_else(|| DEFAULT_COMPONENT_PORT.to_string());
    }
    pod.container(List::Containers, KSERVE_CONTAINER)
        .and_then(|c| first_port(c))
        .unwrap_or_else(|| DEFAULT_COMPONENT_PORT.to_string())
}

/// KServe's copy of queue-proxy's env, taken as it is, before `USER_PORT`
/// is pointed at the agent. A pass that re-creates an agent another webhook
/// removed copies what queue-proxy carries by then (`USER_PORT` 9081, the
/// aggregator's variables), exactly as KServe HEAD does.
fn queue_proxy_env(queue_proxy: &ContainerView) -> Vec<EnvVar> {
    let vars = queue_proxy.env.as_ref().map(|env| env.0.as_slice());
    let vars = vars.unwrap_or_default();
    // Like decoding the list as `[]EnvVar`: one entry without a name and
    // the copy is empty.
    if vars.iter().any(|v| v.name.is_none()) {
        return Vec::new();
    }
    (vars.iter())
        .map(|v| EnvVar {
            name: v
                .name
                .as_ref()
                .map(|n| n.as_str().to_string())
                .unwrap_or_default(),
            value: v.value.as_ref().map(|s| s.as_str().to_string()),
            value_from: v.value_from.as_deref().cloned(),
        })
        .collect()
}

/// Without queue-proxy the agent itself checks the user's readiness; it can
/// only run HTTP and TCP probes (KServe #3909), and it should be probed on
/// the user's HTTP path (KServe #5341).
fn readiness_from_user_probe(pod: &mut WorkingSet<'_>) -> (Vec<EnvVar>, String) {
    let probe = match pod.container(List::Containers, TRANSFORMER_CONTAINER) {
        Some(transformer) => transformer.readiness_probe.as_deref().cloned(),
        None => (pod.containers(List::Containers).first())
            .and_then(|c| c.readiness_probe.as_deref().cloned()),
    };
    let Some(probe) = probe else {
        return (Vec::new(), "/".to_string());
    };
    if probe.http_get.is_none() && probe.tcp_socket.is_none() {
        return (Vec::new(), "/".to_string());
    }
    let path = probe
        .http_get
        .as_ref()
        .and_then(|h| h.path.clone())
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| "/".to_string());
    let var = env_var(SERVING_READINESS_PROBE_ENV, &probe_json(&probe));
    (vec![var], path)
}

fn agent_probe(path: String) -> Probe {
    Probe {
        http_get: Some(HTTPGetAction {
            http_headers: Some(vec![HTTPHeader {
                name: "K-Network-Probe".to_string(),
                value: "queue".to_string(),
            }]),
            port: IntOrString::Int(AGENT_PORT),
            path: Some(path),
            scheme: Some("HTTP".to_string()),
            host: None,
        }),
        ..Default::default()
    }
}

/// queue-proxy now forwards to the agent instead of the model server.
fn redirect_queue_proxy(pod: &mut WorkingSet<'_>) {
    let Some(mut qp) = pod.container_mut(List::Containers, QUEUE_PROXY_CONTAINER) else {
        return;
    };
    if qp.has_env(USER_PORT_ENV) {
        qp.set_env(USER_PORT_ENV, AGENT_PORT_STR);
    }
}

#[cfg(test)]
mod tests;
