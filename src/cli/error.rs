//! Why an offline command fails, and with which exit code.

use crate::lookups::{LookupError, LookupModeError, ObjectsFileError};
use kserve_injector_core::admission::ReviewError;
use kserve_injector_core::reader;
use kserve_injector_core::ApplyError;
use kserve_injector_core::InjectError;
use kserve_injector_core::MutationError;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub(crate) enum CliError {
    /// Unreadable input (exit code 2).
    #[error(transparent)]
    Input(Box<InputError>),
    /// KServe's mutator would deny this pod, or the AdmissionReview was
    /// answered with a denial (exit code 1).
    #[error(transparent)]
    Denied(Denial),
    /// The output could not be written: closed stdout, full disk (exit code 2).
    #[error("cannot write output: {0}")]
    Output(#[source] std::io::Error),
    /// A report that has no JSON form (exit code 2).
    #[error(transparent)]
    Report(serde_json::Error),
    /// Whoever read the output stopped reading (`| head`): end quietly, as
    /// Unix tools do (exit code 0, no message).
    #[error("output reader went away")]
    ReaderGone,
}

/// Why the input, or what `mutate` reads besides it, cannot be used.
#[derive(Debug, thiserror::Error)]
pub(crate) enum InputError {
    #[error(transparent)]
    Read(#[from] reader::ReadError),
    #[error("input holds no document")]
    Empty,
    /// The input file could not be opened or read (a directory, an I/O error).
    #[error("cannot read {path}: {source}")]
    Open {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot read --objects {path}: {source}")]
    ObjectsUnreadable {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("--objects {path}: {source}")]
    Objects {
        path: PathBuf,
        source: ObjectsFileError,
    },
    /// `--kubeconfig`: the runtime its client needs could not start.
    #[error(transparent)]
    Runtime(std::io::Error),
    #[error(transparent)]
    Cluster(#[from] LookupModeError),
    #[error("no cluster configuration")]
    NoCluster,
    /// `label` names the document ("document 2 (Pod web)").
    #[error("{label}: {source}")]
    Lookup { label: String, source: LookupError },
    #[error("{label}: {source}")]
    Decode {
        label: String,
        source: MutationError,
    },
    #[error("{label}: kind {kind:?} is not a Pod, a workload with a pod template, a List or an AdmissionReview")]
    Kind { label: String, kind: String },
    #[error("{label}: no pod template at {pointer}")]
    NoTemplate {
        label: String,
        pointer: &'static str,
    },
    #[error("{label}: internal error: the patch does not apply: {source}")]
    Patch { label: String, source: ApplyError },
    /// An AdmissionReview document that serde_json cannot write back.
    #[error("{label}: {source}")]
    Json {
        label: String,
        source: serde_json::Error,
    },
    #[error("{label}: {source}")]
    Review { label: String, source: ReviewError },
    /// The webhook's answer that does not read back as JSON.
    #[error(transparent)]
    Answer(serde_json::Error),
    #[error("{label}: a List needs an items array")]
    NoItems { label: String },
    #[error("{label}: an AdmissionReview cannot be a List item")]
    ReviewInList { label: String },
    /// A mutated document that has no YAML form.
    #[error(transparent)]
    Yaml(reader::WriteError),
    /// A mutated document or patch that has no JSON form.
    #[error(transparent)]
    Unwritable(serde_json::Error),
    /// `-o` not meant for what was asked (`--compare-to` or not).
    #[error("{0}")]
    OutputChoice(&'static str),
    /// The ConfigMap or settings file a command reads.
    #[error(transparent)]
    Config(#[from] crate::files::LoadError),
    /// `--compare-to`: the ConfigMap as one of the two releases reads it.
    #[error("the ConfigMap, as KServe {release} reads it: {source}")]
    AsRelease {
        release: kserve_injector_core::release::Release,
        source: kserve_injector_core::config::ConfigError,
    },
    #[error("{label}: --compare-to reads Pods and workloads, not AdmissionReviews")]
    ReviewToCompare { label: String },
    #[error("{label}: kind {kind:?} is not a Pod, a workload with a pod template or a List")]
    KindToCompare { label: String, kind: String },
    /// `--compare-to`: a cluster lookup `mutate`'s source could not answer.
    #[error("{label}: cluster lookup: {source}")]
    CompareLookup { label: String, source: LookupError },
}

/// What denied a pod.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Denial {
    /// KServe's mutator, in its words.
    #[error(transparent)]
    Injector(InjectError),
    /// The answer to an AdmissionReview document, with its reason.
    #[error("{label}: denied: {reason}")]
    Review { label: String, reason: String },
}

impl From<InputError> for CliError {
    fn from(e: InputError) -> Self {
        CliError::Input(Box::new(e))
    }
}

impl CliError {
    /// An I/O error of the reader, as an error reading the input file `path`
    /// (which the reader does not know).
    pub(crate) fn reading(self, path: &std::path::Path) -> Self {
        match self {
            CliError::Input(e) => match *e {
                InputError::Read(reader::ReadError::Io(source)) => InputError::Open {
                    path: path.to_path_buf(),
                    source,
                }
                .into(),
                other => CliError::Input(Box::new(other)),
            },
            other => other,
        }
    }

    /// Classifies a failed write of the output.
    pub(crate) fn from_write(e: std::io::Error) -> Self {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            CliError::ReaderGone
        } else {
            CliError::Output(e)
        }
    }

    pub(crate) fn exit_code(&self) -> i32 {
        match self {
            CliError::Input(_) | CliError::Output(_) | CliError::Report(_) => 2,
            CliError::Denied(_) => 1,
            CliError::ReaderGone => 0,
        }
    }
}
