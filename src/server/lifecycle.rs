//! Startup and the shutdown sequence. Shutdown order matters for a
//! `failurePolicy: Fail` webhook: readiness goes first so endpoints are
//! withdrawn while the server still answers, then the listener closes, then
//! in-flight requests finish, and only then does the process exit.

use super::args::ServeArgs;
use super::error::ServeError;
use super::http::{Admin, App, Readiness};
use super::listener::{accept_loop, http1_builder, http2_builder, AdminServer, TlsServer};
use super::metrics::Metrics;
use super::{certs, config_reload, tls};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;
use tracing::{info, warn};

/// How long admin connections (probes, scrapes) get to finish at the end.
const ADMIN_DRAIN: Duration = Duration::from_secs(1);

/// Starts the webhook; see [`Server::start`].
#[derive(Debug)]
pub struct Server;

/// Begins a graceful shutdown; cheap to clone, idempotent.
#[derive(Debug, Clone)]
pub struct ShutdownHandle(Arc<watch::Sender<bool>>);

impl ShutdownHandle {
    pub fn shutdown(&self) {
        self.0.send_replace(true);
    }
}

/// A started server. Dropping it starts a graceful shutdown as well.
#[derive(Debug)]
pub struct RunningServer {
    local_addr: SocketAddr,
    admin_addr: SocketAddr,
    ca_file: Option<PathBuf>,
    shutdown: ShutdownHandle,
    task: tokio::task::JoinHandle<()>,
}

impl RunningServer {
    /// The bound webhook (HTTPS) address; useful with port 0.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The bound admin (plain HTTP) address.
    pub fn admin_addr(&self) -> SocketAddr {
        self.admin_addr
    }

    /// The CA file written by `--self-signed`.
    pub fn ca_file(&self) -> Option<&Path> {
        self.ca_file.as_deref()
    }

    pub fn shutdown_handle(&self) -> ShutdownHandle {
        self.shutdown.clone()
    }

    /// Starts the graceful shutdown: readiness 503 now, listener closed after
    /// `--shutdown-delay`, in-flight requests drained up to `--drain-timeout`.
    pub fn shutdown(&self) {
        self.shutdown.shutdown();
    }

    /// Resolves when the shutdown sequence has completed.
    pub async fn wait(self) -> Result<(), ServeError> {
        self.task.await.map_err(|e| ServeError::Task(e.to_string()))
    }
}

impl Server {
    /// Loads config and certificates, binds both listeners and starts
    /// serving. Must run inside a multi-threaded tokio runtime.
    pub async fn start(args: ServeArgs) -> Result<RunningServer, ServeError> {
        args.validate().map_err(ServeError::Args)?;
        // Anything that asks rustls for the process default gets ring too.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let provider = tls::provider();
        let metrics = Arc::new(Metrics::new());
        // Background tasks (reloaders) stop when this flips or is dropped.
        let (stop_background, background) = watch::channel(false);
        let config = config_reload::load(&args, &metrics, &background)?;
        let certs = certs::load(&args, &provider, &metrics, &background)?;
        let tls_config =
            tls::server_config(provider, certs.serving.clone(), certs.client_ca.clone())?;

        let bind = |what: &'static str, addr: SocketAddr| async move {
            let listener = TcpListener::bind(addr)
                .await
                .map_err(|source| ServeError::Bind { what, addr, source })?;
            let bound =
                listener
                    .local_addr()
                    .map_err(|source| ServeError::Bind { what, addr, source })?;
            Ok::<_, ServeError>((listener, bound))
        };
        let (webhook_listener, local_addr) = bind("webhook", args.addr).await?;
        let (admin_listener, admin_addr) = bind("admin", args.admin_addr).await?;

        let (kill, killed) = watch::channel(false);
        let readiness = Arc::new(Readiness::default());
        let tls_server = Arc::new(TlsServer {
            acceptor: TlsAcceptor::from(Arc::new(tls_config)),
            http1: http1_builder(args.header_read_timeout),
            http2: http2_builder(&args),
            handshake_timeout: args.handshake_timeout,
            app: Arc::new(App {
                env: config.env,
                metrics: metrics.clone(),
                request_timeout: args.request_timeout,
            }),
            killed,
        });
        let admin_server = Arc::new(AdminServer {
            http1: http1_builder(args.header_read_timeout),
            admin: Arc::new(Admin {
                metrics,
                readiness: readiness.clone(),
            }),
        });

        let (stop_webhook, webhook_stopped) = watch::channel(false);
        let webhook_loop = tokio::spawn(accept_loop(
            "webhook",
            webhook_listener,
            webhook_stopped,
            move |tcp, peer, watcher| {
                tokio::spawn(tls_server.clone().serve(tcp, peer, watcher));
            },
        ));
        let (stop_admin, admin_stopped) = watch::channel(false);
        let admin_loop = tokio::spawn(accept_loop(
            "admin",
            admin_listener,
            admin_stopped,
            move |tcp, peer, watcher| {
                tokio::spawn(admin_server.clone().serve(tcp, peer, watcher));
            },
        ));
        readiness.set_ready();
        info!(addr = %local_addr, admin_addr = %admin_addr, "listening");

        let mut reloaders = certs.reloaders;
        reloaders.extend(config.reloader);
        let (shutdown, mut requested) = watch::channel(false);
        let (delay, drain) = (args.shutdown_delay, args.drain_timeout);
        let task = tokio::spawn(async move {
            // An error means every handle was dropped, which also asks to stop.
            super::until_set(&mut requested).await;
            readiness.set_draining();
            info!(
                shutdown_delay_ms = delay.as_millis() as u64,
                "shutdown requested: /readyz reports 503; serving on while the endpoint is withdrawn"
            );
            tokio::time::sleep(delay).await;
            let _ = stop_webhook.send(true);
            match webhook_loop.await {
                Ok(graceful) => {
                    info!(
                        connections = graceful.count(),
                        drain_timeout_ms = drain.as_millis() as u64,
                        "listener closed; draining in-flight requests"
                    );
                    if tokio::time::timeout(drain, graceful.shutdown())
                        .await
                        .is_err()
                    {
                        warn!("drain timeout reached; closing the remaining connections");
                    }
                }
                Err(e) => warn!(error = %e, "the accept loop failed"),
            }
            let _ = kill.send(true);
            let _ = stop_background.send(true);
            for reloader in reloaders {
                let _ = reloader.await;
            }
            let _ = stop_admin.send(true);
            if let Ok(graceful) = admin_loop.await {
                let _ = tokio::time::timeout(ADMIN_DRAIN, graceful.shutdown()).await;
            }
            info!("shutdown complete");
        });
        Ok(RunningServer {
            local_addr,
            admin_addr,
            ca_file: certs.ca_file,
            shutdown: ShutdownHandle(Arc::new(shutdown)),
            task,
        })
    }
}
