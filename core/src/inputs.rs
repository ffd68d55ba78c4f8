//! Everything a mutation depends on besides the pod: the injectors and the
//! core both read it, so it lives apart from either.

use crate::cluster::ClusterData;
use crate::config::Config;
use crate::constants::DEFAULT_CONTROLLER_NAMESPACE;
use std::sync::Arc;

/// Everything a mutation depends on besides the pod. The config is shared
/// (`Arc`) because the server builds one `Inputs` per admission around that
/// request's cluster snapshot.
#[derive(Debug, Clone)]
pub struct Inputs {
    pub config: Arc<Config>,
    /// The namespace KServe's controller runs in (its `POD_NAMESPACE`).
    pub controller_namespace: String,
    pub cluster: ClusterData,
}

impl Inputs {
    pub fn new(config: Config) -> Self {
        Self {
            config: Arc::new(config),
            controller_namespace: DEFAULT_CONTROLLER_NAMESPACE.to_string(),
            cluster: ClusterData::default(),
        }
    }

    /// The same config and namespace with another cluster snapshot.
    pub fn with_cluster(&self, cluster: ClusterData) -> Self {
        Self {
            config: self.config.clone(),
            controller_namespace: self.controller_namespace.clone(),
            cluster,
        }
    }

    /// The config, for tests and tools that adjust it in place.
    pub fn config_mut(&mut self) -> &mut Config {
        Arc::make_mut(&mut self.config)
    }
}

impl Default for Inputs {
    fn default() -> Self {
        Self::new(Config::default())
    }
}
