//! Flags of `kserve-injector audit`, owned by the audit (as `serve`'s are
//! by the server): the CLI flattens [`AuditArgs`] into its subcommand.

use crate::flag_values::ReportFormat;
use std::path::PathBuf;

/// `audit --config`: it replaces the cluster's ConfigMap.
const CONFIG_HELP: &str = "Use this inferenceservice-config (a ConfigMap manifest or a mounted \
     directory) instead of the cluster's. Example: --config ./config.yaml";

/// `audit --kserve-version`: the release the webhook runs, which the
/// cluster's images tell when the upgrade audit is not told.
const KSERVE_VERSION_HELP: &str =
    "The KServe release whose pod mutator the webhook reproduces (its \
     `--kserve-version`): a tag from v0.15.0 to v0.20.0, or head; a minor alone is its last patch \
     release. Default: the --config-file's kserveVersion, else head; with --upgrade-to, the \
     release the cluster runs: else the one whose tag the ConfigMap's agent and \
     storage-initializer images carry (a tag of no release modelled, such as v0.15.3, stops the \
     audit). Example: --kserve-version v0.15.0";

/// Flags of `kserve-injector audit`.
#[derive(Debug, Clone, clap::Args)]
#[command(mut_arg("config", |a| a.help(CONFIG_HELP)),
          mut_arg("kserve_version", |a| a.help(KSERVE_VERSION_HELP)),
          after_help = "Examples:
  kserve-injector audit -A                                  # every namespace, current context
  kserve-injector audit --context prod -n models -o json
  kubectl get pods,rs,deploy,sa,secrets,cm,isvc,clusterstoragecontainers -A -o json > dump.json
  kserve-injector audit --objects dump.json
  kserve-injector audit -A --kserve-version v0.15.0 --upgrade-to v0.15.2

Each pod with the serving.kserve.io/inferenceservice label is compared with
what this webhook makes of its ReplicaSet's pod template today. Fields the
API server defaults, the service account token volume and the sidecars of
--ignore-container (istio-proxy, linkerd-proxy and their init containers
by default) are not compared.

With --upgrade-to, each pod's template is instead mutated as the release
the cluster runs makes it and as the target release will, and each change
is named with the docs/compatibility.md row that explains it; the
ConfigMap keys the target reads differently are listed.

Exit codes: 0 no pod differs (with --upgrade-to: none changes or is
denied), 1 a pod differs (changes, or is denied), 2 bad flags, input or
cluster access.")]
pub struct AuditArgs {
    /// A dump of the objects (`kubectl get ... -A -o yaml|json`), "-" for
    /// standard input, instead of a cluster. Example: --objects dump.json
    #[arg(long, value_name = "FILE", conflicts_with_all = ["kubeconfig", "context"])]
    pub objects: Option<PathBuf>,
    /// Kubeconfig to read the cluster with (default: KUBECONFIG, else
    /// ~/.kube/config, else the in-cluster service account).
    /// Example: --kubeconfig ~/.kube/config
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use. Example: --context kind-kserve
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
    /// Audit the pods of this namespace (default: the context's namespace).
    #[arg(short = 'n', long, conflicts_with = "all_namespaces")]
    pub namespace: Option<String>,
    /// Audit the pods of every namespace.
    #[arg(short = 'A', long)]
    pub all_namespaces: bool,
    /// Output: a table, or the whole report as JSON.
    #[arg(short = 'o', long = "output", value_enum, default_value = "table")]
    pub output: ReportFormat,
    /// A container another webhook adds, not compared (repeatable; added to
    /// the built-in list). Example: --ignore-container vault-agent
    #[arg(long, value_name = "NAME")]
    pub ignore_container: Vec<String>,
    /// The namespace of inferenceservice-config (KServe's controller namespace).
    #[arg(long, default_value = kserve_injector_core::constants::DEFAULT_CONTROLLER_NAMESPACE)]
    pub controller_namespace: String,
    #[command(flatten)]
    pub inputs: crate::input_flags::InputFlags,
    /// Instead of comparing, list every live pod (any label) whose
    /// containers carry a literal value in an env variable KServe fills from
    /// a Secret (AWS_SECRET_ACCESS_KEY, HF_TOKEN, AZURE_CLIENT_SECRET, …),
    /// with its owner, container and variable; values are never printed.
    /// Exit code 1 when any is found. Example: audit --credentials -A
    #[arg(long)]
    pub credentials: bool,
    /// Compare every InferenceService pod as --kserve-version's release
    /// makes it and as this release will after the upgrade: what changes,
    /// which pods it would deny, which ConfigMap keys it reads differently.
    /// Example: --upgrade-to v0.15.2
    #[arg(long, value_name = "VERSION", value_parser = crate::flag_values::kserve_version(),
          conflicts_with = "credentials")]
    pub upgrade_to: Option<kserve_injector_core::release::Release>,
    /// With --upgrade-to: the inferenceservice-config the target release
    /// will read (a ConfigMap manifest or a mounted directory), when the
    /// upgrade changes it too. Default: the current one.
    /// Example: --upgrade-config ./inferenceservice-config-v0.15.2.yaml
    #[arg(long, value_name = "PATH", requires = "upgrade_to")]
    pub upgrade_config: Option<PathBuf>,
    #[command(flatten)]
    pub budget: crate::input_flags::BudgetFlags,
}
