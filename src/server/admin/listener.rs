//! The admin listener (`/healthz`, `/readyz`, `/metrics`), a bounded server
//! of its own: kubelet's probes must be answered within their 1 s timeout
//! whatever anyone does to this port, and nothing sent to it may take the
//! memory or the file descriptors the webhook needs. It serves HTTP/1.1 only
//! (kubelet and Prometheus speak it) on its own thread and current-thread
//! runtime, with at most `limits::ADMIN_CONNECTIONS` connections, shared fairly
//! between client addresses as the webhook's are (`conn/fair.rs`): at the cap,
//! the connection closed for a newcomer is of the address holding the most,
//! the one that answered nothing or the longest ago first, then the first
//! accepted. A request head must come whole within [`HEAD_TIMEOUT`] of the
//! accept (or of its first byte, on a kept-alive connection) and in at most
//! [`MAX_HEAD`] bytes; a connection with no request for [`IDLE_TIMEOUT`] is
//! closed. One rendering of `/metrics` at a time: the runtime has one
//! thread and the encoding does not yield. Its memory is planned
//! (`sizing::cost::ADMIN_CONNECTION`).

use crate::server::conn::backoff::Backoff;
use crate::server::conn::fair;
use crate::server::limits::ADMIN_CONNECTIONS;
use crate::server::metrics::{Metrics, ADMIN};
use hyper::body::Incoming;
use hyper::Request;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::collections::HashMap;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceExt;
use tracing::{debug, warn};

/// A request head must have arrived whole this long after the accept, or
/// after its first byte on a connection kept alive: kubelet and Prometheus
/// send theirs in one write.
pub(crate) const HEAD_TIMEOUT: Duration = Duration::from_secs(2);

/// The bytes a request head may take (kubelet's and Prometheus' take a few
/// hundred); more before the head ends and the connection is closed.
pub(crate) const MAX_HEAD: usize = 4 * 1024;

/// A connection with no request this long after its last answer is closed
/// (Prometheus, scraping every 15 to 60 s, reconnects).
pub(crate) const IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// hyper's buffer for reading heads and writing answers: its floor.
const HTTP1_BUFFER: usize = 8 * 1024;

/// The kernel's buffers per admin connection (it doubles what is set): an
/// answer larger than this waits in hyper for the client to read it.
const SOCKET_SEND_BUFFER: usize = 16 * 1024;
const SOCKET_RECEIVE_BUFFER: usize = 8 * 1024;

/// How long a completed request keeps a connection productive.
const RECENT: Duration = Duration::from_secs(10);

/// The admin listener's warnings come at most this often.
const THROTTLE: Duration = Duration::from_secs(10);

/// One admin connection as the watchdog and eviction see it.
struct Conn {
    epoch: Instant,
    peer: IpAddr,
    /// Microseconds after `epoch`, plus one, when the current request
    /// head's first byte came (0: none yet since the last request).
    head_since_us: AtomicU64,
    /// Bytes read since the last request started (its head, so far).
    head_bytes: AtomicUsize,
    in_flight: AtomicUsize,
    answered: AtomicU64,
    /// Microseconds after `epoch` when the last request was answered.
    last_done_us: AtomicU64,
    /// A head over [`MAX_HEAD`] was refused.
    overlong: std::sync::atomic::AtomicBool,
    evict: CancellationToken,
    wake: Notify,
}

/// Less is less productive; see [`Conn::productivity`].
type Productivity = (bool, bool, Option<Instant>, Instant);

impl Conn {
    fn new(peer: IpAddr) -> Self {
        Self {
            epoch: Instant::now(),
            peer,
            head_since_us: AtomicU64::new(0),
            head_bytes: AtomicUsize::new(0),
            in_flight: AtomicUsize::new(0),
            answered: AtomicU64::new(0),
            last_done_us: AtomicU64::new(0),
            overlong: Default::default(),
            evict: CancellationToken::new(),
            wake: Notify::new(),
        }
    }

    fn micros(&self) -> u64 {
        self.epoch.elapsed().as_micros() as u64
    }

    fn last_done(&self) -> Option<Instant> {
        (self.answered.load(Ordering::Relaxed) > 0)
            .then(|| self.epoch + Duration::from_micros(self.last_done_us.load(Ordering::Relaxed)))
    }

    /// Least first: one that answered nothing in the last [`RECENT`]
    /// before one that did; then one with no request in flight; then one
    /// that never answered before one that did, the longest ago first;
    /// then the first accepted.
    fn productivity(&self, now: Instant) -> Productivity {
        let last = self.last_done();
        let recent = last.is_some_and(|at| now.saturating_duration_since(at) < RECENT);
        let busy = self.in_flight.load(Ordering::Relaxed) > 0;
        (recent, busy, last, self.epoch)
    }

    /// `n` bytes read from the client: while no request is in flight, of
    /// the next head, which must stay under [`MAX_HEAD`].
    fn read(&self, n: usize) -> io::Result<()> {
        if self.in_flight.load(Ordering::Relaxed) > 0 {
            return Ok(());
        }
        if self.head_since_us.load(Ordering::Relaxed) == 0 {
            self.head_since_us
                .store(self.micros() + 1, Ordering::Relaxed);
            self.wake.notify_one();
        }
        if self.head_bytes.fetch_add(n, Ordering::Relaxed) + n > MAX_HEAD {
            self.overlong.store(true, Ordering::Relaxed);
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "request head over the admin listener's limit",
            ));
        }
        Ok(())
    }

    fn started(&self) {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        self.head_since_us.store(0, Ordering::Relaxed);
        self.head_bytes.store(0, Ordering::Relaxed);
        self.wake.notify_one();
    }

    fn done(&self) {
        self.last_done_us.store(self.micros(), Ordering::Relaxed);
        self.answered.fetch_add(1, Ordering::Relaxed);
        self.in_flight.fetch_sub(1, Ordering::Relaxed);
        self.wake.notify_one();
    }

    /// When the connection is closed unless something happens first: its
    /// first head is due [`HEAD_TIMEOUT`] after the accept, a later one as
    /// long after its first byte; between requests, [`IDLE_TIMEOUT`] after
    /// the last answer. A request in flight (the handlers answer at once)
    /// is given the idle timeout.
    fn deadline(&self) -> Instant {
        let head = self.head_since_us.load(Ordering::Relaxed);
        if self.in_flight.load(Ordering::Relaxed) > 0 {
            Instant::now() + IDLE_TIMEOUT
        } else if head > 0 {
            self.epoch + Duration::from_micros(head - 1) + HEAD_TIMEOUT
        } else {
            match self.last_done() {
                Some(at) => at + IDLE_TIMEOUT,
                None => self.epoch + HEAD_TIMEOUT,
            }
        }
    }
}

/// The open admin connections, scanned at the cap.
#[derive(Default)]
struct Open {
    next_id: AtomicU64,
    connections: Mutex<HashMap<u64, Arc<Conn>>>,
}

/// A connection's entry in [`Open`], removed on drop.
struct Listed(Arc<Open>, u64);

impl Drop for Listed {
    fn drop(&mut self) {
        let mut connections = (self.0.connections.lock()).unwrap_or_else(PoisonError::into_inner);
        connections.remove(&self.1);
    }
}

impl Open {
    fn enter(self: &Arc<Self>, peer: IpAddr) -> (Arc<Conn>, Listed) {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let conn = Arc::new(Conn::new(peer));
        let mut connections = (self.connections.lock()).unwrap_or_else(PoisonError::into_inner);
        connections.insert(id, conn.clone());
        (conn, Listed(self.clone(), id))
    }

    /// At the cap: `Some(true)` when another connection was told to close,
    /// `Some(false)` when `newcomer` is the one to go, `None` when every
    /// other one is closing already.
    fn evict_for(&self, newcomer: &Arc<Conn>) -> Option<bool> {
        let now = Instant::now();
        let connections = (self.connections.lock()).unwrap_or_else(PoisonError::into_inner);
        let open: Vec<&Arc<Conn>> = (connections.values())
            .filter(|c| !c.evict.is_cancelled())
            .collect();
        let ranked: Vec<_> = (open.iter())
            .map(|c| fair::Holder {
                addr: c.peer,
                accepted: c.epoch,
                rank: c.productivity(now),
            })
            .collect();
        let at = open.iter().position(|c| Arc::ptr_eq(c, newcomer))?;
        let victim = fair::victim(&ranked, at)?;
        if victim == at {
            return Some(false);
        }
        open[victim].evict.cancel();
        Some(true)
    }
}

/// The socket, seen by the watchdog: what is read while no request is in
/// flight is a head, bounded in time and size.
struct Watched {
    tcp: TcpStream,
    conn: Arc<Conn>,
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.tcp).poll_read(cx, buf);
        let n = buf.filled().len() - before;
        match polled {
            Poll::Ready(Ok(())) if n > 0 => Poll::Ready(self.conn.read(n)),
            other => other,
        }
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.tcp).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_shutdown(cx)
    }
}

/// Serves `router` on `listener` until `stop`, then gives the connections
/// open `drain` to finish. Runs on the admin thread's runtime.
pub(crate) async fn serve(
    listener: TcpListener,
    router: axum::Router,
    metrics: Arc<Metrics>,
    stop: CancellationToken,
    drain: Duration,
) {
    let open = Arc::new(Open::default());
    let slots = Arc::new(Semaphore::new(ADMIN_CONNECTIONS));
    let tracker = TaskTracker::new();
    let (mut backoff, mut warned) = (Backoff::default(), None::<Instant>);
    loop {
        let accepted = tokio::select! {
            biased;
            _ = stop.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        let (tcp, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(e) if e.kind() == io::ErrorKind::ConnectionAborted => continue,
            Err(e) => {
                metrics.accept_error(ADMIN, &e);
                if warned.is_none_or(|at| at.elapsed() >= THROTTLE) {
                    warn!(error = %e, "admin listener: accept failed");
                    warned = Some(Instant::now());
                }
                tokio::select! {
                    biased;
                    _ = stop.cancelled() => break,
                    _ = tokio::time::sleep(backoff.next()) => continue,
                }
            }
        };
        backoff.reset();
        let (conn, listed) = open.enter(peer.ip());
        let slot = match slots.clone().try_acquire_owned() {
            Ok(slot) => slot,
            Err(_) => {
                match open.evict_for(&conn) {
                    Some(true) => {
                        metrics.admin_connection_evictions.inc();
                    }
                    Some(false) => {
                        metrics.admin_connections_refused.inc();
                        debug!(%peer, "admin connection refused at the cap: its address holds the most");
                        continue;
                    }
                    None => {}
                }
                tokio::select! {
                    biased;
                    _ = stop.cancelled() => break,
                    slot = slots.clone().acquire_owned() => match slot {
                        Ok(slot) => slot,
                        Err(_) => break,
                    },
                }
            }
        };
        let _ = rustix::net::sockopt::set_socket_send_buffer_size(&tcp, SOCKET_SEND_BUFFER);
        let _ = rustix::net::sockopt::set_socket_recv_buffer_size(&tcp, SOCKET_RECEIVE_BUFFER);
        let _ = tcp.set_nodelay(true);
        let task = connection(tcp, conn, router.clone(), metrics.clone(), stop.clone());
        tracker.spawn(async move {
            task.await;
            drop((listed, slot));
        });
    }
    drop(listener);
    tracker.close();
    let _ = tokio::time::timeout(drain, tracker.wait()).await;
}

/// One admin connection, until it ends, is evicted or misses a deadline.
async fn connection(
    tcp: TcpStream,
    conn: Arc<Conn>,
    router: axum::Router,
    metrics: Arc<Metrics>,
    stop: CancellationToken,
) {
    metrics.admin_open_connections.inc();
    let seen = conn.clone();
    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
        seen.started();
        let (router, seen) = (router.clone(), seen.clone());
        async move {
            let answer = router.oneshot(req).await;
            seen.done();
            answer
        }
    });
    let io = TokioIo::new(Watched {
        tcp,
        conn: conn.clone(),
    });
    let served = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        // hyper's own bound on a head, also between requests; the
        // watchdog's are shorter.
        .header_read_timeout(IDLE_TIMEOUT)
        .max_buf_size(HTTP1_BUFFER)
        .max_headers(32)
        .serve_connection(io, service);
    tokio::pin!(served);
    let mut graceful = false;
    loop {
        let deadline = conn.deadline();
        tokio::select! {
            biased;
            result = served.as_mut() => {
                if conn.overlong.load(Ordering::Relaxed) {
                    metrics.admin_connection_deadlines.inc();
                }
                if let Err(e) = result {
                    debug!(peer = %conn.peer, error = %e, "admin connection closed with an error");
                }
                break;
            }
            _ = conn.evict.cancelled() => {
                debug!(peer = %conn.peer, "admin connection closed for a new one at the cap");
                break;
            }
            _ = stop.cancelled(), if !graceful => {
                served.as_mut().graceful_shutdown();
                graceful = true;
            }
            _ = conn.wake.notified() => {}
            _ = tokio::time::sleep_until(deadline.into()) => {
                if Instant::now() >= conn.deadline() {
                    metrics.admin_connection_deadlines.inc();
                    debug!(peer = %conn.peer, "admin connection closed: no request head in time, or idle");
                    break;
                }
            }
        }
    }
    metrics.admin_open_connections.dec();
}

#[cfg(test)]
mod tests;
