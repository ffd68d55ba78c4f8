//! Startup and the shutdown sequence. Shutdown order matters for a
//! `failurePolicy: Fail` webhook: readiness goes first and clients are told
//! to move (Connection: close, GOAWAY) while the server still answers, then
//! the listener closes, then in-flight requests finish, then the process
//! exits. Each stage is a token of [`Shutdown`].

use super::conn::{Shutdown, Webhook};
use super::error::ServeError;
use super::limits::Limits;
use super::metrics::{unix_now, Metrics};
use super::serving_cert;
use super::sizing;
use super::webhook::{self, RouterInputs};
use crate::files::{self, Snapshot};
use crate::log_text::bounded;
use crate::lookups::{KubeEnvironment, SnapshotSource};
use crate::reload::{Source, Trigger};
use crate::server::args::LimitFlags;
use crate::server::args::{ConfigFlags, ServeArgs};
use arc_swap::ArcSwap;
use kserve_injector_core::{config::Config, Inputs};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio_util::sync::{CancellationToken, DropGuard};
use tokio_util::task::TaskTracker;
use tracing::{info, warn};

/// How long admin connections (probes, scrapes) get to finish at the end.
const ADMIN_DRAIN: Duration = Duration::from_secs(1);

/// Connections the kernel completes and queues for accept() on each
/// listener (capped by `net.core.somaxconn`, 4096 by default). While the
/// queue is full, a new connection's SYN is dropped and its client tries
/// again only a second later, past kubelet's probe timeout: a queue longer
/// than std's 128 lets a flood of connections be accepted, and refused or
/// served, before it crowds out a probe.
const BACKLOG: u32 = 4096;

/// How long the background tasks (reloaders, the log summary) get to
/// notice the end.
const BACKGROUND_DRAIN: Duration = Duration::from_secs(1);

/// Starts the webhook; see [`Server::start`].
#[derive(Debug)]
pub struct Server;

/// Begins a graceful shutdown; cheap to clone, idempotent.
#[derive(Debug, Clone)]
pub struct ShutdownHandle(CancellationToken);

impl ShutdownHandle {
    pub fn shutdown(&self) {
        self.0.cancel();
    }
}

/// A started server. Dropping it starts a graceful shutdown as well.
#[derive(Debug)]
pub struct RunningServer {
    local_addr: SocketAddr,
    admin_addr: SocketAddr,
    shutdown: ShutdownHandle,
    _drop_guard: DropGuard,
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
        self.task.await.map_err(ServeError::Task)
    }
}

/// A `--self-signed` server is a try-out: no client certificate guards its
/// webhook and its `/metrics`, so a listener off loopback (an explicit
/// `--addr` or `--admin-addr`) is said in the log.
fn warn_if_exposed(addr: SocketAddr, admin_addr: SocketAddr) {
    for (flag, bound) in [("--addr", addr), ("--admin-addr", admin_addr)] {
        if !bound.ip().is_loopback() {
            tracing::warn!(%flag, addr = %bound, "--self-signed with a listener beyond loopback: anyone who reaches {bound} can call it (the webhook takes any AdmissionReview, /metrics answers anyone)");
        }
    }
}

/// The inferenceservice-config, reloaded like the certificates;
/// `drops_image_volumes` is what the API server said at start.
fn load_config(
    args: &ConfigFlags,
    drops_image_volumes: bool,
    metrics: &Arc<Metrics>,
    shutdown: &Shutdown,
) -> Result<Arc<ArcSwap<Inputs>>, ServeError> {
    let flags = args.inputs.clone();
    let settings = match &flags.config_file {
        Some(path) => {
            let snap = crate::reload::read_once(std::slice::from_ref(path));
            files::parse_settings(path, &snap)?
        }
        None => Default::default(),
    };
    let release = flags.release(&settings);
    let defaults = settings.storage_initializer.clone();
    let namespace = args.resolved_controller_namespace();
    let path = flags.config.clone();
    let make_inputs = move |config| {
        let mut inputs = flags.inputs(config, &settings);
        inputs.controller_namespace = namespace.clone();
        inputs.drops_image_volumes = drops_image_volumes;
        Arc::new(inputs)
    };
    metrics.config_last_reload.set(unix_now());
    let Some(path) = path else {
        info!(kserve_version = %release, "using the inferenceservice-config this KServe release shipped");
        let config = Config::shipped(release);
        warn_image_release(&config);
        return Ok(Arc::new(ArcSwap::new(make_inputs(config))));
    };
    let source = Source {
        what: "inferenceservice-config",
        paths: vec![path.clone()],
        trigger: Trigger {
            watch: args.config_watch,
            poll: args.config_poll_interval,
        },
        counters: metrics.config_reloads.clone(),
    };
    let shown = path.display().to_string();
    let parse = move |snap: &Snapshot| files::parse_with(&path, snap, &defaults, release);
    let (config, loaded) = source.load(parse)?;
    info!(config = shown, kserve_version = %config.release(), "inferenceservice-config loaded");
    warn_image_release(&config);
    let inputs = Arc::new(ArcSwap::new(make_inputs(config)));
    let (target, metrics) = (inputs.clone(), metrics.clone());
    loaded.watch(&shutdown.kill, &shutdown.background, move |config| {
        target.store(make_inputs(config));
        metrics.config_last_reload.set(unix_now());
        Ok::<_, std::convert::Infallible>(())
    });
    Ok(inputs)
}

/// Once, at startup: the agent or storage-initializer image of the config
/// is tagged for another KServe release than the one reproduced.
fn warn_image_release(config: &Config) {
    for m in kserve_injector_core::config::image_mismatches(config, config.release()) {
        warn!(
            key = m.key,
            image = %bounded(m.image),
            kserve_version = %config.release(),
            "the {} image names KServe {}, but --kserve-version is {}: set --kserve-version to the release the cluster runs",
            m.key, bounded(&m.names), config.release()
        );
    }
}

fn write_ca(path: PathBuf, pem: &str) -> Result<PathBuf, ServeError> {
    let failed = |source| ServeError::Write {
        path: path.clone(),
        source,
    };
    crate::certs::write_ca(&path, pem).map_err(failed)?;
    info!(ca_file = %path.display(), "trust the self-signed certificate with: curl --cacert {}", path.display());
    Ok(path)
}

/// The bounds the flags leave out, sized to the container's memory limit
/// and the open-file limit (its soft limit raised to the hard one first);
/// logged, so an operator sees what they came to. Connections that cannot
/// fit the open-file limit are refused, with the arithmetic.
fn sized_to_memory(
    limits: &LimitFlags,
    memory: Option<sizing::MemoryLimit>,
    caches: u64,
) -> Result<Limits, ServeError> {
    let (nofile, hard) = sizing::raise_nofile();
    let limit = memory.as_ref().map(|m| m.bytes);
    let sized = sizing::size(limit, nofile, limits, caches);
    let given = limits.max_connections.is_some();
    sizing::check_files(nofile, hard, sized.max_connections, given)?;
    info!(
        cache_budget_bytes = caches,
        memory_limit_bytes = limit,
        memory_limit_file = memory
            .as_ref()
            .map(|m| tracing::field::display(m.file.display())),
        open_file_limit = nofile,
        max_connections = sized.max_connections,
        max_admin_connections = super::limits::ADMIN_CONNECTIONS,
        max_buffered_bytes = sized.max_buffered_bytes,
        max_concurrent_requests = sized.max_concurrent_requests,
        large_reviews = sized.large_reviews,
        "bounds sized to the memory limit (flags given win)"
    );
    Ok(sized)
}

fn bind(
    what: &'static str,
    addr: SocketAddr,
) -> Result<(std::net::TcpListener, SocketAddr), ServeError> {
    let error = |source| ServeError::Bind { what, addr, source };
    let socket = match addr {
        SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4(),
        SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6(),
    };
    let socket = socket.map_err(error)?;
    // As std's bind does: a restarted server binds while old connections linger.
    socket.set_reuseaddr(true).map_err(error)?;
    socket.bind(addr).map_err(error)?;
    let listener = socket.listen(BACKLOG).map_err(error)?.into_std();
    let listener = listener.map_err(error)?;
    listener.set_nonblocking(true).map_err(error)?;
    let bound = listener.local_addr().map_err(error)?;
    Ok((listener, bound))
}

/// The admin listener on its own thread and current-thread runtime, so
/// probes answer whatever the webhook's workers are busy with; bounded on
/// its own (`admin/listener.rs`).
fn spawn_admin(
    listener: std::net::TcpListener,
    router: axum::Router,
    metrics: Arc<Metrics>,
    stop: CancellationToken,
) -> Result<tokio::sync::oneshot::Receiver<()>, ServeError> {
    let (done, finished) = tokio::sync::oneshot::channel();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(ServeError::Runtime)?;
    std::thread::Builder::new()
        .name("kserve-injector-admin".into())
        .spawn(move || {
            runtime.block_on(async move {
                match TcpListener::from_std(listener) {
                    Ok(listener) => {
                        super::admin::listener::serve(listener, router, metrics, stop, ADMIN_DRAIN)
                            .await
                    }
                    Err(e) => warn!(error = %e, "admin listener failed"),
                }
            });
            let _ = done.send(());
        })
        .map_err(ServeError::Runtime)?;
    Ok(finished)
}

impl Server {
    /// Loads config and certificates, binds both listeners, writes the
    /// `--self-signed` CA, and starts serving. Must run inside a
    /// multi-threaded tokio runtime.
    pub async fn start(args: ServeArgs) -> Result<RunningServer, ServeError> {
        args.validate()?;
        let (min, suites) = (args.tls.tls_min_version, &args.tls.tls_cipher_suites);
        let policy = super::tls::policy::policy(&crate::certs::provider(), min, suites)?;
        // Before anything opens a descriptor.
        sizing::raise_nofile();
        // Anything that asks rustls for the process default gets ring too.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut metrics = Metrics::new();
        let lookups = &args.lookups;
        let environment = KubeEnvironment::from_process(lookups.kubeconfig.clone());
        let memory = sizing::memory_limit();
        let mut options = lookups.options();
        let caches = sizing::cache_budget(memory.as_ref().map(|m| m.bytes), &args.limits);
        (options.cache_budget, options.lookup_bytes) =
            sizing::lookup_bytes(caches, lookups.max_lookup_bytes);
        let objects = SnapshotSource::start(
            lookups.objects.as_deref(),
            lookups.cluster_lookups,
            &environment,
            lookups.context.as_deref(),
            &options,
            args.limits.request_timeout,
            || metrics.register_lookups(),
        );
        let objects = objects.await?;
        if let SnapshotSource::Live(lookups) = &objects {
            let mode = args.inference_config.inputs.modelcar_mode;
            super::native_sidecar::check(lookups.client(), mode).await?;
        }
        let drops_image_volumes = match &objects {
            SnapshotSource::Live(lookups) => super::image_volumes::dropped(lookups.client()).await,
            _ => false,
        };
        let objects = Arc::new(objects);
        let metrics = Arc::new(metrics);
        let shutdown = Shutdown::new();
        // Until startup succeeds, an early return stops what was spawned.
        let started = shutdown.kill.clone().drop_guard();
        let inputs = load_config(
            &args.inference_config,
            drops_image_volumes,
            &metrics,
            &shutdown,
        )?;
        let (tls, self_signed_ca) = serving_cert::load(&args.tls, &policy, &metrics, &shutdown)?;

        let (webhook_listener, local_addr) = bind("webhook", args.addr())?;
        let (admin_listener, admin_addr) = bind("admin", args.admin_addr())?;
        let listener = TcpListener::from_std(webhook_listener).map_err(ServeError::Runtime)?;
        // Only now that both ports are bound, so an instance that fails to
        // start never replaces a running one's CA.
        if let Some(pem) = self_signed_ca {
            write_ca(args.tls.ca_out_file(), &pem)?;
        }

        // The caches' budget (the lookups' bytes among it) is set aside
        // only when there are caches.
        let caches = match objects.as_ref() {
            SnapshotSource::Live(_) => caches.unwrap_or(0),
            _ => 0,
        };
        let router_inputs = RouterInputs {
            inputs,
            objects,
            metrics: metrics.clone(),
            limits: sized_to_memory(&args.limits, memory, caches)?,
            draining: shutdown.drain.clone(),
            cert_not_after: tls.not_after_cell(),
            mode: args.shadow.mode(),
        };
        // The router `RouterInputs::webhook_router` builds, keeping its
        // state for the log summary.
        let router = webhook::webhook(&router_inputs);
        let app = router.app().clone();
        let webhook = Webhook::new(&args.limits, tls, router, &metrics, &shutdown);
        // Served from here on: the certificate is loaded and both ports are bound.
        let admin_router = router_inputs.admin_router();
        let admin_stop = CancellationToken::new();
        let admin_done = spawn_admin(
            admin_listener,
            admin_router,
            metrics.clone(),
            admin_stop.clone(),
        )?;
        let connections = TaskTracker::new();
        let max_connections = router_inputs.limits.max_connections;
        let accept = Arc::new(webhook).accept_loop(listener, max_connections, connections.clone());
        let accept = tokio::spawn(accept);
        let (summary_interval, stop) = (args.logging.log_summary_interval, shutdown.kill.clone());
        let summary = async move { app.summary().log_every(summary_interval, stop).await };
        shutdown.background.spawn(summary);
        info!(addr = %local_addr, admin_addr = %admin_addr, max_connections, "listening");
        if args.tls.self_signed {
            warn_if_exposed(local_addr, admin_addr);
        }

        let (delay, drain) = (args.shutdown.shutdown_delay, args.shutdown.drain_timeout);
        let token = shutdown.drain.clone();
        started.disarm();
        let task = tokio::spawn(async move {
            shutdown.drain.cancelled().await;
            info!(
                shutdown_delay_ms = delay.as_millis() as u64,
                "shutdown requested: /readyz reports 503, clients are asked to reconnect elsewhere"
            );
            tokio::time::sleep(delay).await;
            shutdown.close.cancel();
            let _ = accept.await;
            connections.close();
            info!(
                connections = connections.len(),
                drain_timeout_ms = drain.as_millis() as u64,
                "listener closed; draining in-flight requests"
            );
            if tokio::time::timeout(drain, connections.wait())
                .await
                .is_err()
            {
                warn!("drain timeout reached; closing the remaining connections");
            }
            shutdown.kill.cancel();
            shutdown.background.close();
            // A reloader ends at `kill` between two awaits; one busy in a
            // parse that does not yield must not keep the process alive.
            if tokio::time::timeout(BACKGROUND_DRAIN, shutdown.background.wait())
                .await
                .is_err()
            {
                warn!("a reloader is still busy; exiting without waiting for it");
            }
            admin_stop.cancel();
            let _ = tokio::time::timeout(ADMIN_DRAIN, admin_done).await;
            info!("shutdown complete");
        });
        Ok(RunningServer {
            local_addr,
            admin_addr,
            shutdown: ShutdownHandle(token.clone()),
            _drop_guard: token.drop_guard(),
            task,
        })
    }
}
