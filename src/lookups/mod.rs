//! The server's cluster lookups: watch caches of ServiceAccounts,
//! ClusterStorageContainers and InferenceServices (and of Secrets, when
//! `--watch-kinds` names them), Secrets fetched when a pod needs them and
//! kept for a TTL (`fetched`), and [`Lookups::snapshot`], which fills a
//! [`ClusterSnapshot`] for exactly the keys
//! [`kserve_injector_core::cluster::keys::needed_keys`] names.
//!
//! A key a synced cache holds costs no API call. A key it does not hold (an
//! object created a moment before the pod, a cache not synced yet, a kind
//! not watched) gets one direct GET with a short timeout: found, it is used;
//! 404, it is "not found" as for KServe. Any other API error or a timeout is
//! a [`LookupError`], never a silent "not found".
//!
//! Adapter code: the core stays pure and only ever sees the snapshot.

mod cache;
mod fetched;
pub mod metrics;
pub mod mode;
mod objects_file;
mod reduce;
mod source;

pub use metrics::{KindMetrics, LookupMetrics};
pub use mode::{resolve_client, KubeConfigSource, KubeEnvironment, LookupMode, LookupModeError};
pub use objects_file::{load_objects, load_objects_within, ObjectsFileError};
pub use reduce::{inference_service_resource, storage_container_resource};
pub use source::{SnapshotSource, SnapshotSourceError};

use cache::Cache;
use fetched::FetchCache;
use k8s_openapi::api::core::v1 as api;
use kserve_injector_core::cluster::keys::{needed_keys, ObjectKey};
use kserve_injector_core::cluster::{
    ClusterSnapshot, ClusterStorageContainer, InferenceService, ObjectRef, Secret, ServiceAccount,
};
use kserve_injector_core::config::Config;
use kserve_injector_core::pod_facts::PodFacts;
use kube::api::{DynamicObject, ListParams};
use kube::runtime::watcher;
use kube::{Api, Client};
use reduce::{Parsed, Reduce};
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::hash::Hash;
use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::Duration;

/// Default bound on one fallback GET: admission must answer well within the
/// webhook's own timeout (KServe registers 10 s).
pub const DEFAULT_GET_TIMEOUT: Duration = Duration::from_secs(2);

/// The four kinds the lookups read (named as in RBAC on the command line).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum Kind {
    #[value(name = "serviceaccounts")]
    ServiceAccounts,
    #[value(name = "secrets")]
    Secrets,
    #[value(name = "clusterstoragecontainers")]
    StorageContainers,
    #[value(name = "inferenceservices")]
    InferenceServices,
}

impl Kind {
    pub const ALL: [Kind; 4] = [
        Kind::ServiceAccounts,
        Kind::Secrets,
        Kind::StorageContainers,
        Kind::InferenceServices,
    ];

    /// The resource's plural name, as in RBAC and the metrics' `kind` label.
    pub fn label(self) -> &'static str {
        match self {
            Kind::ServiceAccounts => "serviceaccounts",
            Kind::Secrets => "secrets",
            Kind::StorageContainers => "clusterstoragecontainers",
            Kind::InferenceServices => "inferenceservices",
        }
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

/// A lookup that could not be answered; admission must fail with it.
#[derive(Debug, thiserror::Error)]
pub enum LookupError {
    #[error("cluster lookup of {kind} {key}: the API server did not answer within {after:?}")]
    Timeout {
        kind: &'static str,
        key: String,
        after: Duration,
    },
    #[error("cluster lookup of {kind} {key} failed: {source}")]
    Api {
        kind: &'static str,
        key: String,
        #[source]
        source: Box<kube::Error>,
    },
    #[error("cluster lookup of {kind}: {message}")]
    Invalid { kind: &'static str, message: String },
    /// The error of a GET that several admissions waited for.
    #[error(transparent)]
    Shared(Arc<LookupError>),
}

/// Default for `--secret-ttl`: how long a fetched Secret is used before the
/// next admission that needs it reads it again.
pub const DEFAULT_SECRET_TTL: Duration = Duration::from_secs(30);
/// Default for `--secret-cache-entries`.
pub const DEFAULT_SECRET_CACHE_ENTRIES: NonZeroUsize = NonZeroUsize::new(1000).unwrap();

/// The kinds watched by default: none of them holds a credential. Secrets
/// are fetched when a pod needs them and kept for [`DEFAULT_SECRET_TTL`].
pub const DEFAULT_WATCHED: [Kind; 3] = [
    Kind::ServiceAccounts,
    Kind::StorageContainers,
    Kind::InferenceServices,
];

/// `--outside-namespaces`: what happens to a pod that needs lookups in a
/// namespace `--namespaces` does not list.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum OutsideNamespaces {
    /// Denied, naming the namespaces served: the pod would otherwise run
    /// without its injection, which fails later and less clearly.
    #[default]
    Deny,
    /// Admitted with no change at all.
    Allow,
}

/// Which caches to run and how long a fallback GET may take.
#[derive(Debug, Clone)]
pub struct LookupOptions {
    /// Kinds with a watch cache. Secrets not watched are fetched into a
    /// bounded cache with a TTL; other kinds not watched are fetched for
    /// every admission that needs them.
    pub watched: Vec<Kind>,
    pub get_timeout: Duration,
    /// How long a fetched Secret (or its absence) is used.
    pub secret_ttl: Duration,
    /// At most this many fetched Secrets are kept.
    pub secret_cache_entries: NonZeroUsize,
    /// Empty: the whole cluster. Otherwise the only namespaces watched and
    /// read (ClusterStorageContainers, cluster-scoped, stay cluster-wide).
    pub namespaces: BTreeSet<String>,
    /// What a pod needing lookups in another namespace gets.
    pub outside: OutsideNamespaces,
}

impl Default for LookupOptions {
    fn default() -> Self {
        Self {
            watched: DEFAULT_WATCHED.to_vec(),
            get_timeout: DEFAULT_GET_TIMEOUT,
            secret_ttl: DEFAULT_SECRET_TTL,
            secret_cache_entries: DEFAULT_SECRET_CACHE_ENTRIES,
            namespaces: BTreeSet::new(),
            outside: OutsideNamespaces::Deny,
        }
    }
}

impl LookupOptions {
    /// Every kind watched (the behaviour before Secrets were fetched).
    pub fn watch_all() -> Self {
        Self {
            watched: Kind::ALL.to_vec(),
            ..Self::default()
        }
    }

    /// One watch per scope: each namespace of `namespaces`, or (`None`)
    /// the whole cluster.
    fn scopes(&self) -> Vec<Option<String>> {
        if self.namespaces.is_empty() {
            return vec![None];
        }
        self.namespaces.iter().cloned().map(Some).collect()
    }
}

fn watch_all() -> watcher::Config {
    watcher::Config::default()
}

/// Secrets: Helm's release records (often hundreds of KiB each, never a
/// credential) are left out of the cache, should a pod ever name one it is
/// fetched by the fallback GET; and LIST pages are kept small, because a page
/// is held whole (unreduced) until its objects are reduced.
fn watch_secrets() -> watcher::Config {
    watcher::Config::default()
        .fields(SECRET_FIELD_SELECTOR)
        .page_size(SECRET_PAGE_SIZE)
}

pub const SECRET_FIELD_SELECTOR: &str = "type!=helm.sh/release.v1";
const SECRET_PAGE_SIZE: u32 = 100;

type CacheOf<K, T> = Option<Arc<Cache<K, T>>>;

/// What every cache can say whatever its key and value types.
trait CacheState {
    fn is_synced(&self) -> bool;
    fn objects(&self) -> usize;
}

impl<K: Hash + Eq, T> CacheState for Cache<K, T> {
    fn is_synced(&self) -> bool {
        self.synced()
    }
    fn objects(&self) -> usize {
        self.len()
    }
}

/// Spawns the watches filling `cache`, one per scope, when the kind is
/// watched (`cache` is `Some`).
fn spawn_watch<O, R>(
    cache: &CacheOf<R::Key, R::Value>,
    scopes: &[Option<String>],
    api: impl Fn(&Option<String>) -> Api<O>,
    config: watcher::Config,
    reduce: R,
) -> Vec<tokio::task::JoinHandle<()>>
where
    O: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
    R: Reduce<O> + Clone,
{
    let Some(cache) = cache.as_ref() else {
        return Vec::new();
    };
    let watch = |scope: &Option<String>| {
        let run = cache::run(
            api(scope),
            scope.clone(),
            config.clone(),
            reduce.clone(),
            cache.clone(),
        );
        tokio::spawn(run)
    };
    scopes.iter().map(watch).collect()
}

/// Fills `cache`, when the kind is watched, with a complete listing.
fn preload<K: Hash + Eq, T>(cache: &CacheOf<K, T>, entries: impl IntoIterator<Item = (K, T)>) {
    if let Some(c) = cache {
        c.replace_all(entries.into_iter().collect());
    }
}

/// The caches and the client for fallback GETs. Dropping it stops the watches.
pub struct Lookups {
    client: Client,
    metrics: LookupMetrics,
    get_timeout: Duration,
    service_accounts: CacheOf<ObjectRef, ServiceAccount>,
    secrets: CacheOf<ObjectRef, Secret>,
    /// When Secrets are not watched: the ones fetched lately.
    fetched_secrets: Option<FetchCache<ObjectRef, Secret>>,
    storage_containers: CacheOf<String, Parsed<ClusterStorageContainer>>,
    inference_services: CacheOf<ObjectRef, Parsed<InferenceService>>,
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
        fn cache<K: std::hash::Hash + Eq, T>(
            m: &LookupMetrics,
            o: &LookupOptions,
            kind: Kind,
        ) -> CacheOf<K, T> {
            let handles = m.kind(kind).clone();
            let scopes = match kind {
                Kind::StorageContainers => 1,
                _ => o.scopes().len(),
            };
            o.watched
                .contains(&kind)
                .then(|| Arc::new(Cache::new(handles, scopes)))
        }
        Self {
            service_accounts: cache(&metrics, options, Kind::ServiceAccounts),
            secrets: cache(&metrics, options, Kind::Secrets),
            fetched_secrets: (!options.watched.contains(&Kind::Secrets)).then(|| {
                let handles = metrics.kind(Kind::Secrets).clone();
                FetchCache::new(options.secret_ttl, options.secret_cache_entries, handles)
            }),
            storage_containers: cache(&metrics, options, Kind::StorageContainers),
            inference_services: cache(&metrics, options, Kind::InferenceServices),
            client,
            metrics,
            get_timeout: options.get_timeout,
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
        let c = &this.client;
        let scopes = options.scopes();
        let isvc = reduce::inference_service_resource();
        let tasks = [
            spawn_watch(
                &this.service_accounts,
                &scopes,
                |s| match s {
                    Some(ns) => Api::<api::ServiceAccount>::namespaced(c.clone(), ns),
                    None => Api::all(c.clone()),
                },
                watch_all(),
                reduce::ServiceAccounts,
            ),
            spawn_watch(
                &this.secrets,
                &scopes,
                |s| match s {
                    Some(ns) => Api::<api::Secret>::namespaced(c.clone(), ns),
                    None => Api::all(c.clone()),
                },
                watch_secrets(),
                reduce::Secrets,
            ),
            spawn_watch(
                &this.storage_containers,
                &[None],
                |_| Api::all_with(c.clone(), &reduce::storage_container_resource()),
                watch_all(),
                reduce::StorageContainers,
            ),
            spawn_watch(
                &this.inference_services,
                &scopes,
                |s| match s {
                    Some(ns) => Api::namespaced_with(c.clone(), ns, &isvc),
                    None => Api::all_with(c.clone(), &isvc),
                },
                watch_all(),
                reduce::InferenceServices,
            ),
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
    pub fn uncached(client: Client, get_timeout: Duration) -> Self {
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
        preload(&this.service_accounts, data.service_accounts);
        match &this.fetched_secrets {
            Some(fetched) => {
                (data.secrets.into_iter()).for_each(|(k, v)| fetched.insert(k, Some(v)))
            }
            None => preload(&this.secrets, data.secrets),
        }
        fn parsed<K, T>((k, v): (K, T)) -> (K, Parsed<T>) {
            (k, Ok(v))
        }
        preload(
            &this.storage_containers,
            data.storage_containers.into_iter().map(parsed),
        );
        preload(
            &this.inference_services,
            data.inference_services.into_iter().map(parsed),
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
        fn state<K: Hash + Eq, T>(cache: &CacheOf<K, T>) -> Option<&dyn CacheState> {
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
        match (kind, &self.fetched_secrets) {
            (Kind::Secrets, Some(fetched)) => fetched.len(),
            _ => self.cache_state(kind).map_or(0, |c| c.objects()),
        }
    }

    /// The client of the lookups, for a question about the cluster itself.
    pub fn client(&self) -> &Client {
        &self.client
    }

    pub fn metrics(&self) -> &LookupMetrics {
        &self.metrics
    }

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

    async fn fill(&self, key: &ObjectKey, out: &mut ClusterSnapshot) -> Result<(), LookupError> {
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
                let found = match &self.fetched_secrets {
                    Some(fetched) => fetched.get_or_fetch(r, || self.get_secret(r)).await?,
                    None => match self.cached_object(Kind::Secrets, &self.secrets, r) {
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
                        let resource = reduce::inference_service_resource();
                        let api = Api::<DynamicObject>::namespaced_with(
                            self.client.clone(),
                            &r.namespace,
                            &resource,
                        );
                        match self.get(kind, r, api.get_opt(&r.name)).await? {
                            Some(o) => Reduce::value(&reduce::InferenceServices, &o),
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
            .filter(|c| c.synced())
            .and_then(|c| c.read().get(key).cloned());
        match found {
            Some(_) => m.hits.inc(),
            None => m.misses.inc(),
        };
        found
    }

    async fn fill_storage_containers(&self, out: &mut ClusterSnapshot) -> Result<(), LookupError> {
        let kind = Kind::StorageContainers;
        let m = self.metrics.kind(kind);
        let mut all: BTreeMap<String, Parsed<ClusterStorageContainer>> = BTreeMap::new();
        match self.storage_containers.as_ref().filter(|c| c.synced()) {
            Some(cache) => {
                m.hits.inc();
                all.extend(cache.read().iter().map(|(k, v)| (k.clone(), v.clone())));
            }
            None => {
                m.misses.inc();
                let resource = reduce::storage_container_resource();
                let api = Api::<DynamicObject>::all_with(self.client.clone(), &resource);
                let list = self
                    .get(kind, &"(all)", api.list(&ListParams::default()))
                    .await?;
                for o in &list.items {
                    all.insert(
                        o.metadata.name.clone().unwrap_or_default(),
                        Reduce::value(&reduce::StorageContainers, o),
                    );
                }
            }
        }
        for (name, parsed) in all {
            let csc = self.usable(kind, parsed)?;
            out.storage_containers.insert(name, csc);
        }
        Ok(())
    }

    fn usable<T>(&self, kind: Kind, parsed: Parsed<T>) -> Result<T, LookupError> {
        parsed.map_err(|message| {
            self.metrics.kind(kind).lookup_errors.inc();
            LookupError::Invalid {
                kind: kind.label(),
                message,
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

#[cfg(test)]
mod tests;
