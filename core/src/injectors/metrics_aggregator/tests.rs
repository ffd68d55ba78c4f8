use super::*;
use crate::injectors::test_support::{env_with, run, run_idempotent, run_with};
use serde_json::{json, Value};

const AGG: &str = "serving.kserve.io/enable-metric-aggregation";
const PROM: &str = "serving.kserve.io/enable-prometheus-scraping";

fn pod(annotations: Option<Value>) -> Value {
    let mut metadata = json!({"name": "deployment", "namespace": "default"});
    if let Some(a) = annotations {
        metadata["annotations"] = a;
    }
    json!({
        "metadata": metadata,
        "spec": {"containers": [
            {"name": "sklearn"},
            {"name": "queue-proxy",
             "ports": [{"name": "http-usermetric", "containerPort": 9091, "protocol": "TCP"}]}
        ]}
    })
}

/// MA1's queue-proxy after aggregation.
fn aggregated_queue_proxy() -> Value {
    json!({
        "name": "queue-proxy",
        "env": [
            {"name": "KSERVE_CONTAINER_PROMETHEUS_METRICS_PORT", "value": "8080"},
            {"name": "KSERVE_CONTAINER_PROMETHEUS_METRICS_PATH", "value": "/metrics"},
            {"name": "AGGREGATE_PROMETHEUS_METRICS_PORT", "value": "9088"}
        ],
        "ports": [
            {"name": "http-usermetric", "containerPort": 9091, "protocol": "TCP"},
            {"name": "aggr-metric", "containerPort": 9088, "protocol": "TCP"}
        ]
    })
}

fn spec_with_aggregation() -> Value {
    json!({"containers": [{"name": "sklearn"}, aggregated_queue_proxy()]})
}

#[test]
fn ma1_aggregation_true_sets_queue_proxy_env_and_port() {
    let out = run(inject, &pod(Some(json!({AGG: "true"})))).unwrap();
    assert_eq!(out["spec"], spec_with_aggregation());
    assert_eq!(
        out["metadata"]["annotations"],
        json!({AGG: "true", PROM: "false"})
    );
}

#[test]
fn ma2_is_idempotent() {
    let once = run_idempotent(
        inject,
        &pod(Some(json!({AGG: "true", PROM: "true"}))),
        &Inputs::default(),
    );
    assert_eq!(once["spec"], spec_with_aggregation());
}

#[test]
fn ma3_absent_annotations_are_set_from_config_and_spec_is_unchanged() {
    let input = pod(None);
    let out = run(inject, &input).unwrap();
    assert_eq!(out["spec"], input["spec"]);
    assert_eq!(
        out["metadata"]["annotations"],
        json!({AGG: "false", PROM: "false"})
    );
    // KServe's unit test config has neither key: the annotations get "".
    let empty = env_with(|c| c.metrics_aggregator = Default::default());
    let out = run_with(inject, &input, &empty).unwrap();
    assert_eq!(out["spec"], input["spec"]);
    assert_eq!(out["metadata"]["annotations"], json!({AGG: "", PROM: ""}));
}

#[test]
fn ma4_aggregation_false_leaves_the_spec_alone() {
    let input = pod(Some(json!({AGG: "false"})));
    let out = run(inject, &input).unwrap();
    assert_eq!(out["spec"], input["spec"]);
}

#[test]
fn ma5_scraping_with_aggregation_points_prometheus_at_9088() {
    let out = run(inject, &pod(Some(json!({AGG: "true", PROM: "true"})))).unwrap();
    assert_eq!(out["spec"], spec_with_aggregation());
    assert_eq!(
        out["metadata"]["annotations"],
        json!({AGG: "true", PROM: "true", "prometheus.io/port": "9088", "prometheus.io/path": "/metrics"})
    );
}

#[test]
fn ma6_scraping_without_aggregation_points_prometheus_at_9091() {
    let input = pod(Some(json!({AGG: "false", PROM: "true"})));
    let out = run(inject, &input).unwrap();
    assert_eq!(out["spec"], input["spec"]);
    assert_eq!(
        out["metadata"]["annotations"],
        json!({AGG: "false", PROM: "true", "prometheus.io/port": "9091", "prometheus.io/path": "/metrics"})
    );
}

#[test]
fn ma7_aggregation_without_scraping_adds_no_prometheus_annotations() {
    let out = run(inject, &pod(Some(json!({AGG: "true", PROM: "false"})))).unwrap();
    assert_eq!(out["spec"], spec_with_aggregation());
    assert_eq!(
        out["metadata"]["annotations"],
        json!({AGG: "true", PROM: "false"})
    );
}

#[test]
fn config_defaults_apply_only_when_the_annotation_is_absent() {
    let on = env_with(|c| {
        c.metrics_aggregator.enable_metric_aggregation = "true".into();
        c.metrics_aggregator.enable_prometheus_scraping = "true".into();
    });
    let out = run_with(inject, &pod(None), &on).unwrap();
    assert_eq!(out["spec"], spec_with_aggregation());
    assert_eq!(out["metadata"]["annotations"]["prometheus.io/port"], "9088");

    let input = pod(Some(json!({AGG: "false", PROM: "false"})));
    assert_eq!(run_with(inject, &input, &on).unwrap(), input);
}

#[test]
fn only_the_exact_string_true_enables() {
    for value in ["True", "TRUE", "1", "yes", ""] {
        let input = pod(Some(json!({AGG: value, PROM: value})));
        assert_eq!(run(inject, &input).unwrap(), input, "{value:?}");
    }
}

#[test]
fn kserve_prometheus_port_and_path_annotations_are_forwarded() {
    let annotations = json!({AGG: "true", "prometheus.kserve.io/port": "8082",
                             "prometheus.kserve.io/path": "/stats"});
    let out = run(inject, &pod(Some(annotations))).unwrap();
    assert_eq!(
        out["spec"]["containers"][1]["env"],
        json!([
            {"name": "KSERVE_CONTAINER_PROMETHEUS_METRICS_PORT", "value": "8082"},
            {"name": "KSERVE_CONTAINER_PROMETHEUS_METRICS_PATH", "value": "/stats"},
            {"name": "AGGREGATE_PROMETHEUS_METRICS_PORT", "value": "9088"}
        ])
    );
}

#[test]
fn stale_values_are_replaced_by_name_and_prometheus_annotations_overwritten() {
    let mut input = pod(Some(
        json!({AGG: "true", PROM: "true", "prometheus.io/port": "1234",
                                    "prometheus.kserve.io/port": "8082"}),
    ));
    input["spec"]["containers"][1]["env"] = json!([
        {"name": "USER_PORT", "value": "8080"},
        {"name": "KSERVE_CONTAINER_PROMETHEUS_METRICS_PORT", "value": "8080"}
    ]);
    let out = run_idempotent(inject, &input, &Inputs::default());
    assert_eq!(
        out["spec"]["containers"][1]["env"],
        json!([
            {"name": "USER_PORT", "value": "8080"},
            {"name": "KSERVE_CONTAINER_PROMETHEUS_METRICS_PORT", "value": "8082"},
            {"name": "KSERVE_CONTAINER_PROMETHEUS_METRICS_PATH", "value": "/metrics"},
            {"name": "AGGREGATE_PROMETHEUS_METRICS_PORT", "value": "9088"}
        ])
    );
    assert_eq!(out["metadata"]["annotations"]["prometheus.io/port"], "9088");
}

#[test]
fn every_queue_proxy_container_is_configured() {
    let input = json!({
        "metadata": {"annotations": {AGG: "true"}},
        "spec": {"containers": [{"name": "queue-proxy"}, {"name": "kserve-container"}, {"name": "queue-proxy"}]}
    });
    let out = run_idempotent(inject, &input, &Inputs::default());
    for index in [0, 2] {
        let qp = &out["spec"]["containers"][index];
        assert_eq!(qp["env"].as_array().map(Vec::len), Some(3), "{qp}");
        assert_eq!(
            qp["ports"],
            json!([{"name": "aggr-metric", "containerPort": 9088, "protocol": "TCP"}])
        );
    }
    assert_eq!(
        out["spec"]["containers"][1],
        json!({"name": "kserve-container"})
    );
}

#[test]
fn an_existing_aggr_metric_port_is_kept() {
    let mut input = pod(Some(json!({AGG: "true"})));
    input["spec"]["containers"][1]["ports"] =
        json!([{"name": "aggr-metric", "containerPort": 9999, "protocol": "TCP"}]);
    let out = run(inject, &input).unwrap();
    assert_eq!(
        out["spec"]["containers"][1]["ports"],
        json!([{"name": "aggr-metric", "containerPort": 9999, "protocol": "TCP"}])
    );
}

#[test]
fn aggregation_without_queue_proxy_only_writes_annotations() {
    let input = json!({"metadata": {"annotations": {AGG: "true", PROM: "true"}},
                       "spec": {"containers": [{"name": "kserve-container"}]}});
    let out = run(inject, &input).unwrap();
    assert_eq!(out["spec"], input["spec"]);
    assert_eq!(out["metadata"]["annotations"]["prometheus.io/port"], "9088");
}

#[test]
fn a_pod_without_metadata_gets_the_annotations() {
    let input = json!({"spec": {"containers": [{"name": "kserve-container"}]}});
    let out = run(inject, &input).unwrap();
    assert_eq!(
        out["metadata"],
        json!({"annotations": {AGG: "false", PROM: "false"}})
    );
}
