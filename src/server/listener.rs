//! Accept loops and per-connection serving. HTTP/2 or HTTP/1.1 is picked
//! from the TLS ALPN result rather than by sniffing the first bytes, so the
//! HTTP/1 header timeout applies from the first byte and a silent client
//! cannot park a connection in version detection.

use super::args::ServeArgs;
use super::http::{Admin, App};
use hyper::server::conn::{http1, http2};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use std::convert::Infallible;
use std::io::ErrorKind;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;
use tracing::{debug, warn};

/// HTTP/1 settings shared by both listeners.
pub(crate) fn http1_builder(header_read_timeout: Duration) -> http1::Builder {
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(header_read_timeout)
        .keep_alive(true)
        .max_headers(100);
    builder
}

/// HTTP/2 settings, including the limits that came with the rapid-reset
/// fixes: a client that keeps opening and cancelling streams, or that makes
/// the server reset streams, gets a GOAWAY instead of free work.
pub(crate) fn http2_builder(args: &ServeArgs) -> http2::Builder<TokioExecutor> {
    let mut builder = http2::Builder::new(TokioExecutor::new());
    builder
        .timer(TokioTimer::new())
        .max_concurrent_streams(args.http2_max_concurrent_streams)
        .max_pending_accept_reset_streams(20)
        .max_local_error_reset_streams(256)
        .max_header_list_size(64 * 1024)
        .keep_alive_interval(Duration::from_secs(30))
        .keep_alive_timeout(Duration::from_secs(10));
    builder
}

/// Accepts until `stop` turns true, then closes the listening socket (new
/// connections are refused from then on) and hands back the handle that
/// drains the connections it started.
pub(crate) async fn accept_loop<F>(
    what: &'static str,
    listener: TcpListener,
    mut stop: watch::Receiver<bool>,
    mut on_connection: F,
) -> GracefulShutdown
where
    F: FnMut(TcpStream, SocketAddr, Watcher),
{
    let graceful = GracefulShutdown::new();
    loop {
        let accepted = tokio::select! {
            biased;
            _ = super::until_set(&mut stop) => break,
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((tcp, peer)) => {
                // Admission answers are single small writes; Nagle would only delay them.
                let _ = tcp.set_nodelay(true);
                on_connection(tcp, peer, graceful.watcher());
            }
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::ConnectionAborted | ErrorKind::ConnectionReset
                ) =>
            {
                debug!(listener = what, error = %e, "connection aborted before accept");
            }
            Err(e) => {
                // Typically out of file descriptors: pause instead of spinning.
                warn!(listener = what, error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
    drop(listener);
    graceful
}

/// Serves admission requests over TLS.
pub(crate) struct TlsServer {
    pub acceptor: TlsAcceptor,
    pub http1: http1::Builder,
    pub http2: http2::Builder<TokioExecutor>,
    pub handshake_timeout: Duration,
    pub app: Arc<App>,
    /// Turns true when the drain timeout has passed: connections still open
    /// then are closed rather than left running.
    pub killed: watch::Receiver<bool>,
}

impl TlsServer {
    pub(crate) async fn serve(self: Arc<Self>, tcp: TcpStream, peer: SocketAddr, watcher: Watcher) {
        let tls =
            match tokio::time::timeout(self.handshake_timeout, self.acceptor.accept(tcp)).await {
                Ok(Ok(tls)) => tls,
                Ok(Err(e)) => {
                    self.app.metrics.tls_handshake_errors.inc();
                    // Port probes and load balancer health checks connect and
                    // close without a handshake; that is not worth a warning.
                    if matches!(
                        e.kind(),
                        ErrorKind::UnexpectedEof | ErrorKind::ConnectionReset
                    ) {
                        debug!(%peer, error = %e, "TLS handshake: connection closed");
                    } else {
                        warn!(%peer, error = %e, "TLS handshake failed");
                    }
                    return;
                }
                Err(_) => {
                    self.app.metrics.tls_handshake_errors.inc();
                    debug!(%peer, "TLS handshake timed out");
                    return;
                }
            };
        let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
        let app = self.app.clone();
        let service = service_fn(move |req| {
            let app = app.clone();
            async move { Ok::<_, Infallible>(app.handle(req).await) }
        });
        let io = TokioIo::new(tls);
        let killed = self.killed.clone();
        let result = if h2 {
            until_killed(
                watcher.watch(self.http2.serve_connection(io, service)),
                killed,
            )
            .await
        } else {
            until_killed(
                watcher.watch(self.http1.serve_connection(io, service)),
                killed,
            )
            .await
        };
        if let Err(e) = result {
            debug!(%peer, error = %e, "connection closed with an error");
        }
    }
}

async fn until_killed<F>(
    connection: F,
    mut killed: watch::Receiver<bool>,
) -> Result<(), hyper::Error>
where
    F: std::future::Future<Output = Result<(), hyper::Error>>,
{
    tokio::select! {
        result = connection => result,
        _ = super::until_set(&mut killed) => {
            debug!("connection closed: drain timeout reached");
            Ok(())
        }
    }
}

/// Serves the admin endpoints over plain HTTP/1.1.
pub(crate) struct AdminServer {
    pub http1: http1::Builder,
    pub admin: Arc<Admin>,
}

impl AdminServer {
    pub(crate) async fn serve(self: Arc<Self>, tcp: TcpStream, peer: SocketAddr, watcher: Watcher) {
        let admin = self.admin.clone();
        let service = service_fn(move |req| {
            let response = admin.handle(&req);
            async move { Ok::<_, Infallible>(response) }
        });
        if let Err(e) = watcher
            .watch(self.http1.serve_connection(TokioIo::new(tcp), service))
            .await
        {
            debug!(%peer, error = %e, "admin connection closed with an error");
        }
    }
}
