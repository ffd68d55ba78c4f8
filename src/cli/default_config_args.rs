//! `default-config`'s flags.

use kserve_injector_core::Release;

/// Which release's shipped inferenceservice-config to print.
#[derive(Debug, Clone, clap::Args)]
pub struct DefaultConfigArgs {
    /// The KServe release whose shipped inferenceservice-config to print
    /// (the keys the pod mutator reads, as that release's ConfigMap holds
    /// them; what `serve` and `mutate --kserve-version` use without
    /// --config): v0.15 … v0.20 or head. Default: head. Example:
    /// --kserve-version v0.15
    #[arg(long, value_name = "VERSION", value_parser = super::kserve_version())]
    pub kserve_version: Option<Release>,
}
