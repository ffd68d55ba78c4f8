//! The server's cluster lookups: watch caches of ServiceAccounts,
//! ClusterStorageContainers and InferenceServices (and of Secrets, when
//! `--watch-kinds` names them), Secrets fetched when a pod needs them and
//! kept for a TTL (`fetched`), and [`Lookups::snapshot`], which fills a
//! [`ClusterSnapshot`] for exactly the keys
//! [`kserve_injector_core::cluster::needed_keys`] names.
//!
//! A key a synced cache holds costs no API call. A key it does not hold (an
//! object created a moment before the pod, a cache not synced yet, a kind
//! not watched) gets one direct GET with a short timeout: found, it is used;
//! 404, it is "not found" as for KServe. Any other API error or a timeout is
//! a [`LookupError`], never a silent "not found".
//!
//! Adapter code: the core stays pure and only ever sees the snapshot.

mod budget;
mod cache;
mod entry;
mod error;
mod fetched;
mod metrics;
mod mode;
mod names;
mod objects_file;
mod options;
mod reduce;
mod shares;
mod snapshot;
mod source;
mod stream;
mod view;
mod watch;
mod wire;

pub use error::LookupError;
pub use metrics::{KindMetrics, LookupMetrics};
pub use mode::{resolve_client, KubeEnvironment, LookupMode, LookupModeError};
pub(crate) use objects_file::load_objects_within;
pub use objects_file::{load_objects, ObjectsFileError};
pub use options::{Kind, LookupOptions, OutsideNamespaces, StreamingLists};
pub(crate) use options::{
    DEFAULT_GET_TIMEOUT, DEFAULT_MAX_SA_SECRETS, DEFAULT_SECRET_CACHE_ENTRIES,
};
pub use reduce::InvalidObject;
pub(crate) use reduce::{inference_service_resource, storage_container_resource};
pub use shares::Shed;
pub(crate) use shares::{DEFAULT_LOOKUP_BYTES, DEFAULT_NAMESPACE_ADMISSIONS};
pub use snapshot::fetch_once;
pub use source::{SnapshotSource, SnapshotSourceError};
pub(crate) use wire::DEFAULT_MAX_OBJECT_BYTES;

use cache::Cache;
use entry::Entry;
use fetched::FetchCache;
use kserve_injector_core::cluster::{
    ClusterSnapshot, ClusterStorageContainer, InferenceService, ObjectRef, Secret, ServiceAccount,
};
use kube::Client;
use reduce::Parsed;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;
use watch::{preload, spawn_watch, CacheOf, CacheState};

/// The caches and the client for fallback GETs. Dropping it stops the watches.
pub struct Lookups {
    client: Client,
    metrics: LookupMetrics,
    get_timeout: Duration,
    /// What one object may keep.
    bounds: wire::Bounds,
    service_accounts: CacheOf<ServiceAccount>,
    secrets: CacheOf<Secret>,
    /// When Secrets are not watched, or their cache went over its budget:
    /// the ones fetched lately.
    fetched_secrets: FetchCache<ObjectRef, Parsed<Arc<Secret>>>,
    storage_containers: CacheOf<ClusterStorageContainer>,
    /// The storage containers' shared set, rebuilt once per change.
    storage_view: view::StorageView,
    inference_services: CacheOf<InferenceService>,
    /// What admissions' lookups hold, shared out between namespaces.
    shares: shares::Shares,
    namespaces: BTreeSet<String>,
    outside: OutsideNamespaces,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Lookups {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl Lookups {
    fn unstarted(client: Client, metrics: LookupMetrics, options: &LookupOptions) -> Self {
        fn cache<D: wire::Decode>(m: &LookupMetrics, o: &LookupOptions) -> CacheOf<D::Object> {
            let kind = D::KIND;
            let handles = m.kind(kind).clone();
            let scopes = match kind {
                Kind::StorageContainers => 1,
                _ => o.scopes().len(),
            };
            let cap = budget::byte_caps(o.cache_budget, &o.watched)[kind.index()];
            o.watched
                .contains(&kind)
                .then(|| Arc::new(Cache::capped(handles, scopes, cap, D::weight)))
        }
        // Secrets not watched: their share of the budget goes to the fetched ones.
        let fetched_cap =
            budget::byte_caps(options.cache_budget, &[Kind::Secrets])[Kind::Secrets.index()];
        Self {
            service_accounts: cache::<wire::ServiceAccounts>(&metrics, options),
            secrets: cache::<wire::Secrets>(&metrics, options),
            fetched_secrets: {
                let handles = metrics.kind(Kind::Secrets).clone();
                FetchCache::new(
                    options.secret_ttl,
                    options.secret_cache_entries,
                    fetched_cap,
                    wire::fetched_secret_weight,
                    handles,
                )
            },
            storage_containers: cache::<wire::StorageContainers>(&metrics, options),
            storage_view: view::StorageView::default(),
            inference_services: cache::<wire::InferenceServices>(&metrics, options),
            shares: shares::Shares::new(options.lookup_bytes, options.namespace_admissions),
            client,
            metrics,
            get_timeout: options.get_timeout,
            bounds: wire::Bounds {
                object: options.max_object_bytes,
                sa_secrets: options.max_sa_secrets,
            },
            namespaces: options.namespaces.clone(),
            outside: options.outside,
            tasks: Vec::new(),
        }
    }

    /// Starts the watches (per namespace of `options.namespaces`, or
    /// cluster-wide) for every kind in `options.watched`. Must run inside a
    /// Tokio runtime.
    pub fn start(client: Client, metrics: LookupMetrics, options: &LookupOptions) -> Self {
        let mut this = Self::unstarted(client, metrics, options);
        let (c, scopes) = (&this.client, options.scopes());
        let how = cache::Filling {
            bounds: this.bounds,
            lists: options.streaming_lists,
        };
        let tasks = [
            spawn_watch::<wire::ServiceAccounts>(c, &this.service_accounts, &scopes, how),
            spawn_watch::<wire::Secrets>(c, &this.secrets, &scopes, how),
            spawn_watch::<wire::StorageContainers>(c, &this.storage_containers, &[None], how),
            spawn_watch::<wire::InferenceServices>(c, &this.inference_services, &scopes, how),
        ];
        this.tasks.extend(tasks.into_iter().flatten());
        this
    }

    /// With `--namespaces`, a namespace they do not list: what a pod there
    /// that needs lookups gets. `None` everywhere else.
    pub fn outside(&self, namespace: &str) -> Option<OutsideNamespaces> {
        let listed = self.namespaces.is_empty() || self.namespaces.contains(namespace);
        (!listed).then_some(self.outside)
    }

    /// The namespaces served, comma-separated (empty: all).
    pub fn namespaces(&self) -> String {
        let names: Vec<&str> = self.namespaces.iter().map(String::as_str).collect();
        names.join(",")
    }

    /// No caches: every key is fetched directly (what `mutate --kubeconfig`
    /// does once).
    pub(crate) fn uncached(client: Client, get_timeout: Duration) -> Self {
        let options = LookupOptions {
            watched: Vec::new(),
            get_timeout,
            ..LookupOptions::default()
        };
        Self::unstarted(client, LookupMetrics::unregistered(), &options)
    }

    /// Synced caches of the kinds `options` watches holding `data`, and no
    /// watches; Secrets not watched fill the fetched Secrets (fresh for the
    /// TTL, the last `secret_cache_entries` of them). For benchmarks and
    /// tests of the cache path; `client` still serves misses.
    pub fn preloaded(
        client: Client,
        metrics: LookupMetrics,
        options: &LookupOptions,
        data: ClusterSnapshot,
    ) -> Self {
        let this = Self::unstarted(client, metrics, options);
        preload(
            &this.service_accounts,
            data.service_accounts.into_values().map(Entry::Usable),
        );
        match this.secrets_fetched() {
            true => (data.secrets.into_iter())
                .for_each(|(k, v)| this.fetched_secrets.insert(k, Some(Ok(v)))),
            false => preload(&this.secrets, data.secrets.into_values().map(Entry::Usable)),
        }
        let containers = data.storage_containers.iter();
        preload(
            &this.storage_containers,
            containers.map(|c| Entry::Usable(Arc::new(c.clone()))),
        );
        preload(
            &this.inference_services,
            (data.inference_services.into_values()).map(|v| Entry::Usable(Arc::new(v))),
        );
        this
    }

    /// True when every watched cache has applied a complete LIST: `/readyz`
    /// answers 503 until then.
    pub fn ready(&self) -> bool {
        Kind::ALL
            .into_iter()
            .all(|kind| self.cache_state(kind).is_none_or(|c| c.is_synced()))
    }

    /// Waits until [`ready`](Self::ready), at most `limit`; returns whether it is.
    pub async fn wait_ready(&self, limit: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + limit;
        while !self.ready() {
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        true
    }

    /// The one place a [`Kind`] picks its cache field: the caches' key and
    /// value types differ, so it hands back what they have in common.
    /// `None` when the kind is not watched.
    fn cache_state(&self, kind: Kind) -> Option<&dyn CacheState> {
        fn state<T: entry::Named>(cache: &CacheOf<T>) -> Option<&dyn CacheState> {
            cache.as_deref().map(|c| c as &dyn CacheState)
        }
        match kind {
            Kind::ServiceAccounts => state(&self.service_accounts),
            Kind::Secrets => state(&self.secrets),
            Kind::StorageContainers => state(&self.storage_containers),
            Kind::InferenceServices => state(&self.inference_services),
        }
    }

    /// Objects a watched cache holds now, or for Secrets not watched, the
    /// fetched entries kept (expired ones until they are next asked for).
    pub fn cached(&self, kind: Kind) -> usize {
        match kind == Kind::Secrets && self.secrets_fetched() {
            true => self.fetched_secrets.len(),
            false => self.cache_state(kind).map_or(0, |c| c.objects()),
        }
    }

    /// Whether Secrets are fetched (and kept for the TTL) rather than
    /// watched: not watched, or their cache went over its budget.
    fn secrets_fetched(&self) -> bool {
        self.secrets.as_ref().is_none_or(|c| c.over_budget())
    }

    /// The client of the lookups, for a question about the cluster itself.
    pub fn client(&self) -> &Client {
        &self.client
    }

    pub fn metrics(&self) -> &LookupMetrics {
        &self.metrics
    }
}

#[cfg(test)]
mod tests;
