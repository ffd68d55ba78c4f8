//! Cluster objects the injectors read, as a plain snapshot: filled by an
//! informer in the server or by files in tests, never fetched by the core.

use std::collections::BTreeMap;

/// Data KServe's mutator reads from the API server. Lookups arrive here as
/// plain data; an injector never performs I/O. What is absent behaves as
/// "not found".
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterData {
    /// Secret data by `namespace/name`, for the storage-spec credentials.
    pub secrets: BTreeMap<String, BTreeMap<String, String>>,
}

impl ClusterData {
    pub fn secret(&self, namespace: &str, name: &str) -> Option<&BTreeMap<String, String>> {
        self.secrets.get(&format!("{namespace}/{name}"))
    }
}
