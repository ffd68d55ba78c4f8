//! SIGTERM (kubelet) and SIGINT (Ctrl-C) start the graceful shutdown; a
//! second one means the operator wants out now.

use super::error::ServeError;
use super::lifecycle::ShutdownHandle;
use tokio::signal::unix::{signal, Signal, SignalKind};
use tracing::{info, warn};

/// Signal streams registered before the server starts, so a signal that
/// arrives during startup is delivered to us instead of killing the process
/// with the default action.
pub(super) struct Signals {
    term: Signal,
    int: Signal,
}

impl Signals {
    pub(super) fn install() -> Result<Self, ServeError> {
        Ok(Self {
            term: signal(SignalKind::terminate()).map_err(ServeError::Signals)?,
            int: signal(SignalKind::interrupt()).map_err(ServeError::Signals)?,
        })
    }

    async fn next(&mut self) -> &'static str {
        tokio::select! {
            _ = self.term.recv() => "SIGTERM",
            _ = self.int.recv() => "SIGINT",
        }
    }

    /// The first signal starts the graceful shutdown, the second exits.
    pub(super) fn forward_to(mut self, handle: ShutdownHandle) {
        tokio::spawn(async move {
            let first = self.next().await;
            info!(
                signal = first,
                "shutting down gracefully (send it again to exit at once)"
            );
            handle.shutdown();
            let second = self.next().await;
            warn!(signal = second, "second signal: exiting without draining");
            std::process::exit(1);
        });
    }
}
