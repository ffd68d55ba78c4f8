//! One watch cache: kube-runtime's `watcher` (list, then watch from the
//! list's resourceVersion; no streaming list) feeding a map of
//! already-reduced objects. kube-runtime's `Store` would hold the API
//! objects themselves (for Secrets: their data); converting at the event
//! keeps only what the core reads, and the map is keyed by the core's own
//! key types so a lookup borrows the key it was given.

use super::metrics::KindMetrics;
use futures::StreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Resource};
use serde::de::DeserializeOwned;
use std::collections::{HashMap, HashSet};
use std::fmt::Debug;
use std::hash::Hash;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{RwLock, RwLockReadGuard};
use std::time::Duration;

/// After any watch error the watch is dropped and rebuilt from a fresh LIST.
/// kube-runtime would resume from the last resourceVersion, and when the API
/// server's storage was reset (etcd restored or re-created) that version
/// either fails forever ("too large") or, once the new storage has passed
/// it, succeeds and silently skips every object written before: the cache
/// would stay wrong with no further error. A relist is always right.
///
/// The pause before a rebuild starts at [`RELIST_PAUSE`] and doubles up to
/// [`RELIST_PAUSE_MAX`] while rebuilds keep failing, so a persistent error
/// (RBAC, an API server that is down) does not spin. The longest pause is
/// short because the usual errors are an API server's restart: refused
/// connections while it is down, then 403s and 5xxs for a few seconds while
/// its RBAC and storage catch up. With a 30 s maximum, those start-up
/// errors alone pushed the first good relist 30 s past the API server's
/// return; with 4 s, a cache is back within 4 s plus its LIST. A failing
/// request costs the API server little, and a watch that fails right after
/// every LIST keeps the longest pause: the pause goes back to the start
/// only once a watch has run [`HEALTHY_AFTER`] without an error.
const RELIST_PAUSE: Duration = Duration::from_millis(500);
const RELIST_PAUSE_MAX: Duration = Duration::from_secs(4);
const HEALTHY_AFTER: Duration = Duration::from_secs(30);

/// The namespace a cache key belongs to (`None`: cluster-scoped), so that
/// one namespace's LIST replaces only that namespace's entries.
pub trait Scoped {
    fn namespace(&self) -> Option<&str>;
}

impl Scoped for kserve_injector_core::cluster::ObjectRef {
    fn namespace(&self) -> Option<&str> {
        Some(&self.namespace)
    }
}

impl Scoped for String {
    fn namespace(&self) -> Option<&str> {
        None
    }
}

/// Reduced objects by key, filled by one watch per scope (the whole
/// cluster, or each namespace of `--namespaces`), and how many scopes have
/// not applied a full LIST yet.
#[derive(Debug)]
pub struct Cache<K, T> {
    map: RwLock<HashMap<K, T>>,
    /// Bumped by every change, under the map's write lock.
    generation: AtomicU64,
    unlisted: AtomicUsize,
    /// At most this many objects (the kind's share of the caches' budget).
    cap: Option<usize>,
    /// Set once the cap was reached: the cache is empty for good and the
    /// kind is read as an unwatched one.
    over_budget: AtomicBool,
    pub(super) metrics: KindMetrics,
}

impl<K: Hash + Eq, T> Cache<K, T> {
    #[cfg(test)]
    pub fn new(metrics: KindMetrics, scopes: usize) -> Self {
        Self::capped(metrics, scopes, None)
    }

    /// A cache that gives up beyond `cap` objects.
    pub fn capped(metrics: KindMetrics, scopes: usize, cap: Option<usize>) -> Self {
        // Not listed yet: not in sync with the API server.
        metrics.stale.set(scopes as i64);
        Self {
            cap,
            over_budget: AtomicBool::new(false),
            map: RwLock::new(HashMap::new()),
            generation: AtomicU64::new(0),
            unlisted: AtomicUsize::new(scopes),
            metrics,
        }
    }

    /// True once every scope's LIST has been applied (stays true while a
    /// watch reconnects: misses then go to the API server).
    pub fn synced(&self) -> bool {
        self.unlisted.load(Ordering::Acquire) == 0
    }

    /// True once the cache gave up at its cap: lookups go to the API server.
    pub fn over_budget(&self) -> bool {
        self.over_budget.load(Ordering::Acquire)
    }

    /// Whether `held` objects are more than the cap allows.
    fn beyond_cap(&self, held: usize) -> bool {
        self.cap.is_some_and(|cap| held > cap)
    }

    /// Drops every object and stops caching for good (see `budget.rs`).
    fn give_up(&self, kind: &'static str) {
        if self.over_budget.swap(true, Ordering::AcqRel) {
            return;
        }
        *self.write() = HashMap::new();
        self.metrics.objects.set(0);
        self.metrics.over_budget.set(1);
        self.metrics.stale.set(0);
        // Counts as listed, so `/readyz` does not wait for it.
        self.unlisted.store(0, Ordering::Release);
        tracing::error!(
            kind,
            cap = self.cap,
            "the watch cache reached its share of the memory limit: it is dropped, and this kind is read from the API server for each admission that needs it"
        );
    }

    pub fn read(&self) -> RwLockReadGuard<'_, HashMap<K, T>> {
        self.map.read().unwrap_or_else(|e| e.into_inner())
    }

    pub fn len(&self) -> usize {
        self.read().len()
    }

    /// Changes so far: equal generations, equal contents.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// The map, for a change: the generation moves before the lock is let go.
    fn write(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<K, T>> {
        let map = self.map.write().unwrap_or_else(|e| e.into_inner());
        self.generation.fetch_add(1, Ordering::AcqRel);
        map
    }

    /// Adds or replaces one object (a watch `Apply`).
    pub fn insert(&self, key: K, value: T) {
        let mut map = self.write();
        map.insert(key, value);
        self.metrics.objects.set(map.len() as i64);
    }

    pub fn remove(&self, key: &K) {
        let mut map = self.write();
        map.remove(key);
        self.metrics.objects.set(map.len() as i64);
    }

    /// Replaces everything with a complete listing and marks the cache synced.
    pub fn replace_all(&self, listed: HashMap<K, T>) {
        let len = listed.len();
        *self.write() = listed;
        self.metrics.objects.set(len as i64);
        self.metrics.stale.set(0);
        self.unlisted.store(0, Ordering::Release);
    }
}

impl<K: Hash + Eq + Scoped, T> Cache<K, T> {
    /// After a complete listing of `scope` (all of it for `None`) was
    /// applied in place: drops that scope's entries the listing did not
    /// name (deleted meanwhile); `first` counts the scope as listed.
    fn listed_scope(&self, scope: Option<&str>, listed: &HashSet<K>, first: bool) {
        let mut map = self.write();
        map.retain(|k, _| match scope {
            None => listed.contains(k),
            Some(ns) => k.namespace() != Some(ns) || listed.contains(k),
        });
        self.metrics.objects.set(map.len() as i64);
        if first {
            self.unlisted.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// How a watched API object becomes a cache entry.
pub trait Reduce<O>: Send + Sync + 'static {
    /// The resource, for logs.
    const KIND: &'static str;
    type Key: Hash + Eq + Clone + Scoped + Send + Sync + 'static;
    type Value: Send + Sync + 'static;
    fn key(&self, object: &O) -> Self::Key;
    fn value(&self, object: &O) -> Self::Value;
    /// [`value`](Self::value) of an object no longer needed after it.
    fn value_owned(&self, object: O) -> Self::Value {
        self.value(&object)
    }
}

/// Runs the watch for `api` (the whole of `scope`: a namespace, or the
/// cluster for `None`) into `cache` until the task is aborted.
pub async fn run<O, R>(
    api: Api<O>,
    scope: Option<String>,
    config: watcher::Config,
    reduce: R,
    cache: std::sync::Arc<Cache<R::Key, R::Value>>,
) where
    O: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    R: Reduce<O>,
{
    let kind = R::KIND;
    let namespace = scope.as_deref().unwrap_or("(all)");
    let mut pause = RELIST_PAUSE;
    let mut listed_once = false;
    // Counted in the kind's `stale` gauge from `Cache::new` until listed.
    let mut in_sync = false;
    loop {
        let stream = watcher::watcher(api.clone(), config.clone());
        let mut stream = std::pin::pin!(stream);
        // A LIST is applied in place as its pages arrive, so a relist
        // holds the objects once (and the keys seen), not twice; until it
        // is done the cache mixes the old and the new state of objects.
        let mut listed: HashSet<R::Key> = HashSet::new();
        let mut listed_at = None;
        while let Some(item) = stream.next().await {
            if cache.over_budget() {
                return;
            }
            match item {
                Ok(event) => match event {
                    Event::Init => listed = HashSet::new(),
                    Event::InitApply(o) => {
                        let k = reduce.key(&o);
                        let v = reduce.value_owned(o);
                        cache.insert(k.clone(), v);
                        listed.insert(k);
                        if cache.beyond_cap(cache.len()) {
                            cache.give_up(kind);
                        }
                    }
                    Event::InitDone => {
                        cache.listed_scope(scope.as_deref(), &listed, !listed_once);
                        listed = HashSet::new();
                        listed_once = true;
                        listed_at = Some(tokio::time::Instant::now());
                        if !in_sync {
                            in_sync = true;
                            cache.metrics.stale.dec();
                        }
                        tracing::debug!(
                            kind,
                            namespace,
                            objects = cache.len(),
                            "watch cache listed"
                        );
                    }
                    Event::Apply(o) => {
                        cache.insert(reduce.key(&o), reduce.value_owned(o));
                        if cache.beyond_cap(cache.len()) {
                            cache.give_up(kind);
                        }
                    }
                    Event::Delete(o) => cache.remove(&reduce.key(&o)),
                },
                Err(error) if cache.over_budget() => {
                    let _ = error;
                    break;
                }
                Err(error) => {
                    cache.metrics.watch_errors.inc();
                    let error = crate::log_text::bounded(&error);
                    tracing::warn!(kind, namespace, %error, "cluster watch error");
                    break;
                }
            }
        }
        if cache.over_budget() {
            return;
        }
        // Admissions keep reading what the cache holds; the gauge says it
        // may be behind until the next LIST is applied.
        if in_sync {
            in_sync = false;
            cache.metrics.stale.inc();
        }
        if listed_at.is_some_and(|at| at.elapsed() >= HEALTHY_AFTER) {
            pause = RELIST_PAUSE;
        }
        tracing::info!(
            kind,
            namespace,
            pause_ms = pause.as_millis() as u64,
            "rebuilding the cluster watch from a fresh list"
        );
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(RELIST_PAUSE_MAX);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kserve_injector_core::cluster::ObjectRef;

    /// Applies a listing of `ns` in place, as the watch does.
    fn list(cache: &Cache<ObjectRef, u8>, ns: &str, names: &[&str], first: bool) {
        let keys: HashSet<ObjectRef> = names.iter().map(|n| ObjectRef::new(ns, *n)).collect();
        for k in &keys {
            cache.insert(k.clone(), 0);
        }
        cache.listed_scope(Some(ns), &keys, first);
    }

    #[test]
    fn a_namespace_listing_replaces_that_namespace_only_and_all_must_list() {
        let cache = Cache::new(KindMetrics::default(), 2);
        list(&cache, "a", &["x", "y"], true);
        assert!(!cache.synced(), "b has not listed yet");
        list(&cache, "b", &["x"], true);
        assert!(cache.synced());
        // a relists after a watch error: y was deleted meanwhile.
        list(&cache, "a", &["x"], false);
        assert!(cache.synced());
        let mut keys: Vec<String> = cache.read().keys().map(|k| k.to_string()).collect();
        keys.sort();
        assert_eq!(keys, ["a/x", "b/x"]);
        assert_eq!(cache.metrics.objects.get(), 2);
    }

    #[test]
    fn a_cache_past_its_cap_gives_up_and_counts_as_listed() {
        let metrics = KindMetrics::default();
        let cache = Cache::capped(metrics.clone(), 1, Some(2));
        for n in ["x", "y"] {
            cache.insert(ObjectRef::new("a", n), 0u8);
        }
        assert!(!cache.beyond_cap(cache.len()));
        cache.insert(ObjectRef::new("a", "z"), 0);
        assert!(cache.beyond_cap(cache.len()));
        cache.give_up("serviceaccounts");
        assert!(cache.over_budget() && cache.synced());
        assert_eq!(
            (
                cache.len(),
                metrics.objects.get(),
                metrics.over_budget.get()
            ),
            (0, 0, 1)
        );
    }
}
