//! `default-config`'s flags.

use kserve_injector_core::release::Release;

/// Which release's shipped inferenceservice-config to print.
#[derive(Debug, Clone, clap::Args)]
pub struct DefaultConfigArgs {
    /// The KServe release whose shipped inferenceservice-config to print
    /// (the keys the pod mutator reads, as that release's ConfigMap holds
    /// them; what `serve` and `mutate --kserve-version` use without
    /// --config): a tag from v0.15.0 to v0.20.0, or head; a minor alone is
    /// its last patch release. Default: head. Example: --kserve-version
    /// v0.15.2
    #[arg(long, value_name = "VERSION", value_parser = crate::flag_values::kserve_version())]
    pub kserve_version: Option<Release>,
}
