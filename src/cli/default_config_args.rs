//! `default-config`'s flags.

/// Which release's shipped inferenceservice-config to print.
#[derive(Debug, Clone, clap::Args)]
#[command(mut_arg("kserve_version", |a| a.help(
    "The KServe release whose shipped inferenceservice-config to print (the keys the pod \
     mutator reads, as that release's ConfigMap holds them; what `serve` and `mutate \
     --kserve-version` use without --config): a tag from v0.15.0 to v0.20.0, or head; a minor \
     alone is its last patch release. Default: head. Example: --kserve-version v0.15.2"
)))]
pub struct DefaultConfigArgs {
    #[command(flatten)]
    pub release: crate::input_flags::ReleaseFlag,
}
