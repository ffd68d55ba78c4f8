//! The periodic admission summary: what was reviewed, patched, denied and
//! malformed since the last line.

use crate::log_text::bounded;
use kserve_injector_core::admission::Reviewed;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tracing::info;

/// The info-level admission log: one aggregated line per interval instead
/// of a formatted JSON line and a write per request. On two cores a line
/// per request cost more CPU than the review itself, and a non-blocking
/// writer only moves that cost to another thread on the same cores. The
/// per-request line is at debug (`--log kserve_injector=debug`).
#[derive(Debug, Default)]
pub(crate) struct Summary {
    reviewed: AtomicU64,
    patched: AtomicU64,
    denied: AtomicU64,
    malformed: AtomicU64,
    last_denial: Mutex<Option<String>>,
}

impl Summary {
    pub(crate) fn count_malformed(&self) {
        self.malformed.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn count(&self, r: &Reviewed) {
        self.reviewed.fetch_add(1, Ordering::Relaxed);
        if r.patch_ops > 0 {
            self.patched.fetch_add(1, Ordering::Relaxed);
        }
        if let Some(reason) = &r.denial {
            self.denied.fetch_add(1, Ordering::Relaxed);
            // Bounded as it is kept: a denial may quote a pod's annotation
            // whole, and the line must not grow with it.
            let last = format!(
                "{}/{} ({}): {}",
                bounded(&r.namespace),
                bounded(&r.name),
                bounded(&r.uid),
                bounded(reason)
            );
            *self
                .last_denial
                .lock()
                .unwrap_or_else(PoisonError::into_inner) = Some(last);
        }
    }

    pub(crate) async fn log_every(&self, interval: Duration, stop: CancellationToken) {
        let mut tick = tokio::time::interval(interval);
        tick.tick().await;
        loop {
            tokio::select! {
                _ = stop.cancelled() => { self.log(interval); return; }
                _ = tick.tick() => self.log(interval),
            }
        }
    }

    fn log(&self, interval: Duration) {
        let reviewed = self.reviewed.swap(0, Ordering::Relaxed);
        let malformed = self.malformed.swap(0, Ordering::Relaxed);
        if reviewed + malformed == 0 {
            return;
        }
        let last_denial = self
            .last_denial
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        info!(
            interval_s = interval.as_secs_f64(),
            reviewed,
            patched = self.patched.swap(0, Ordering::Relaxed),
            denied = self.denied.swap(0, Ordering::Relaxed),
            malformed,
            last_denial,
            "admission summary"
        );
    }
}
