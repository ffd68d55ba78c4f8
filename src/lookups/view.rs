//! The ClusterStorageContainers every admission reads, shared: built from
//! the watch cache once per change (`Cache::generation`) and handed out as
//! an `Arc`, so an admission costs the same with 10 or 5,000 of them (the
//! core reads only the candidates for its URI, see
//! `kserve_injector_core::cluster::StorageContainers`).

use super::cache::Cache;
use super::entry::Named;
use super::reduce::{InvalidObject, Parsed};
use kserve_injector_core::cluster::{ClusterStorageContainer, StorageContainers};
use std::sync::{Arc, Mutex};

type Shared = Parsed<StorageContainers>;

/// The set built for one generation of the cache.
#[derive(Default)]
pub(super) struct StorageView {
    built: Mutex<Option<(u64, Shared)>>,
}

impl StorageView {
    /// The cache's set as of now: the one built for its generation, or a
    /// new one (one admission builds it, those arriving meanwhile wait).
    pub(super) fn current(&self, cache: &Cache<ClusterStorageContainer>) -> Shared {
        let mut built = self.built.lock().unwrap_or_else(|e| e.into_inner());
        let generation = cache.generation();
        if let Some((g, shared)) = built.as_ref() {
            if *g == generation {
                return shared.clone();
            }
        }
        let (generation, mut held) = cache.entries();
        held.sort_unstable_by(|a, b| a.name().cmp(b.name()));
        let parsed: Vec<_> = held.iter().map(|e| e.parsed()).collect();
        let shared = Self::build(parsed.iter());
        *built = Some((generation, shared.clone()));
        shared
    }

    /// The set of `parsed` (in name order), or the first unusable one's
    /// error.
    pub(super) fn build<'a>(
        parsed: impl Iterator<Item = &'a Parsed<Arc<ClusterStorageContainer>>>,
    ) -> Shared {
        let all: Result<Vec<Arc<ClusterStorageContainer>>, InvalidObject> =
            parsed.cloned().collect();
        all.map(|all| all.into_iter().collect())
    }
}
