//! Where the server's admissions get their cluster objects: nowhere (lookups
//! off), a fixed snapshot (`serve --objects FILE`, for trying the webhook
//! out and for tests), or the watch caches with a fallback GET.

use super::{resolve_client, KubeEnvironment, LookupError, LookupMetrics, LookupMode};
use super::{LookupModeError, LookupOptions, Lookups, OutsideNamespaces};
use crate::log_text::bounded;
use kserve_injector_core::cluster::ClusterSnapshot;
use kserve_injector_core::config::Config;
use kserve_injector_core::PodFacts;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tracing::{info, warn};

pub enum SnapshotSource {
    /// Every object is "not found".
    Off,
    /// A snapshot loaded once; each pod gets the part it may read.
    Static(ClusterSnapshot),
    /// Watch caches; a miss is one bounded GET.
    Live(Box<Lookups>),
}

/// Why `serve` cannot start with the cluster objects it was asked for.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotSourceError {
    #[error("--objects {path}: {source}")]
    Open {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("--objects {path}: {source}")]
    File {
        path: PathBuf,
        source: Box<super::ObjectsFileError>,
    },
    /// Worded as `serve`'s other flag errors.
    #[error("invalid flags: --lookup-timeout must be shorter than --request-timeout")]
    LookupTimeout,
    #[error(transparent)]
    Mode(#[from] LookupModeError),
}

impl SnapshotSource {
    /// `serve`'s objects: `file` (`--objects`), else the watch caches when
    /// `mode` resolves to a cluster, else nothing. `metrics` is called only
    /// when there are lookups, so only then are their series exported.
    pub async fn start(
        file: Option<&Path>,
        mode: LookupMode,
        environment: &KubeEnvironment,
        context: Option<&str>,
        options: &LookupOptions,
        request_timeout: Duration,
        metrics: impl FnOnce() -> LookupMetrics,
    ) -> Result<Self, SnapshotSourceError> {
        if let Some(path) = file {
            let accept = crate::files::Accept::RegularFile;
            let file =
                crate::files::open(path, accept).map_err(|source| SnapshotSourceError::Open {
                    path: path.to_path_buf(),
                    source,
                })?;
            let loaded = crate::lookups::load_objects(&mut std::io::BufReader::new(file)).map_err(
                |source| SnapshotSourceError::File {
                    path: path.to_path_buf(),
                    source: Box::new(source),
                },
            )?;
            for line in loaded.ignored_lines() {
                warn!(file = %path.display(), "{}", bounded(line));
            }
            let data = loaded.data;
            info!(objects = data.len(), file = %path.display(), "cluster objects from a file; no cluster lookups");
            return Ok(Self::Static(data));
        }
        match resolve_client(mode, environment, context).await? {
            Some(_) if options.get_timeout >= request_timeout => {
                Err(SnapshotSourceError::LookupTimeout)
            }
            Some(client) => {
                let lookups = Lookups::start(client, metrics(), options);
                Ok(Self::Live(Box::new(lookups)))
            }
            None => Ok(Self::Off),
        }
    }

    /// The objects one pod's mutation may read.
    pub async fn snapshot(
        &self,
        facts: &PodFacts,
        config: &Config,
    ) -> Result<ClusterSnapshot, LookupError> {
        match self {
            Self::Off => Ok(ClusterSnapshot::default()),
            Self::Static(data) => Ok(data.restrict(facts, config)),
            Self::Live(lookups) => lookups.snapshot(facts, config).await,
        }
    }

    /// False while a watch cache has not listed once (`/readyz` is 503).
    pub fn ready(&self) -> bool {
        match self {
            Self::Live(lookups) => lookups.ready(),
            Self::Off | Self::Static(_) => true,
        }
    }

    /// With `--namespaces`, what a pod needing lookups in `namespace` gets
    /// when they do not list it, and the namespaces served.
    pub fn outside(&self, namespace: &str) -> Option<(OutsideNamespaces, String)> {
        match self {
            Self::Live(lookups) => (lookups.outside(namespace)).map(|o| (o, lookups.namespaces())),
            Self::Off | Self::Static(_) => None,
        }
    }

    /// Whether a pod's facts are worth computing at all.
    pub(crate) fn is_off(&self) -> bool {
        matches!(self, Self::Off)
    }
}
