//! The flags that say how pods are mutated, declared once and flattened
//! into every subcommand that mutates or compares pods (`serve`, `mutate`,
//! `audit`; `default-config` takes the release alone): which
//! inferenceservice-config, which settings file, the KServe release, the
//! modelcar's shape and the security profile. A subcommand whose flag means
//! a little more says so with `mut_arg` on its own command, never with a
//! second declaration. Beside `flag_values.rs`, so the server, the CLI and
//! the audit import it without an upward import. Also the reader's budget
//! as flags (`BudgetFlags`), for `mutate` and `audit`.

use crate::files::{self, LoadError};
use crate::flag_values::{kserve_version, modelcar_mode, security_profile};
use kserve_injector_core::config::Config;
use kserve_injector_core::reader::Budget;
use kserve_injector_core::release::Release;
use kserve_injector_core::{Inputs, ModelcarMode, SecurityProfile, Settings};
use std::path::PathBuf;

/// `--kserve-version`, on its own for `default-config`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ReleaseFlag {
    /// The KServe release the cluster runs, whose pod mutator to reproduce:
    /// a tag from v0.15.0 to v0.20.0 (patch releases included: v0.15.1,
    /// v0.15.2, v0.17.1, v0.18.1) or head; a minor alone (v0.15) is the last
    /// patch release of that line (v0.15.2). Default: the --config-file's
    /// kserveVersion key, else head. Example: --kserve-version v0.15.2
    #[arg(long, value_name = "VERSION", value_parser = kserve_version())]
    pub kserve_version: Option<Release>,
}

/// The inputs of a mutation, as flags.
#[derive(Debug, Clone, clap::Args)]
pub struct InputFlags {
    /// KServe's inferenceservice-config: a ConfigMap manifest (YAML or JSON)
    /// or the directory it is mounted at. Default: the values the
    /// --kserve-version release shipped (`default-config` prints them).
    /// Example: --config ./inferenceservice-config.yaml
    #[arg(long, value_name = "PATH")]
    pub config: Option<PathBuf>,
    /// kserve-injector's own settings (YAML or JSON): what KServe's
    /// ConfigMap has no key for. Read once. Example: --config-file
    /// ./kserve-injector.yaml
    #[arg(long, value_name = "PATH")]
    pub config_file: Option<PathBuf>,
    /// The modelcar's shape: classic (KServe's regular container) or
    /// native-sidecar (an init container with restartPolicy Always, started
    /// before the model server; Kubernetes 1.29 or newer). A pod's
    /// kserve-injector.io/modelcar-mode annotation overrides it.
    #[arg(long, value_name = "MODE", default_value = "classic", value_parser = modelcar_mode())]
    pub modelcar_mode: ModelcarMode,
    #[command(flatten)]
    pub release: ReleaseFlag,
    /// The security profile of the containers the webhook adds: baseline
    /// (KServe's containers as they are) or restricted (each meets the
    /// restricted Pod Security Standard). A pod's
    /// kserve-injector.io/security-profile annotation overrides it.
    #[arg(long, value_name = "PROFILE", default_value = "baseline", value_parser = security_profile())]
    pub security_profile: SecurityProfile,
}

impl InputFlags {
    /// `--kserve-version` as given.
    pub fn kserve_version(&self) -> Option<Release> {
        self.release.kserve_version
    }

    /// The settings file (`--config-file`), or the defaults without one.
    pub fn settings(&self) -> Result<Settings, LoadError> {
        files::load_settings(self.config_file.as_deref())
    }

    /// The release given: `--kserve-version`, else the settings file's
    /// `kserveVersion`; `None` when neither names one.
    pub fn given_release(&self, settings: &Settings) -> Option<Release> {
        self.kserve_version().or(settings.kserve_version)
    }

    /// The release mutated as: the one given, else head.
    pub fn release(&self, settings: &Settings) -> Release {
        settings.release(self.kserve_version())
    }

    /// The one assembly of [`Inputs`] from these flags, the
    /// inferenceservice-config and the settings file; the caller adds what
    /// only it knows (the controller's namespace, the cluster's snapshot).
    pub fn inputs(&self, config: Config, settings: &Settings) -> Inputs {
        let mut inputs = Inputs::new(config);
        inputs.modelcar_mode = self.modelcar_mode;
        inputs.security_profile = self.security_profile;
        inputs.model_volume = settings.model_volume.clone();
        inputs
    }
}

/// What one input may cost the reader (see docs/operations.md, "Limits").
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Input limits")]
pub struct BudgetFlags {
    /// Most bytes in one document: its source text, and the text its
    /// values expand to (an alias counted each time it is used).
    /// Example: --max-document-bytes 268435456
    #[arg(long, value_name = "BYTES", default_value_t = Budget::default().document_bytes,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub max_document_bytes: u64,
    /// Most nodes (mappings, sequences, scalars) in one document.
    /// Example: --max-document-nodes 4000000
    #[arg(long, value_name = "N", default_value_t = Budget::default().document_nodes,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub max_document_nodes: u64,
    /// Most bytes of text in all the documents of one input together.
    /// Example: --max-input-bytes 4294967296
    #[arg(long, value_name = "BYTES", default_value_t = Budget::default().input_bytes,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub max_input_bytes: u64,
    /// Most nodes in all the documents of one input together.
    /// Example: --max-input-nodes 64000000
    #[arg(long, value_name = "N", default_value_t = Budget::default().input_nodes,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub max_input_nodes: u64,
}

impl BudgetFlags {
    pub fn budget(&self) -> Budget {
        Budget {
            document_bytes: self.max_document_bytes,
            document_nodes: self.max_document_nodes,
            input_bytes: self.max_input_bytes,
            input_nodes: self.max_input_nodes,
            ..Budget::default()
        }
    }
}
