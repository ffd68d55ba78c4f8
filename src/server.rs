//! The webhook server: HTTPS on `--addr` (`POST /mutate-pods`, `POST
//! /mutate`), a plain-HTTP admin listener on `--admin-addr` (`/healthz`,
//! `/readyz`, `/metrics`), certificates and config reloaded from disk while
//! serving, and a graceful drain on SIGTERM.
//!
//! Embedding (as the integration tests do):
//! [`Server::start`] with a [`args::ServeArgs`] (parsed from
//! `serve`'s flags, which it defines, or built directly), then
//! [`RunningServer::shutdown`] and [`RunningServer::wait`]. Or, without
//! sockets or TLS, the routers alone: [`RouterInputs::webhook_router`] and
//! [`RouterInputs::admin_router`], called with `tower::ServiceExt::oneshot`.

mod admin;
pub mod args;
mod conn;
mod error;
pub(crate) mod image_volumes;
mod lifecycle;
mod limits;
mod logging;
mod metrics;
mod native_sidecar;
mod serving_cert;
mod signals;
mod sizing;
mod tls;
mod webhook;

use crate::server::args::ServeArgs;
pub use error::ServeError;
pub use lifecycle::{RunningServer, Server, ShutdownHandle};
pub use limits::{Limits, Pace};
pub use metrics::Metrics;
use std::time::Duration;
pub use tls::policy::TlsPolicyError;
pub use tls::TlsConfigError;
pub use webhook::RouterInputs;

/// Connection tasks still running after the drain get this long to notice
/// the runtime is going away before the process exits regardless.
const RUNTIME_SHUTDOWN: Duration = Duration::from_secs(1);

/// `kserve-injector serve`: runs until SIGTERM/SIGINT and the drain that
/// follows, then returns.
pub fn run(args: ServeArgs) -> Result<(), ServeError> {
    logging::init(&args.logging)?;
    logging::log_panics();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("kserve-injector")
        .build()
        .map_err(ServeError::Runtime)?;
    let result = runtime.block_on(async {
        let signals = signals::Signals::install()?;
        let server = Server::start(args).await?;
        signals.forward_to(server.shutdown_handle());
        server.wait().await
    });
    runtime.shutdown_timeout(RUNTIME_SHUTDOWN);
    result
}
