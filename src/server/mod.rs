//! The webhook server (being built; see issue "Webhook server").

/// Flags of `kserve-injector serve`.
#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {}

#[derive(Debug, thiserror::Error)]
#[error("the webhook server is not available in this build")]
pub struct ServeError;

pub fn run(_args: ServeArgs) -> Result<(), ServeError> {
    Err(ServeError)
}
