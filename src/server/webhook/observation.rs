//! What the server records of each review: metrics, shadow mode's log
//! lines, and the counts for the periodic admission summary (`summary.rs`).

use super::app::App;
use crate::log_text::bounded;
use kserve_injector_core::admission::Reviewed;
use tracing::{debug, info};

impl App {
    /// A request that is not an AdmissionReview we can read: counted in the
    /// summary, logged at debug (its sender may retry it at any rate).
    pub(crate) fn malformed(&self, e: &kserve_injector_core::admission::ReviewError) {
        self.summary().count_malformed();
        debug!(error = %bounded(e), "malformed admission request");
    }

    /// Metrics, the summary, and the per-request line at debug level.
    pub(crate) fn observe(&self, r: &Reviewed) {
        for (injector, outcome) in &r.outcomes {
            self.metrics().record_injection(injector, outcome.as_str());
        }
        self.summary().count(r);
        if r.denial.is_some() {
            self.metrics().denials.inc();
        }
        if !r.withheld.is_empty() {
            self.shadow_difference(r);
        }
        if let Some(reason) = &r.withheld_denial {
            self.shadow_denial(r, reason);
        }
        for lack in &r.unsupported {
            debug!(
                request_uid = %bounded(&r.uid),
                namespace = %bounded(&r.namespace),
                object_name = %bounded(&r.name),
                kserve_version = %lack.release,
                "{}",
                bounded(lack)
            );
        }
        debug!(
            request_uid = %bounded(&r.uid),
            namespace = %bounded(&r.namespace),
            object_name = %bounded(&r.name),
            operation = %bounded(&r.operation),
            kind = %bounded(&r.kind),
            dry_run = r.dry_run,
            allowed = r.allowed,
            patch_ops = r.patch_ops,
            reason = r.denial.as_deref().map(|d| tracing::field::display(bounded(d))),
            modelcar_shape = r.modelcar_shape.map(tracing::field::display),
            "admission reviewed"
        );
    }
}

impl App {
    /// Shadow mode found a pod this webhook would change: one line with the
    /// operations' paths and injectors (never their values, which may hold
    /// a Secret's), and the counter once per injector involved.
    fn shadow_difference(&self, r: &Reviewed) {
        let mut injectors: Vec<&'static str> = r.withheld.iter().map(|w| w.injector).collect();
        injectors.sort_unstable();
        injectors.dedup();
        for injector in &injectors {
            self.metrics().record_shadow_difference(injector);
        }
        let changes: Vec<String> = (r.withheld.iter())
            .map(|w| format!("{} {} ({})", w.op, w.path, w.injector))
            .collect();
        info!(
            request_uid = %bounded(&r.uid),
            namespace = %bounded(&r.namespace),
            pod = %bounded(&r.name),
            generate_name = r.generate_name.as_deref().map(|g| tracing::field::display(bounded(g))),
            injectors = injectors.join(",").as_str(),
            changes = %bounded(changes.join("; ")),
            "shadow mode: this webhook would change the pod"
        );
    }
}

impl App {
    /// Shadow mode allowed a pod this webhook would have denied: one line
    /// with the reason, counted as `injector="deny"`.
    fn shadow_denial(&self, r: &Reviewed, reason: &str) {
        self.metrics()
            .record_shadow_difference(crate::server::metrics::SHADOW_DENY);
        info!(
            request_uid = %bounded(&r.uid),
            namespace = %bounded(&r.namespace),
            pod = %bounded(&r.name),
            generate_name = r.generate_name.as_deref().map(|g| tracing::field::display(bounded(g))),
            reason = %bounded(reason),
            "shadow mode: this webhook would deny the pod"
        );
    }
}
