//! The accept loop: at most `--max-connections` connections at once, the
//! cap shared fairly between client addresses (`fair.rs`), accept failures
//! (out of descriptors) paced by a backoff instead of a spin.

use super::activity::{Activity, Eviction};
use super::backoff::Backoff;
use super::Webhook;
use crate::server::metrics::WEBHOOK;
use std::io::ErrorKind;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::task::TaskTracker;
use tracing::{debug, warn};

/// The kernel's send buffer per connection (it doubles what is set).
const SOCKET_SEND_BUFFER: usize = 64 * 1024;

/// The connection-limit and accept-failure warnings come at most this often.
const THROTTLE: Duration = Duration::from_secs(10);

/// What a connection accepted at the cap gets.
enum AtCap {
    Slot(OwnedSemaphorePermit),
    /// Its own address holds the most: it is closed at once.
    Refused,
    /// The listener is closing.
    Closing,
}

/// Logs at most once per `THROTTLE`, with how many were held back.
#[derive(Default)]
struct Throttle(Option<Instant>, u64);

impl Throttle {
    fn warn(&mut self, message: &str, error: &dyn std::fmt::Display) {
        if self.0.is_some_and(|t| t.elapsed() < THROTTLE) {
            self.1 += 1;
            return;
        }
        warn!(error = %error, suppressed = self.1, "{message}");
        *self = Self(Some(Instant::now()), 0);
    }
}

impl Webhook {
    /// Accepts until `close`, at most `max` connections at once, then drops
    /// the listening socket so new connections are refused. At the cap, a
    /// new connection takes the slot of the least productive connection,
    /// which is told to close (and does at once, or within [`CLOSE_GRACE`]).
    /// Connections run on `tracker`.
    pub(crate) async fn accept_loop(
        self: Arc<Self>,
        listener: TcpListener,
        max: usize,
        tracker: TaskTracker,
    ) {
        let slots = Arc::new(Semaphore::new(max));
        let close = self.shutdown.close.clone();
        let mut throttle = Throttle::default();
        let mut backoff = Backoff::default();
        loop {
            let accepted = tokio::select! {
                biased;
                _ = close.cancelled() => break,
                accepted = listener.accept() => accepted,
            };
            let tcp = match accepted {
                Ok((tcp, peer)) => (tcp, peer),
                Err(e) if matches!(e.kind(), ErrorKind::ConnectionAborted) => continue,
                Err(e) => {
                    // Typically out of file descriptors: pause, longer each
                    // time, instead of spinning; the connections open are
                    // served meanwhile on their own tasks.
                    self.metrics.accept_error(WEBHOOK, &e);
                    throttle.warn("accept failed", &e);
                    let pause = backoff.next();
                    tokio::select! {
                        biased;
                        _ = close.cancelled() => break,
                        _ = tokio::time::sleep(pause) => continue,
                    }
                }
            };
            backoff.reset();
            let (tcp, peer) = tcp;
            // Listed now, not when its task first runs: a connection
            // accepted next at the cap must find every one it may evict,
            // and this one is among those the cap's share may refuse.
            let listed = self.open.enter(&self.metrics, peer.ip());
            let slot = match slots.clone().try_acquire_owned() {
                Ok(slot) => slot,
                Err(_) => {
                    let message = "connection limit reached: closing, for each new connection, one of the address holding the most";
                    throttle.warn(message, &max);
                    self.at_cap.notify_waiters();
                    match self.slot_at_cap(&slots, &listed.0).await {
                        AtCap::Slot(slot) => slot,
                        AtCap::Refused => {
                            self.metrics.connections_refused.inc();
                            debug!(%peer, "refused at the cap: its address holds the most connections");
                            continue;
                        }
                        AtCap::Closing => break,
                    }
                }
            };
            // Admission answers are single small writes; Nagle would only delay them.
            let _ = tcp.set_nodelay(true);
            // A fixed send buffer rather than one the kernel grows to
            // megabytes for a client that does not read: cgroup v2 charges
            // socket buffers to the container (docs/operations.md, "Memory").
            let _ = rustix::net::sockopt::set_socket_send_buffer_size(&tcp, SOCKET_SEND_BUFFER);
            tracker.spawn(self.clone().serve(tcp, peer, slot, listed));
        }
    }

    /// A slot for `newcomer`, accepted at the cap: the connection
    /// `fair::victim` chooses is told to close, and its slot taken once it
    /// has (while every connection is closing already, the first slot
    /// given back); or the newcomer is the one chosen, and refused.
    async fn slot_at_cap(&self, slots: &Arc<Semaphore>, newcomer: &Arc<Activity>) -> AtCap {
        match self.open.evict_for(newcomer) {
            Eviction::Other => {
                self.metrics.connection_evictions.inc();
            }
            Eviction::Newcomer => return AtCap::Refused,
            Eviction::None => {}
        }
        tokio::select! {
            biased;
            _ = self.shutdown.close.cancelled() => AtCap::Closing,
            slot = slots.clone().acquire_owned() => slot.map_or(AtCap::Closing, AtCap::Slot),
        }
    }
}
