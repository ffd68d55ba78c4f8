//! `mutate --kubeconfig`: the cluster objects each pod needs, read from a
//! live cluster with the server's lookups, uncached.

use super::{CliError, InputError, MutateSource};
use crate::lookups::{
    resolve_client, KubeEnvironment, LookupError, LookupMode, Lookups, DEFAULT_GET_TIMEOUT,
};
use kserve_injector_core::PodFacts;
use kserve_injector_core::{cluster::ClusterSnapshot, config::Config};
use std::path::Path;

/// `mutate --kubeconfig`: the objects each pod needs, read from a live
/// cluster with direct GETs (no watches for a one-shot command).
pub(crate) struct LiveCluster {
    // Dropped before the runtime its client was built on.
    lookups: Lookups,
    runtime: tokio::runtime::Runtime,
}

impl LiveCluster {
    pub(crate) fn connect(kubeconfig: &Path, context: Option<&str>) -> Result<Self, CliError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(InputError::Runtime)?;
        let environment = KubeEnvironment {
            kubeconfig_flag: Some(kubeconfig.to_path_buf()),
            ..KubeEnvironment::default()
        };
        let client = runtime
            .block_on(resolve_client(LookupMode::On, &environment, context))
            .map_err(InputError::Cluster)?
            .ok_or(InputError::NoCluster)?;
        let lookups = Lookups::uncached(client, DEFAULT_GET_TIMEOUT);
        Ok(Self { lookups, runtime })
    }
}

impl MutateSource for LiveCluster {
    fn snapshot(
        &mut self,
        facts: &PodFacts,
        config: &Config,
    ) -> Result<ClusterSnapshot, LookupError> {
        self.runtime.block_on(self.lookups.snapshot(facts, config))
    }
}
