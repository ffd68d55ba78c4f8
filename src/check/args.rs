//! Flags of `kserve-injector check`.

use crate::flag_values::ReportFormat;
use std::path::PathBuf;
use std::time::Duration;

/// Flags of `kserve-injector check`.
#[derive(Debug, Clone, clap::Args)]
#[command(after_help = "Examples:
  kserve-injector check                                   # current context, namespace kserve
  kserve-injector check --context prod --probe-namespace models -o json
  helm test kserve-injector -n kserve                     # the same check, in the cluster

Each check prints a line: ✔ passed, ⚠ a warning, ✖ failed (with `fix:` saying
what to do), – skipped (what it needs is missing). The last check sends a pod
labelled like an InferenceService pod to the API server with dryRun=All: it
goes through the webhook configuration, the Service, TLS and serve, and must
come back with the modelcar (or storage-initializer) kserve-injector injects.
Nothing is created.

Exit codes: 0 nothing failed (warnings allowed), 1 a check failed, 2 bad
flags or no cluster to check.")]
pub struct CheckArgs {
    /// Kubeconfig to reach the cluster with (default: KUBECONFIG, else
    /// ~/.kube/config, else the in-cluster service account).
    /// Example: --kubeconfig ~/.kube/config
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use. Example: --context kind-kserve
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
    /// The namespace kserve-injector is installed in (its Deployment,
    /// Service, Secret and KServe's ConfigMap). Example: --namespace kserve
    #[arg(short = 'n', long, default_value = "kserve")]
    pub namespace: String,
    /// The name of its objects: the MutatingWebhookConfiguration, the
    /// Deployment and the Service (the chart's fullname).
    /// Example: --name kserve-injector
    #[arg(long, default_value = "kserve-injector")]
    pub name: String,
    /// The namespace the dry-run probe pod is sent to: one the webhook
    /// serves (in --namespaces mode, one of them). Nothing is created.
    /// Example: --probe-namespace models
    #[arg(long, value_name = "NAMESPACE", default_value = "default")]
    pub probe_namespace: String,
    /// Bound on the TLS handshake with the webhook (the dry run gets 30 s
    /// more). Example: --timeout 10s
    #[arg(long, default_value = "5s", value_parser = crate::flag_values::parse_duration)]
    pub timeout: Duration,
    /// Output: a line per check, or the report as JSON.
    #[arg(short = 'o', long = "output", value_enum, default_value = "table")]
    pub output: ReportFormat,
}
