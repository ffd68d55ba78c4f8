//! Each connection's activity, for the watchdog (`watchdog.rs`) and for
//! eviction at the connection cap: when its requests started and ended,
//! when it last completed a review, its answers waiting ([`Outbox`]) and
//! its socket's waiting writes, its share ([`Share`]), and the open
//! connections, scanned for the least productive one.

use super::fair::Holder;
use super::metered::WriteStall;
use crate::server::metrics::Metrics;
use crate::server::webhook::reply::Outbox;
use crate::server::webhook::share::Share;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// One connection's requests, for the watchdog and for eviction at the cap.
pub(super) struct Activity {
    /// When the connection was accepted.
    pub(super) epoch: Instant,
    /// Its client's address: the cap is shared fairly between addresses.
    pub(super) peer: IpAddr,
    pub(super) started: AtomicU64,
    pub(super) in_flight: AtomicUsize,
    /// Microseconds after `epoch` when the last request finished (fine
    /// enough to order connections answered one after another).
    pub(super) last_done_us: AtomicU64,
    /// Microseconds after `epoch`, plus one, when the last review was
    /// answered (200); 0 while none was.
    pub(super) last_review_us: AtomicU64,
    pub(super) first: Notify,
    /// Whether its TLS handshake is done.
    pub(super) handshaken: AtomicBool,
    /// Its bytes, and the token a new connection at the cap cancels to take
    /// its slot.
    pub(super) share: Arc<Share>,
    /// Answers not yet taken by hyper.
    pub(super) outbox: Arc<Outbox>,
    /// A write waiting for the client to read.
    pub(super) stall: Arc<WriteStall>,
}

impl Activity {
    pub(super) fn new(metrics: Arc<Metrics>, peer: IpAddr) -> Self {
        let epoch = Instant::now();
        Self {
            epoch,
            peer,
            started: AtomicU64::new(0),
            in_flight: AtomicUsize::new(0),
            last_done_us: AtomicU64::new(0),
            last_review_us: AtomicU64::new(0),
            first: Notify::new(),
            handshaken: AtomicBool::new(false),
            share: Arc::default(),
            outbox: Arc::new(Outbox::new(metrics)),
            stall: Arc::new(WriteStall::new(epoch)),
        }
    }

    /// Since when no request has been in flight (the accept if none
    /// finished yet); `None` while one is.
    pub(super) fn idle_since(&self) -> Option<Instant> {
        let last_done = Duration::from_micros(self.last_done_us.load(Ordering::Relaxed));
        (self.in_flight.load(Ordering::SeqCst) == 0).then(|| self.epoch + last_done)
    }

    /// How productive the connection is, least first (compared only with
    /// connections of its own address, `fair.rs`): one that completed no
    /// review in the last [`RECENT`] before one that did; of those, first
    /// the ones past their handshake with no request in flight (silent,
    /// idle, or whose requests all failed), then the others (in their
    /// handshake, or with a request in flight, which its body's pace bounds
    /// to about a second); then one that never completed a review before
    /// one that did, the one whose last review is the oldest first; then
    /// the first accepted. So a new client's first review is not cut for
    /// connections of its address that only sit there or reconnect (a
    /// flood's connections are the newest, and youngest first would close
    /// a new client's connection at the flood's next arrival), and requests
    /// in flight never protect a connection from one that keeps completing
    /// reviews: a stalled stream is a promise, not progress.
    pub(super) fn productivity(&self, now: Instant) -> Productivity {
        let since = match self.last_review_us.load(Ordering::Relaxed) {
            0 => None,
            us => Some(self.epoch + Duration::from_micros(us - 1)),
        };
        let recent = since.is_some_and(|at| now.saturating_duration_since(at) < RECENT);
        let silent =
            self.handshaken.load(Ordering::Relaxed) && self.in_flight.load(Ordering::Relaxed) == 0;
        (recent, recent || !silent, since, self.epoch)
    }
}

/// See [`Activity::productivity`]; less is less productive.
pub(super) type Productivity = (bool, bool, Option<Instant>, Instant);

/// How long a completed review keeps a connection productive: the API
/// server's connections review every few seconds while pods are created.
const RECENT: Duration = Duration::from_secs(10);

/// Held while a request is being answered, however that ends (a reset
/// stream drops it unpolled); `1` is whether it was a review answered.
pub(super) struct Busy(pub(super) Arc<Activity>, pub(super) bool);

impl Drop for Busy {
    fn drop(&mut self) {
        let us = self.0.epoch.elapsed().as_micros() as u64;
        self.0.last_done_us.store(us, Ordering::Relaxed);
        if self.1 {
            self.0.last_review_us.store(us + 1, Ordering::Relaxed);
        }
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Watches a connection's outbox for answers that wait while their client
/// takes none of them: looked at by the watchdog at least every
/// `--write-timeout`, it says since when (to within one look) the outbox has
/// had answers waiting with no progress.
#[derive(Default)]
pub(super) struct OutboxWatch {
    progress: u64,
    since: Option<Instant>,
}

impl OutboxWatch {
    pub(super) fn look(&mut self, outbox: &Outbox) -> Option<Instant> {
        let progress = outbox.progress();
        if outbox.bytes() == 0 {
            self.since = None;
        } else if progress != self.progress || self.since.is_none() {
            self.since = Some(Instant::now());
        }
        self.progress = progress;
        self.since
    }
}

/// The open connections, so that a new one at the cap can take the slot of
/// the least productive one. A scan of at most `--max-connections` entries,
/// only at the cap: cheaper than keeping them ordered on every request.
#[derive(Default)]
pub(super) struct Open {
    pub(super) next_id: AtomicU64,
    pub(super) connections: Mutex<HashMap<u64, Arc<Activity>>>,
}

impl Open {
    /// Lists a connection until the returned guard drops.
    pub(super) fn enter(
        self: &Arc<Self>,
        metrics: &Arc<Metrics>,
        peer: IpAddr,
    ) -> (Arc<Activity>, Listed) {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let activity = Arc::new(Activity::new(metrics.clone(), peer));
        let mut connections = self
            .connections
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        connections.insert(id, activity.clone());
        (activity, Listed(self.clone(), id))
    }

    /// For `newcomer` (listed already) at the cap: tells the connection
    /// chosen by `fair::victim` among those not yet told to close (the
    /// newcomer included) to close, and says which it was.
    pub(super) fn evict_for(&self, newcomer: &Arc<Activity>) -> Eviction {
        let now = Instant::now();
        let connections = self
            .connections
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let open: Vec<&Arc<Activity>> = (connections.values())
            .filter(|a| !a.share.evict.is_cancelled())
            .collect();
        let ranked: Vec<_> = (open.iter())
            .map(|a| Holder {
                addr: a.peer,
                accepted: a.epoch,
                rank: a.productivity(now),
            })
            .collect();
        let Some(at) = open.iter().position(|a| Arc::ptr_eq(a, newcomer)) else {
            return Eviction::None;
        };
        match super::fair::victim(&ranked, at) {
            Some(i) if i == at => Eviction::Newcomer,
            Some(i) => {
                open[i].share.evict.cancel();
                Eviction::Other
            }
            None => Eviction::None,
        }
    }
}

/// What [`Open::evict_for`] did.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Eviction {
    /// Told another connection to close.
    Other,
    /// The newcomer is the one to go: it is refused.
    Newcomer,
    /// Every connection is closing already.
    None,
}

/// A connection's entry in [`Open`], removed on drop.
pub(super) struct Listed(Arc<Open>, u64);

impl Drop for Listed {
    fn drop(&mut self) {
        let mut connections = (self.0.connections.lock()).unwrap_or_else(PoisonError::into_inner);
        connections.remove(&self.1);
    }
}

#[cfg(test)]
mod tests;
