//! Prometheus metrics. Every label takes values from a fixed, small set (no
//! pod or namespace names), so the series count stays bounded whatever the
//! traffic is. The per-request series are resolved once at startup: a
//! request then costs a few atomic adds, not a family lookup (hash + lock)
//! per series.

use crate::injectors::INJECTOR_NAMES;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::{Registry, Unit};

/// The webhook paths; anything else is reported as "other".
pub(crate) const PATHS: [&str; 3] = ["/mutate-pods", "/mutate", "other"];
const CODES: [u16; 9] = [200, 400, 404, 405, 413, 415, 500, 503, 504];
/// Which certificate a certificate metric is about.
pub(crate) const SERVING: &str = "serving";
pub(crate) const CLIENT_CA: &str = "client_ca";
/// The inferenceservice-config, as a reloaded source.
pub(crate) const CONFIG: &str = "config";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct RequestLabels {
    pub path: &'static str,
    pub code: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct PathLabels {
    pub path: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct InjectionLabels {
    pub injector: &'static str,
    pub outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct CertLabels {
    pub cert: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabels {
    version: &'static str,
}

/// Buckets from 50µs (a typical review) to 5s (the default request budget).
fn latency_histogram() -> Histogram {
    Histogram::new([
        0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
        1.0, 2.5, 5.0,
    ])
}

/// A reloaded source's success and failure counters.
#[derive(Debug, Clone)]
pub(crate) struct ReloadCounters {
    pub ok: Counter,
    pub failed: Counter,
}

#[derive(Debug)]
pub(crate) struct Metrics {
    registry: Registry,
    /// `requests` resolved per PATHS × CODES, and `duration` per PATHS.
    hot_requests: Vec<Vec<Counter>>,
    hot_duration: Vec<Histogram>,
    /// `injections` per INJECTOR_NAMES × [injected, unchanged].
    hot_injections: Vec<[Counter; 2]>,
    pub open_connections: Gauge,
    pub connection_deadlines: Counter,
    pub requests: Family<RequestLabels, Counter>,
    pub duration: Family<PathLabels, Histogram, fn() -> Histogram>,
    pub in_flight: Gauge,
    pub injections: Family<InjectionLabels, Counter>,
    pub denials: Counter,
    pub panics: Counter,
    pub tls_handshake_errors: Counter,
    pub cert_reloads: Family<CertLabels, Counter>,
    pub cert_reload_errors: Family<CertLabels, Counter>,
    pub cert_not_after: Family<CertLabels, Gauge>,
    pub config_reloads: Counter,
    pub config_reload_errors: Counter,
    pub config_last_reload: Gauge,
}

impl Metrics {
    pub(crate) fn new() -> Self {
        let mut registry = Registry::with_prefix("kserve_injector");
        let m = Self {
            registry: Registry::default(),
            hot_requests: Vec::new(),
            hot_duration: Vec::new(),
            hot_injections: Vec::new(),
            open_connections: Gauge::default(),
            connection_deadlines: Counter::default(),
            requests: Family::default(),
            duration: Family::new_with_constructor(latency_histogram),
            in_flight: Gauge::default(),
            injections: Family::default(),
            denials: Counter::default(),
            panics: Counter::default(),
            tls_handshake_errors: Counter::default(),
            cert_reloads: Family::default(),
            cert_reload_errors: Family::default(),
            cert_not_after: Family::default(),
            config_reloads: Counter::default(),
            config_reload_errors: Counter::default(),
            config_last_reload: Gauge::default(),
        };
        registry.register(
            "requests",
            "Webhook HTTP requests by path and status code",
            m.requests.clone(),
        );
        registry.register_with_unit(
            "request_duration",
            "Time from request head to response, webhook listener",
            Unit::Seconds,
            m.duration.clone(),
        );
        registry.register(
            "requests_in_flight",
            "Webhook requests being served",
            m.in_flight.clone(),
        );
        registry.register(
            "injections",
            "Injector runs on admitted pods, by injector and outcome",
            m.injections.clone(),
        );
        registry.register(
            "denials",
            "Admission requests denied (the pod was refused)",
            m.denials.clone(),
        );
        registry.register(
            "panics",
            "Requests that panicked and were answered with 500",
            m.panics.clone(),
        );
        registry.register(
            "open_connections",
            "Webhook connections open (TLS handshake included)",
            m.open_connections.clone(),
        );
        registry.register(
            "connection_deadlines",
            "Connections closed for missing the handshake, first-request or idle deadline",
            m.connection_deadlines.clone(),
        );
        registry.register(
            "tls_handshake_errors",
            "TLS handshakes that failed or timed out",
            m.tls_handshake_errors.clone(),
        );
        registry.register(
            "certificate_reloads",
            "Certificates loaded after a change on disk",
            m.cert_reloads.clone(),
        );
        registry.register(
            "certificate_reload_errors",
            "Changed certificates that could not be loaded (the previous one kept serving)",
            m.cert_reload_errors.clone(),
        );
        registry.register(
            "certificate_not_after_timestamp_seconds",
            "Expiry (Unix time) of the certificate in use; for client_ca the earliest in the bundle",
            m.cert_not_after.clone(),
        );
        registry.register(
            "config_reloads",
            "inferenceservice-config loads after a change on disk",
            m.config_reloads.clone(),
        );
        registry.register(
            "config_reload_errors",
            "Changed configs that could not be loaded (the previous one stayed in use)",
            m.config_reload_errors.clone(),
        );
        registry.register(
            "config_last_reload_success_timestamp_seconds",
            "When the config in use was loaded (Unix time)",
            m.config_last_reload.clone(),
        );
        registry.register(
            "build",
            "Build information",
            Info::new(BuildLabels {
                version: env!("CARGO_PKG_VERSION"),
            }),
        );
        let hot_requests = PATHS
            .iter()
            .map(|&path| {
                let counters = CODES.iter().map(|&code| RequestLabels { path, code });
                counters
                    .map(|l| m.requests.get_or_create(&l).clone())
                    .collect()
            })
            .collect();
        let hot_duration = PATHS
            .iter()
            .map(|&path| m.duration.get_or_create(&PathLabels { path }).clone())
            .collect();
        let hot_injections = INJECTOR_NAMES
            .iter()
            .map(|&injector| {
                ["injected", "unchanged"].map(|outcome| {
                    let labels = InjectionLabels { injector, outcome };
                    m.injections.get_or_create(&labels).clone()
                })
            })
            .collect();
        Self {
            registry,
            hot_requests,
            hot_duration,
            hot_injections,
            ..m
        }
    }

    /// Index into PATHS.
    pub(crate) fn path_index(path: &str) -> usize {
        PATHS
            .iter()
            .position(|p| *p == path)
            .unwrap_or(PATHS.len() - 1)
    }

    pub(crate) fn record_request(&self, path: usize, code: u16, seconds: f64) {
        match CODES.iter().position(|c| *c == code) {
            Some(i) => self.hot_requests[path][i].inc(),
            None => self
                .requests
                .get_or_create(&RequestLabels {
                    path: PATHS[path],
                    code,
                })
                .inc(),
        };
        self.hot_duration[path].observe(seconds);
    }

    pub(crate) fn record_injection(&self, injector: &str, outcome: &str) {
        let Some(i) = INJECTOR_NAMES.iter().position(|n| *n == injector) else {
            return;
        };
        self.hot_injections[i][usize::from(outcome != "injected")].inc();
    }

    pub(crate) fn reload_counters(&self, source: &'static str) -> ReloadCounters {
        if source == CONFIG {
            return ReloadCounters {
                ok: self.config_reloads.clone(),
                failed: self.config_reload_errors.clone(),
            };
        }
        let labels = CertLabels { cert: source };
        ReloadCounters {
            ok: self.cert_reloads.get_or_create(&labels).clone(),
            failed: self.cert_reload_errors.get_or_create(&labels).clone(),
        }
    }

    /// The OpenMetrics text exposition, which Prometheus scrapes natively.
    pub(crate) fn encode(&self) -> Result<String, std::fmt::Error> {
        let mut out = String::with_capacity(8 * 1024);
        prometheus_client::encoding::text::encode(&mut out, &self.registry)?;
        Ok(out)
    }

    pub(crate) fn cert_loaded(&self, cert: &'static str, not_after: i64) {
        self.cert_not_after
            .get_or_create(&CertLabels { cert })
            .set(not_after);
    }

    /// Makes the certificate series visible at 0 from the start, so an alert
    /// on their rate works before the first rotation.
    pub(crate) fn register_cert(&self, cert: &'static str) {
        let _ = self.cert_reloads.get_or_create(&CertLabels { cert });
        let _ = self.cert_reload_errors.get_or_create(&CertLabels { cert });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposition_has_the_documented_series() -> Result<(), std::fmt::Error> {
        let m = Metrics::new();
        m.register_cert(SERVING);
        m.cert_loaded(SERVING, 1_900_000_000);
        let text = m.encode()?;
        for series in [
            "kserve_injector_requests_total{path=\"/mutate-pods\",code=\"200\"} 0",
            "kserve_injector_request_duration_seconds_bucket{le=\"0.001\",path=\"/mutate\"} 0",
            "kserve_injector_requests_in_flight 0",
            "kserve_injector_injections_total{injector=\"modelcar\",outcome=\"injected\"} 0",
            "kserve_injector_certificate_not_after_timestamp_seconds{cert=\"serving\"} 1900000000",
            "kserve_injector_certificate_reloads_total{cert=\"serving\"} 0",
            "kserve_injector_config_reload_errors_total 0",
            "kserve_injector_build_info{version=",
        ] {
            assert!(text.contains(series), "missing {series} in\n{text}");
        }
        assert_eq!(PATHS[Metrics::path_index("/mutate")], "/mutate");
        assert_eq!(PATHS[Metrics::path_index("/etc/passwd")], "other");
        m.record_request(0, 200, 0.0001);
        m.record_request(0, 429, 0.0001);
        m.record_injection("modelcar", "injected");
        let text = m.encode()?;
        for series in [
            "kserve_injector_requests_total{path=\"/mutate-pods\",code=\"200\"} 1",
            "kserve_injector_requests_total{path=\"/mutate-pods\",code=\"429\"} 1",
            "kserve_injector_injections_total{injector=\"modelcar\",outcome=\"injected\"} 1",
        ] {
            assert!(text.contains(series), "missing {series} in\n{text}");
        }
        Ok(())
    }
}
