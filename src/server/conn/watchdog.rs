//! The watchdog of one connection, for what hyper does not bound: the
//! first request (due [`Webhook`]'s first-request timeout after the
//! handshake, sooner at the cap), idleness, a client that takes nothing it
//! is sent (`--write-timeout`), eviction for a newcomer at the cap, and the
//! drain (GOAWAY or `Connection: close`, then the close).

use super::activity::{Activity, OutboxWatch};
use super::{Shutdown, Webhook, CLOSE_GRACE, SILENT_AT_CAP};
use hyper::body::{Body, Incoming};
use hyper::service::HttpService;
use hyper_util::server::conn::auto::{self, HttpServerConnExec};
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::time::Instant;
use tracing::debug;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A connection hyper serves, told to finish what it has and close.
pub(super) trait Graceful {
    fn graceful_shutdown(self: Pin<&mut Self>);
}

impl<I, S, E, B> Graceful for auto::Connection<'_, I, S, E>
where
    S: HttpService<Incoming, ResBody = B>,
    S::Error: Into<BoxError>,
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    B: Body + 'static,
    B::Error: Into<BoxError>,
    E: HttpServerConnExec<S::Future, B>,
{
    fn graceful_shutdown(self: Pin<&mut Self>) {
        auto::Connection::graceful_shutdown(self);
    }
}

impl Webhook {
    /// Runs `conn` until it ends or a deadline of the module comment
    /// closes it; `epoch` is the end of its handshake.
    pub(super) async fn watch<C>(
        &self,
        conn: C,
        h2: bool,
        epoch: Instant,
        peer: SocketAddr,
        activity: &Activity,
    ) where
        C: Graceful + Future<Output = Result<(), BoxError>>,
    {
        tokio::pin!(conn);
        let Shutdown {
            drain, close, kill, ..
        } = &self.shutdown;
        let (mut graceful, mut close_by) = (false, None);
        // Once evicted: when the connection is closed, whatever its client
        // or its requests still do.
        let mut evicted_by: Option<Instant> = None;
        let mut outbox = OutboxWatch::default();
        loop {
            let started = activity.started.load(Ordering::Relaxed) > 0;
            // Never before the first request: hyper would close a connection
            // it has read nothing from, dropping a request still in the socket.
            let told = close.is_cancelled() || (h2 && drain.is_cancelled());
            if told && started && !graceful {
                conn.as_mut().graceful_shutdown();
                graceful = true;
            }
            let first = epoch + self.first_request_timeout;
            let deadline = match activity.idle_since() {
                _ if !started => close_by.map_or(first, |by: Instant| by.min(first)),
                Some(since) => since + self.idle_timeout,
                None => Instant::now() + self.idle_timeout,
            };
            let deadline = evicted_by.map_or(deadline, |by| by.min(deadline));
            // A client that stopped reading is looked for at least every
            // --write-timeout (an answer queued since the last look is seen
            // at the next), so it is closed within twice that.
            let deadline = match stalled_since(&mut outbox, activity) {
                Some(since) => deadline.min(since + self.write_timeout),
                None if started => deadline.min(Instant::now() + self.write_timeout),
                None => deadline,
            };
            tokio::select! {
                biased;
                result = conn.as_mut() => {
                    if let Err(e) = result {
                        debug!(%peer, error = %e, "connection closed with an error");
                    }
                    return;
                }
                _ = kill.cancelled() => return,
                // A connection that has sent nothing yet gets a moment for
                // the request it may be sending, then is closed.
                _ = close.cancelled(), if close_by.is_none() => {
                    close_by = Some(Instant::now() + CLOSE_GRACE);
                }
                _ = drain.cancelled(), if h2 && !graceful && started => {}
                _ = activity.first.notified(), if !started => {}
                _ = activity.share.evict.cancelled(), if evicted_by.is_none() => {
                    if !started {
                        debug!(%peer, "closed before its first request for a new connection at the cap");
                        return;
                    }
                    // Hyper closes an idle HTTP/1 connection at once (a busy
                    // one after its answer) and sends HTTP/2 GOAWAY; requests
                    // still waiting for their bodies are answered 503 by
                    // their readers, the others are answered.
                    if !graceful {
                        conn.as_mut().graceful_shutdown();
                        graceful = true;
                    }
                    evicted_by = Some(Instant::now() + CLOSE_GRACE);
                }
                _ = self.at_cap.notified(), if !started => {
                    let by = Instant::now().max(epoch + SILENT_AT_CAP);
                    close_by = Some(close_by.map_or(by, |earlier: Instant| earlier.min(by)));
                }
                _ = tokio::time::sleep_until(deadline.into()) => {
                    let stalled = stalled_since(&mut outbox, activity);
                    if stalled.is_some_and(|since| since.elapsed() >= self.write_timeout) {
                        // Not gracefully: a graceful close would wait for
                        // the very answers the client does not read.
                        self.metrics.connection_deadlines.inc();
                        self.metrics.write_timeouts.inc();
                        debug!(%peer, "closed: the client read nothing it was sent for --write-timeout");
                        return;
                    }
                    if activity.started.load(Ordering::Relaxed) == 0 {
                        // No preface or request head in time: there is nothing to drain.
                        self.metrics.connection_deadlines.inc();
                        debug!(%peer, "no request in time (first-request timeout, or silent at the cap)");
                        return;
                    }
                    let idle = activity.idle_since();
                    if evicted_by.is_some_and(|by| Instant::now() >= by) {
                        debug!(%peer, "closed for a new connection at the cap");
                        return;
                    }
                    if idle.is_some_and(|since| since.elapsed() >= self.idle_timeout) {
                        if graceful {
                            return;
                        }
                        self.metrics.connection_deadlines.inc();
                        conn.as_mut().graceful_shutdown();
                        graceful = true;
                    }
                }
            }
        }
    }
}

/// Since when the client has taken nothing it was sent: answers waiting
/// with no chunk taken (as `watch` last saw them), or a write waiting for
/// the socket.
fn stalled_since(watch: &mut OutboxWatch, activity: &Activity) -> Option<Instant> {
    match (watch.look(&activity.outbox), activity.stall.since()) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}
