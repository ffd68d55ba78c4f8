//! Metrics aggregation: queue-proxy scrapes the model server and serves both
//! sets of metrics on one port, which Prometheus is pointed at.

use super::InjectError;
use crate::constants::*;
use crate::inputs::Inputs;
use crate::pod::{List, WorkingSet};
use k8s_openapi::api::core::v1::ContainerPort;

pub(crate) const NAME: &str = "metrics-aggregator";

/// Whether the annotation says "true"; written from config when absent.
fn enabled(pod: &mut WorkingSet<'_>, key: &str, default: &str) -> bool {
    match pod.annotation(key) {
        Some(v) => v == "true",
        None => {
            pod.set_annotation(key, default);
            default == "true"
        }
    }
}

pub(crate) fn inject(pod: &mut WorkingSet<'_>, inputs: &Inputs) -> Result<(), InjectError> {
    let config = &inputs.config.metrics_aggregator;
    let aggregate = enabled(
        pod,
        ENABLE_METRIC_AGGREGATION_ANNOTATION,
        &config.enable_metric_aggregation,
    );
    if aggregate {
        let port = pod
            .annotation(KSERVE_PROMETHEUS_PORT_ANNOTATION)
            .unwrap_or(DEFAULT_CONTAINER_METRICS_PORT)
            .to_string();
        let path = pod
            .annotation(KSERVE_PROMETHEUS_PATH_ANNOTATION)
            .unwrap_or(DEFAULT_METRICS_PATH)
            .to_string();
        for index in pod.positions(List::Containers, QUEUE_PROXY_CONTAINER) {
            let Some(mut qp) = pod.container_at(List::Containers, index) else {
                continue;
            };
            qp.set_env(METRICS_QUEUE_PROXY_ENV[0], &port);
            qp.set_env(METRICS_QUEUE_PROXY_ENV[1], &path);
            qp.set_env(METRICS_QUEUE_PROXY_ENV[2], AGGREGATE_METRICS_PORT);
            qp.ensure_port(&ContainerPort {
                name: Some(AGGREGATE_METRICS_PORT_NAME.to_string()),
                container_port: AGGREGATE_METRICS_PORT_NUMBER,
                protocol: Some("TCP".to_string()),
                ..Default::default()
            });
        }
    }
    let scrape = enabled(
        pod,
        ENABLE_PROMETHEUS_SCRAPING_ANNOTATION,
        &config.enable_prometheus_scraping,
    );
    if scrape {
        let port = if aggregate {
            AGGREGATE_METRICS_PORT
        } else {
            DEFAULT_POD_PROMETHEUS_PORT
        };
        pod.set_annotation(PROMETHEUS_PORT_ANNOTATION, port);
        pod.set_annotation(PROMETHEUS_PATH_ANNOTATION, DEFAULT_METRICS_PATH);
    }
    Ok(())
}

#[cfg(test)]
mod tests;
