//! Prometheus metrics. Every label takes values from a fixed, small set (no
//! pod or namespace names), so the series count stays bounded whatever the
//! traffic is.

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

#[derive(Debug)]
pub(crate) struct Metrics {
    registry: Registry,
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
        for path in PATHS {
            let _ = m.duration.get_or_create(&PathLabels { path });
            for code in CODES {
                let _ = m.requests.get_or_create(&RequestLabels { path, code });
            }
        }
        for injector in INJECTOR_NAMES {
            for outcome in ["injected", "unchanged"] {
                let _ = m
                    .injections
                    .get_or_create(&InjectionLabels { injector, outcome });
            }
        }
        Self { registry, ..m }
    }

    pub(crate) fn path_label(path: &str) -> &'static str {
        PATHS
            .iter()
            .copied()
            .find(|p| *p == path)
            .unwrap_or("other")
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

    pub(crate) fn cert_reloaded(&self, cert: &'static str, not_after: i64) {
        self.cert_loaded(cert, not_after);
        self.cert_reloads.get_or_create(&CertLabels { cert }).inc();
    }

    pub(crate) fn cert_reload_failed(&self, cert: &'static str) {
        self.cert_reload_errors
            .get_or_create(&CertLabels { cert })
            .inc();
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
        assert_eq!(Metrics::path_label("/mutate"), "/mutate");
        assert_eq!(Metrics::path_label("/etc/passwd"), "other");
        Ok(())
    }
}
