//! The webhook listener and its connections: an accept loop capped at
//! `--max-connections` (`listener.rs`), and per connection a TLS handshake
//! under a deadline and hyper-util's auto builder (pinned to the protocol
//! ALPN chose, so a silent client cannot park in version sniffing) serving
//! the webhook's [`WebhookService`] (`connection.rs`; no axum router: axum
//! serves only the admin port), with a watchdog for what hyper does not
//! bound: the first request (HTTP/2 preface + HEADERS), idleness, writes
//! the client does not take, and the drain (`watchdog.rs`). Each connection
//! has its share of the requests in flight (`--http2-max-concurrent-streams`,
//! which h2 enforces) and of the bytes held (`webhook/share.rs`), and its
//! activity (`activity.rs`). The cap is shared fairly between client
//! addresses (`fair.rs`): at the cap, a new connection takes the slot of a
//! connection of the address holding the most, or is refused at once when
//! its own address holds as many as any other; within an address, the one
//! closed is the least productive (one that never completed a review, the
//! first accepted first, else the one whose last review is the oldest;
//! requests in flight, stalled or not, do not count), which is closed
//! gracefully at once: its requests still waiting for their bodies are
//! answered 503, the others finish, and whatever is left after
//! [`CLOSE_GRACE`] is cut ([`activity::Open`]). Connections that have sent
//! no request yet give up their slots after [`SILENT_AT_CAP`]. So clients
//! that hold connections (silent, idle, or busy with promises) cannot keep
//! real ones (the API server) waiting, a connection that keeps completing
//! reviews is never the one closed while one of its address that does not
//! exists, and no client's connections, however busy, close those of a
//! client that holds fewer.

pub(crate) mod backoff;
pub(crate) mod fair;

mod activity;
mod connection;
mod listener;
mod metered;
mod watchdog;

use super::metrics::Metrics;
use super::tls::Tls;
use super::webhook::reply::CHUNK;
use super::webhook::WebhookService;
use crate::server::args::LimitFlags;
use activity::Open;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use hyper_util::server::conn::auto;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

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

/// HTTP/2 flow-control window for what clients send (connection and stream).
const RECEIVE_WINDOW: u32 = 64 * 1024;

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
        limits: &LimitFlags,
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
}
