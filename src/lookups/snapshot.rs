//! [`Lookups::snapshot`]: the objects one pod's mutation may read, each from
//! its cache or, on a miss, from one bounded GET.

use super::reduce::{Parsed, Reduce};
use super::view::StorageView;
use super::watch::CacheOf;
use super::{Kind, LookupError, Lookups};
use k8s_openapi::api::core::v1 as api;
use kserve_injector_core::cluster::{needed_keys, ObjectKey};
use kserve_injector_core::cluster::{
    ClusterSnapshot, ClusterStorageContainer, ObjectRef, Secret, ServiceAccount,
};
use kserve_injector_core::config::Config;
use kserve_injector_core::PodFacts;
use kube::api::{DynamicObject, ListParams};
use kube::{Api, Client};
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

impl Lookups {
    /// The objects one pod's mutation may read: [`needed_keys`] iterated to
    /// a fixed point (as [`ClusterSnapshot::restrict`] does over a snapshot),
    /// each key from its cache or, on a miss, from one GET.
    pub async fn snapshot(
        &self,
        facts: &PodFacts,
        config: &Config,
    ) -> Result<ClusterSnapshot, LookupError> {
        let mut out = ClusterSnapshot::default();
        let mut seen = BTreeSet::new();
        loop {
            let mut progressed = false;
            for key in needed_keys(facts, config, &out) {
                if seen.contains(&key) {
                    continue;
                }
                self.fill(&key, &mut out).await?;
                seen.insert(key);
                progressed = true;
            }
            if !progressed {
                return Ok(out);
            }
        }
    }

    pub(super) async fn fill(
        &self,
        key: &ObjectKey,
        out: &mut ClusterSnapshot,
    ) -> Result<(), LookupError> {
        match key {
            ObjectKey::ServiceAccount(r) => {
                let kind = Kind::ServiceAccounts;
                if let Some(sa) = self.cached_object(kind, &self.service_accounts, r) {
                    out.service_accounts.insert(r.clone(), sa);
                    return Ok(());
                }
                let api = Api::<api::ServiceAccount>::namespaced(self.client.clone(), &r.namespace);
                if let Some(sa) = self.get(kind, r, api.get_opt(&r.name)).await? {
                    out.insert_service_account(ServiceAccount::from_api(&sa, &r.namespace));
                }
            }
            ObjectKey::Secret(r) => {
                let fetched = &self.fetched_secrets;
                let found = match self.secrets_fetched() {
                    true => fetched.get_or_fetch(r, || self.get_secret(r)).await?,
                    false => match self.cached_object(Kind::Secrets, &self.secrets, r) {
                        Some(s) => Some(s),
                        None => self.get_secret(r).await?,
                    },
                };
                if let Some(s) = found {
                    out.secrets.insert(r.clone(), s);
                }
            }
            ObjectKey::InferenceService(r) => {
                let kind = Kind::InferenceServices;
                let cached = self.cached_object(kind, &self.inference_services, r);
                let parsed = match cached {
                    Some(parsed) => parsed,
                    None => {
                        let resource = super::reduce::inference_service_resource();
                        let api = Api::<DynamicObject>::namespaced_with(
                            self.client.clone(),
                            &r.namespace,
                            &resource,
                        );
                        match self.get(kind, r, api.get_opt(&r.name)).await? {
                            Some(o) => Reduce::value(&super::reduce::InferenceServices, &o),
                            None => return Ok(()),
                        }
                    }
                };
                out.insert_inference_service(self.usable(kind, parsed)?);
            }
            ObjectKey::ClusterStorageContainers => self.fill_storage_containers(out).await?,
        }
        Ok(())
    }

    /// One GET of a Secret, reduced at once.
    async fn get_secret(&self, r: &ObjectRef) -> Result<Option<Secret>, LookupError> {
        let api = Api::<api::Secret>::namespaced(self.client.clone(), &r.namespace);
        let found = self.get(Kind::Secrets, r, api.get_opt(&r.name)).await?;
        Ok(found.map(|s| Secret::from_api_owned(s, &r.namespace)))
    }

    /// A copy of the cached object, counting a hit; `None` (a miss) when the
    /// kind is not watched, not synced yet, or the key is absent.
    fn cached_object<T: Clone>(
        &self,
        kind: Kind,
        cache: &CacheOf<ObjectRef, T>,
        key: &ObjectRef,
    ) -> Option<T> {
        let m = self.metrics.kind(kind);
        let found = (cache.as_ref())
            .filter(|c| c.synced() && !c.over_budget())
            .and_then(|c| c.read().get(key).cloned());
        match found {
            Some(_) => m.hits.inc(),
            None => m.misses.inc(),
        };
        found
    }

    /// Every ClusterStorageContainer, shared: the cache's current set (built
    /// once per change, then handed to every admission as an `Arc`), or on
    /// a miss one LIST. An unusable one fails the lookup, the first by name
    /// as KServe's typed decode of the list would.
    async fn fill_storage_containers(&self, out: &mut ClusterSnapshot) -> Result<(), LookupError> {
        let kind = Kind::StorageContainers;
        let m = self.metrics.kind(kind);
        let cache = (self.storage_containers.as_ref()).filter(|c| c.synced() && !c.over_budget());
        let shared = match cache {
            Some(cache) => {
                m.hits.inc();
                self.storage_view.current(cache)
            }
            None => {
                m.misses.inc();
                let resource = super::reduce::storage_container_resource();
                let api = Api::<DynamicObject>::all_with(self.client.clone(), &resource);
                let list = self
                    .get(kind, &"(all)", api.list(&ListParams::default()))
                    .await?;
                let all: BTreeMap<String, Parsed<Arc<ClusterStorageContainer>>> = (list.items)
                    .iter()
                    .map(|o| {
                        let parsed = Reduce::value(&super::reduce::StorageContainers, o);
                        (o.metadata.name.clone().unwrap_or_default(), parsed)
                    })
                    .collect();
                StorageView::build(all.values())
            }
        };
        out.storage_containers = self.usable(kind, shared)?;
        Ok(())
    }

    fn usable<T>(&self, kind: Kind, parsed: Parsed<T>) -> Result<T, LookupError> {
        parsed.map_err(|source| {
            self.metrics.kind(kind).lookup_errors.inc();
            LookupError::Invalid {
                kind: kind.label(),
                source,
            }
        })
    }

    /// One direct request, bounded by the GET timeout; counted as a fallback.
    async fn get<T>(
        &self,
        kind: Kind,
        key: &(dyn std::fmt::Display + Sync),
        request: impl Future<Output = kube::Result<T>>,
    ) -> Result<T, LookupError> {
        let m = self.metrics.kind(kind);
        m.fallback_gets.inc();
        let failed = |e| {
            m.lookup_errors.inc();
            e
        };
        match tokio::time::timeout(self.get_timeout, request).await {
            Ok(Ok(found)) => Ok(found),
            Ok(Err(source)) => Err(failed(LookupError::Api {
                kind: kind.label(),
                key: key.to_string(),
                source: Box::new(source),
            })),
            Err(_) => Err(failed(LookupError::Timeout {
                kind: kind.label(),
                key: key.to_string(),
                after: self.get_timeout,
            })),
        }
    }
}

/// Reads exactly the objects one pod's mutation needs with direct GETs (a
/// LIST for ClusterStorageContainers), each bounded by `get_timeout`: the
/// CLI's `mutate --kubeconfig`.
pub async fn fetch_once(
    client: Client,
    facts: &PodFacts,
    config: &Config,
    get_timeout: Duration,
) -> Result<ClusterSnapshot, LookupError> {
    Lookups::uncached(client, get_timeout)
        .snapshot(facts, config)
        .await
}
