//! Each connection's activity, for the watchdog in `conn.rs` and for
//! eviction at the connection cap: when its requests started and ended,
//! its answers waiting ([`Outbox`]) and its socket's waiting writes, and
//! the open connections, scanned for the one idle the longest.

use crate::server::answer::Outbox;
use crate::server::metered::WriteStall;
use crate::server::metrics::Metrics;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// One connection's requests, for the watchdog and for eviction at the cap.
pub(super) struct Activity {
    /// When the connection was accepted.
    pub(super) epoch: Instant,
    pub(super) started: AtomicU64,
    pub(super) in_flight: AtomicUsize,
    /// Microseconds after `epoch` when the last request finished (fine
    /// enough to order connections answered one after another).
    pub(super) last_done_us: AtomicU64,
    pub(super) first: Notify,
    /// Cancelled when a new connection at the cap takes this one's slot.
    pub(super) evict: CancellationToken,
    /// Answers not yet taken by hyper.
    pub(super) outbox: Arc<Outbox>,
    /// A write waiting for the client to read.
    pub(super) stall: Arc<WriteStall>,
}

impl Activity {
    pub(super) fn new(metrics: Arc<Metrics>) -> Self {
        let epoch = Instant::now();
        Self {
            epoch,
            started: AtomicU64::new(0),
            in_flight: AtomicUsize::new(0),
            last_done_us: AtomicU64::new(0),
            first: Notify::new(),
            evict: CancellationToken::new(),
            outbox: Arc::new(Outbox::new(metrics)),
            stall: Arc::new(WriteStall::new(epoch)),
        }
    }

    /// Since when the client has taken nothing it was sent: an answer
    /// waiting with no chunk taken, or a write waiting for the socket.
    pub(super) fn stalled_since(&self) -> Option<Instant> {
        let waiting = (self.outbox.bytes() > 0).then(|| self.outbox.last_progress());
        match (waiting, self.stall.since()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Since when no request has been in flight (the accept if none
    /// finished yet); `None` while one is.
    pub(super) fn idle_since(&self) -> Option<Instant> {
        let last_done = Duration::from_micros(self.last_done_us.load(Ordering::Relaxed));
        // SeqCst, with `Busy::drop` and `Open::waiting`: a request that
        // ends during a scan at the cap is seen idle or wakes the scanner.
        (self.in_flight.load(Ordering::SeqCst) == 0).then(|| self.epoch + last_done)
    }
}

/// Held while a request is being answered, however that ends (a reset
/// stream drops it unpolled).
pub(super) struct Busy(pub(super) Arc<Activity>, pub(super) Arc<Open>);

impl Drop for Busy {
    fn drop(&mut self) {
        let us = self.0.epoch.elapsed().as_micros() as u64;
        self.0.last_done_us.store(us, Ordering::Relaxed);
        if self.0.in_flight.fetch_sub(1, Ordering::SeqCst) == 1 && self.1.waiting() {
            self.1.became_idle.notify_waiters();
        }
    }
}

/// The open connections, so that a new one at the cap can take the slot of
/// the one idle the longest. A scan of at most `--max-connections` entries,
/// only at the cap: cheaper than keeping them ordered on every request.
#[derive(Default)]
pub(super) struct Open {
    pub(super) next_id: AtomicU64,
    pub(super) connections: Mutex<HashMap<u64, Arc<Activity>>>,
    /// How many new connections wait at the cap for one to become idle.
    pub(super) waiting: AtomicUsize,
    pub(super) became_idle: Notify,
}

impl Open {
    pub(super) fn waiting(&self) -> bool {
        self.waiting.load(Ordering::SeqCst) > 0
    }

    /// Lists a connection until the returned guard drops.
    pub(super) fn enter(self: &Arc<Self>, metrics: &Arc<Metrics>) -> (Arc<Activity>, Listed) {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let activity = Arc::new(Activity::new(metrics.clone()));
        let mut connections = self
            .connections
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        connections.insert(id, activity.clone());
        (activity, Listed(self.clone(), id))
    }

    /// Tells the connection idle the longest, not yet told, to close;
    /// false when every connection has a request in flight or is closing.
    pub(super) fn evict_longest_idle(&self) -> bool {
        let connections = self
            .connections
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let idlest = (connections.values())
            .filter(|a| !a.evict.is_cancelled())
            .filter_map(|a| a.idle_since().map(|since| (since, a)))
            .min_by_key(|(since, _)| *since);
        match idlest {
            Some((_, activity)) => {
                activity.evict.cancel();
                true
            }
            None => false,
        }
    }
}

/// A connection's entry in [`Open`], removed on drop.
pub(super) struct Listed(Arc<Open>, u64);

impl Drop for Listed {
    fn drop(&mut self) {
        let mut connections = (self.0.connections.lock()).unwrap_or_else(PoisonError::into_inner);
        connections.remove(&self.1);
    }
}
