//! The webhook listener: an accept loop capped at `--max-connections`, and
//! per connection a TLS handshake under a deadline, hyper-util's auto
//! builder (pinned to the protocol ALPN chose, so a silent client cannot park
//! in version sniffing) serving the webhook's [`WebhookService`] (no axum
//! router: axum serves only the admin port), and a watchdog for what
//! hyper does not bound: the first request (HTTP/2 preface + HEADERS),
//! idleness, and the drain. Each connection has its share of the requests
//! in flight (`--http2-max-concurrent-streams`, which h2 enforces) and of
//! the bytes held (`share.rs`). The cap is shared fairly between client
//! addresses (`fair.rs`): at the cap, a new connection takes the slot of a
//! connection of the address holding the most, or is refused at once when
//! its own address holds as many as any other; within an address, the one
//! closed is the least productive (one that never completed a review, the
//! first accepted first, else the one whose last review is the oldest; requests
//! in flight, stalled or not, do not count), which is closed gracefully at
//! once: its requests still waiting for their bodies are
//! answered 503, the others finish, and whatever is left after
//! [`CLOSE_GRACE`] is cut ([`Open`]). Connections that have sent no request
//! yet give up their slots after [`SILENT_AT_CAP`]. So clients that hold
//! connections (silent, idle, or busy with promises) cannot keep real ones
//! (the API server) waiting, a connection that keeps completing reviews
//! is never the one closed while one of its address that does not exists,
//! and no client's connections, however busy, close those of a client
//! that holds fewer.

use super::accept::Backoff;
use super::answer::CHUNK;
use super::metered::Metered;
use super::metrics::{Metrics, WEBHOOK};
use super::service::WebhookService;
use super::tls::Tls;
use crate::server::settings::LimitSettings;
use activity::{Activity, Busy, Eviction, Listed, Open, OutboxWatch};
use axum::http::header::CONNECTION;
use axum::http::{HeaderValue, Request, StatusCode, Version};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use std::io::ErrorKind;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{debug, warn};

/// After the listener closes, how long a connection that has not sent its
/// first request yet is kept for it; after an eviction, how long the
/// connection's requests get to finish.
const CLOSE_GRACE: Duration = Duration::from_secs(1);

/// At the connection cap, how long a connection may stay without sending a
/// request: a real client sends its first one right after the handshake.
const SILENT_AT_CAP: Duration = Duration::from_secs(1);

/// What hyper's HTTP/1 side buffers, reading a request head or writing an
/// answer (its floor is 8 KiB).
const HTTP1_BUFFER: usize = 16 * 1024;

/// Answers one connection may have waiting for its client to read; a new
/// request beyond them (or beyond `--max-connection-buffered-bytes`) is
/// refused unread. The API server reads its answers at once: it has none
/// waiting for long. (Over HTTP/2 a connection has no more streams than
/// `--http2-max-concurrent-streams`, 8 by default, anyway.)
pub(crate) const ANSWERS_WAITING: usize = 8;

/// The kernel's send buffer per connection (it doubles what is set).
const SOCKET_SEND_BUFFER: usize = 64 * 1024;

/// HTTP/2 flow-control window for what clients send (connection and stream).
const RECEIVE_WINDOW: u32 = 64 * 1024;

/// What rustls holds of encrypted output not yet taken by the socket.
const TLS_SEND_BUFFER: usize = 16 * 1024;

/// The connection-limit and accept-failure warnings come at most this often.
const THROTTLE: Duration = Duration::from_secs(10);

/// The shutdown tree, one `CancellationToken` per stage. Cancelling a stage
/// cancels the ones under it: `kill` ⊃ `close` ⊃ `drain`.
#[derive(Debug, Clone)]
pub(crate) struct Shutdown {
    /// SIGTERM: readiness fails; HTTP/1 responses carry `Connection: close`
    /// and HTTP/2 connections get GOAWAY after their first request.
    pub drain: CancellationToken,
    /// End of `--shutdown-delay`: the listener closes, every connection
    /// finishes what it has in flight and closes.
    pub close: CancellationToken,
    /// End of `--drain-timeout`: what is still open is dropped, background
    /// tasks stop.
    pub kill: CancellationToken,
    /// The background tasks (reloaders, the log summary): they run until
    /// `kill`, and the shutdown waits for them.
    pub background: TaskTracker,
}

impl Shutdown {
    pub(crate) fn new() -> Self {
        let kill = CancellationToken::new();
        let (close, background) = (kill.child_token(), TaskTracker::new());
        let drain = close.child_token();
        Self {
            drain,
            close,
            kill,
            background,
        }
    }
}

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

pub(crate) struct Webhook {
    pub tls: Arc<Tls>,
    pub router: WebhookService,
    pub metrics: Arc<Metrics>,
    pub shutdown: Shutdown,
    h1: auto::Builder<TokioExecutor>,
    h2: auto::Builder<TokioExecutor>,
    handshake_timeout: Duration,
    first_request_timeout: Duration,
    idle_timeout: Duration,
    write_timeout: Duration,
    /// Answer bytes one connection may have waiting before its new requests
    /// are refused.
    connection_budget: usize,
    /// Told whenever the accept loop waits at the connection cap.
    at_cap: Notify,
    open: Arc<Open>,
}

impl Webhook {
    pub(crate) fn new(
        limits: &LimitSettings,
        tls: Arc<Tls>,
        router: WebhookService,
        metrics: &Arc<Metrics>,
        shutdown: &Shutdown,
    ) -> Self {
        let mut builder = auto::Builder::new(TokioExecutor::new());
        builder
            .http1()
            .timer(TokioTimer::new())
            .header_read_timeout(limits.header_read_timeout)
            .max_headers(100)
            // Bounds what hyper holds for a client that does not read (and
            // the request head it may read).
            .max_buf_size(HTTP1_BUFFER);
        // The limits that came with the rapid-reset fixes: a client that
        // keeps opening and cancelling streams gets a GOAWAY, not free work.
        builder
            .http2()
            .timer(TokioTimer::new())
            .max_concurrent_streams(limits.http2_max_concurrent_streams)
            .max_pending_accept_reset_streams(20)
            .max_local_error_reset_streams(256)
            .max_header_list_size(64 * 1024)
            // A stream is handed its next chunk only while what it holds
            // fits in the window its client granted and in two chunks (see
            // answer.rs): what h2 holds once an answer stops being counted
            // is on its way to the socket, never held back by the client.
            .max_send_buf_size(2 * CHUNK)
            // What a client may send ahead of what the server has read: per
            // connection, all of it may sit in memory (docs/operations.md,
            // "Memory"). HTTP/2's own default, where hyper's is 1 MiB.
            .initial_connection_window_size(RECEIVE_WINDOW)
            .initial_stream_window_size(RECEIVE_WINDOW)
            .keep_alive_interval(Duration::from_secs(30))
            .keep_alive_timeout(Duration::from_secs(10));
        Self {
            tls,
            router,
            metrics: metrics.clone(),
            shutdown: shutdown.clone(),
            h1: builder.clone().http1_only(),
            h2: builder.http2_only(),
            handshake_timeout: limits.handshake_timeout,
            first_request_timeout: limits.first_request_timeout,
            idle_timeout: limits.idle_timeout,
            write_timeout: limits.write_timeout,
            connection_budget: limits.max_connection_buffered_bytes,
            at_cap: Notify::new(),
            open: Arc::default(),
        }
    }

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

    async fn serve(
        self: Arc<Self>,
        tcp: TcpStream,
        peer: SocketAddr,
        slot: OwnedSemaphorePermit,
        (activity, listed): (Arc<Activity>, Listed),
    ) {
        self.metrics.open_connections.inc();
        let accepted = activity.epoch;
        let mut deadline = accepted + self.handshake_timeout;
        let handshake = TlsAcceptor::from(self.tls.config.load_full()).accept(tcp);
        tokio::pin!(handshake);
        let tls = loop {
            tokio::select! {
                _ = self.shutdown.kill.cancelled() => break None,
                _ = activity.share.evict.cancelled() => {
                    debug!(%peer, "closed in the TLS handshake for a new connection at the cap");
                    break None;
                }
                result = &mut handshake => match result {
                    Ok(tls) => break Some(tls),
                    Err(e) => {
                        self.metrics.tls_handshake_errors.inc();
                        debug!(%peer, error = %e, "TLS handshake failed");
                        break None;
                    }
                },
                _ = self.at_cap.notified() => {
                    deadline = deadline.min(Instant::now().max(accepted + SILENT_AT_CAP));
                }
                _ = tokio::time::sleep_until(deadline.into()) => {
                    self.metrics.tls_handshake_errors.inc();
                    self.metrics.connection_deadlines.inc();
                    debug!(%peer, "TLS handshake timed out");
                    break None;
                }
            }
        };
        if let Some(mut tls) = tls {
            activity.handshaken.store(true, Ordering::Relaxed);
            let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
            tls.get_mut().1.set_buffer_limit(Some(TLS_SEND_BUFFER));
            let io = TokioIo::new(Metered::new(tls, activity.stall.clone()));
            self.run(io, h2, peer, activity).await;
        }
        drop(listed);
        self.metrics.open_connections.dec();
        drop(slot);
    }

    async fn run<I>(&self, io: I, h2: bool, peer: SocketAddr, activity: Arc<Activity>)
    where
        I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    {
        // The first request is due this long after the handshake, not the accept.
        let epoch = Instant::now();
        let (router, seen, drain) = (
            self.router.clone(),
            activity.clone(),
            self.shutdown.drain.clone(),
        );
        let budget = self.connection_budget;
        let service = hyper::service::service_fn(move |req: Request<Incoming>| {
            if seen.started.fetch_add(1, Ordering::Relaxed) == 0 {
                seen.first.notify_one();
            }
            let outbox = seen.outbox.clone();
            let unread = outbox.bytes() >= budget || outbox.answers() >= ANSWERS_WAITING;
            // An HTTP/2 stream refused unread costs nothing once reset, and
            // REFUSED_STREAM tells the client (Go's HTTP/2 client among
            // them) that the request was not processed and may be retried.
            seen.in_flight.fetch_add(1, Ordering::Relaxed);
            let (mut busy, drain) = (Busy(seen.clone(), false), drain.clone());
            let call = match (unread, h2) {
                (true, true) => {
                    outbox.shed();
                    None
                }
                (true, false) => Some(router.refuse_unread(req)),
                (false, _) => Some(router.answer(req, Some(seen.share.clone()))),
            };
            async move {
                let Some(call) = call else {
                    drop(busy);
                    return Err(h2::Error::from(h2::Reason::REFUSED_STREAM));
                };
                let mut response = call.await;
                // A review answered is what makes a connection productive.
                busy.1 = response.status() == StatusCode::OK;
                drop(busy);
                if h2 {
                    response.body_mut().last_byte_alone();
                }
                response.body_mut().queue_in(&outbox);
                if response.version() != Version::HTTP_2 && drain.is_cancelled() {
                    // The client learns now, while we still answer, to take
                    // its next request to another replica.
                    let close = HeaderValue::from_static("close");
                    response.headers_mut().insert(CONNECTION, close);
                }
                Ok::<_, h2::Error>(response)
            }
        });
        let builder = if h2 { &self.h2 } else { &self.h1 };
        let conn = builder.serve_connection(io, service);
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
            let deadline = match stalled_since(&mut outbox, &activity) {
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
                    let stalled = stalled_since(&mut outbox, &activity);
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

mod activity;
