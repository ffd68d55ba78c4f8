use super::*;
use crate::config::{Config, ConfigError};
use crate::injectors::test_support::{env_with, run, run_idempotent, run_with};
use serde_json::{json, Value};
use std::collections::BTreeMap;

const TCP_JSON: &str = r#"{"tcpSocket":{"port":8080},"timeoutSeconds":1,"periodSeconds":10,"successThreshold":1,"failureThreshold":3}"#;

/// KServe's test config AG-cfg.
fn ag_env() -> Inputs {
    env_with(|c| {
        c.agent.image = "gcr.io/kserve/agent:latest".into();
        c.agent.resources.memory_request = "200Mi".into();
        c.logger.default_url = "http://httpbin.org/".into();
    })
}

/// AG-cfg with A11's logger TLS settings.
fn tls_env() -> Inputs {
    let mut env = ag_env();
    env.edit_config(|c| {
        c.logger.default_url = "https://httpbin.org/".into();
        c.logger.ca_bundle = "kserve-tls-bundle".into();
        c.logger.ca_cert_file = "ca.crt".into();
        c.logger.tls_skip_verify = true;
    });
    env
}

fn tcp_probe() -> Value {
    json!({"tcpSocket": {"port": 8080}, "timeoutSeconds": 1, "periodSeconds": 10,
           "successThreshold": 1, "failureThreshold": 3})
}

fn queue_proxy() -> Value {
    json!({"name": "queue-proxy", "env": [{"name": "SERVING_READINESS_PROBE", "value": TCP_JSON}]})
}

fn sklearn() -> Value {
    json!({"name": "sklearn", "readinessProbe": tcp_probe()})
}

fn pod(annotations: Value, containers: Value) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "deployment",
            "namespace": "default",
            "labels": {
                "serving.kserve.io/inferenceservice": "sklearn",
                "model": "sklearn",
                "endpoint": "default",
                "component": "predictor"
            },
            "annotations": annotations
        },
        "spec": {"containers": containers}
    })
}

fn puller_annotations() -> Value {
    json!({
        "internal.serving.kserve.io/agent": "true",
        "internal.serving.kserve.io/configVolumeName": "modelconfig-deployment-0",
        "internal.serving.kserve.io/modelDir": "/mnt/models",
        "internal.serving.kserve.io/configMountPath": "/mnt/configs"
    })
}

fn logger_annotations() -> Value {
    json!({
        "internal.serving.kserve.io/logger": "true",
        "internal.serving.kserve.io/logger-sink-url": "http://httpbin.org/",
        "internal.serving.kserve.io/logger-mode": "all"
    })
}

fn with(mut base: Value, extra: Value) -> Value {
    if let (Some(b), Some(e)) = (base.as_object_mut(), extra.as_object()) {
        b.extend(e.clone());
    }
    base
}

fn container<'a>(pod: &'a Value, name: &str) -> &'a Value {
    pod["spec"]["containers"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["name"] == name))
        .unwrap_or_else(|| panic!("no container {name} in {pod:#}"))
}

fn agent_args(pod: &Value) -> Vec<&str> {
    container(pod, "agent")["args"]
        .as_array()
        .expect("agent args")
        .iter()
        .map(|a| a.as_str().expect("string arg"))
        .collect()
}

fn agent_probe(path: &str) -> Value {
    json!({"httpGet": {"httpHeaders": [{"name": "K-Network-Probe", "value": "queue"}],
                       "port": 9081, "path": path, "scheme": "HTTP"}})
}

fn ag_resources() -> Value {
    json!({"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "100m", "memory": "200Mi"}})
}

const LOGGER_ARGS: [&str; 14] = [
    "--log-url",
    "http://httpbin.org/",
    "--source-uri",
    "deployment",
    "--log-mode",
    "all",
    "--inference-service",
    "sklearn",
    "--namespace",
    "default",
    "--endpoint",
    "default",
    "--component",
    "predictor",
];

fn logger_args_then(tail: &[&'static str]) -> Vec<&'static str> {
    LOGGER_ARGS.iter().chain(tail).copied().collect()
}

#[test]
fn a1_puller_gets_the_whole_agent_container_and_volumes() {
    let mut input = pod(puller_annotations(), json!([sklearn()]));
    input["spec"]["serviceAccountName"] = json!("sa");
    let out = run_with(inject, &input, &ag_env()).unwrap();
    let containers = out["spec"]["containers"].as_array().unwrap();
    assert_eq!(containers.len(), 2);
    assert_eq!(containers[0], sklearn(), "user container untouched");
    assert_eq!(
        containers[1],
        json!({
            "name": "agent",
            "image": "gcr.io/kserve/agent:latest",
            "args": ["--enable-puller", "--config-dir", "/mnt/configs", "--model-dir", "/mnt/models",
                     "--component-port", "8080"],
            "resources": ag_resources(),
            "ports": [{"name": "agent-port", "containerPort": 9081, "protocol": "TCP"}],
            "env": [{"name": "SERVING_READINESS_PROBE", "value": TCP_JSON}],
            "readinessProbe": agent_probe("/"),
            "volumeMounts": [
                {"name": "model-dir", "mountPath": "/mnt/models"},
                {"name": "model-config", "mountPath": "/mnt/configs"}
            ]
        })
    );
    assert_eq!(
        out["spec"]["volumes"],
        json!([
            {"name": "model-dir", "emptyDir": {}},
            {"name": "model-config", "configMap": {"name": "modelconfig-deployment-0"}}
        ])
    );
    assert_eq!(out["spec"]["serviceAccountName"], "sa");
}

#[test]
fn a2_without_agent_logger_or_batcher_annotations_nothing_changes() {
    for annotations in [
        json!({}),
        json!({"internal.serving.kserve.io/logger-mode": "all"}),
    ] {
        let input = pod(annotations, json!([sklearn(), queue_proxy()]));
        assert_eq!(run_with(inject, &input, &ag_env()).unwrap(), input);
    }
    let bare =
        json!({"metadata": {"name": "deployment"}, "spec": {"containers": [{"name": "sklearn"}]}});
    assert_eq!(run(inject, &bare).unwrap(), bare);
}

#[test]
fn a3_logger_with_queue_proxy_copies_its_env() {
    let input = pod(logger_annotations(), json!([sklearn(), queue_proxy()]));
    let out = run_with(inject, &input, &ag_env()).unwrap();
    assert_eq!(
        agent_args(&out),
        logger_args_then(&[
            "--logger-tls-skip-verify",
            "false",
            "--component-port",
            "8080"
        ])
    );
    let agent = container(&out, "agent");
    assert_eq!(
        agent["env"],
        json!([{"name": "SERVING_READINESS_PROBE", "value": TCP_JSON}])
    );
    assert_eq!(agent["readinessProbe"], agent_probe("/"));
    assert_eq!(agent["resources"], ag_resources());
    assert!(agent.get("volumeMounts").is_none());
    assert!(out["spec"].get("volumes").is_none());
    assert_eq!(container(&out, "queue-proxy"), &queue_proxy());
}

#[test]
fn a4_metadata_headers_come_before_tls_skip_verify() {
    let annotations = with(
        logger_annotations(),
        json!({"internal.serving.kserve.io/logger-metadata-headers": "Foo,Bar"}),
    );
    let out = run_with(
        inject,
        &pod(annotations, json!([sklearn(), queue_proxy()])),
        &ag_env(),
    )
    .unwrap();
    assert_eq!(
        agent_args(&out),
        logger_args_then(&[
            "--metadata-headers",
            "Foo,Bar",
            "--logger-tls-skip-verify",
            "false",
            "--component-port",
            "8080"
        ])
    );
}

#[test]
fn a5_metadata_annotations_resolve_listed_keys_in_order() {
    let annotations = with(
        logger_annotations(),
        json!({"internal.serving.kserve.io/logger-metadata-annotations": "Foo,Fizz",
               "Foo": "Bar", "Fizz": "Buzz"}),
    );
    let out = run_with(
        inject,
        &pod(annotations, json!([sklearn(), queue_proxy()])),
        &ag_env(),
    )
    .unwrap();
    assert_eq!(
        agent_args(&out),
        logger_args_then(&[
            "--metadata-annotations",
            "Foo=Bar,Fizz=Buzz",
            "--logger-tls-skip-verify",
            "false",
            "--component-port",
            "8080"
        ])
    );
}

#[test]
fn a5_missing_metadata_annotation_keys_are_skipped_and_may_leave_an_empty_value() {
    let args_for = |keys: &str| {
        let annotations = with(
            logger_annotations(),
            json!({"internal.serving.kserve.io/logger-metadata-annotations": keys, "Fizz": "Buzz"}),
        );
        let out = run_with(inject, &pod(annotations, json!([sklearn()])), &ag_env()).unwrap();
        let args: Vec<String> = agent_args(&out).iter().map(|a| a.to_string()).collect();
        let at = args
            .iter()
            .position(|a| a == "--metadata-annotations")
            .expect("flag present");
        args[at + 1].clone()
    };
    assert_eq!(args_for("Foo,Fizz"), "Fizz=Buzz");
    assert_eq!(args_for("Nope"), "");
}

/// The `--metadata-annotations` value the agent gets under `release`, or
/// `None` without the flag.
fn metadata_annotations_under(
    release: crate::release::Release,
    annotations: Value,
) -> Option<String> {
    let mut env = ag_env();
    env.edit_config(|c| {
        let config = c.clone().for_release(release);
        *c = config;
    });
    let annotations = with(logger_annotations(), annotations);
    let out = run_with(inject, &pod(annotations, json!([sklearn()])), &env).unwrap();
    let args: Vec<String> = agent_args(&out).iter().map(|a| a.to_string()).collect();
    let at = args.iter().position(|a| a == "--metadata-annotations")?;
    Some(args[at + 1].clone())
}

#[test]
fn a5_metadata_annotations_arrive_in_v0_15_1() {
    use crate::release::Release;
    let annotations = json!({"internal.serving.kserve.io/logger-metadata-annotations": "team,absent",
                             "team": "ml"});
    for release in [
        Release::V0_15_1,
        Release::V0_15_2,
        Release::V0_16_0,
        Release::Head,
    ] {
        assert_eq!(
            metadata_annotations_under(release, annotations.clone()).as_deref(),
            Some("team=ml"),
            "{release}"
        );
    }
    assert_eq!(
        metadata_annotations_under(Release::V0_15_0, annotations),
        None
    );
}

#[test]
fn a5_metadata_annotations_are_joined_as_go_joins_them() {
    // `InjectAgent` (v0.15.1 to HEAD): `strings.Split` on commas, each key
    // looked up as written (no trimming), `%s=%s` without escaping, joined
    // with commas: a key listed twice appears twice, a value keeps its
    // commas, a key with a blank or an empty key matches nothing.
    let got = |keys: &str| {
        let annotations = json!({"internal.serving.kserve.io/logger-metadata-annotations": keys,
                                 "team": "ml", "tags": "a,b", "eq": "x=y", "blank": ""});
        metadata_annotations_under(crate::release::Release::Head, annotations)
    };
    assert_eq!(got("team,team").as_deref(), Some("team=ml,team=ml"));
    assert_eq!(got("tags,team").as_deref(), Some("tags=a,b,team=ml"));
    assert_eq!(got("eq").as_deref(), Some("eq=x=y"));
    assert_eq!(got("blank").as_deref(), Some("blank="));
    assert_eq!(got(" team,team ,").as_deref(), Some(""));
    assert_eq!(got(",,team").as_deref(), Some("team=ml"));
    assert_eq!(got("").as_deref(), Some(""));
}

#[test]
fn a6_batcher_args_and_queue_proxy_env() {
    let annotations = json!({
        "internal.serving.kserve.io/batcher": "true",
        "internal.serving.kserve.io/batcher-max-latency": "100",
        "internal.serving.kserve.io/batcher-max-batchsize": "30"
    });
    let out = run_with(
        inject,
        &pod(annotations, json!([sklearn(), queue_proxy()])),
        &ag_env(),
    )
    .unwrap();
    assert_eq!(
        agent_args(&out),
        [
            "--enable-batcher",
            "--max-batchsize",
            "30",
            "--max-latency",
            "100",
            "--component-port",
            "8080"
        ]
    );
    assert_eq!(
        container(&out, "agent")["env"],
        json!([{"name": "SERVING_READINESS_PROBE", "value": TCP_JSON}])
    );
}

#[test]
fn a6_batcher_config_values_are_not_used_and_absent_annotations_give_no_flags() {
    let env = env_with(|c| {
        c.batcher.max_batch_size = "32".into();
        c.batcher.max_latency = "5000".into();
    });
    let annotations = json!({"internal.serving.kserve.io/batcher": "true"});
    let out = run_with(inject, &pod(annotations, json!([sklearn()])), &env).unwrap();
    assert_eq!(
        agent_args(&out),
        ["--enable-batcher", "--component-port", "8080"]
    );
}

#[test]
fn a7_an_existing_agent_container_stops_the_injector() {
    let existing = json!({"name": "agent", "image": "gcr.io/kserve/agent:v0.1"});
    let input = pod(
        logger_annotations(),
        json!([sklearn(), queue_proxy(), existing]),
    );
    assert_eq!(run_with(inject, &input, &ag_env()).unwrap(), input);
}

#[test]
fn an_init_container_named_agent_also_blocks_injection() {
    let mut input = pod(logger_annotations(), json!([sklearn()]));
    input["spec"]["initContainers"] = json!([{"name": "agent"}]);
    assert_eq!(run_with(inject, &input, &ag_env()).unwrap(), input);
}

#[test]
fn a8_default_logger_url_and_mode() {
    let annotations = json!({"internal.serving.kserve.io/logger": "true"});
    let user = json!({"name": "kserve-container", "readinessProbe": tcp_probe()});
    let out = run_with(
        inject,
        &pod(annotations, json!([user, queue_proxy()])),
        &ag_env(),
    )
    .unwrap();
    assert_eq!(
        agent_args(&out),
        logger_args_then(&[
            "--logger-tls-skip-verify",
            "false",
            "--component-port",
            "8080"
        ])
    );
}

#[test]
fn a9_queue_proxy_user_port_is_redirected_to_the_agent() {
    let annotations = json!({"internal.serving.kserve.io/logger": "true"});
    let user = json!({"name": "kserve-container", "readinessProbe": tcp_probe()});
    let qp = json!({"name": "queue-proxy", "env": [
        {"name": "SERVING_READINESS_PROBE", "value": TCP_JSON},
        {"name": "USER_PORT", "value": "8080"}
    ]});
    let out = run_with(inject, &pod(annotations, json!([user, qp])), &ag_env()).unwrap();
    assert_eq!(
        container(&out, "queue-proxy")["env"],
        json!([
            {"name": "SERVING_READINESS_PROBE", "value": TCP_JSON},
            {"name": "USER_PORT", "value": "9081"}
        ])
    );
    assert_eq!(
        container(&out, "agent")["env"],
        json!([
            {"name": "SERVING_READINESS_PROBE", "value": TCP_JSON},
            {"name": "USER_PORT", "value": "8080"}
        ])
    );
}

#[test]
fn queue_proxy_without_env_gives_an_agent_without_env() {
    let annotations = json!({"internal.serving.kserve.io/logger": "true"});
    let out = run_with(
        inject,
        &pod(annotations, json!([sklearn(), {"name": "queue-proxy"}])),
        &ag_env(),
    )
    .unwrap();
    assert!(container(&out, "agent").get("env").is_none());
    assert!(container(&out, "queue-proxy").get("env").is_none());
    assert_eq!(container(&out, "agent")["readinessProbe"], agent_probe("/"));
}

#[test]
fn a10_kserve_container_port_and_model_dir_mount() {
    let user = json!({"name": "kserve-container", "readinessProbe": tcp_probe(),
                      "ports": [{"name": "serving-port", "containerPort": 80}]});
    let out = run_with(inject, &pod(puller_annotations(), json!([user])), &ag_env()).unwrap();
    assert_eq!(&agent_args(&out)[5..], ["--component-port", "80"]);
    assert_eq!(
        container(&out, "kserve-container")["volumeMounts"],
        json!([{"name": "model-dir", "mountPath": "/mnt/models"}])
    );
}

#[test]
fn a10_existing_model_dir_mount_on_kserve_container_is_not_duplicated() {
    let user = json!({"name": "kserve-container",
                      "volumeMounts": [{"name": "model-dir", "mountPath": "/mnt/models"}]});
    let out = run_with(inject, &pod(puller_annotations(), json!([user])), &ag_env()).unwrap();
    assert_eq!(
        container(&out, "kserve-container")["volumeMounts"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

#[test]
fn a11_logger_tls_args_volume_and_mount() {
    let annotations = with(
        logger_annotations(),
        json!({"internal.serving.kserve.io/logger-sink-url": "https://httpbin.org/"}),
    );
    let out = run_with(
        inject,
        &pod(annotations, json!([sklearn(), queue_proxy()])),
        &tls_env(),
    )
    .unwrap();
    let mut want = logger_args_then(&[
        "--logger-ca-cert-file",
        "ca.crt",
        "--logger-tls-skip-verify",
        "true",
        "--component-port",
        "8080",
    ]);
    want[1] = "https://httpbin.org/";
    assert_eq!(agent_args(&out), want);
    assert_eq!(
        container(&out, "agent")["volumeMounts"],
        json!([{"name": "agent-ca-bundle", "mountPath": "/etc/tls/logger", "readOnly": true}])
    );
    assert_eq!(
        out["spec"]["volumes"],
        json!([{"name": "agent-ca-bundle",
                "configMap": {"name": "kserve-tls-bundle", "optional": true}}])
    );
}

#[test]
fn a11_logger_ca_bundle_is_only_mounted_for_the_logger() {
    let annotations = json!({"internal.serving.kserve.io/batcher": "true"});
    let out = run_with(inject, &pod(annotations, json!([sklearn()])), &tls_env()).unwrap();
    assert!(out["spec"].get("volumes").is_none());
    assert!(container(&out, "agent").get("volumeMounts").is_none());
    assert!(!agent_args(&out).contains(&"--logger-tls-skip-verify"));
}

#[test]
fn a12_logger_storage_args() {
    let mut env = ag_env();
    env.edit_config(|c| {
        c.logger.storage = Some(crate::config::LoggerStorage {
            path: "/logger".into(),
            parameters: Some(BTreeMap::from([
                ("type".to_string(), "s3".to_string()),
                ("region".to_string(), "us-west-2".to_string()),
                ("format".to_string(), "json".to_string()),
            ])),
            key: "logger-credentials".into(),
            service_account_name: "logger-sa".into(),
        })
    });
    let out = run_with(
        inject,
        &pod(logger_annotations(), json!([sklearn(), queue_proxy()])),
        &env,
    )
    .unwrap();
    assert_eq!(
        agent_args(&out),
        logger_args_then(&[
            "--log-store-path",
            "/logger",
            "--log-store-format",
            "json",
            "--logger-tls-skip-verify",
            "false",
            "--component-port",
            "8080"
        ])
    );
}

#[test]
fn optional_logger_args_keep_kserve_order() {
    let mut env = ag_env();
    env.edit_config(|c| {
        c.logger.storage = Some(crate::config::LoggerStorage {
            path: "/logs".into(),
            parameters: None,
            key: "credentials".into(),
            service_account_name: "logger-sa".into(),
        });
        c.logger.marshaller_url = "http://marshaller:8080".into();
        c.logger.batch_size = 16;
        c.logger.batch_interval = "5s".into();
        c.logger.ca_cert_file = "ca.crt".into();
    });
    let annotations = with(
        logger_annotations(),
        json!({"internal.serving.kserve.io/logger-metadata-headers": "X-Id",
               "internal.serving.kserve.io/logger-metadata-annotations": "team", "team": "ml"}),
    );
    let out = run_with(inject, &pod(annotations, json!([sklearn()])), &env).unwrap();
    assert_eq!(
        agent_args(&out),
        logger_args_then(&[
            "--log-store-path",
            "/logs",
            "--log-marshaller-url",
            "http://marshaller:8080",
            "--log-batch-size",
            "16",
            "--log-batch-interval",
            "5s",
            "--metadata-headers",
            "X-Id",
            "--metadata-annotations",
            "team=ml",
            "--logger-ca-cert-file",
            "ca.crt",
            "--logger-tls-skip-verify",
            "false",
            "--component-port",
            "8080"
        ])
    );
}

#[test]
fn a13_http_get_probe_is_serialised_and_its_path_mirrored() {
    let user = json!({"name": "sklearn", "readinessProbe": {
        "httpGet": {"path": "/v1/health/ready", "port": 8080, "scheme": "HTTP"},
        "timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3
    }});
    let out = run_with(inject, &pod(puller_annotations(), json!([user])), &ag_env()).unwrap();
    let agent = container(&out, "agent");
    assert_eq!(
        agent["env"],
        json!([{"name": "SERVING_READINESS_PROBE",
                "value": r#"{"httpGet":{"path":"/v1/health/ready","port":8080,"scheme":"HTTP"},"timeoutSeconds":1,"periodSeconds":10,"successThreshold":1,"failureThreshold":3}"#}])
    );
    assert_eq!(agent["readinessProbe"], agent_probe("/v1/health/ready"));
}

#[test]
fn bug_5341_probe_path_is_only_mirrored_without_queue_proxy() {
    let user = json!({"name": "kserve-container", "readinessProbe": {
        "httpGet": {"path": "/v1/health/ready", "port": 8080}}});
    let without = run_with(
        inject,
        &pod(logger_annotations(), json!([user.clone()])),
        &ag_env(),
    )
    .unwrap();
    assert_eq!(
        container(&without, "agent")["readinessProbe"],
        agent_probe("/v1/health/ready")
    );
    let with_qp = run_with(
        inject,
        &pod(logger_annotations(), json!([user, queue_proxy()])),
        &ag_env(),
    )
    .unwrap();
    assert_eq!(
        container(&with_qp, "agent")["readinessProbe"],
        agent_probe("/")
    );
}

#[test]
fn http_get_probe_without_path_keeps_the_root_path() {
    let user = json!({"name": "kserve-container", "readinessProbe": {"httpGet": {"port": 8080}}});
    let out = run_with(inject, &pod(logger_annotations(), json!([user])), &ag_env()).unwrap();
    let agent = container(&out, "agent");
    assert_eq!(agent["readinessProbe"], agent_probe("/"));
    assert_eq!(agent["env"][0]["value"], r#"{"httpGet":{"port":8080}}"#);
}

#[test]
fn a14_bug_3909_exec_and_grpc_probes_are_not_handed_to_the_agent() {
    for probe in [
        json!({"exec": {"command": ["echo", "hello"]}, "periodSeconds": 10}),
        json!({"grpc": {"port": 9000}, "periodSeconds": 10}),
    ] {
        let user = json!({"name": "sklearn", "readinessProbe": probe});
        let out = run_with(inject, &pod(logger_annotations(), json!([user])), &ag_env()).unwrap();
        let agent = container(&out, "agent");
        assert!(agent.get("env").is_none(), "{probe}: {agent:#}");
        assert_eq!(agent["readinessProbe"], agent_probe("/"));
    }
}

#[test]
fn a15_zero_thresholds_are_omitted_like_go() {
    let user = json!({"name": "sklearn", "readinessProbe": {
        "tcpSocket": {"port": 8080}, "initialDelaySeconds": 0, "timeoutSeconds": 0,
        "periodSeconds": 0, "successThreshold": 0, "failureThreshold": 0}});
    let out = run_with(inject, &pod(logger_annotations(), json!([user])), &ag_env()).unwrap();
    assert_eq!(
        container(&out, "agent")["env"],
        json!([{"name": "SERVING_READINESS_PROBE", "value": r#"{"tcpSocket":{"port":8080}}"#}])
    );
}

#[test]
fn a16_no_probe_gives_no_env() {
    let out = run_with(
        inject,
        &pod(logger_annotations(), json!([{"name": "kserve-container"}])),
        &ag_env(),
    )
    .unwrap();
    let agent = container(&out, "agent");
    assert!(agent.get("env").is_none());
    assert_eq!(agent["readinessProbe"], agent_probe("/"));
}

#[test]
fn transformer_wins_for_component_port_and_probe() {
    let predictor = json!({"name": "kserve-container", "ports": [{"containerPort": 8085}],
                           "readinessProbe": {"tcpSocket": {"port": 8085}}});
    let transformer = json!({"name": "transformer-container",
                             "readinessProbe": {"httpGet": {"path": "/ready", "port": "http"}}});
    let out = run_with(
        inject,
        &pod(
            logger_annotations(),
            json!([predictor.clone(), transformer]),
        ),
        &ag_env(),
    )
    .unwrap();
    let agent = container(&out, "agent");
    assert_eq!(&agent_args(&out)[16..], ["--component-port", "8080"]);
    assert_eq!(
        agent["env"][0]["value"],
        r#"{"httpGet":{"path":"/ready","port":"http"}}"#
    );
    assert_eq!(agent["readinessProbe"], agent_probe("/ready"));

    let with_port = json!({"name": "transformer-container", "ports": [{"containerPort": 8082}]});
    let out = run_with(
        inject,
        &pod(logger_annotations(), json!([predictor, with_port])),
        &ag_env(),
    )
    .unwrap();
    assert_eq!(&agent_args(&out)[16..], ["--component-port", "8082"]);
    assert!(container(&out, "agent").get("env").is_none());
}

#[test]
fn security_context_is_copied_from_the_first_container() {
    let first =
        json!({"name": "sklearn", "securityContext": {"runAsUser": 1000, "runAsNonRoot": true}});
    let out = run_with(
        inject,
        &pod(
            logger_annotations(),
            json!([first, {"name": "kserve-container"}]),
        ),
        &ag_env(),
    )
    .unwrap();
    assert_eq!(
        container(&out, "agent")["securityContext"],
        json!({"runAsUser": 1000, "runAsNonRoot": true})
    );
}

#[test]
fn puller_without_config_volume_or_model_dir_is_denied_with_kserve_message() {
    for missing in [
        "internal.serving.kserve.io/configVolumeName",
        "internal.serving.kserve.io/modelDir",
    ] {
        let mut annotations = puller_annotations();
        annotations.as_object_mut().unwrap().remove(missing);
        let err = run_with(inject, &pod(annotations, json!([sklearn()])), &ag_env()).unwrap_err();
        assert_eq!(
            err.message,
            "can not find internal.serving.kserve.io/configVolumeName label"
        );
        assert_eq!(err.injector, NAME);
    }
}

#[test]
fn puller_without_config_mount_path_omits_config_dir_but_mounts_model_config() {
    let mut annotations = puller_annotations();
    annotations
        .as_object_mut()
        .unwrap()
        .remove("internal.serving.kserve.io/configMountPath");
    let out = run_with(inject, &pod(annotations, json!([sklearn()])), &ag_env()).unwrap();
    assert_eq!(
        agent_args(&out),
        [
            "--enable-puller",
            "--model-dir",
            "/mnt/models",
            "--component-port",
            "8080"
        ]
    );
    assert_eq!(
        container(&out, "agent")["volumeMounts"][1],
        json!({"name": "model-config", "mountPath": "/mnt/configs"})
    );
}

#[test]
fn puller_batcher_and_logger_args_are_in_kserve_order() {
    let annotations = with(
        with(puller_annotations(), logger_annotations()),
        json!({"internal.serving.kserve.io/batcher": "true",
               "internal.serving.kserve.io/batcher-max-batchsize": "32"}),
    );
    let out = run_with(inject, &pod(annotations, json!([sklearn()])), &ag_env()).unwrap();
    let args = agent_args(&out);
    assert_eq!(
        &args[..9],
        [
            "--enable-puller",
            "--config-dir",
            "/mnt/configs",
            "--model-dir",
            "/mnt/models",
            "--enable-batcher",
            "--max-batchsize",
            "32",
            "--log-url"
        ]
    );
    assert_eq!(&args[args.len() - 2..], ["--component-port", "8080"]);
}

#[test]
fn pod_template_namespace_comes_from_the_doc_context() {
    let mut input = pod(logger_annotations(), json!([sklearn()]));
    input["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("namespace");
    let view = crate::view::pod_from_value(&input).expect("a pod the view reads");
    let mut doc = crate::pod::WorkingSet::in_namespace(view, "models");
    inject(&mut doc, &ag_env()).unwrap();
    let mut out = input.clone();
    crate::pod::apply_all(&doc.into_patch(), &mut out).expect("recorded ops apply");
    let args = agent_args(&out);
    let at = args.iter().position(|a| *a == "--namespace").unwrap();
    assert_eq!(args[at + 1], "models");
}

/// A17: every scenario, once injected, goes through again with a different
/// logger config and comes back unchanged.
#[test]
fn a17_reinvocation_with_another_logger_config_changes_nothing() {
    let qp_with_port = json!({"name": "queue-proxy", "env": [
        {"name": "SERVING_READINESS_PROBE", "value": TCP_JSON},
        {"name": "USER_PORT", "value": "8080"}]});
    let scenarios = [
        pod(puller_annotations(), json!([sklearn()])),
        pod(logger_annotations(), json!([sklearn(), queue_proxy()])),
        pod(
            with(
                logger_annotations(),
                json!({"internal.serving.kserve.io/logger-metadata-headers": "Foo,Bar"}),
            ),
            json!([sklearn(), queue_proxy()]),
        ),
        pod(
            json!({"internal.serving.kserve.io/batcher": "true",
                   "internal.serving.kserve.io/batcher-max-latency": "100"}),
            json!([sklearn(), queue_proxy()]),
        ),
        pod(
            json!({"internal.serving.kserve.io/logger": "true"}),
            json!([{"name": "kserve-container", "readinessProbe": tcp_probe()}, qp_with_port]),
        ),
        pod(
            puller_annotations(),
            json!([{"name": "kserve-container", "ports": [{"containerPort": 80}]}]),
        ),
    ];
    for input in scenarios {
        let once = run_idempotent(inject, &input, &ag_env());
        assert_ne!(once, input);
        let again = run_with(inject, &once, &tls_env()).unwrap();
        assert_eq!(again, once);
    }
}

fn config_with(section: &str, json: &str) -> Result<Config, ConfigError> {
    let manifest = crate::reader::documents(&mut Config::default_manifest().as_bytes())
        .and_then(|mut docs| docs.next().expect("a document"))
        .expect("default manifest");
    let mut data: BTreeMap<String, String> = manifest["data"]
        .as_object()
        .expect("data")
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
        .collect();
    data.insert(section.to_string(), json.to_string());
    Config::from_data(&data)
}

#[test]
fn a18_logger_storage_defaults() {
    let res = r#""memoryRequest":"100Mi","memoryLimit":"1Gi","cpuRequest":"100m","cpuLimit":"1""#;
    let config = config_with("logger", &format!("{{{res}}}")).unwrap();
    assert_eq!(config.logger.storage, None);

    let config = config_with(
        "logger",
        &format!(r#"{{{res},"storage":{{"path":"/logs"}}}}"#),
    )
    .unwrap();
    let storage = config.logger.storage.expect("storage");
    assert_eq!(storage.service_account_name, "logger-sa");
    assert_eq!(storage.key, "credentials");

    let config = config_with(
        "logger",
        &format!(r#"{{{res},"Storage":{{"path":"/logs","key":"k","serviceAccountName":"sa1"}}}}"#),
    )
    .unwrap();
    let storage = config.logger.storage.expect("storage");
    assert_eq!(
        (storage.key.as_str(), storage.service_account_name.as_str()),
        ("k", "sa1")
    );
}

#[test]
fn a18_invalid_agent_and_logger_resources_are_rejected_with_kserve_messages() {
    let bad = r#"{"MemoryRequest":"200mc","memoryLimit":"1Gi","cpuRequest":"100m","cpuLimit":"1"}"#;
    let agent = config_with("agent", bad).unwrap_err().to_string();
    assert!(
        agent.starts_with("failed to parse resource configuration for \"agent\": "),
        "{agent}"
    );
    let logger = config_with("logger", bad).unwrap_err().to_string();
    assert!(
        logger.starts_with("Failed to parse resource configuration for \"logger\": \""),
        "{logger}"
    );
    let missing = config_with("agent", r#"{"image":"x"}"#)
        .unwrap_err()
        .to_string();
    assert!(missing.starts_with("failed to parse resource configuration for \"agent\""));
}

#[test]
fn agent_resources_are_canonical_quantities() {
    let config = config_with(
        "agent",
        r#"{"image":"a","memoryRequest":"0.5Gi","memoryLimit":"1024Mi","cpuRequest":"0.1","cpuLimit":"1000m"}"#,
    )
    .unwrap();
    let out = run_with(
        inject,
        &pod(logger_annotations(), json!([sklearn()])),
        &Inputs::new(config),
    )
    .unwrap();
    assert_eq!(
        container(&out, "agent")["resources"],
        json!({"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "100m", "memory": "512Mi"}})
    );
}

#[test]
fn empty_agent_image_is_omitted_like_go() {
    let env = env_with(|c| c.agent.image.clear());
    let out = run_with(inject, &pod(logger_annotations(), json!([sklearn()])), &env).unwrap();
    assert!(container(&out, "agent").get("image").is_none());
}

#[test]
fn a_pod_without_containers_gets_an_agent_instead_of_a_panic() {
    let input = json!({"metadata": {"annotations": {"internal.serving.kserve.io/logger": "true"}},
                       "spec": {"containers": []}});
    let out = run(inject, &input).unwrap();
    assert_eq!(out["spec"]["containers"][0]["name"], "agent");
}

/// KServe HEAD copies queue-proxy's env as it is; a pass that re-creates an
/// agent another webhook removed sees queue-proxy already redirected.
#[test]
fn a_re_created_agent_copies_queue_proxy_env_as_kserve_does() {
    let annotations = json!({"internal.serving.kserve.io/logger": "true"});
    let user = json!({"name": "kserve-container", "ports": [{"containerPort": 8085}]});
    let qp = json!({"name": "queue-proxy", "env": [{"name": "USER_PORT", "value": "8085"}]});
    let first = run_with(inject, &pod(annotations, json!([user, qp])), &ag_env()).unwrap();
    assert_eq!(
        container(&first, "agent")["env"],
        json!([{"name": "USER_PORT", "value": "8085"}])
    );
    let mut removed = first.clone();
    removed["spec"]["containers"]
        .as_array_mut()
        .unwrap()
        .retain(|c| c["name"] != "agent");
    let repaired = run_with(inject, &removed, &ag_env()).unwrap();
    assert_eq!(
        container(&repaired, "agent")["env"],
        json!([{"name": "USER_PORT", "value": "9081"}])
    );
    assert_eq!(
        container(&repaired, "queue-proxy"),
        container(&first, "queue-proxy")
    );
}
