//! Prometheus metrics. Every label takes values from a fixed, small set (no
//! pod or namespace names), so the series count stays bounded whatever the
//! traffic is. The per-request series are resolved once at startup: a
//! request then costs a few atomic adds, not a family lookup (hash + lock)
//! per series.

use crate::reload::ReloadCounters;
use kserve_injector_core::{INJECTOR_NAMES, MUTATOR};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::{Registry, Unit};
use std::time::{SystemTime, UNIX_EPOCH};

/// The webhook paths; anything else is reported as "other".
const PATHS: [&str; 3] = ["/mutate-pods", "/mutate", "other"];
const CODES: [u16; 10] = [200, 400, 404, 405, 408, 413, 415, 500, 503, 504];
/// The `error` label of `accept_errors`.
const ACCEPT_ERRORS: [&str; 4] = ["emfile", "enfile", "enomem", "other"];
/// Which certificate a certificate metric is about.
pub(crate) const SERVING: &str = "serving";
pub(crate) const CLIENT_CA: &str = "client_ca";
/// The `injector` of a shadow difference that is a denial (ours, or a pod
/// or request we could not read), whatever its reason: the reason is in the
/// log line, so the series stay one per injector plus this one.
pub(crate) const SHADOW_DENY: &str = "deny";

/// Now as Unix seconds, the unit of the timestamp gauges.
pub(crate) fn unix_now() -> i64 {
    let since_epoch = SystemTime::now().duration_since(UNIX_EPOCH);
    since_epoch.map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

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
pub(crate) struct InjectorLabels {
    pub injector: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct CertLabels {
    pub cert: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct AcceptLabels {
    pub listener: &'static str,
    pub error: &'static str,
}

/// The listeners, as `accept_errors` and the admin series name them.
pub(crate) const WEBHOOK: &str = "webhook";
pub(crate) const ADMIN: &str = "admin";

/// Buckets from 50µs (a typical review) to 5s (the default request budget).
fn latency_histogram() -> Histogram {
    Histogram::new([
        0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
        1.0, 2.5, 5.0,
    ])
}

/// The Prometheus registry and the series the server records into; `/metrics`
/// on the admin router encodes it. Build it with [`Metrics::new`] (or
/// `default()`, the same).
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    /// `requests` resolved per PATHS × CODES (other codes are looked up),
    /// `request_duration` per PATHS.
    hot_requests: [[Counter; CODES.len()]; PATHS.len()],
    hot_duration: Vec<Histogram>,
    /// `injections` per INJECTOR_NAMES × [injected, unchanged]: all there is.
    hot_injections: [[Counter; 2]; INJECTOR_NAMES.len()],
    requests: Family<RequestLabels, Counter>,
    cert_reloads: Family<CertLabels, Counter>,
    cert_reload_errors: Family<CertLabels, Counter>,
    cert_not_after: Family<CertLabels, Gauge>,
    cert_pending: Family<CertLabels, Gauge>,
    shadow_differences: Family<InjectorLabels, Counter>,
    pub(crate) config_reloads: ReloadCounters,
    pub(crate) in_flight: Gauge,
    pub(crate) answers_waiting: Gauge,
    pub(crate) answer_bytes_waiting: Gauge,
    pub(crate) answers_shed: Counter,
    pub(crate) write_timeouts: Counter,
    pub(crate) open_connections: Gauge,
    pub(crate) connection_deadlines: Counter,
    pub(crate) connection_evictions: Counter,
    pub(crate) connections_refused: Counter,
    accept_errors: Family<AcceptLabels, Counter>,
    pub(crate) admin_open_connections: Gauge,
    pub(crate) admin_connection_evictions: Counter,
    pub(crate) admin_connections_refused: Counter,
    pub(crate) admin_connection_deadlines: Counter,
    pub(crate) denials: Counter,
    pub(crate) panics: Counter,
    pub(crate) tls_handshake_errors: Counter,
    pub(crate) config_last_reload: Gauge,
}

/// Unlike a derived `Default`, registers and resolves every series: a
/// `Metrics` with an empty `hot_duration` would panic on the first request.
impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Every series registered (the lookups' are added by `serve` when it
    /// has lookups), all at zero.
    pub fn new() -> Self {
        let mut m = Self {
            registry: Registry::with_prefix("kserve_injector"),
            hot_requests: Default::default(),
            hot_duration: Vec::new(),
            hot_injections: Default::default(),
            requests: Family::default(),
            cert_reloads: Family::default(),
            cert_reload_errors: Family::default(),
            cert_not_after: Family::default(),
            cert_pending: Family::default(),
            shadow_differences: Family::default(),
            config_reloads: ReloadCounters::default(),
            in_flight: Gauge::default(),
            answers_waiting: Gauge::default(),
            answer_bytes_waiting: Gauge::default(),
            answers_shed: Counter::default(),
            write_timeouts: Counter::default(),
            open_connections: Gauge::default(),
            connection_deadlines: Counter::default(),
            connection_evictions: Counter::default(),
            connections_refused: Counter::default(),
            accept_errors: Family::default(),
            admin_open_connections: Gauge::default(),
            admin_connection_evictions: Counter::default(),
            admin_connections_refused: Counter::default(),
            admin_connection_deadlines: Counter::default(),
            denials: Counter::default(),
            panics: Counter::default(),
            tls_handshake_errors: Counter::default(),
            config_last_reload: Gauge::default(),
        };
        let duration = Family::<_, _, fn() -> Histogram>::new_with_constructor(latency_histogram);
        let injections = Family::<InjectionLabels, Counter>::default();
        let r = &mut m.registry;
        r.register_with_unit(
            "request_duration",
            "Time from request head to response, webhook listener",
            Unit::Seconds,
            duration.clone(),
        );
        let build = [("version", env!("CARGO_PKG_VERSION"))];
        r.register("build", "Build information", Info::new(build));
        macro_rules! register {
            ($($name:literal, $help:literal, $metric:expr;)*) => { $(r.register($name, $help, $metric.clone());)* };
        }
        register! {
            "requests", "Webhook HTTP requests by path and status code", m.requests;
            "requests_in_flight", "Webhook requests being served", m.in_flight;
            "answers_waiting", "Answers not yet taken by the connection, because the client is slow to read or does not read", m.answers_waiting;
            "answer_bytes_waiting", "Bytes of the answers not yet taken by their connections", m.answer_bytes_waiting;
            "write_timeouts", "Connections closed because the client read nothing it was sent for --write-timeout (also counted in connection_deadlines)", m.write_timeouts;
            "answers_shed", "Requests refused with 503 because the answer bytes waiting, on their connection or in the whole server, were over their budget", m.answers_shed;
            "open_connections", "Webhook connections open (TLS handshake included)", m.open_connections;
            "connection_deadlines", "Connections closed for missing the handshake, first-request or idle deadline", m.connection_deadlines;
            "connection_evictions", "Connections closed at --max-connections to make room for a new one (of the address holding the most)", m.connection_evictions;
            "connections_refused", "New connections closed at once at --max-connections because their own address held the most", m.connections_refused;
            "accept_errors", "accept() failures by listener and error (emfile, enfile: out of file descriptors; the listener backs off)", m.accept_errors;
            "admin_open_connections", "Admin (probes, metrics) connections open", m.admin_open_connections;
            "admin_connection_evictions", "Admin connections closed at the admin connection cap to make room for a new one (of the address holding the most)", m.admin_connection_evictions;
            "admin_connections_refused", "New admin connections closed at once at the admin cap because their own address held the most", m.admin_connections_refused;
            "admin_connection_deadlines", "Admin connections closed for a request head too slow or too large, or idle too long", m.admin_connection_deadlines;
            "injections", "Injector runs on admitted pods, by injector and outcome", injections;
            "denials", "Admission requests denied (the pod was refused)", m.denials;
            "panics", "Requests that panicked and were answered with 500", m.panics;
            "tls_handshake_errors", "TLS handshakes that failed or timed out", m.tls_handshake_errors;
            "certificate_reloads", "Certificates loaded after a change on disk", m.cert_reloads;
            "certificate_reload_errors", "Changed certificates that could not be loaded (the previous one kept serving)", m.cert_reload_errors;
            "certificate_not_after_timestamp_seconds", "Expiry (Unix time) of the certificate in use; for client_ca the earliest in the bundle", m.cert_not_after;
            "certificate_pending_not_before_timestamp_seconds", "notBefore (Unix time) of a changed certificate that is not valid yet, loaded then; 0 when none waits", m.cert_pending;
            "config_reloads", "inferenceservice-config loads after a change on disk", m.config_reloads.ok;
            "config_reload_errors", "Changed configs that could not be loaded (the previous one stayed in use)", m.config_reloads.failed;
            "config_last_reload_success_timestamp_seconds", "When the config in use was loaded (Unix time)", m.config_last_reload;
            "shadow_differences", "Shadow mode: pods this webhook would have changed, by injector, or denied (injector=deny)", m.shadow_differences;
        }
        for listener in [WEBHOOK, ADMIN] {
            for error in ACCEPT_ERRORS {
                m.accept_errors
                    .get_or_create(&AcceptLabels { listener, error })
                    .inc_by(0);
            }
        }
        for injector in INJECTOR_NAMES.iter().chain([&MUTATOR, &SHADOW_DENY]) {
            m.shadow_differences
                .get_or_create(&InjectorLabels { injector })
                .inc_by(0);
        }
        m.hot_requests = PATHS.map(|path| CODES.map(|code| m.request_counter(path, code)));
        m.hot_duration = PATHS
            .map(|path| duration.get_or_create(&PathLabels { path }).clone())
            .to_vec();
        let injection = |injector, outcome| {
            let labels = InjectionLabels { injector, outcome };
            injections.get_or_create(&labels).clone()
        };
        m.hot_injections =
            INJECTOR_NAMES.map(|name| ["injected", "unchanged"].map(|o| injection(name, o)));
        m
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
            None => self.request_counter(PATHS[path], code).inc(),
        };
        self.hot_duration[path].observe(seconds);
    }

    fn request_counter(&self, path: &'static str, code: u16) -> Counter {
        let labels = RequestLabels { path, code };
        self.requests.get_or_create(&labels).clone()
    }

    pub(crate) fn record_injection(&self, injector: &str, outcome: &str) {
        if let Some(i) = INJECTOR_NAMES.iter().position(|n| *n == injector) {
            self.hot_injections[i][usize::from(outcome != "injected")].inc();
        }
    }

    /// One pod shadow mode would have changed, counted once per injector
    /// that would have changed it.
    pub(crate) fn record_shadow_difference(&self, injector: &'static str) {
        let labels = InjectorLabels { injector };
        self.shadow_differences.get_or_create(&labels).inc();
    }

    /// [`SERVING`]'s or [`CLIENT_CA`]'s reload counters and pending gauge.
    pub(crate) fn cert_reloads(&self, cert: &'static str) -> ReloadCounters {
        let labels = CertLabels { cert };
        let ok = self.cert_reloads.get_or_create(&labels).clone();
        let failed = self.cert_reload_errors.get_or_create(&labels).clone();
        let pending = self.cert_pending.get_or_create(&labels).clone();
        ReloadCounters {
            ok,
            failed,
            pending,
        }
    }

    /// One failed accept() on `listener`, by its cause.
    pub(crate) fn accept_error(&self, listener: &'static str, error: &std::io::Error) {
        let error = match error.raw_os_error() {
            Some(libc::EMFILE) => "emfile",
            Some(libc::ENFILE) => "enfile",
            Some(libc::ENOBUFS | libc::ENOMEM) => "enomem",
            _ => "other",
        };
        let labels = AcceptLabels { listener, error };
        self.accept_errors.get_or_create(&labels).inc();
    }

    /// The cluster lookups' families, registered on this registry.
    pub(crate) fn register_lookups(&mut self) -> crate::lookups::LookupMetrics {
        crate::lookups::LookupMetrics::register(&mut self.registry)
    }

    /// The OpenMetrics text exposition, which Prometheus scrapes natively.
    pub fn encode(&self) -> Result<String, std::fmt::Error> {
        let mut out = String::with_capacity(8 * 1024);
        prometheus_client::encoding::text::encode(&mut out, &self.registry)?;
        Ok(out)
    }

    pub(crate) fn cert_loaded(&self, cert: &'static str, not_after: i64) {
        let labels = CertLabels { cert };
        self.cert_not_after.get_or_create(&labels).set(not_after);
    }
}
