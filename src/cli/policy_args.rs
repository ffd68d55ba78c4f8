//! Flags of `kserve-injector policy`.

/// The inputs of `mutate`, nothing else: the policy is what the webhook
/// would do with the pods it takes, under the same inputs.
#[derive(Debug, Clone, clap::Args)]
#[command(after_help = "Examples:
  kserve-injector policy > policy.yaml && kubectl apply -f policy.yaml
  kserve-injector policy --config inferenceservice-config.yaml --kserve-version v0.15.2

Writes a MutatingAdmissionPolicy and its MutatingAdmissionPolicyBinding
(admissionregistration.k8s.io/v1: Kubernetes 1.36 or newer): the InferenceService pods whose mutation
needs no cluster lookup and no webhook, patched by the API server itself
exactly as `mutate` patches them (docs/policy.md). The policy's size in
bytes goes to stderr.

Exit codes: 0 written, 2 unreadable config or settings, or a config whose
mutation of the policy's pods cannot be written in CEL.")]
pub struct PolicyArgs {
    #[command(flatten)]
    pub inputs: crate::input_flags::InputFlags,
}
