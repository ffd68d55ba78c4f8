//! Everything a mutation depends on besides the pod: the injectors and the
//! core both read it, so it lives apart from either.

use crate::cluster::ClusterData;
use crate::config::Config;
use crate::constants::DEFAULT_CONTROLLER_NAMESPACE;

/// Everything a mutation depends on besides the pod.
#[derive(Debug, Clone)]
pub struct Env {
    pub config: Config,
    /// The namespace KServe's controller runs in (its `POD_NAMESPACE`).
    pub controller_namespace: String,
    pub cluster: ClusterData,
}

impl Env {
    pub fn new(config: Config) -> Self {
        Self {
            config,
            controller_namespace: DEFAULT_CONTROLLER_NAMESPACE.to_string(),
            cluster: ClusterData::default(),
        }
    }
}

impl Default for Env {
    fn default() -> Self {
        Self::new(Config::default())
    }
}
