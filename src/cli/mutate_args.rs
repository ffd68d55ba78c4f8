//! Flags of `kserve-injector mutate`.

use super::OutputFormat;
use crate::input_flags::BudgetFlags;
use std::path::PathBuf;

/// `mutate -o`: the mutated objects or the patch, or, with
/// `--compare-to`, the difference between the two releases.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum MutateOutput {
    Yaml,
    Json,
    Patch,
    Table,
    Summary,
}

impl MutateOutput {
    /// What `mutate` prints without `--compare-to`.
    pub fn objects(output: Option<Self>) -> Result<OutputFormat, &'static str> {
        match output {
            None | Some(MutateOutput::Yaml) => Ok(OutputFormat::Yaml),
            Some(MutateOutput::Json) => Ok(OutputFormat::Json),
            Some(MutateOutput::Patch) => Ok(OutputFormat::Patch),
            Some(MutateOutput::Table | MutateOutput::Summary) => {
                Err("-o table and -o summary print a difference: they need --compare-to")
            }
        }
    }

    /// What `mutate --compare-to` prints: table, json or summary.
    pub fn difference(output: Option<Self>) -> Result<Self, &'static str> {
        match output {
            None => Ok(MutateOutput::Table),
            Some(MutateOutput::Yaml | MutateOutput::Patch) => {
                Err("with --compare-to, -o is table, json or summary")
            }
            Some(other) => Ok(other),
        }
    }
}

#[derive(Debug, Clone, clap::Args)]
#[command(after_help = "Examples:
  kserve-injector mutate pod.yaml
  kserve-injector mutate --config inferenceservice-config.yaml -o patch pod.yaml
  kserve-injector mutate --objects cluster.yaml pod.yaml   # ServiceAccounts, Secrets, CSCs, ISVCs
  kserve-injector mutate --kubeconfig ~/.kube/config pod.yaml   # the same, read from a cluster
  kubectl get deploy my-predictor -o yaml | kserve-injector mutate -
  kserve-injector mutate review.json        # prints the AdmissionReview response
  kserve-injector mutate --kserve-version v0.15.0 --compare-to v0.15.2 deployment.yaml

Input starting with { or [ is read as JSON, anything else as YAML the way
kubectl reads it (merge keys expanded; at most 64 levels of nesting; see
--max-document-bytes and the other input limits below).
Documents are processed and printed one at a time; the first one that fails
stops the run.

Exit codes: 0 mutated (or nothing to do; also when the reader of the output
stops reading, as with | head), 1 the webhook would deny a pod or denies an
AdmissionReview (whose response is still printed), 2 unreadable input or
config, or output that cannot be written. With --compare-to: 0 no pod
changes, 1 a pod changes or is denied by either release, 2 as above.")]
pub struct MutateArgs {
    #[command(flatten)]
    pub inputs: crate::input_flags::InputFlags,
    /// Output: the mutated objects as yaml (the default) or json, or the
    /// JSON Patch the webhook would return; with --compare-to, the
    /// difference as a table (the default) or json, or only its summary.
    /// AdmissionReview input always prints the response as JSON.
    /// Example: -o patch
    #[arg(short = 'o', long = "output", value_enum, value_name = "FORMAT")]
    pub output: Option<MutateOutput>,
    /// Namespace the pods are created in (default: each object's own, else "default").
    /// Example: --namespace models
    #[arg(short = 'n', long)]
    pub namespace: Option<String>,
    /// Cluster objects the webhook would read from the API server: ServiceAccounts,
    /// Secrets, ClusterStorageContainers, InferenceServices (multi-document YAML/JSON
    /// or a List). Without it, every lookup is "not found". Example: --objects cluster.yaml
    #[arg(long, value_name = "FILE", conflicts_with = "kubeconfig")]
    pub objects: Option<PathBuf>,
    /// Read those objects from a live cluster instead, with direct GETs (as
    /// `istioctl kube-inject` reads its config). Example: --kubeconfig ~/.kube/config
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use. Example: --context kind-kserve
    #[arg(long, value_name = "NAME", requires = "kubeconfig")]
    pub context: Option<String>,
    /// Instead of the mutated objects, print how each pod differs under
    /// this release from --kserve-version's: each changed field with the
    /// docs/compatibility.md row that explains it, and denials. Both read
    /// --config, else each its own shipped ConfigMap. Example: --compare-to v0.16.0
    #[arg(long, value_name = "VERSION", value_parser = crate::flag_values::kserve_version())]
    pub compare_to: Option<kserve_injector_core::release::Release>,
    /// A Pod, a multi-document YAML, a v1 List, a workload with a pod template
    /// (Deployment, StatefulSet, DaemonSet, ReplicaSet, Job, CronJob) or an
    /// AdmissionReview; "-" or nothing reads standard input. Example: pod.yaml
    #[arg(value_name = "FILE")]
    pub file: Option<PathBuf>,
    #[command(flatten)]
    pub budget: BudgetFlags,
}
