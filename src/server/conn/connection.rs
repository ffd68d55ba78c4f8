//! One connection: its TLS handshake under a deadline, then hyper serving
//! the webhook on it, each request counted in the connection's activity and
//! refused unread while its client has too many replies waiting; the
//! watchdog (`watchdog.rs`) closes it.

use super::activity::{Activity, Busy, Listed};
use super::metered::Metered;
use super::{Webhook, SILENT_AT_CAP};
use axum::http::header::CONNECTION;
use axum::http::{HeaderValue, Request, StatusCode, Version};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;
use tokio::net::TcpStream;
use tokio::sync::OwnedSemaphorePermit;
use tokio_rustls::TlsAcceptor;
use tracing::debug;

/// Answers one connection may have waiting for its client to read; a new
/// request beyond them (or beyond `--max-connection-buffered-bytes`) is
/// refused unread. The API server reads its answers at once: it has none
/// waiting for long. (Over HTTP/2 a connection has no more streams than
/// `--http2-max-concurrent-streams`, 8 by default, anyway.)
pub(crate) const ANSWERS_WAITING: usize = 8;

/// What rustls holds of encrypted output not yet taken by the socket.
const TLS_SEND_BUFFER: usize = 16 * 1024;

impl Webhook {
    pub(super) async fn serve(
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
                (false, _) => Some(router.reply(req, Some(seen.share.clone()))),
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
        self.watch(conn, h2, epoch, peer, &activity).await;
    }
}
